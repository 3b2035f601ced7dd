// server::parse_* on accepted and rejected bodies: what agents send is accepted; each bad field is
// an ApiError with a 4xx status naming it.
#include <cmath>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "server/request.hpp"

namespace rocky::server {
namespace {
using json = nlohmann::ordered_json;

ApiError chat_error(const std::string& body) {
  try {
    parse_chat(parse_body(body));
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "");
}

TEST(ServerRequest, AcceptsWhatAgentsSend) {
  const std::string body = R"({"model":"m","messages":[
      {"role":"developer","content":[{"type":"text","text":"be"},{"type":"text","text":"brief"}]},
      {"role":"user","content":"weather?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get","arguments":{"city":"Oslo"}}}]},
      {"role":"tool","tool_call_id":"c1","content":"sunny"},
      {"role":"assistant","tool_calls":[{"id":"c2","type":"function","function":{"name":"get","arguments":"{\"city\":\"Rome\"}"}}]},
      {"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"rain"}]}],
    "tools":[{"type":"function","function":{"name":"get","parameters":{"type":"object"}}}],
    "tool_choice":"auto","stream":true,"stream_options":{"include_usage":true},
    "max_completion_tokens":12,"max_tokens":99,"temperature":0.2,"top_k":40.0,"seed":-1,"stop":"END","n":1})";
  const ChatRequest r = parse_chat(parse_body(body));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(*r.sampling.max_tokens, 12);  // max_completion_tokens wins
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_EQ(r.sampling.seed, -1);
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"END"});
  ASSERT_EQ(r.messages.size(), 6u);
  const json t = normalise_for_template(r.messages);
  EXPECT_EQ(t[0]["content"], "be\nbrief");
  EXPECT_EQ(t[4]["tool_calls"][0]["function"]["arguments"], json({{"city", "Rome"}}));
  EXPECT_EQ(t[2]["tool_calls"][0]["function"]["arguments"], json({{"city", "Oslo"}}));
  EXPECT_EQ(t[5]["content"], "rain");
  EXPECT_EQ(t[2]["content"], "");  // null
  EXPECT_EQ(t[4]["content"], "");  // absent
}

TEST(ServerRequest, EachBadFieldIsNamed) {
  const struct {
    const char* body;
    int status;
    const char* param;
  } cases[] = {
      {R"({"messages": [)", 400, ""},
      {R"([1])", 400, ""},
      {R"({})", 400, "messages"},
      {R"({"messages":"hi"})", 400, "messages"},
      {R"({"messages":[]})", 400, "messages"},
      {R"({"messages":[{"role":"wizard","content":"x"}]})", 400, "messages[0].role"},
      {R"({"messages":[{"role":"user"}]})", 400, "messages[0].content"},
      {R"({"messages":[{"role":"user","content":{"a":1}}]})", 400, "messages[0].content"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", 400, "messages[0].content[0].type"},
      {R"({"messages":[{"role":"user","content":"x","tool_calls":[]}]})", 400, "messages[0].tool_calls"},
      {R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":3}}]}]})",
       400, "messages[0].tool_calls[0].function.arguments"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":-2})", 400, "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":1e12})", 400, "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":1.5})", 400, "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":18446744073709551615})", 400, "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":0})", 400, "n"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":17})", 400, "n"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})", 400, "temperature"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_p":1.5})", 400, "top_p"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":[1]})", 400, "stop[0]"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":1}})", 400,
       "stream_options.include_usage"},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})", 400, "tool_choice"},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"function","function":{"name":"f"}}})", 400,
       "tool_choice"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{}}]})", 400,
       "tools[0].function.name"},
      {R"({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":[]})", 400, "chat_template_kwargs"},
  };
  for (const auto& c : cases) {
    const ApiError e = chat_error(c.body);
    EXPECT_EQ(e.status, c.status) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " → " << e.message;
    EXPECT_FALSE(e.message.empty());
    if (*c.param) {
      EXPECT_NE(e.message.find(c.param), std::string::npos) << e.message;
    }
    const json j = e.to_json();
    EXPECT_TRUE(j["error"].contains("message") && j["error"].contains("type") && j["error"].contains("param") &&
                j["error"].contains("code"));
  }
}

