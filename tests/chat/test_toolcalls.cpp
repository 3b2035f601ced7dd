// Tool-call and reasoning parsing against every example of ../shared/reference/chat/toolcalls/*.json
// (llama.cpp's common_chat_parse results at 1eeb523c), format detection from the real templates,
// thinking_forced_open from the rendered prompt, and the streaming helper fed in small pieces.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "chat/template.hpp"
#include "chat/toolcalls.hpp"

namespace {

using nlohmann::ordered_json;
using namespace rocky::chat;

const std::string k_dir = std::string(ROCKY_SHARED_DIR) + "/reference/chat/";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ToolFormat format_of(const std::string& name) {
  if (name == "hermes_2_pro") return ToolFormat::hermes;
  if (name == "llama_3_x") return ToolFormat::llama3;
  if (name == "llama_3_x_builtin") return ToolFormat::llama3_builtin;
  if (name == "mistral_nemo") return ToolFormat::mistral_nemo;
  if (name == "deepseek_r1") return ToolFormat::deepseek_r1;
  if (name == "granite") return ToolFormat::granite;
  if (name == "generic") return ToolFormat::generic;
  throw std::runtime_error("unknown format " + name);
}

struct Example {
  std::string file, name, tmpl, raw, prompt_ends_with;
  ReplySyntax syntax;
  ordered_json expected;
};

std::vector<Example> examples() {
  std::vector<Example> out;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(k_dir + "toolcalls")) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const auto d = ordered_json::parse(read_file(f));
    for (const auto& e : d["examples"]) {
      Example x;
      x.file = std::filesystem::path(f).filename().string();
      x.name = e["name"];
      x.tmpl = e["template"];
      x.raw = e["raw_output"];
      x.prompt_ends_with = e["prompt_ends_with"];
      const auto& s = e["llama_cpp_syntax"];
      x.syntax.format = format_of(s["format"]);
      x.syntax.reasoning = parse_reasoning_format(s["reasoning_format"].get<std::string>());
      x.syntax.thinking_forced_open = s["thinking_forced_open"];
      x.syntax.parse_tool_calls = s["parse_tool_calls"];
      x.expected = e["expected_message"];
      out.push_back(std::move(x));
    }
  }
  return out;
}

// Compares as the reference's "comparison" field says; returns "" when equal.
std::string compare(const ParsedReply& got, const ordered_json& want) {
  const ordered_json m = got.to_openai();
  if (m["role"] != "assistant") return "role";
  if (m["content"] != want["content"])
    return "content: got " + m["content"].dump() + ", want " + want["content"].dump();
  const ordered_json wr = want.contains("reasoning_content") ? want["reasoning_content"] : ordered_json();
  const ordered_json gr = m.contains("reasoning_content") ? m["reasoning_content"] : ordered_json();
  if (gr != wr) return "reasoning_content: got " + gr.dump() + ", want " + wr.dump();
  const ordered_json wc = want.contains("tool_calls") ? want["tool_calls"] : ordered_json::array();
  if (got.tool_calls.size() != wc.size())
    return "tool_calls: got " + std::to_string(got.tool_calls.size()) + ", want " + std::to_string(wc.size());
  for (size_t k = 0; k < wc.size(); ++k) {
    const auto& g = m["tool_calls"][k];
    if (g["type"] != "function") return "type";
    if (g["function"]["name"] != wc[k]["function"]["name"]) return "name of call " + std::to_string(k);
    if (nlohmann::json::parse(g["function"]["arguments"].get<std::string>()) !=
        nlohmann::json(wc[k]["function"]["arguments"]))
      return "arguments of call " + std::to_string(k) + ": " + g["function"]["arguments"].get<std::string>();
    if (wc[k]["id"].is_null()) {
      if (!got.tool_calls[k].id.empty() || g["id"].get<std::string>().size() != 32) return "generated id";
    } else if (g["id"] != wc[k]["id"]) {
      return "id of call " + std::to_string(k);
    }
  }
  return "";
}

