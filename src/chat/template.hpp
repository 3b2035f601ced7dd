// Chat templates: a Jinja2 subset that renders GGUF `tokenizer.chat_template` strings exactly as
// Hugging Face transformers' apply_chat_template(..., tokenize=False) does.
//
// The environment copied is transformers' (src/transformers/utils/chat_template_utils.py):
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, loopcontrols, the
// `{% generation %}` block), default (non-strict) Undefined, autoescape off,
// keep_trailing_newline=False; `tojson` is json.dumps(x, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False) with those keyword arguments; globals raise_exception(msg),
// strftime_now(fmt), namespace(), range(), dict(). Values follow Python semantics (str + None
// raises, lists print as their repr, `in` is substring/key/element test, ...).
//
// What is supported: {{ }}, {% %}, {# #} with - / + whitespace control; if/elif/else, for (tuple
// targets, `if` filter, else, loop.index/index0/revindex/revindex0/first/last/length/previtem/
// nextitem/depth/cycle), break/continue, set (names, tuples, ns.attr, block set), macro (defaults,
// keyword arguments, recursion), filter blocks, generation, raw; expressions with literals
// (str/int/float/list/tuple/dict), attribute and item access, slices, calls, filters, tests,
// arithmetic, comparison chains, and/or/not, `in`/`not in`, `~`, inline if/else. Anything else
// (include, import, extends, call blocks, an unknown filter, test or method) is an error naming
// the template's line and column — never a silently wrong prompt.
//
// Reference data and tests: ../shared/reference/chat/ (README.md), tests/chat/.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

#include "core/error.hpp"

namespace rocky::chat {

// Thrown by Template::parse and Template::render. what() is "chat template:LINE:COL: TYPE: MESSAGE"
// (LINE and COL 1-based), except for errors the template raises itself through raise_exception(),
// whose what() is exactly the template's message (what transformers' TemplateError carries and a
// server should return to the client).
class TemplateError : public Error {
 public:
  enum class Kind {
    syntax,           // parse(): the template is malformed or uses an unsupported construct
    raise_exception,  // render(): the template called raise_exception(message)
    runtime,          // render(): a Python/Jinja error (TypeError, UndefinedError, ...)
  };
  TemplateError(Kind kind, std::string type, std::string message, int line, int col);
  Kind kind() const { return kind_; }
  const std::string& type() const { return type_; }        // "TemplateError", "TypeError", ...
  const std::string& message() const { return message_; }  // without position or type
  int line() const { return line_; }                       // 0 when not known
  int col() const { return col_; }

 private:
  Kind kind_;
  std::string type_, message_;
  int line_, col_;
};

struct RenderOptions {
  bool add_generation_prompt = true;
  // transformers' continue_final_message: the final message (normally a partial assistant reply)
  // is left open so the model continues it. Requires add_generation_prompt = false (as transformers).
  bool continue_final_message = false;
  std::string bos_token, eos_token;  // the model's; passed as template variables
  nlohmann::ordered_json tools;      // the request's tools; null = absent (the template sees none)
  // chat_template_kwargs: extra template variables; they override everything above.
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  // strftime_now's clock (Unix seconds, UTC) when set; otherwise SOURCE_DATE_EPOCH from the
  // environment (UTC) when set; otherwise the local clock.
  std::optional<int64_t> now;
  // llama-server's own context variable date_string (today as "%d %b %Y", strftime_now's clock;
  // Llama 3.x templates print it). The server and `rocky run` set it; transformers' rendering (the
  // shared reference cases) passes none of llama.cpp's variables, so it is off by default.
  bool date_string = false;
  // Work limit: statements + loop iterations + calls + filters of one render (a hostile template
  // fails with "template too expensive" instead of running for minutes). Real templates need
  // a few thousand per message.
  int64_t max_steps = 5'000'000;
};

namespace detail {
struct Program;  // parsed template (internal)
}

class Template {
 public:
  // Parses a template source (bytes as stored in the GGUF). Throws TemplateError (kind syntax).
  static Template parse(std::string source);

  // Renders `messages` (a JSON array, as sent: key order kept; nothing is normalised) with
  // `messages`, `tools`, `documents` (none), `add_generation_prompt`, `bos_token`, `eos_token` and
  // the kwargs as variables. Throws TemplateError (or Error for a bad `messages` shape with
  // continue_final_message). Thread-safe: a Template may render concurrently.
  std::string render(const nlohmann::ordered_json& messages, const RenderOptions& options) const;

  const std::string& source() const;

 private:
  std::shared_ptr<const detail::Program> program_;
};

// The ChatML template (<|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n) for
// models whose GGUF has no tokenizer.chat_template.
std::string chatml_fallback_source();

// llama.cpp's built-in templates by the names `--chat-template` takes (llama-chat.cpp), as Jinja
// sources that render the same text: chatml, llama3, gemma, mistral-v7, mistral-v7-tekken, phi3,
// phi4, deepseek3, zephyr. nullopt: not one of them.
std::optional<std::string> builtin_template_source(std::string_view name);
std::vector<std::string> builtin_template_names();

}  // namespace rocky::chat
