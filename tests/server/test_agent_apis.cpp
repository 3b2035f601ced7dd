// The agent APIs without a model: Anthropic Messages and OpenAI Responses requests translated onto
// the chat template's messages, their bad fields named, the bodies built from a parsed reply (a
// Hermes tool call written by hand: a random-weight model never writes one), and the order of the
// streamed events.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/anthropic.hpp"
#include "server/openai_responses.hpp"

namespace rocky::server {
namespace {
using json = nlohmann::ordered_json;

template <class F>
ApiError error_of(F f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return ApiError(0, "");
}

// "event: NAME\ndata: {json}\n\n" × n → [(NAME, json)].
std::vector<std::pair<std::string, json>> events(const std::string& s) {
  std::vector<std::pair<std::string, json>> out;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t end = s.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos);
    const std::string ev = s.substr(pos, end - pos);
    pos = end + 2;
    const size_t nl = ev.find('\n');
    EXPECT_EQ(ev.rfind("event: ", 0), 0u) << ev;
    EXPECT_EQ(ev.substr(nl + 1, 6), "data: ") << ev;
    out.emplace_back(ev.substr(7, nl - 7), json::parse(ev.substr(nl + 7)));
  }
  return out;
}

// What a Qwen-style model writes when it thinks, says something and calls a tool.
const char* k_reply =
    "<think>need weather</think>Let me check.<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";

chat::ReplySyntax hermes() { return {chat::ToolFormat::hermes, chat::ReasoningFormat::deepseek, false, true}; }

runtime::GenerateResult result(runtime::StopReason why, int n_out = 5) {
  runtime::GenerateResult r;
  r.reason = why;
  r.n_prompt = 40;
  r.n_cached = 32;
  r.tokens.assign(n_out, 1);
  return r;
}

TEST(AnthropicRequest, TranslatesBlocksOntoChatMessages) {
  const json body = json::parse(
      R"({"model":"m","max_tokens":64,"system":[{"type":"text","text":"be"},{"type":"text","text":"brief","cache_control":{"type":"ephemeral"}}],
    "messages":[{"role":"user","content":"weather in Oslo?"},
      {"role":"assistant","content":[{"type":"thinking","thinking":"use the tool","signature":"x"},{"type":"text","text":"Checking."},
        {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Oslo"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"}]},
        {"type":"tool_result","tool_use_id":"toolu_2","content":"boom","is_error":true},{"type":"text","text":"and?"}]}],
    "tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
    "tool_choice":{"type":"auto"},"stop_sequences":["END"],"temperature":0,"top_p":0.9,"top_k":5,"metadata":{"user_id":"u"},"stream":true})");
  const auto r = anthropic::parse_messages(body, false);
  const json want =
      json::parse(R"([{"role":"system","content":"be\nbrief"},{"role":"user","content":"weather in Oslo?"},
    {"role":"assistant","content":"Checking.","reasoning_content":"use the tool","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":{"city":"Oslo"}}}]},
    {"role":"tool","tool_call_id":"toolu_1","content":"sunny"},{"role":"tool","tool_call_id":"toolu_2","content":"Error: boom"},
    {"role":"user","content":"and?"}])");
  EXPECT_EQ(r.messages, want) << r.messages.dump(1);
  EXPECT_EQ(
      r.tools,
      json::parse(
          R"([{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])"));
  EXPECT_EQ(r.sampling.max_tokens, 64);
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(*r.sampling.top_k, 5);
  EXPECT_EQ(*r.sampling.temperature, 0.0);
  EXPECT_TRUE(r.stream);
}

