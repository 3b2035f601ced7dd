// libFuzzer target for the chat-template renderer and the reply parsers. The input is a template
// source (any bytes); it is parsed and rendered with a fixed conversation (system, list content,
// tool calls with object and string arguments, tool results, null content) and tools, in the
// modes the server uses. Properties: no crash, hang, leak or sanitizer report; the only exception
// is rocky::chat::TemplateError (or rocky::Error). The same bytes are then parsed as a model reply
// in every tool-call format, whole and streamed in pieces: the streamed deltas must add up to the
// whole parse.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "chat/template.hpp"
#include "chat/toolcalls.hpp"

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "chat_template_fuzz: property violated: %s\n", what);
  std::abort();
}

const nlohmann::ordered_json& conversation() {
  static const auto* c = new nlohmann::ordered_json(nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": [{"type": "text", "text": "Weather in "}, {"type": "text", "text": "Paris?"}]},
      {"role": "assistant", "content": "", "tool_calls": [
        {"id": "abc123XYZ", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
        {"id": "call_9b1e2f3a4c5d", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\": \"CET\"}"}}]},
      {"role": "tool", "tool_call_id": "abc123XYZ", "content": "{\"temp\": 18.5}"},
      {"role": "tool", "tool_call_id": "call_9b1e2f3a4c5d", "content": "12:00"},
      {"role": "assistant", "content": null, "reasoning_content": "thinking…"},
      {"role": "user", "content": "Thanks — ünïcödé ✓\n\t"},
      {"role": "assistant", "content": "You're welcome "}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather \"now\"",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "array",
      "items": {"type": "integer"}}}, "required": ["city"]}}}]
  })"));
  return *c;
}

void check_reply(std::string_view text, rocky::chat::ToolFormat f, bool forced_open) {
  using namespace rocky::chat;
  const ReplySyntax syn{f, ReasoningFormat::deepseek, forced_open, true};
  const ParsedReply whole = parse_reply(text, syn);
  ReplyStream st(syn);
  std::string content, reasoning;
  size_t calls = 0;
  const size_t step = std::max<size_t>(1 + text.size() % 5, text.size() / 256);  // at most ~256 pushes
  for (size_t at = 0; at < text.size(); at += step) {
    auto d = st.push(text.substr(at, step));
    content += d.content;
    reasoning += d.reasoning_content;
    calls += d.tool_calls.size();
  }
  auto d = st.finish();
  content += d.content;
  reasoning += d.reasoning_content;
  calls += d.tool_calls.size();
  if (content != st.result().content || reasoning != st.result().reasoning_content ||
      calls != st.result().tool_calls.size())
    die("stream deltas differ from the stream's result");
  const bool consistent =
      whole.content == content && whole.reasoning_content == reasoning && whole.tool_calls.size() == calls;
  // A well-formed reply streams to exactly the whole parse (a malformed one keeps what was sent).
  if (!consistent && !whole.malformed) die("streamed reply differs from the whole parse");
  if (whole.malformed && !st.result().malformed) die("malformed reply not flagged by the stream");
  (void)whole.to_openai();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string src(reinterpret_cast<const char*>(data), size);
  const auto& conv = conversation();
  try {
    const auto tmpl = rocky::chat::Template::parse(src);
    rocky::chat::RenderOptions o;
    o.bos_token = "<s>";
    o.eos_token = "</s>";
    o.now = 1768478400;
    o.max_steps = 200000;
    o.add_generation_prompt = (size & 1) != 0;
    if (size & 2) o.tools = conv["tools"];
    if (size & 4) o.kwargs = {{"enable_thinking", false}, {"bos_token", "<B>"}};
    o.continue_final_message = (size & 8) != 0 && !o.add_generation_prompt;
    try {
      (void)tmpl.render(conv["messages"], o);
    } catch (const rocky::Error&) {}
    // an empty conversation and odd messages shapes must not crash either
    o.continue_final_message = false;
    try {
      (void)tmpl.render(nlohmann::ordered_json::array(), o);
    } catch (const rocky::Error&) {}
    try {
      (void)tmpl.render(nlohmann::ordered_json::parse(R"([1, "x", null, {"role": 5}, [[]]])"), o);
    } catch (const rocky::Error&) {}
  } catch (const rocky::Error&) {}
  using rocky::chat::ToolFormat;
  for (ToolFormat f :
       {ToolFormat::content_only, ToolFormat::generic, ToolFormat::hermes, ToolFormat::llama3,
        ToolFormat::llama3_builtin, ToolFormat::mistral_nemo, ToolFormat::deepseek_r1, ToolFormat::granite})
    check_reply(src, f, (size & 16) != 0);
  return 0;
}