// max_tokens' messages name its real bounds, also for a value past int64 (the JSON parser's uint64).
TEST(ServerRequest, MaxTokensNamesItsBounds) {
  for (const char* v : {"18446744073709551615", "16777217", "-2"}) {
    const ApiError e =
        chat_error(fmt::format(R"({{"messages":[{{"role":"user","content":"x"}}],"max_tokens":{}}})", v));
    EXPECT_EQ(e.status, 400) << v;
    EXPECT_NE(e.message.find(v), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("16777216"), std::string::npos) << e.message;
  }
  EXPECT_EQ(*parse_chat(parse_body(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":16777216})"))
                 .sampling.max_tokens,
            16777216);
  EXPECT_EQ(
      *parse_chat(parse_body(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":-1})")).sampling.max_tokens,
      -1);
  // Absent: the server's -n applies.
  EXPECT_FALSE(parse_chat(parse_body(R"({"messages":[{"role":"user","content":"x"}]})")).sampling.max_tokens);
}

TEST(ServerRequest, InvalidUtf8NamesTheOffset) {
  const std::string body = std::string(R"({"messages":[{"role":"user","content":")") + "ok\xC3(" + R"("}]})";
  try {
    parse_body(body);
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_NE(e.message.find("UTF-8"), std::string::npos);
    EXPECT_NE(e.message.find("offset 41"), std::string::npos) << e.message;
  }
  EXPECT_EQ(find_invalid_utf8("\xE2\x82\xAC ok \xF0\x9F\x98\x80"), std::string::npos);
  EXPECT_EQ(find_invalid_utf8("\xC0\x80"), 0u);            // overlong
  EXPECT_EQ(find_invalid_utf8("a\xED\xA0\x80"), 1u);       // surrogate
  EXPECT_EQ(find_invalid_utf8("ab\xF4\x90\x80\x80"), 2u);  // past U+10FFFF
}

TEST(ServerRequest, CompletionPromptForms) {
  EXPECT_EQ(*parse_completion(parse_body(R"({"prompt":"hi"})"), false).prompt_text, "hi");
  EXPECT_EQ(*parse_completion(parse_body(R"({"prompt":["hi"]})"), false).prompt_text, "hi");
  EXPECT_EQ(parse_completion(parse_body(R"({"prompt":[1,2,3]})"), false).prompt_tokens,
            (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(parse_completion(parse_body(R"({"prompt":[[4,5]]})"), false).prompt_tokens, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(*parse_completion(parse_body(R"({"prompt":"x","n_predict":7})"), true).sampling.max_tokens, 7);
  EXPECT_FALSE(parse_completion(parse_body(R"({"prompt":"x","n_predict":7})"), false).sampling.max_tokens);
  for (const char* bad : {R"({"prompt":5})", R"({"prompt":["a","b"]})", R"({"prompt":[1,-1]})", R"({"prompt":[]})",
                          R"({"prompt":"x","echo":true})", R"({})"}) {
    EXPECT_THROW(parse_completion(parse_body(bad), false), ApiError) << bad;
  }
  // Log-probabilities: chat logprobs true + top_logprobs N; completions logprobs N; n_probs N.
  EXPECT_EQ(parse_completion(parse_body(R"({"prompt":"x","logprobs":3})"), false).sampling.n_probs, 3);
  EXPECT_EQ(parse_completion(parse_body(R"({"prompt":"x","logprobs":0})"), false).sampling.n_probs, 0);
  EXPECT_EQ(parse_completion(parse_body(R"({"prompt":"x","logprobs":null})"), false).sampling.n_probs, -1);
  EXPECT_EQ(parse_completion(parse_body(R"({"prompt":"x","n_probs":4})"), true).sampling.n_probs, 4);
  EXPECT_EQ(parse_chat(parse_body(R"({"messages":[{"role":"user","content":"x"}],"logprobs":false})")).sampling.n_probs,
            -1);
  EXPECT_EQ(parse_chat(parse_body(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":3})"))
                .sampling.n_probs,
            3);
  for (const char* bad : {R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":3})",
                          R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})",
                          R"({"messages":[{"role":"user","content":"x"}],"logprobs":3})"}) {
    EXPECT_THROW(parse_chat(parse_body(bad)), ApiError) << bad;
  }
  // Streamed log-probabilities (each chunk carries its tokens').
  EXPECT_EQ(parse_chat(parse_body(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"stream":true})"))
                .sampling.n_probs,
            0);
  // Fields that change the output but are not implemented: a 400 naming each; neutral values pass
  // (what SDKs send by default). Native /completion (grammar, json_schema, n_probs) and chat alike.
  const std::pair<const char*, const char*> unsupported[] = {{"presence_penalty", "2.5"},
                                                             {"presence_penalty", "\"x\""},
                                                             {"frequency_penalty", "1e9"},
                                                             {"logit_bias", "\"x\""},
                                                             {"best_of", "3"},
                                                             {"n_probs", "50"},
                                                             {"grammar", "\"root ::= x\""},
                                                             {"grammar", "7"},
                                                             {"json_schema", "{\"type\":\"object\",\"not\":{}}"},
                                                             {"mirostat", "3"},
                                                             {"typical_p", "1.5"},
                                                             {"xtc_probability", "-0.1"},
                                                             {"xtc_threshold", "\"x\""},
                                                             {"dry_multiplier", "-1"},
                                                             {"dry_base", "0.5"},
                                                             {"dry_allowed_length", "1.5"},
                                                             {"dry_penalty_last_n", "-2"},
                                                             {"dry_sequence_breakers", "[]"},
                                                             {"dry_sequence_breakers", "\"\\n\""},
                                                             {"mirostat_tau", "-1"},
                                                             {"mirostat_eta", "\"x\""},
                                                             {"top_n_sigma", "-3"},
                                                             {"samplers", "7"},
                                                             {"id_slot", "-2"},
                                                             {"t_max_predict_ms", "-1"}};
  for (const auto& [name, value] : unsupported) {
    const std::string body = std::string(R"({"prompt":"x",")") + name + "\":" + value + "}";
    for (bool native : {false, true}) {
      try {
        parse_completion(parse_body(body), native);
        ADD_FAILURE() << "accepted " << body;
      } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400) << body;
        EXPECT_EQ(e.param, name) << body;
      }
    }
    const std::string chat =
        std::string(R"({"messages":[{"role":"user","content":"x"}],")") + name + "\":" + value + "}";
    EXPECT_THROW(parse_chat(parse_body(chat)), ApiError) << chat;
  }
  EXPECT_NO_THROW(parse_chat(parse_body(
      R"({"messages":[{"role":"user","content":"x"}],"presence_penalty":0,"frequency_penalty":0,"logit_bias":{},"best_of":1})")));
  EXPECT_NO_THROW(
      parse_completion(parse_body(R"({"prompt":"x","grammar":"","json_schema":null,"n_probs":0,"mirostat":0})"), true));
  // A bad entry of a list is named by its index.
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt":"x","samplers":["top_k","infill"]})", "samplers[1]"},
           {R"({"prompt":"x","samplers":["top_k",3]})", "samplers[1]"},
           {R"({"prompt":"x","samplers":"kpz"})", "samplers"},
           {R"({"prompt":"x","dry_sequence_breakers":["\n",""]})", "dry_sequence_breakers[1]"},
           {R"({"prompt":"x","dry_sequence_breakers":[1]})", "dry_sequence_breakers[0]"}}) {
    try {
      parse_completion(parse_body(body), true);
      ADD_FAILURE() << "accepted " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param, param) << body;
      EXPECT_NE(e.message.find(param), std::string::npos) << e.message;
    }
  }
  EXPECT_EQ(parse_detokenize(parse_body(R"({"tokens":[1,2]})")), (std::vector<int32_t>{1, 2}));
}

