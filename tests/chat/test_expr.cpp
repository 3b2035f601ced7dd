// Unit tests of the template language: a table of expressions and statements whose expected output
// (or Python error) was produced by jinja2 in transformers' environment (expr_cases.hpp), plus
// error positions, unsupported constructs, resource limits, the clock, continue_final_message and
// the ChatML fallback.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "chat/expr_cases.hpp"
#include "chat/template.hpp"

namespace {

using nlohmann::ordered_json;
using rocky::chat::RenderOptions;
using rocky::chat::Template;
using rocky::chat::TemplateError;

std::string render(const std::string& src, const RenderOptions& o = {},
                   const ordered_json& msgs = ordered_json::array()) {
  return Template::parse(src).render(msgs, o);
}

TEST(ChatExpr, MatchesJinja2Table) {
  RenderOptions o;
  o.kwargs = ordered_json::parse(k_context);
  o.now = 1768478400;
  size_t n = 0;
  for (const auto& c : k_expr_cases) {
    ++n;
    const std::string want = c.want;
    try {
      const std::string got = render(c.src, o);
      EXPECT_EQ(got, want) << "template: " << c.src;
    } catch (const TemplateError& e) {
      if (want.empty() || want[0] != '!') {
        ADD_FAILURE() << "template: " << c.src << "\nraised " << e.what() << "\nwant " << want;
        continue;
      }
      EXPECT_EQ("!" + e.type() + ": " + e.message(), want) << "template: " << c.src;
    }
  }
  EXPECT_EQ(n, 49u);
}

// A parse error names line and column of the offending token.
void expect_syntax(const std::string& src, int line, int col, const std::string& needle) {
  try {
    Template::parse(src);
    ADD_FAILURE() << "parsed: " << src;
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), TemplateError::Kind::syntax) << src;
    EXPECT_EQ(e.line(), line) << src << ": " << e.what();
    EXPECT_EQ(e.col(), col) << src << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(
        std::string(e.what()).rfind("chat template:" + std::to_string(line) + ":" + std::to_string(col) + ": ", 0), 0u)
        << e.what();
  }
}

TEST(ChatExpr, SyntaxErrorPositions) {
  expect_syntax("{{ 1 + }}", 1, 8 + 2, "unexpected end of print statement");
  expect_syntax("ab\n  {% frobnicate %}", 2, 6, "unknown tag 'frobnicate'");
  expect_syntax("{{ x | nope }}", 1, 8, "No filter named 'nope'");
  expect_syntax("{{ x is nope }}", 1, 6, "No test named 'nope'");
  expect_syntax("line\n{{ x | truncate(3) }}", 2, 8, "filter 'truncate' is not supported");
  expect_syntax("{% include 'other.jinja' %}", 1, 4, "'{% include %}' is not supported");
  expect_syntax("{% extends 'base' %}", 1, 4, "not supported");
  expect_syntax("{% call foo() %}{% endcall %}", 1, 4, "not supported");
  expect_syntax("{% for x in y recursive %}{% endfor %}", 1, 15, "recursive");
  expect_syntax("{% if x %}\nabc", 2, 4, "expected 'elif' or 'else' or 'endif'");
  expect_syntax("{% break %}", 1, 4, "outside of a loop");
  expect_syntax("x\n\n   {{ 'unterminated }}", 3, 7, "unterminated string");
  expect_syntax("{{ a ) }}", 1, 6, "unexpected ')'");
  expect_syntax("{{ a $ b }}", 1, 6, "unexpected char");
  expect_syntax("{# no end", 1, 1, "missing end of comment");
  expect_syntax("{{ x", 1, 1, "expected '}}'");
  expect_syntax("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}", 1, 70, "nesting too deep");
  EXPECT_EQ(render(std::string(300, '(') + "1" + std::string(300, ')')).size(), 601u);  // text, not a tag
}

TEST(ChatExpr, RuntimeErrorPositions) {
  try {
    render("line one\n{% if true %}\n  {{- 'x' + none }}\n{% endif %}");
    FAIL();
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), TemplateError::Kind::runtime);
    EXPECT_EQ(e.type(), "TypeError");
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.col(), 11);
    EXPECT_STREQ(e.what(), "chat template:3:11: TypeError: can only concatenate str (not \"NoneType\") to str");
  }
  try {
    render("{{ raise_exception('Only user and assistant roles are supported!') }}");
    FAIL();
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), TemplateError::Kind::raise_exception);
    EXPECT_STREQ(e.what(), "Only user and assistant roles are supported!");
    EXPECT_EQ(e.line(), 1);
  }
  try {
    render("{{ 'abc'.zfill(5) }}");
    FAIL();
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.type(), "NotImplementedError");
    EXPECT_NE(std::string(e.what()).find("str.zfill() is not supported"), std::string::npos) << e.what();
  }
}