TEST(AnthropicRequest, NamesBadFields) {
  auto err = [](const char* body, bool count = false) {
    return error_of([&] { anthropic::parse_messages(json::parse(body), count); });
  };
  const auto missing = err(R"({"model":"m","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(missing.status, 400);
  EXPECT_EQ(missing.param, "max_tokens");
  EXPECT_NO_THROW(
      anthropic::parse_messages(json::parse(R"({"model":"m","messages":[{"role":"user","content":"hi"}]})"), true));
  const auto image = err(
      R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{}}]}]})");
  EXPECT_EQ(image.param, "messages[0].content[1].type");
  EXPECT_NE(image.message.find("image"), std::string::npos);
  EXPECT_EQ(err(R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"document"}]}]})").param,
            "messages[0].content[0].type");
  // any / tool need tools; tool names one of them.
  EXPECT_EQ(err(R"({"max_tokens":5,"messages":[{"role":"user","content":"a"}],"tool_choice":{"type":"any"}})").param,
            "tool_choice.type");
  EXPECT_EQ(
      err(R"({"max_tokens":5,"messages":[{"role":"user","content":"a"}],"tool_choice":{"type":"tool","name":"x"}})")
          .param,
      "tool_choice.type");
  const char* tools = R"("tools":[{"name":"w","input_schema":{"type":"object"}}])";
  auto with_tools = [&](const std::string& choice) {
    return std::string(R"({"max_tokens":5,"messages":[{"role":"user","content":"a"}],)") + tools +
           R"(,"tool_choice":)" + choice + "}";
  };
  EXPECT_EQ(err(with_tools(R"({"type":"tool","name":"x"})").c_str()).param, "tool_choice.name");
  EXPECT_EQ(err(with_tools(R"({"type":"tool"})").c_str()).param, "tool_choice.name");
  EXPECT_EQ(err(with_tools(R"({"type":"some"})").c_str()).param, "tool_choice.type");
  EXPECT_EQ(err(with_tools(R"({"type":"any","disable_parallel_tool_use":1})").c_str()).param,
            "tool_choice.disable_parallel_tool_use");
  EXPECT_EQ(err(with_tools(R"("any")").c_str()).param, "tool_choice");
  EXPECT_EQ(
      err(R"({"max_tokens":5,"messages":[{"role":"user","content":"a"}],"tools":[{"type":"web_search_20250305","name":"w"}]})")
          .param,
      "tools[0].type");
  EXPECT_EQ(err(R"({"max_tokens":5,"messages":[{"role":"user","content":"a"}],"tools":[{"name":"w"}]})").param,
            "tools[0].input_schema");
  EXPECT_EQ(err(R"({"max_tokens":0,"messages":[{"role":"user","content":"a"}]})").param, "max_tokens");
  EXPECT_EQ(err(R"({"max_tokens":5,"messages":[{"role":"system","content":"a"}]})").param, "messages[0].role");
  EXPECT_EQ(
      err(R"({"max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"b"}]}]})").param,
      "messages[0].content[0].type");
  EXPECT_EQ(err(R"({"max_tokens":5,"messages":[{"role":"user","content":"a"}],"stop_sequences":[1]})").param,
            "stop_sequences[0]");
}

TEST(AnthropicRequest, ToolChoiceAsChatCompletionsNamesIt) {
  auto parse = [](const std::string& choice) {
    return anthropic::parse_messages(
        json::parse(
            R"({"max_tokens":5,"messages":[{"role":"user","content":"a"}],"tools":[{"name":"w","input_schema":{"type":"object"}},{"name":"v","input_schema":{"type":"object"}}],"tool_choice":)" +
            choice + "}"),
        false);
  };
  const auto any = parse(R"({"type":"any","disable_parallel_tool_use":true})");
  EXPECT_EQ(any.tool_choice, "required");
  EXPECT_FALSE(any.parallel_tool_calls);
  const auto tool = parse(R"({"type":"tool","name":"v"})");
  EXPECT_EQ(tool.tool_choice, "function");
  EXPECT_EQ(tool.tool_choice_name, "v");
  EXPECT_TRUE(tool.parallel_tool_calls);
  EXPECT_EQ(parse(R"({"type":"none"})").tool_choice, "none");
  EXPECT_EQ(parse(R"({"type":"auto"})").tool_choice, "auto");
}

TEST(AnthropicErrors, TypesAndStatuses) {
  auto check = [](int status, int want_status, const char* want_type) {
    const ApiError e(status, "why");
    EXPECT_EQ(anthropic::error_status(e), want_status);
    const json j = anthropic::error_json(e);
    EXPECT_EQ(j["type"], "error");
    EXPECT_EQ(j["error"]["type"], want_type);
    EXPECT_EQ(j["error"]["message"], "why");
  };
  check(400, 400, "invalid_request_error");
  check(401, 401, "authentication_error");
  check(404, 404, "not_found_error");
  check(413, 413, "request_too_large");
  check(503, 529, "overloaded_error");
  check(500, 500, "api_error");
}