TEST(ToolCalls, EveryReferenceExample) {
  const auto ex = examples();
  ASSERT_EQ(ex.size(), 21u);
  size_t passed = 0;
  for (const auto& x : ex) {
    const std::string r = compare(parse_reply(x.raw, x.syntax), x.expected);
    if (r.empty())
      ++passed;
    else
      ADD_FAILURE() << x.file << " " << x.name << ": " << r;
  }
  std::printf("tool-call reference examples: %zu/%zu\n", passed, ex.size());
}

// The format and thinking_forced_open come out of the template and the prompt it renders, as
// llama.cpp derives them (tools_available conversation, add_generation_prompt).
TEST(ToolCalls, DetectionFromTemplates) {
  const auto conv = ordered_json::parse(read_file(k_dir + "conversations/tools_available.json"));
  const auto index = ordered_json::parse(read_file(k_dir + "cases.json"));
  for (const auto& x : examples()) {
    const std::string src = read_file(k_dir + "templates/" + x.tmpl + ".jinja");
    RenderOptions o;
    o.tools = conv["tools"];
    o.now = 1768478400;
    for (const auto& t : index["templates"]) {
      if (t["name"] == x.tmpl) {
        o.bos_token = t["bos_token"];
        o.eos_token = t["eos_token"];
      }
    }
    std::string prompt;
    try {
      prompt = Template::parse(src).render(conv["messages"], o);
    } catch (const TemplateError&) {
      prompt = "";  // Gemma 2 raises on the system message; its format needs no prompt
    }
    ordered_json tools = conv["tools"];
    if (x.syntax.format == ToolFormat::llama3_builtin)
      tools.push_back(
          {{"type", "function"}, {"function", {{"name", "brave_search"}, {"parameters", ordered_json::object()}}}});
    const ReplySyntax s = reply_syntax(src, tools, prompt, x.syntax.reasoning);
    EXPECT_EQ(to_string(s.format), std::string(to_string(x.syntax.format))) << x.name;
    if (!prompt.empty()) {
      EXPECT_EQ(s.thinking_forced_open, x.syntax.thinking_forced_open) << x.name;
      EXPECT_TRUE(prompt.size() >= x.prompt_ends_with.size() &&
                  prompt.compare(prompt.size() - x.prompt_ends_with.size(), std::string::npos, x.prompt_ends_with) == 0)
          << x.name;
    }
  }
  // without tools: reasoning formats stay, the others are content only
  const ordered_json none;
  EXPECT_EQ(detect_tool_format(read_file(k_dir + "templates/qwen3-0.6b.jinja"), none), ToolFormat::hermes);
  EXPECT_EQ(detect_tool_format(read_file(k_dir + "templates/deepseek-r1-distill-qwen-32b.jinja"), none),
            ToolFormat::deepseek_r1);
  EXPECT_EQ(detect_tool_format(read_file(k_dir + "templates/llama-3.2-3b-instruct.jinja"), none),
            ToolFormat::content_only);
  EXPECT_EQ(detect_tool_format(read_file(k_dir + "templates/mistral-nemo-instruct-2407.jinja"), none),
            ToolFormat::content_only);
  EXPECT_EQ(detect_tool_format(read_file(k_dir + "templates/zephyr-7b-beta.jinja"), none), ToolFormat::content_only);
}

TEST(ToolCalls, ReasoningFormats) {
  const std::string raw = "<think>\nhmm\n</think>\n\nAnswer.";
  ReplySyntax s{ToolFormat::hermes, ReasoningFormat::none, false, true};
  auto r = parse_reply(raw, s);
  EXPECT_EQ(r.content, raw);
  EXPECT_EQ(r.reasoning_content, "");
  s.reasoning = ReasoningFormat::deepseek;
  r = parse_reply(raw, s);
  EXPECT_EQ(r.content, "Answer.");
  EXPECT_EQ(r.reasoning_content, "hmm");
  s.reasoning = ReasoningFormat::auto_detect;
  EXPECT_EQ(parse_reply(raw, s).reasoning_content, "hmm");
  // an unclosed thought is all reasoning (llama.cpp allows it)
  EXPECT_EQ(parse_reply("<think>still thinking", s).reasoning_content, "still thinking");
  EXPECT_THROW(parse_reasoning_format("deepseek-legacy2"), rocky::Error);
}