TEST(ChatExpr, ResourceLimits) {
  const auto t0 = std::chrono::steady_clock::now();
  RenderOptions small;
  small.max_steps = 100000;
  try {
    render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", small);
    FAIL();
  } catch (const TemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("too expensive"), std::string::npos) << e.what();
  }
  EXPECT_THROW(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), TemplateError);
  EXPECT_THROW(render("{{ 'a' * 100000000 }}"), TemplateError);
  EXPECT_THROW(
      render("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"),
      TemplateError);
  EXPECT_THROW(render("{{ 9223372036854775807 + 1 }}"), TemplateError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  // deep nesting and cycles through namespaces are errors, not stack overflows
  EXPECT_THROW(render("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}"),
               TemplateError);
  EXPECT_THROW(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), TemplateError);
  EXPECT_THROW(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns | tojson }}"), TemplateError);
  EXPECT_THROW(render("{% set h = namespace(c=namespace()) %}{% for i in range(2000) %}{% set t = namespace() %}"
                      "{% set t.prev = h.c %}{% set h.c = t %}{% endfor %}{{ h.c }}"),
               TemplateError);
  {
    ordered_json msgs = ordered_json::parse("[" + std::string(700, '[') + std::string(700, ']') + "]");
    EXPECT_THROW(Template::parse("{{ messages }}").render(msgs, {}), TemplateError);
  }
  // a namespace holding itself is freed (no reference cycle survives the render)
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me is defined }}"), "True");
}

TEST(ChatExpr, Clock) {
  RenderOptions o;
  o.now = 1768478400;
  EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %H:%M:%S %a') }}", o), "2026-01-15 12:00:00 Thu");
  ::setenv("SOURCE_DATE_EPOCH", "86400", 1);
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}"), "02 Jan 1970");
  ::unsetenv("SOURCE_DATE_EPOCH");
  const std::string year = render("{{ strftime_now('%Y') }}");
  EXPECT_GE(std::stoi(year), 2025);
  // date_string: llama-server's "%d %b %Y" of the same clock; chat_template_kwargs override it.
  EXPECT_EQ(render("{{ date_string is defined }}", o), "False");  // transformers' context: not passed
  o.date_string = true;
  EXPECT_EQ(render("{{ date_string }}|{{ strftime_now('%d %b %Y') }}", o), "15 Jan 2026|15 Jan 2026");
  RenderOptions k = o;
  k.kwargs = {{"date_string", "26 Jul 2024"}};
  EXPECT_EQ(render("{{ date_string }}", k), "26 Jul 2024");
}

// llama.cpp's built-in templates (llama-chat.cpp's output for each name) on one conversation.
TEST(ChatExpr, BuiltinTemplates) {
  const ordered_json msgs = ordered_json::parse(
      R"([{"role":"system","content":"Be brief. "},{"role":"user","content":" Hi"},{"role":"assistant","content":"Hello"},{"role":"user","content":"Bye"}])");
  RenderOptions o;
  o.add_generation_prompt = true;
  auto builtin = [&](const char* name) {
    const auto src = rocky::chat::builtin_template_source(name);
    EXPECT_TRUE(src) << name;
    return src ? Template::parse(*src).render(msgs, o) : std::string();
  };
  EXPECT_EQ(builtin("chatml"),
            "<|im_start|>system\nBe brief. <|im_end|>\n<|im_start|>user\n Hi<|im_end|>\n<|im_start|>assistant\n"
            "Hello<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(builtin("llama3"),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>"
            "\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>user"
            "<|end_header_id|>\n\nBye<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(builtin("gemma"),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(builtin("mistral-v7"),
            "[SYSTEM_PROMPT] Be brief. [/SYSTEM_PROMPT][INST]  Hi[/INST] Hello</s>[INST] Bye[/INST]");
  EXPECT_EQ(builtin("mistral-v7-tekken"),
            "[SYSTEM_PROMPT]Be brief. [/SYSTEM_PROMPT][INST] Hi[/INST]Hello</s>[INST]Bye[/INST]");
  EXPECT_EQ(builtin("phi3"),
            "<|system|>\nBe brief. <|end|>\n<|user|>\n Hi<|end|>\n<|assistant|>\nHello<|end|>\n<|user|>\nBye<|end|>\n"
            "<|assistant|>\n");
  EXPECT_EQ(builtin("phi4"),
            "<|im_start|>system<|im_sep|>Be brief. <|im_end|><|im_start|>user<|im_sep|> Hi<|im_end|><|im_start|>"
            "assistant<|im_sep|>Hello<|im_end|><|im_start|>user<|im_sep|>Bye<|im_end|><|im_start|>assistant<|im_sep|>");
  EXPECT_EQ(builtin("deepseek3"),
            "Be brief. \n\n<\uff5cUser\uff5c> Hi<\uff5cAssistant\uff5c>Hello<\uff5cend\u2581of\u2581sentence\uff5c>"
            "<\uff5cUser\uff5c>Bye<\uff5cAssistant\uff5c>");
  EXPECT_EQ(builtin("zephyr"),
            "<|system|>\nBe brief. <|endoftext|>\n<|user|>\n Hi<|endoftext|>\n<|assistant|>\nHello<|endoftext|>\n"
            "<|user|>\nBye<|endoftext|>\n<|assistant|>\n");
  EXPECT_FALSE(rocky::chat::builtin_template_source("no-such-template"));
  EXPECT_EQ(rocky::chat::builtin_template_names().size(), 9u);
}

