#include "server/responses_request.hpp"

#include <fmt/format.h>

#include <limits>

#include "grammar/json_schema.hpp"
#include "server/json_fields.hpp"

namespace rocky::server::responses {

using namespace fields;

namespace {

constexpr int64_t k_int_max = std::numeric_limits<int32_t>::max();

// A message's content: a string, or parts of text (input_text, output_text, refusal).
std::string content_text(const json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad_type(param, "a string or an array of content parts", content);
  std::string out;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", param, i);
    const json& part = content[i];
    if (!part.is_object()) bad_type(p, "an object", part);
    const std::string type = string_at(part, "type", p + ".type", true);
    std::string text;
    if (type == "input_text" || type == "output_text" || type == "text")
      text = string_at(part, "text", p + ".text", true);
    else if (type == "refusal")
      text = string_at(part, "refusal", p + ".refusal", true);
    else if (type == "input_image" || type == "input_file" || type == "input_audio")
      throw ApiError(400, fmt::format("'{}.type' is '{}': this server takes text only", p, type), p + ".type",
                     "unsupported_content");
    else
      bad_value(p + ".type", fmt::format("'{}' is not a text content part (input_text, output_text)", type));
    if (!out.empty()) out += "\n";
    out += text;
  }
  return out;
}

// Reasoning item text: its reasoning_text content, else its summary.
std::string reasoning_text(const json& item, const std::string& p) {
  std::string out;
  for (const char* key : {"content", "summary"}) {
    const json* parts = get(item, key);
    if (!parts) continue;
    if (!parts->is_array()) bad_type(p + "." + key, "an array", *parts);
    for (size_t i = 0; i < parts->size(); ++i) {
      const json& part = (*parts)[i];
      if (!part.is_object()) bad_type(fmt::format("{}.{}[{}]", p, key, i), "an object", part);
      if (!out.empty()) out += "\n";
      out += string_at(part, "text", fmt::format("{}.{}[{}].text", p, key, i), true);
    }
    if (!out.empty()) break;
  }
  return out;
}

json translate_input(const json& input) {
  json out = json::array();
  if (input.is_string()) {
    out.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
    return out;
  }
  if (!input.is_array()) bad_type("input", "a string or an array of items", input);
  std::string pending_reasoning;
  auto new_assistant = [&](std::string content) {
    json a = {{"role", "assistant"}, {"content", std::move(content)}};
    if (!pending_reasoning.empty()) a["reasoning_content"] = pending_reasoning;
    pending_reasoning.clear();
    out.push_back(std::move(a));
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const std::string p = fmt::format("input[{}]", i);
    const json& item = input[i];
    if (!item.is_object()) bad_type(p, "an object", item);
    const std::string type = string_at(item, "type", p + ".type", false, get(item, "role") ? "message" : "");
    if (type == "message") {
      std::string role = string_at(item, "role", p + ".role", true);
      const json* c = get(item, "content");
      if (!c)
        throw ApiError(400, fmt::format("'{}.content' is required", p), p + ".content", "missing_required_parameter");
      std::string text = content_text(*c, p + ".content");
      if (role == "developer") role = "system";
      if (role == "assistant") {
        new_assistant(std::move(text));
      } else if (role == "user" || role == "system") {
        out.push_back({{"role", role}, {"content", std::move(text)}});
      } else {
        bad_value(p + ".role", fmt::format("must be 'user', 'assistant', 'system' or 'developer' (got '{}')", role));
      }
    } else if (type == "function_call") {
      const std::string call_id = string_at(item, "call_id", p + ".call_id", true);
      const std::string name = string_at(item, "name", p + ".name", true);
      const std::string args = string_at(item, "arguments", p + ".arguments", true);
      if (out.empty() || out.back().value("role", "") != "assistant" || !pending_reasoning.empty()) new_assistant("");
      json& a = out.back();
      if (!a.contains("tool_calls")) a["tool_calls"] = json::array();
      a["tool_calls"].push_back(
          {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}});
    } else if (type == "function_call_output") {
      const std::string call_id = string_at(item, "call_id", p + ".call_id", true);
      const json* o = get(item, "output");
      if (!o)
        throw ApiError(400, fmt::format("'{}.output' is required", p), p + ".output", "missing_required_parameter");
      out.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", content_text(*o, p + ".output")}});
    } else if (type == "reasoning") {
      if (!pending_reasoning.empty()) pending_reasoning += "\n";
      pending_reasoning += reasoning_text(item, p);
    } else if (type.empty()) {
      throw ApiError(400, fmt::format("'{}.type' is required (or a 'role' for a message)", p), p + ".type",
                     "missing_required_parameter");
    } else {
      throw ApiError(400,
                     fmt::format("'{}.type' is '{}': supported input items are message, function_call, "
                                 "function_call_output and reasoning",
                                 p, type),
                     p + ".type", "unsupported_value");
    }
  }
  if (!pending_reasoning.empty()) new_assistant("");  // a trailing reasoning item: kept, as assistant history
  return out;
}

