// Tool-call and reasoning parsing of model replies, as llama.cpp's common_chat_parse does at
// upstream commit 1eeb523c (common/chat.cpp, common/chat-parser.cpp); the formats and their test
// data are in ../shared/reference/chat/toolcalls/ (README.md §8 there).
//
//   hermes        <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call> (Qwen 2.5/3, QwQ, Hermes)
//   llama3        the whole reply is {"name": …, "parameters": {…}} (Llama 3.1/3.2)
//   llama3_builtin  also <|python_tag|>NAME.call(key="value", …) (Llama 3.1 builtin tools)
//   mistral_nemo  [TOOL_CALLS][{"name", "arguments", "id"}, …]
//   deepseek_r1   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{…}\n```…
//   granite       <|tool_call|>[{"name", "arguments"}, …]; <response>…</response> is unwrapped
//   generic       one JSON object {"tool_call": {…}} | {"tool_calls": […]} | {"response": "…"}
//   content_only  no tool calls
//
// <think>…</think> (or, when the prompt already opened it, …</think>) becomes reasoning_content
// under --reasoning-format auto or deepseek (llama-server's default is auto, which behaves as
// deepseek here); with none the thought stays in content. Malformed tool-call output is never an
// error: as llama.cpp, the whole reply then falls back to content (after reasoning).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rocky::chat {

enum class ToolFormat { content_only, generic, hermes, llama3, llama3_builtin, mistral_nemo, deepseek_r1, granite };
enum class ReasoningFormat { none, auto_detect, deepseek };

const char* to_string(ToolFormat f);
const char* to_string(ReasoningFormat f);
// "auto", "none", "deepseek" (llama-server's --reasoning-format); throws rocky::Error otherwise.
ReasoningFormat parse_reasoning_format(std::string_view name);

// The format llama.cpp picks for a template source and a request's tools (null or an array of
// OpenAI tools): R1, Granite and Hermes templates keep their format without tools (for reasoning);
// Llama 3.x needs tools (llama3_builtin when a tool is brave_search, wolfram_alpha, web_search,
// python or code_interpreter and the template knows <|python_tag|>); Mistral Nemo needs tools;
// other templates get generic with tools and content_only without.
ToolFormat detect_tool_format(std::string_view template_source, const nlohmann::ordered_json& tools);

// How to parse one reply.
struct ReplySyntax {
  ToolFormat format = ToolFormat::content_only;
  ReasoningFormat reasoning = ReasoningFormat::auto_detect;
  bool thinking_forced_open = false;  // the prompt ended inside <think> (QwQ, R1 distills)
  bool parse_tool_calls = true;       // false: tool_choice "none" (calls stay content)
};

// The syntax for a request: the detected format, and thinking_forced_open when the rendered prompt
// ends with "<think>\n" (hermes and deepseek_r1 formats, as llama.cpp).
ReplySyntax reply_syntax(std::string_view template_source, const nlohmann::ordered_json& tools,
                         std::string_view rendered_prompt, ReasoningFormat reasoning);

struct ToolCall {
  std::string id;  // as the model wrote it (Mistral); empty: the server generates one
  std::string name;
  std::string arguments;  // a JSON text (compact, key order kept)
};

struct ParsedReply {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
  bool malformed = false;  // a tool-call marker was followed by broken syntax: all content

  // The OpenAI assistant message: {"role", "content" (null when empty), "reasoning_content" (only
  // when non-empty), "tool_calls" (only when any: {"type": "function", "id", "function": {"name",
  // "arguments"}})}. Empty ids are filled with random_tool_call_id().
  nlohmann::ordered_json to_openai() const;
};

ParsedReply parse_reply(std::string_view text, const ReplySyntax& syntax);
inline ParsedReply parse_reply(std::string_view text, ToolFormat format, ReasoningFormat reasoning) {
  return parse_reply(text, ReplySyntax{format, reasoning, false, true});
}

// A random 32-character alphanumeric id (llama.cpp's gen_tool_call_id).
std::string random_tool_call_id();

// Incremental parsing for streaming: feed the generated text as it comes; each push returns what
// is safe to send now. Content that could still be the start of a tool-call marker, "<think>" or
// "</think>" (and whitespace that parsing may strip) is held back until it resolves. Tool calls
// are returned once, when their JSON is complete. finish() flushes the rest; the concatenation of
// all deltas equals result() (content, reasoning, calls in order), which equals parse_reply() of
// the whole text unless that is malformed (then result() keeps what was already sent and
// result().malformed is set).
class ReplyStream {
 public:
  struct Delta {
    std::string content;
    std::string reasoning_content;
    std::vector<ToolCall> tool_calls;  // newly completed calls
    bool empty() const { return content.empty() && reasoning_content.empty() && tool_calls.empty(); }
  };

  explicit ReplyStream(ReplySyntax syntax);
  ~ReplyStream();
  ReplyStream(ReplyStream&&) noexcept;
  ReplyStream& operator=(ReplyStream&&) noexcept;
  Delta push(std::string_view text);
  Delta finish();
  const ParsedReply& result() const { return done_; }  // valid after finish()
  const std::string& text() const { return text_; }

 private:
  Delta diff(const ParsedReply& now);
  ReplySyntax syntax_;
  std::unique_ptr<struct ScanMemo> memo_;
  std::string text_;
  std::string sent_content_, sent_reasoning_;
  size_t sent_calls_ = 0;
  bool finished_ = false;
  ParsedReply done_;
};

}  // namespace rocky::chat
