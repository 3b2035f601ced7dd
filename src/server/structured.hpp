// Structured output for `rocky serve`: the grammar that makes a reply a tool call in the model's
// own format (tool_choice "required" or a named function), or a lazy one that constrains a call
// only once the model starts it (tool_choice "auto").
//
//   hermes        <tool_call>\n{"name": "f", "arguments": {…}}\n</tool_call>    trigger <tool_call>
//   llama3        {"name": "f", "parameters": {…}}                             trigger {"name"
//   mistral_nemo  [TOOL_CALLS][{"name": "f", "arguments": {…}, "id": "abc123XYZ"}] trigger [TOOL_CALLS]
//   granite       <|tool_call|>[{"name": "f", "arguments": {…}}]                  trigger <|tool_call|>
//   generic       {"tool_call": {"name": "f", "arguments": {…}}}  (templates that never read `tools`,
//                 the ChatML fallback included, as llama-server's generic handler; no lazy form:
//                 the whole reply is the JSON object)
// `arguments` follows the tool's `parameters` JSON Schema (absent: any JSON object).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/toolcalls.hpp"

namespace rocky::server {

struct ToolGrammar {
  std::string gbnf;
  std::vector<std::string> triggers;  // empty: constrained from the first token
};

// `choice`: "required", "function" (only `name`) or "auto" (lazy; an empty gbnf when the format
// has no lazy form). Throws ApiError 400 for a tool whose parameters schema cannot be converted
// (naming the tool and the JSON pointer) or a format without a constrained form.
ToolGrammar tool_call_grammar(chat::ToolFormat format, const nlohmann::ordered_json& tools, const std::string& choice,
                              const std::string& name);

}  // namespace rocky::server
