#include "server/chat_template.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace rocky::server {

const std::string& chatml_source() {
  static const std::string s =
      "{%- for message in messages -%}\n"
      "  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
      "{%- endfor -%}\n"
      "{%- if add_generation_prompt -%}\n"
      "  {{- '<|im_start|>assistant\\n' -}}\n"
      "{%- endif -%}\n";
  return s;
}

ChatTemplate ChatTemplate::load(const gguf::GgufFile& f, const tok::Tokenizer& tok, const std::string& override_file) {
  ChatTemplate t;
  const auto& v = tok.vocab();
  if (v.valid(v.bos())) t.bos_ = v.token(v.bos()).text;
  if (v.valid(v.eos())) t.eos_ = v.token(v.eos()).text;
  if (!override_file.empty()) {
    std::ifstream in(override_file, std::ios::binary);
    if (!in) fail("cannot read the chat template file '{}'", override_file);
    std::ostringstream s;
    s << in.rdbuf();
    t.source_ = s.str();
  } else if (auto src = f.get_string("tokenizer.chat_template")) {
    t.source_ = std::string(*src);
  } else {
    t.source_ = chatml_source();
    t.fallback_ = true;
  }
  if (t.source_ != chatml_source())
    fail("{}: this chat template needs the Jinja renderer (src/chat), which this build does not have yet; "
         "only the ChatML fallback renders", override_file.empty() ? "tokenizer.chat_template" : override_file);
  t.fallback_ = true;
  return t;
}

std::vector<int32_t> tokenize_chat_prompt(const ChatTemplate& t, const tok::Tokenizer& tok, std::string prompt) {
  if (tok.vocab().add_bos() && !t.bos_token().empty() && prompt.rfind(t.bos_token(), 0) == 0)
    prompt.erase(0, t.bos_token().size());
  return tok.tokenize(prompt, /*add_special=*/true, /*parse_special=*/true);
}

std::string ChatTemplate::render(const TemplateInputs& in) const {
  // ChatML, as chatml_source() renders it: message.content must be a string.
  std::string out;
  const auto& msgs = in.messages;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const auto& m = msgs[i];
    auto role = m.find("role");
    auto content = m.find("content");
    if (role == m.end() || !role->is_string()) fail("chat template: messages[{}].role is not a string", i);
    std::string text;
    if (content != m.end() && content->is_string()) text = content->get<std::string>();
    else if (content == m.end() || content->is_null()) text = "";
    else fail("chat template: messages[{}].content is not a string (the ChatML template concatenates it)", i);
    out += "<|im_start|>" + role->get<std::string>() + "\n" + text;
    const bool last = i + 1 == msgs.size();
    if (last && in.continue_final_message) return out;
    out += "<|im_end|>\n";
  }
  if (in.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace rocky::server