TEST(AnthropicResponse, MessageWithThinkingTextAndToolUse) {
  const auto reply = chat::parse_reply(k_reply, hermes());
  const json m = anthropic::message_json("msg_1", "mod", reply, result(runtime::StopReason::Eog));
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["stop_reason"], "tool_use");
  EXPECT_TRUE(m["stop_sequence"].is_null());
  ASSERT_EQ(m["content"].size(), 3u) << m.dump();
  EXPECT_EQ(m["content"][0]["type"], "thinking");
  EXPECT_EQ(m["content"][0]["thinking"], "need weather");
  EXPECT_EQ(m["content"][1], json::parse(R"({"type":"text","text":"Let me check."})"));
  EXPECT_EQ(m["content"][2]["type"], "tool_use");
  EXPECT_EQ(m["content"][2]["name"], "get_weather");
  EXPECT_EQ(m["content"][2]["input"], json::parse(R"({"city":"Oslo"})"));
  EXPECT_EQ(m["content"][2]["id"].get<std::string>().rfind("toolu_", 0), 0u);
  EXPECT_EQ(
      m["usage"],
      json::parse(
          R"({"input_tokens":8,"cache_creation_input_tokens":0,"cache_read_input_tokens":32,"output_tokens":5})"));

  auto stop = result(runtime::StopReason::StopString);
  stop.stop_word = "END";
  const json s = anthropic::message_json("msg_2", "mod", chat::parse_reply("hi", hermes()), stop);
  EXPECT_EQ(s["stop_reason"], "stop_sequence");
  EXPECT_EQ(s["stop_sequence"], "END");
  EXPECT_EQ(anthropic::message_json("m", "m", {}, result(runtime::StopReason::Length))["stop_reason"], "max_tokens");
  EXPECT_EQ(anthropic::message_json("m", "m", {}, result(runtime::StopReason::Eog))["stop_reason"], "end_turn");
}

