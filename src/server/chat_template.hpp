// The chat template of `rocky serve` and `rocky run -cnv`: one place that picks the template
// (--chat-template-file, else the GGUF's tokenizer.chat_template, else ChatML with a warning) and
// renders messages to prompt text through src/chat's Jinja-subset renderer (rocky::chat::Template).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/template.hpp"
#include "gguf/gguf.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::server {

struct TemplateInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;  // null: none
  bool add_generation_prompt = true;
  bool continue_final_message = false;  // a final assistant message is continued (prefilled)
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
};

class ChatTemplate {
 public:
  // `override_file` (may be empty) wins over the GGUF's template. Throws rocky::Error when the
  // file cannot be read, chat::TemplateError when the template does not parse.
  // `override_file`: a Jinja file; else `override_template` (--chat-template): one of llama.cpp's
  // built-in names (chat::builtin_template_source) or a Jinja source; else the model's (ChatML
  // when it has none).
  static ChatTemplate load(const gguf::GgufFile& f, const tok::Tokenizer& tok, const std::string& override_file,
                           const std::string& override_template = {});
  const std::string& source() const { return tmpl_.source(); }
  bool is_fallback() const { return fallback_; }
  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }
  // The prompt text; throws chat::TemplateError (or rocky::Error) carrying the renderer's message.
  std::string render(const TemplateInputs& in) const;

 private:
  explicit ChatTemplate(chat::Template t) : tmpl_(std::move(t)) {}
  chat::Template tmpl_;
  std::string bos_, eos_;
  bool fallback_ = false;
};

// The ids of a rendered chat prompt, as chat completions and `rocky run -cnv` feed them: a BOS the
// template wrote itself is dropped when the vocab adds one anyway (as llama-server does), then the
// text is tokenized with special tokens added and parsed.
std::vector<int32_t> tokenize_chat_prompt(const ChatTemplate& t, const tok::Tokenizer& tok, std::string prompt);

}  // namespace rocky::server