// logit_bias in OpenAI's form (token-id keys) and llama-server's ([token or text, bias or false]).
TEST(ServerRequest, LogitBiasForms) {
  const auto b =
      parse_completion(parse_body(R"({"prompt":"x","logit_bias":{"15":-100,"Hello":2.5}})"), false).sampling.logit_bias;
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].id, 15);
  EXPECT_EQ(b[0].bias, -100);
  EXPECT_EQ(b[1].id, -1);
  EXPECT_EQ(b[1].text, "Hello");
  EXPECT_EQ(b[1].bias, 2.5);
  const auto pairs =
      parse_completion(parse_body(R"({"prompt":"x","logit_bias":[[7,false],["hi",1]]})"), true).sampling.logit_bias;
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].id, 7);
  EXPECT_TRUE(std::isinf(pairs[0].bias) && pairs[0].bias < 0);
  EXPECT_EQ(pairs[1].text, "hi");
  for (const char* bad : {R"([[7]])", R"([[7,true]])", R"({"5":"x"})", R"([[-3,1]])", R"({"":1})", R"(5)"}) {
    const std::string body = std::string(R"({"prompt":"x","logit_bias":)") + bad + "}";
    try {
      parse_completion(parse_body(body), true);
      ADD_FAILURE() << "accepted " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param.rfind("logit_bias", 0), 0u) << body << " → " << e.param;
    }
  }
  const auto p = parse_chat(parse_body(R"({"messages":[{"role":"user","content":"x"}],"presence_penalty":0.5,
    "frequency_penalty":-1})"))
                     .sampling;
  EXPECT_EQ(*p.presence_penalty, 0.5);
  EXPECT_EQ(*p.frequency_penalty, -1);
  EXPECT_THROW(parse_detokenize(parse_body(R"({"tokens":[1,"a"]})")), ApiError);
  const ApplyTemplateRequest a =
      parse_apply_template(parse_body(R"({"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]})"));
  EXPECT_TRUE(a.add_generation_prompt);
  EXPECT_TRUE(a.tools.is_null());
  EXPECT_TRUE(a.messages[0]["content"].is_array());  // as given: no normalisation
}