TEST(AnthropicStream, EventSequence) {
  anthropic::MessageEvents ev("msg_1", "mod", 40);
  chat::ReplyStream stream(hermes());
  std::string out = ev.begin();
  // The reply in small pieces, as tokens come.
  const std::string text = k_reply;
  for (size_t i = 0; i < text.size(); i += 3) {
    const auto d = stream.push(text.substr(i, 3));
    if (!d.empty()) out += ev.delta(d);
  }
  const auto last = stream.finish();
  out += ev.finish(last, stream.result(), result(runtime::StopReason::Eog));
  const auto evs = events(out);
  std::vector<std::string> names;
  std::string thinking, said, args;
  for (const auto& [name, data] : evs) {
    EXPECT_EQ(data["type"], name);
    if (names.empty() || names.back() != name || name != "content_block_delta") names.push_back(name);
    if (name == "content_block_delta") {
      const json& d = data["delta"];
      if (d["type"] == "thinking_delta") thinking += d["thinking"].get<std::string>();
      if (d["type"] == "text_delta") said += d["text"].get<std::string>();
      if (d["type"] == "input_json_delta") args += d["partial_json"].get<std::string>();
    }
  }
  const std::vector<std::string> want = {"message_start",       "ping",
                                         "content_block_start", "content_block_delta",
                                         "content_block_stop",  "content_block_start",
                                         "content_block_delta", "content_block_stop",
                                         "content_block_start", "content_block_delta",
                                         "content_block_stop",  "message_delta",
                                         "message_stop"};
  EXPECT_EQ(names, want) << out;
  EXPECT_EQ(thinking, "need weather");
  EXPECT_EQ(said, "Let me check.");
  EXPECT_EQ(json::parse(args), json::parse(R"({"city":"Oslo"})"));
  // Block indexes 0, 1, 2 in order; the tool_use block starts with an empty input.
  std::vector<int> starts;
  std::vector<json> blocks;
  for (const auto& [name, data] : evs)
    if (name == "content_block_start") {
      starts.push_back(data["index"]);
      blocks.push_back(data["content_block"]);
    }
  EXPECT_EQ(starts, (std::vector<int>{0, 1, 2}));
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0]["type"], "thinking");
  EXPECT_EQ(blocks[1], json::parse(R"({"type":"text","text":""})"));
  EXPECT_EQ(blocks[2]["type"], "tool_use");
  EXPECT_EQ(blocks[2]["name"], "get_weather");
  EXPECT_EQ(blocks[2]["input"], json::object());
  const json& md = evs[evs.size() - 2].second;
  EXPECT_EQ(md["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(md["usage"]["output_tokens"], 5);
  EXPECT_EQ(evs[0].second["message"]["usage"]["input_tokens"], 40);
}

TEST(AgentStreams, ErrorEvents) {
  anthropic::MessageEvents a("msg_1", "mod", 4);
  const auto ae = events(a.error(ApiError(503, "the server is shutting down")));
  ASSERT_EQ(ae.size(), 1u);
  EXPECT_EQ(ae[0].first, "error");
  EXPECT_EQ(
      ae[0].second,
      json::parse(R"({"type":"error","error":{"type":"overloaded_error","message":"the server is shutting down"}})"));
  EXPECT_EQ(events(a.idle())[0].first, "ping");
  const auto r = responses::parse_responses(json::parse(R"({"input":"hi"})"), false);
  responses::ResponseEvents o({"resp_1", 7, "mod", &r}, nullptr);
  (void)o.begin();
  const auto oe = events(o.error(ApiError(500, "boom", "", "server_error")));
  ASSERT_EQ(oe.size(), 1u);
  EXPECT_EQ(oe[0].first, "error");
  EXPECT_EQ(oe[0].second["message"], "boom");
  EXPECT_EQ(oe[0].second["code"], "server_error");
  EXPECT_EQ(oe[0].second["sequence_number"], 2);
}

TEST(ResponsesRequest, TranslatesItems) {
  const json body = json::parse(R"({"model":"m","instructions":"be brief","input":[
      {"role":"developer","content":"dev"},
      {"type":"message","role":"user","content":[{"type":"input_text","text":"weather?"}]},
      {"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"tool"}]},
      {"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Oslo\"}"},
      {"type":"function_call_output","call_id":"call_1","output":"sunny"},
      {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Sunny."}]}],
    "tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"},"strict":false}],
    "tool_choice":"auto","max_output_tokens":32,"temperature":0.5,"top_p":1,"text":{"format":{"type":"text"}},"store":false,"stream":true})");
  const auto r = responses::parse_responses(body, false);
  const json want = json::parse(R"([{"role":"system","content":"dev"},{"role":"user","content":"weather?"},
    {"role":"assistant","content":"","reasoning_content":"tool","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
    {"role":"tool","tool_call_id":"call_1","content":"sunny"},{"role":"assistant","content":"Sunny."}])");
  EXPECT_EQ(r.input, want) << r.input.dump(1);
  EXPECT_EQ(*r.instructions, "be brief");
  EXPECT_EQ(r.tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.sampling.max_tokens, 32);
  EXPECT_FALSE(r.store);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(responses::parse_responses(json::parse(R"({"input":"hi"})"), false).input,
            json::parse(R"([{"role":"user","content":"hi"}])"));
}

