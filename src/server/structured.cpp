// Tool-call grammars (see structured.hpp).
#include "server/structured.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "grammar/json_schema.hpp"
#include "server/request.hpp"

namespace rocky::server {
namespace {

// A GBNF literal for text.
std::string lit(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o + "\"";
}

}  // namespace

ToolGrammar tool_call_grammar(chat::ToolFormat format, const nlohmann::ordered_json& tools, const std::string& choice,
                              const std::string& name) {
  using chat::ToolFormat;
  ToolGrammar tg;
  std::string open, close, args_key = "arguments", trigger;
  switch (format) {
    case ToolFormat::hermes:
      open = "<tool_call>\n{\"name\": ";
      close = "}\n</tool_call>";
      trigger = "<tool_call>";
      break;
    case ToolFormat::llama3:
      open = "{\"name\": ";
      close = "}";
      args_key = "parameters";
      trigger = "{\"name\"";
      break;
    case ToolFormat::mistral_nemo:
      open = "[TOOL_CALLS][{\"name\": ";
      trigger = "[TOOL_CALLS]";
      break;
    case ToolFormat::granite:
      open = "<|tool_call|>[{\"name\": ";
      close = "}]";
      trigger = "<|tool_call|>";
      break;
    case ToolFormat::generic:
    case ToolFormat::content_only:
      if (choice == "auto") return tg;
      open = "{\"tool_call\": {\"name\": ";
      close = "}}";
      break;
    default:
      throw ApiError(400,
                     fmt::format("tool_choice '{}' is not supported with this chat template's tool-call format ({})",
                                 choice, chat::to_string(format)),
                     "tool_choice", "unsupported_value");
  }
  std::string rules, calls;
  int n = 0;
  for (size_t i = 0; i < tools.size(); ++i) {
    const auto& fn = tools[i]["function"];
    const std::string fname = fn.value("name", "");
    if (choice == "function" && fname != name) continue;
    nlohmann::json params = nlohmann::json::object();
    if (fn.contains("parameters") && !fn["parameters"].is_null())
      params = nlohmann::json::parse(fn["parameters"].dump());
    if (params.is_object() && params.empty()) params = {{"type", "object"}};
    const std::string prefix = fmt::format("t{}-", n);
    try {
      rules += grammar::json_schema_to_gbnf(params, prefix);
    } catch (const Error& e) {
      throw ApiError(400, fmt::format("'tools[{}].function.parameters': {}", i, e.what()),
                     fmt::format("tools[{}].function.parameters", i), "invalid_value");
    }
    std::string call = lit(nlohmann::json(fname).dump() + ", \"" + args_key + "\": ") + " " + prefix + "root";
    if (format == ToolFormat::mistral_nemo) call += " \", \\\"id\\\": \\\"\" [a-zA-Z0-9]{9} \"\\\"}]\"";
    calls += (n ? " | " : "") + call;
    ++n;
  }
  if (n == 0) throw ApiError(400, "no tool to call", "tool_choice", "invalid_value");
  tg.gbnf = "root ::= " + lit(open) + " (" + calls + ") " + (close.empty() ? "" : lit(close)) + "\n" + rules;
  if (choice == "auto") tg.triggers.push_back(trigger);
  return tg;
}

}  // namespace rocky::server