// Structured output fields: grammar, json_schema, response_format (json_object / json_schema) become
// checked GBNF; errors name line:col or the JSON pointer; two constraints are a 400 naming both.
TEST(ServerRequest, StructuredOutput) {
  const std::string msgs = R"("messages":[{"role":"user","content":"x"}])";
  auto chat = [&](const std::string& extra) { return parse_chat(parse_body("{" + msgs + "," + extra + "}")); };
  auto err = [&](const std::string& extra) {
    try {
      chat(extra);
    } catch (const ApiError& e) {
      return e;
    }
    return ApiError(0, "accepted");
  };
  EXPECT_EQ(chat(R"("grammar":"root ::= \"a\"")").sampling.grammar, "root ::= \"a\"");
  EXPECT_EQ(chat(R"("grammar":"root ::= \"a\"")").sampling.grammar_param, "grammar");
  EXPECT_NE(chat(R"("response_format":{"type":"json_object"})").sampling.grammar.find("root ::="), std::string::npos);
  const auto s = chat(
      R"("response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,"schema":{"type":"integer"}}})");
  EXPECT_EQ(s.sampling.grammar_param, "response_format.json_schema.schema");
  EXPECT_TRUE(chat(R"("response_format":{"type":"text"})").sampling.grammar.empty());
  EXPECT_FALSE(parse_completion(parse_body(R"({"prompt":"x","json_schema":{"type":"boolean"}})"), true)
                   .sampling.grammar.empty());

  ApiError e = err(R"("grammar":"root ::= \"a\" @")");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "grammar");
  EXPECT_NE(e.message.find("line 1:14"), std::string::npos) << e.message;
  e = err(R"("response_format":{"type":"json_schema","json_schema":{"schema":{"properties":{"a":{"multipleOf":2}}}}})");
  EXPECT_EQ(e.param, "response_format.json_schema.schema");
  EXPECT_NE(e.message.find("at /properties/a: unsupported keyword 'multipleOf'"), std::string::npos) << e.message;
  e = err(R"("grammar":"root ::= \"a\"","response_format":{"type":"json_object"})");
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("'grammar' and 'response_format'"), std::string::npos) << e.message;
  e = err(R"("response_format":{"type":"json_schema","json_schema":{"name":"n"}})");
  EXPECT_EQ(e.param, "response_format.json_schema.schema");
  e = err(R"("response_format":{"type":"yaml"})");
  EXPECT_EQ(e.param, "response_format.type");

  // Tool choice: required / named need tools (and the name must be one of them); not with a grammar.
  const std::string tools = R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}])";
  EXPECT_EQ(chat(tools + R"(,"tool_choice":"required")").tool_choice, "required");
  const auto named = chat(tools + R"(,"tool_choice":{"type":"function","function":{"name":"f"}})");
  EXPECT_EQ(named.tool_choice, "function");
  EXPECT_EQ(named.tool_choice_name, "f");
  EXPECT_EQ(err(tools + R"(,"tool_choice":{"type":"function","function":{"name":"g"}})").param,
            "tool_choice.function.name");
  e = err(tools + R"(,"tool_choice":"required","grammar":"root ::= \"a\"")");
  EXPECT_NE(e.message.find("'tool_choice' and 'grammar'"), std::string::npos) << e.message;
}

