// The chat template of `rocky serve` and `rocky run -cnv`: one place that picks the template
// (--chat-template-file, else the GGUF's tokenizer.chat_template, else ChatML with a warning) and
// renders messages to prompt text.
//
// This is a seam over the Jinja-subset renderer in src/chat (rocky::chat::Template). Until that
// module is in this build, only the ChatML fallback is rendered (by hand, byte for byte what the
// ChatML template gives); any other template is a clear error, never a wrong prompt.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::server {

struct TemplateInputs {
  nlohmann::json messages = nlohmann::json::array();
  nlohmann::json tools;  // null: none
  bool add_generation_prompt = true;
  bool continue_final_message = false;  // a final assistant message is continued (prefilled)
  nlohmann::json kwargs = nlohmann::json::object();
};

class ChatTemplate {
 public:
  // `override_file` (may be empty) wins over the GGUF's template. Throws rocky::Error when the
  // file cannot be read or the template cannot be parsed.
  static ChatTemplate load(const gguf::GgufFile& f, const tok::Tokenizer& tok, const std::string& override_file);
  const std::string& source() const { return source_; }
  bool is_fallback() const { return fallback_; }
  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }
  // The prompt text; throws rocky::Error carrying the renderer's message.
  std::string render(const TemplateInputs& in) const;

 private:
  std::string source_, bos_, eos_;
  bool fallback_ = false;
};

// The ids of a rendered chat prompt, as chat completions and `rocky run -cnv` feed them: a BOS the
// template wrote itself is dropped when the vocab adds one anyway (as llama-server does), then the
// text is tokenized with special tokens added and parsed.
std::vector<int32_t> tokenize_chat_prompt(const ChatTemplate& t, const tok::Tokenizer& tok, std::string prompt);

// The ChatML template used when a model has none.
const std::string& chatml_source();

}  // namespace rocky::server