json translate_tools(const json& tools, json& echo) {
  if (!tools.is_array()) bad_type("tools", "an array", tools);
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string p = fmt::format("tools[{}]", i);
    const json& t = tools[i];
    if (!t.is_object()) bad_type(p, "an object", t);
    const std::string type = string_at(t, "type", p + ".type", true);
    if (type != "function")
      throw ApiError(400,
                     fmt::format("'{}.type' is '{}': only function tools are supported (hosted tools run on "
                                 "OpenAI's servers)",
                                 p, type),
                     p + ".type", "unsupported_tool");
    const std::string name = string_at(t, "name", p + ".name", true);
    if (name.empty()) bad_value(p + ".name", "must not be empty");
    json fn = {{"name", name}};
    if (const json* d = get(t, "description")) {
      if (!d->is_string()) bad_type(p + ".description", "a string", *d);
      fn["description"] = *d;
    }
    if (const json* ps = get(t, "parameters")) {
      if (!ps->is_object()) bad_type(p + ".parameters", "an object", *ps);
      fn["parameters"] = *ps;
    } else {
      fn["parameters"] = {{"type", "object"}, {"properties", json::object()}};
    }
    bool_at(t, "strict", p + ".strict", true);
    out.push_back({{"type", "function"}, {"function", fn}});
    json e = {{"type", "function"},
              {"name", name},
              {"description", fn.value("description", json())},
              {"parameters", fn["parameters"]},
              {"strict", bool_at(t, "strict", p + ".strict", true)}};
    echo.push_back(std::move(e));
  }
  return out;
}

}  // namespace