TEST(ToolCalls, MalformedFallsBackToContent) {
  const ReplySyntax h{ToolFormat::hermes, ReasoningFormat::deepseek, false, true};
  const std::string bad = "Let me call.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>";
  auto r = parse_reply(bad, h);
  EXPECT_EQ(r.content, bad);
  EXPECT_TRUE(r.tool_calls.empty());
  const ReplySyntax g{ToolFormat::generic, ReasoningFormat::none, false, true};
  EXPECT_EQ(parse_reply("plain words", g).content, "plain words");
  EXPECT_EQ(parse_reply("{\"neither\": 1}", g).content, "{\"neither\": 1}");
  // tool_choice none: calls stay content
  const ReplySyntax off{ToolFormat::hermes, ReasoningFormat::deepseek, false, false};
  const std::string call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  EXPECT_EQ(parse_reply(call, off).content, call);
}

// Feeds the reply in pieces; the deltas add up to the final parse, and no piece of a marker or of
// the thought leaks into content before it is decided.
void stream_check(const Example& x, const std::vector<size_t>& cuts) {
  ReplyStream st(x.syntax);
  std::string content, reasoning;
  std::vector<ToolCall> calls;
  size_t at = 0;
  for (size_t c : cuts) {
    auto d = st.push(std::string_view(x.raw).substr(at, c - at));
    at = c;
    content += d.content;
    reasoning += d.reasoning_content;
    calls.insert(calls.end(), d.tool_calls.begin(), d.tool_calls.end());
    for (const char* m : {"<tool_call", "<think", "</think", "[TOOL_CALLS", "<|tool_call", "<｜tool"})
      EXPECT_EQ(content.find(m), std::string::npos) << x.name << " leaked " << m << " at byte " << at;
  }
  auto d = st.push(std::string_view(x.raw).substr(at));
  content += d.content;
  reasoning += d.reasoning_content;
  calls.insert(calls.end(), d.tool_calls.begin(), d.tool_calls.end());
  d = st.finish();
  content += d.content;
  reasoning += d.reasoning_content;
  calls.insert(calls.end(), d.tool_calls.begin(), d.tool_calls.end());
  const ParsedReply whole = parse_reply(x.raw, x.syntax);
  EXPECT_EQ(content, whole.content) << x.name;
  EXPECT_EQ(reasoning, whole.reasoning_content) << x.name;
  ASSERT_EQ(calls.size(), whole.tool_calls.size()) << x.name;
  for (size_t k = 0; k < calls.size(); ++k) {
    EXPECT_EQ(calls[k].name, whole.tool_calls[k].name);
    EXPECT_EQ(calls[k].arguments, whole.tool_calls[k].arguments);
  }
  EXPECT_EQ(compare(st.result(), x.expected), "") << x.name;
}

TEST(ToolCalls, StreamingMatchesWholeParse) {
  std::mt19937 rng(7);
  for (const auto& x : examples()) {
    std::vector<size_t> bytes;
    for (size_t k = 1; k < x.raw.size(); ++k) bytes.push_back(k);
    stream_check(x, bytes);  // byte by byte (UTF-8 split inside characters too)
    for (int round = 0; round < 5; ++round) {
      std::vector<size_t> cuts;
      for (size_t k = 1; k < x.raw.size(); k += 1 + rng() % 7) cuts.push_back(k);
      stream_check(x, cuts);
    }
  }
}

TEST(ToolCalls, StreamingEmitsContentEarly) {
  ReplyStream st({ToolFormat::hermes, ReasoningFormat::deepseek, false, true});
  EXPECT_EQ(st.push("<thi").content, "");
  auto d = st.push("nk>\nPlan: look it up");
  EXPECT_EQ(d.content, "");
  EXPECT_EQ(d.reasoning_content, "Plan: look it up");
  d = st.push(".\n</think>\n\nSure, checking");
  EXPECT_EQ(d.reasoning_content, ".");
  EXPECT_EQ(d.content, "Sure, checking");
  d = st.push(" now.\n<tool");
  EXPECT_EQ(d.content, " now.\n");  // the newline before a tag is content (llama.cpp's open regex)

  d = st.push("_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa");
  EXPECT_TRUE(d.empty());
  d = st.push("ris\"}}\n</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"city\":\"Paris\"}");
  d = st.finish();
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(st.result().content, "Sure, checking now.\n");
}

}  // namespace