// llama-server's speculative.* fields: dotted keys or one "speculative" object; each bad one named.
TEST(ServerRequest, SpeculativeFields) {
  for (const char* body : {R"({"prompt":"x","speculative.n_max":8,"speculative.n_min":2,"speculative.p_min":0.5})",
                           R"({"prompt":"x","speculative":{"n_max":8,"n_min":2,"p_min":0.5}})"}) {
    const auto r = parse_completion(parse_body(body), true);
    EXPECT_EQ(r.sampling.spec_n_max, 8) << body;
    EXPECT_EQ(r.sampling.spec_n_min, 2) << body;
    EXPECT_EQ(r.sampling.spec_p_min, 0.5) << body;
    EXPECT_FALSE(r.sampling.spec_param.empty());
  }
  const auto none = parse_completion(parse_body(R"({"prompt":"x"})"), true);
  EXPECT_FALSE(none.sampling.spec_n_max);
  EXPECT_TRUE(none.sampling.spec_param.empty());
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt":"x","speculative.n_maxx":4})", "speculative.n_maxx"},
           {R"({"prompt":"x","speculative":{"type":"ngram"}})", "speculative.type"},
           {R"({"prompt":"x","speculative":[1]})", "speculative"},
           {R"({"prompt":"x","speculative.n_max":"8"})", "speculative.n_max"},
           {R"({"prompt":"x","speculative.n_max":-1})", "speculative.n_max"},
           {R"({"prompt":"x","speculative.n_max":257})", "speculative.n_max"},
           {R"({"prompt":"x","speculative.n_min":1.5})", "speculative.n_min"},
           {R"({"prompt":"x","speculative.p_min":2})", "speculative.p_min"},
           {R"({"prompt":"x","speculative.n_max":2,"speculative.n_min":3})", "speculative.n_min"},
           {R"({"prompt":"x","speculative.n_max":2,"speculative":{"n_max":2}})", "speculative.n_max"}}) {
    try {
      parse_completion(parse_body(body), true);
      ADD_FAILURE() << "accepted " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400) << body;
      EXPECT_EQ(e.param, param) << body;
      EXPECT_NE(e.message.find(param), std::string::npos) << e.message;
    }
    const std::string chat = R"({"messages":[{"role":"user","content":"x"}],)" + body.substr(body.find(',') + 1);
    EXPECT_THROW(parse_chat(parse_body(chat)), ApiError) << chat;
  }
}

}  // namespace
// llama-server's sampler fields: values as sent; `samplers` by name (llama.cpp's other spellings too)
// or by letter.
TEST(ServerRequest, SamplerFields) {
  const CompletionRequest r = parse_completion(
      parse_body(R"({"prompt":"x","typical_p":0.5,"top_n_sigma":1.5,"xtc_probability":0.25,"xtc_threshold":0.2,
      "dry_multiplier":0.8,"dry_base":2,"dry_allowed_length":3,"dry_penalty_last_n":-1,
      "dry_sequence_breakers":["\n","###"],"mirostat":2,"mirostat_tau":4,"mirostat_eta":0.2,
      "samplers":["top_k","typical","temperature"],"n":2,"id_slot":1,"t_max_predict_ms":500})"),
      true);
  const SamplingFields& s = r.sampling;
  EXPECT_EQ(s.typical_p, 0.5);
  EXPECT_EQ(s.top_n_sigma, 1.5);
  EXPECT_EQ(s.xtc_probability, 0.25);
  EXPECT_EQ(s.xtc_threshold, 0.2);
  EXPECT_EQ(s.dry_multiplier, 0.8);
  EXPECT_EQ(s.dry_base, 2.0);
  EXPECT_EQ(s.dry_allowed_length, 3);
  EXPECT_EQ(s.dry_penalty_last_n, -1);
  EXPECT_EQ(s.dry_sequence_breakers, (std::vector<std::string>{"\n", "###"}));
  EXPECT_EQ(s.mirostat, 2);
  EXPECT_EQ(s.mirostat_tau, 4.0);
  EXPECT_EQ(s.mirostat_eta, 0.2);
  using K = runtime::SamplerKind;
  EXPECT_EQ(s.samplers, (std::vector<K>{K::top_k, K::typical_p, K::temperature}));
  EXPECT_EQ(s.n, 2);
  EXPECT_EQ(s.id_slot, 1);
  EXPECT_EQ(s.t_max_predict_ms, 500);
  const auto letters = parse_completion(parse_body(R"({"prompt":"x","samplers":"edskypmxt"})"), true);
  EXPECT_EQ(letters.sampling.samplers, runtime::default_sampler_order());
  const auto none = parse_completion(parse_body(R"({"prompt":"x"})"), true);
  EXPECT_FALSE(none.sampling.samplers);
  EXPECT_FALSE(none.sampling.mirostat);
  EXPECT_EQ(none.sampling.n, 1);
  EXPECT_EQ(none.sampling.id_slot, -1);
}

}  // namespace rocky::server