TEST(ResponsesRequest, NamesBadFields) {
  auto err = [](const char* body) { return error_of([&] { responses::parse_responses(json::parse(body), false); }); };
  EXPECT_EQ(err(R"({"model":"m"})").param, "input");
  EXPECT_EQ(err(R"({"input":"a","tools":[{"type":"web_search"}]})").param, "tools[0].type");
  EXPECT_EQ(err(R"({"input":"a","tool_choice":"required"})").param, "tool_choice");
  EXPECT_EQ(err(R"({"input":"a","tool_choice":{"type":"function","name":"f"}})").param, "tool_choice");
  const std::string tools = R"("tools":[{"type":"function","name":"f"}])";
  auto with_tools = [&](const std::string& rest) {
    return err((R"({"input":"a",)" + tools + "," + rest + "}").c_str());
  };
  EXPECT_EQ(with_tools(R"("tool_choice":{"type":"function","name":"g"})").param, "tool_choice.name");
  EXPECT_EQ(with_tools(R"("tool_choice":{"type":"function"})").param, "tool_choice.name");
  EXPECT_EQ(with_tools(R"("tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]})").param, "tool_choice.type");
  EXPECT_EQ(with_tools(R"("tool_choice":{"type":"file_search"})").param, "tool_choice.type");
  EXPECT_EQ(with_tools(R"("tool_choice":"sometimes")").param, "tool_choice");
  EXPECT_EQ(with_tools(R"("tool_choice":"required","text":{"format":{"type":"json_object"}})").param, "tool_choice");
  EXPECT_EQ(err(R"({"input":"a","text":{"format":{"type":"json_schema","schema":{}}}})").param, "text.format.name");
  EXPECT_EQ(err(R"({"input":"a","text":{"format":{"type":"json_schema","name":"x"}}})").param, "text.format.schema");
  EXPECT_EQ(err(R"({"input":"a","text":{"format":{"type":"json_schema","name":"x","schema":[]}}})").param,
            "text.format.schema");
  EXPECT_EQ(err(R"({"input":"a","text":{"format":{"type":"json_schema","name":"x","schema":{"$ref":"#/x"}}}})").param,
            "text.format.schema");
  EXPECT_EQ(err(R"({"input":"a","text":{"format":{"type":"json_schema","name":"x","schema":{},"strict":"y"}}})").param,
            "text.format.strict");
  EXPECT_EQ(err(R"({"input":"a","text":{"format":{"type":"xml"}}})").param, "text.format.type");
  EXPECT_EQ(err(R"({"input":[{"type":"item_reference","id":"x"}]})").param, "input[0].type");
  EXPECT_EQ(err(R"({"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]})").param,
            "input[0].content[0].type");
  EXPECT_EQ(err(R"({"input":"a","max_output_tokens":0})").param, "max_output_tokens");
  EXPECT_EQ(err(R"({"input":[{"type":"function_call","name":"f","arguments":"{}"}]})").param, "input[0].call_id");
}

TEST(ResponsesRequest, ToolChoiceAndTextFormat) {
  const auto named = responses::parse_responses(
      json::parse(
          R"({"input":"a","tools":[{"type":"function","name":"f"},{"type":"function","name":"g"}],"tool_choice":{"type":"function","name":"g"}})"),
      false);
  EXPECT_EQ(named.tool_choice, "function");
  EXPECT_EQ(named.tool_choice_name, "g");
  EXPECT_EQ(named.tool_choice_echo, json::parse(R"({"type":"function","name":"g"})"));
  EXPECT_TRUE(named.sampling.grammar.empty());
  const auto req = responses::parse_responses(
      json::parse(R"({"input":"a","tools":[{"type":"function","name":"f"}],"tool_choice":"required"})"), false);
  EXPECT_EQ(req.tool_choice, "required");
  const auto schema = responses::parse_responses(
      json::parse(
          R"({"input":"a","text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object","properties":{"n":{"type":"integer"}}},"strict":true}}})"),
      false);
  EXPECT_EQ(schema.sampling.grammar_param, "text.format.schema");
  EXPECT_NE(schema.sampling.grammar.find("root ::="), std::string::npos) << schema.sampling.grammar;
  EXPECT_EQ(schema.text_format["name"], "x");
  const auto obj =
      responses::parse_responses(json::parse(R"({"input":"a","text":{"format":{"type":"json_object"}}})"), false);
  EXPECT_EQ(obj.sampling.grammar_param, "text.format");
  EXPECT_FALSE(obj.sampling.grammar.empty());
}