TEST(ChatExpr, GenerationBlockAndVariables) {
  RenderOptions o;
  o.bos_token = "<s>";
  o.eos_token = "</s>";
  EXPECT_EQ(render("{{ bos_token }}{% generation %}[{{ eos_token }}]{% endgeneration %}", o), "<s>[</s>]");
  EXPECT_EQ(render("{{ tools is none }}{{ documents is none }}{{ tools is defined }}{{ add_generation_prompt }}", o),
            "TrueTrueTrueTrue");
  o.tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  o.kwargs = ordered_json::parse(R"({"bos_token": "<B>", "enable_thinking": false})");
  EXPECT_EQ(render("{{ bos_token }}{{ tools[0].function.name }}{{ enable_thinking }}", o), "<B>fFalse");
}

TEST(ChatExpr, ContinueFinalMessage) {
  const std::string chatml = rocky::chat::chatml_fallback_source();
  const auto msgs = ordered_json::parse(
      R"([{"role": "user", "content": "Write a haiku"}, {"role": "assistant", "content": "Autumn moon "}])");
  RenderOptions o;
  o.add_generation_prompt = false;
  o.continue_final_message = true;
  EXPECT_EQ(render(chatml, o, msgs), "<|im_start|>user\nWrite a haiku<|im_end|>\n<|im_start|>assistant\nAutumn moon ");
  // a template that trims content: the cut output is right-stripped
  const std::string trim = "{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}</{{ m.role }}>{% endfor %}";
  EXPECT_EQ(render(trim, o, msgs), "<user>Write a haiku</user><assistant>Autumn moon");
  // list content: the last text part is continued
  const auto parts = ordered_json::parse(
      R"([{"role": "assistant", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]}])");
  EXPECT_EQ(render("{% for p in messages[0].content %}({{ p.text }}){% endfor %}", o, parts), "(A)(B");
  o.add_generation_prompt = true;
  EXPECT_THROW(render(chatml, o, msgs), TemplateError);
}

TEST(ChatExpr, ChatmlFallback) {
  const auto msgs = ordered_json::parse(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])");
  RenderOptions o;
  EXPECT_EQ(render(rocky::chat::chatml_fallback_source(), o, msgs),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
  o.add_generation_prompt = false;
  EXPECT_EQ(render(rocky::chat::chatml_fallback_source(), o, msgs),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
}

TEST(ChatExpr, Whitespace) {
  // CRLF in the source is normalised; one trailing newline dropped; text after }} kept
  EXPECT_EQ(render("a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n"), "a\nb\n");
  EXPECT_EQ(render("x\n\n"), "x\n");
  EXPECT_EQ(render("{{ 1 }}\n{{ 2 }}"), "1\n2");
  // lstrip_blocks only at the start of a line; {%+ keeps the spaces
  EXPECT_EQ(render("a  {% if true %}b{% endif %}"), "a  b");
  EXPECT_EQ(render("  {%+ if true %}b{% endif %}"), "  b");
  EXPECT_EQ(render("  {# c #}\nb"), "b");
}

TEST(ChatExpr, ConcurrentRenders) {
  const auto t = Template::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m.content }}{% endfor %}{{ ns.n "
      "}}");
  ordered_json msgs = ordered_json::array();
  for (int k = 0; k < 50; ++k) msgs.push_back({{"role", "user"}, {"content", std::to_string(k)}});
  const std::string want = t.render(msgs, {});
  std::vector<std::thread> th;
  std::atomic<int> bad{0};
  for (int k = 0; k < 4; ++k)
    th.emplace_back([&] {
      for (int r = 0; r < 200; ++r)
        if (t.render(msgs, {}) != want) ++bad;
    });
  for (auto& x : th) x.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