ResponsesRequest parse_responses(const json& o, bool input_tokens) {
  ResponsesRequest r;
  r.model = string_at(o, "model", "model", false);
  if (const json* ins = get(o, "instructions")) {
    if (!ins->is_string()) bad_type("instructions", "a string", *ins);
    r.instructions = ins->get<std::string>();
  }
  const json* input = get(o, "input");
  if (!input) throw ApiError(400, "'input' is required", "input", "missing_required_parameter");
  r.input = translate_input(*input);
  if (const json* t = get(o, "tools")) r.tools = translate_tools(*t, r.tools_echo);
  if (const json* tc = get(o, "tool_choice")) {
    std::string choice;
    if (tc->is_string()) {
      choice = tc->get<std::string>();
      if (choice != "auto" && choice != "none" && choice != "required")
        bad_value("tool_choice", fmt::format("must be 'auto', 'none' or 'required' (got '{}')", choice));
    } else if (tc->is_object()) {
      choice = string_at(*tc, "type", "tool_choice.type", true);
      if (choice == "allowed_tools")
        throw ApiError(400,
                       "'tool_choice.type' 'allowed_tools' is not supported: send the allowed subset as 'tools' "
                       "(with tool_choice 'auto' or 'required')",
                       "tool_choice.type", "unsupported_value");
      if (choice != "function")
        bad_value("tool_choice.type",
                  fmt::format("'{}' is not a tool choice for function tools (function; or the strings auto, none, "
                              "required)",
                              choice));
      r.tool_choice_name = string_at(*tc, "name", "tool_choice.name", true);
    } else {
      bad_type("tool_choice", "a string or an object", *tc);
    }
    // required / a named function: the reply is a call, constrained to the tools' parameters.
    if ((choice == "required" || choice == "function") && (r.tools.is_null() || r.tools.empty()))
      bad_value("tool_choice", fmt::format("is '{}' but the request has no tools", choice));
    if (choice == "function") {
      bool found = false;
      for (const auto& t : r.tools) found = found || t["function"]["name"] == r.tool_choice_name;
      if (!found)
        bad_value("tool_choice.name", fmt::format("'{}' is not one of the request's tools", r.tool_choice_name));
    }
    r.tool_choice = choice;
    r.tool_choice_echo = *tc;
  }
  r.parallel_tool_calls = bool_at(o, "parallel_tool_calls", "parallel_tool_calls", true);
  if (const json* prev = get(o, "previous_response_id")) {
    if (!prev->is_string()) bad_type("previous_response_id", "a string", *prev);
    r.previous_response_id = prev->get<std::string>();
  }
  if (const json* text = get(o, "text")) {
    if (!text->is_object()) bad_type("text", "an object", *text);
    if (const json* f = get(*text, "format")) {
      if (!f->is_object()) bad_type("text.format", "an object", *f);
      const std::string type = string_at(*f, "type", "text.format.type", true);
      if (type == "json_schema") {
        const std::string name = string_at(*f, "name", "text.format.name", true);
        if (name.empty()) bad_value("text.format.name", "must not be empty");
        string_at(*f, "description", "text.format.description", false);
        bool_at(*f, "strict", "text.format.strict", false);
        const json* sc = get(*f, "schema");
        if (!sc)
          throw ApiError(400, "'text.format.schema' is required", "text.format.schema", "missing_required_parameter");
        if (!sc->is_object()) bad_type("text.format.schema", "an object", *sc);
        r.sampling.grammar = checked_gbnf(
            "text.format.schema", [&] { return grammar::json_schema_to_gbnf(nlohmann::json::parse(sc->dump())); });
        r.sampling.grammar_param = "text.format.schema";
      } else if (type == "json_object") {
        r.sampling.grammar = grammar::json_object_gbnf();
        r.sampling.grammar_param = "text.format";
      } else if (type != "text") {
        bad_value("text.format.type", fmt::format("must be 'text', 'json_schema' or 'json_object' (got '{}')", type));
      }
      r.text_format = *f;
    }
  }
  if (!r.sampling.grammar.empty() && (r.tool_choice == "required" || r.tool_choice == "function"))
    throw ApiError(400,
                   fmt::format("'tool_choice' '{}' and 'text.format' both constrain the output; send only one of them",
                               r.tool_choice),
                   "tool_choice", "invalid_value");
  if (const json* md = get(o, "metadata")) {
    if (!md->is_object()) bad_type("metadata", "an object", *md);
    r.metadata = *md;
  }
  if (const json* rs = get(o, "reasoning"); rs && !rs->is_object()) bad_type("reasoning", "an object", *rs);
  if (const json* tr = get(o, "truncation")) {
    if (!tr->is_string() || (*tr != "disabled" && *tr != "auto"))
      bad_value("truncation", "must be 'disabled' or 'auto'");
  }
  if (input_tokens) return r;
  r.store = bool_at(o, "store", "store", true);
  r.stream = bool_at(o, "stream", "stream", false);
  r.max_output_tokens = int_at(o, "max_output_tokens", "max_output_tokens", 1, k_int_max);
  r.sampling.max_tokens = r.max_output_tokens.value_or(-1);
  r.sampling.temperature = number_at(o, "temperature", "temperature", 0.0, 2.0);
  r.sampling.top_p = number_at(o, "top_p", "top_p", 0.0, 1.0);
  if (get(o, "background") && bool_at(o, "background", "background", false))
    throw ApiError(400, "'background' responses are not supported", "background", "unsupported_value");
  return r;
}

}  // namespace rocky::server::responses
