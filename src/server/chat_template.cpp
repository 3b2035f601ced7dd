#include "server/chat_template.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace rocky::server {

ChatTemplate ChatTemplate::load(const gguf::GgufFile& f, const tok::Tokenizer& tok, const std::string& override_file,
                                const std::string& override_template) {
  std::string source;
  bool fallback = false;
  if (!override_file.empty()) {
    std::ifstream in(override_file, std::ios::binary);
    if (!in) fail("cannot read the chat template file '{}'", override_file);
    std::ostringstream s;
    s << in.rdbuf();
    source = s.str();
  } else if (!override_template.empty()) {
    if (auto b = chat::builtin_template_source(override_template)) {
      source = *b;
    } else if (override_template.find("{{") != std::string::npos || override_template.find("{%") != std::string::npos) {
      source = override_template;
    } else {
      std::string names;
      for (const auto& n : chat::builtin_template_names()) names += (names.empty() ? "" : ", ") + n;
      fail("--chat-template '{}' is neither a built-in template ({}) nor a Jinja template", override_template, names);
    }
  } else if (auto src = f.get_string("tokenizer.chat_template")) {
    source = std::string(*src);
  } else {
    source = chat::chatml_fallback_source();
    fallback = true;
  }
  auto parse = [&]() {
    try {
      return chat::Template::parse(std::move(source));
    } catch (const std::exception& e) {
      if (!override_template.empty() && override_file.empty()) fail("--chat-template: {}", e.what());
      if (override_file.empty()) throw;
      fail("{}: {}", override_file, e.what());  // name the file: the message gives line:column only
    }
  };
  ChatTemplate t(parse());
  t.fallback_ = fallback;
  const auto& v = tok.vocab();
  if (v.valid(v.bos())) t.bos_ = v.token(v.bos()).text;
  if (v.valid(v.eos())) t.eos_ = v.token(v.eos()).text;
  return t;
}

std::vector<int32_t> tokenize_chat_prompt(const ChatTemplate& t, const tok::Tokenizer& tok, std::string prompt) {
  if (tok.vocab().add_bos() && !t.bos_token().empty() && prompt.rfind(t.bos_token(), 0) == 0)
    prompt.erase(0, t.bos_token().size());
  return tok.tokenize(prompt, /*add_special=*/true, /*parse_special=*/true);
}

std::string ChatTemplate::render(const TemplateInputs& in) const {
  chat::RenderOptions o;
  o.add_generation_prompt = in.add_generation_prompt && !in.continue_final_message;
  o.continue_final_message = in.continue_final_message;
  o.bos_token = bos_;
  o.eos_token = eos_;
  o.tools = in.tools;
  o.kwargs = in.kwargs;
  o.date_string = true;  // llama-server's context
  return tmpl_.render(in.messages, o);
}

}  // namespace rocky::server