TEST(ResponsesResponse, ObjectAndStoredMessages) {
  const auto r = responses::parse_responses(json::parse(R"({"input":"hi","max_output_tokens":5})"), false);
  const responses::ResponseHead h{"resp_1", 7, "mod", &r};
  const auto reply = chat::parse_reply(k_reply, hermes());
  const json output = responses::output_items(reply, h.id);
  ASSERT_EQ(output.size(), 3u);
  EXPECT_EQ(output[0]["type"], "reasoning");
  EXPECT_EQ(output[1]["type"], "message");
  EXPECT_EQ(output[1]["content"][0]["text"], "Let me check.");
  EXPECT_EQ(output[2]["type"], "function_call");
  EXPECT_EQ(json::parse(output[2]["arguments"].get<std::string>()), json::parse(R"({"city":"Oslo"})"));
  const json obj = responses::response_json(h, output, nullptr);
  EXPECT_EQ(obj["status"], "in_progress");
  const auto full = result(runtime::StopReason::Length);
  const json done = responses::response_json(h, output, &full);
  EXPECT_EQ(done["object"], "response");
  EXPECT_EQ(done["status"], "incomplete");
  EXPECT_EQ(done["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(
      done["usage"],
      json::parse(
          R"({"input_tokens":40,"input_tokens_details":{"cached_tokens":32},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":45})"));
  const json stored = responses::assistant_messages(reply, output);
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0]["content"], "Let me check.");
  EXPECT_EQ(stored[0]["reasoning_content"], "need weather");
  EXPECT_EQ(stored[0]["tool_calls"][0]["id"], output[2]["call_id"]);
}

TEST(ResponsesStream, EventSequenceNumbered) {
  const auto r = responses::parse_responses(json::parse(R"({"input":"hi"})"), false);
  json stored;
  responses::ResponseEvents ev({"resp_1", 7, "mod", &r},
                               [&](const chat::ParsedReply&, const json& out) { stored = out; });
  chat::ReplyStream stream(hermes());
  std::string out = ev.begin();
  const std::string text = k_reply;
  for (size_t i = 0; i < text.size(); i += 4) {
    const auto d = stream.push(text.substr(i, 4));
    if (!d.empty()) out += ev.delta(d);
  }
  const auto last = stream.finish();
  out += ev.finish(last, stream.result(), result(runtime::StopReason::Eog));
  std::vector<std::string> names;
  int64_t seq = 0;
  std::string said;
  for (const auto& [name, data] : events(out)) {
    EXPECT_EQ(data["type"], name);
    EXPECT_EQ(data["sequence_number"], seq++);
    if (name == "response.output_text.delta") said += data["delta"].get<std::string>();
    if (names.empty() || names.back() != name || name.find(".delta") == std::string::npos) names.push_back(name);
  }
  const std::vector<std::string> want = {"response.created",
                                         "response.in_progress",
                                         "response.output_item.added",
                                         "response.reasoning_text.delta",
                                         "response.reasoning_text.done",
                                         "response.output_item.done",
                                         "response.output_item.added",
                                         "response.content_part.added",
                                         "response.output_text.delta",
                                         "response.output_text.done",
                                         "response.content_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added",
                                         "response.function_call_arguments.delta",
                                         "response.function_call_arguments.done",
                                         "response.output_item.done",
                                         "response.completed"};
  EXPECT_EQ(names, want) << out;
  EXPECT_EQ(said, "Let me check.");
  ASSERT_EQ(stored.size(), 3u);
  EXPECT_EQ(stored[2]["name"], "get_weather");
}

TEST(ResponseStore, BoundedLeastRecentlyUsed) {
  responses::ResponseStore store(2);
  store.put("a", json::array({1}));
  store.put("b", json::array({2}));
  EXPECT_TRUE(store.get("a"));  // a is now the most recent
  store.put("c", json::array({3}));
  EXPECT_FALSE(store.get("b"));
  EXPECT_EQ(*store.get("a"), json::array({1}));
  EXPECT_EQ(*store.get("c"), json::array({3}));
  EXPECT_EQ(store.size(), 2u);
  // By bytes: ["xxxx…"] entries of 14 bytes each in a store of 30.
  responses::ResponseStore small(100, 30);
  small.put("a", json::array({std::string(10, 'x')}));
  small.put("b", json::array({std::string(10, 'y')}));
  small.put("c", json::array({std::string(10, 'z')}));
  EXPECT_FALSE(small.get("a"));
  EXPECT_TRUE(small.get("b"));
  EXPECT_TRUE(small.get("c"));
  small.put("huge", json::array({std::string(100, 'h')}));
  EXPECT_FALSE(small.get("huge"));
  EXPECT_EQ(small.size(), 2u);
}

}  // namespace
}  // namespace rocky::server
