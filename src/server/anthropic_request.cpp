#include "server/anthropic_request.hpp"

#include <fmt/format.h>

#include <limits>

#include "server/json_fields.hpp"

namespace rocky::server::anthropic {

using namespace fields;

namespace {

constexpr int64_t k_int_max = std::numeric_limits<int32_t>::max();

// A text block list (or a string) joined into one string; other block types are refused.
std::string text_of(const json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad_type(param, "a string or an array of text blocks", content);
  std::string out;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", param, i);
    const json& b = content[i];
    if (!b.is_object()) bad_type(p, "an object", b);
    const std::string type = string_at(b, "type", p + ".type", true);
    if (type == "image" || type == "document")
      throw ApiError(400, fmt::format("'{}.type' is '{}': this server takes text only", p, type), p + ".type",
                     "unsupported_content");
    if (type != "text") bad_value(p + ".type", fmt::format("must be 'text' here (got '{}')", type));
    if (!out.empty()) out += "\n";
    out += string_at(b, "text", p + ".text", true);
  }
  return out;
}

// One Anthropic message → OpenAI-shaped messages appended to `out`: a user turn's tool_result
// blocks become "tool" messages (in order, the text around them user messages); an assistant
// turn's text, thinking and tool_use blocks one assistant message (content, reasoning_content,
// tool_calls).
void translate_message(const json& m, size_t i, json& out) {
  const std::string p = fmt::format("messages[{}]", i);
  if (!m.is_object()) bad_type(p, "an object", m);
  const std::string role = string_at(m, "role", p + ".role", true);
  if (role != "user" && role != "assistant")
    bad_value(p + ".role", fmt::format("must be 'user' or 'assistant' (got '{}')", role));
  const json* content = get(m, "content");
  if (!content)
    throw ApiError(400, fmt::format("'{}.content' is required", p), p + ".content", "missing_required_parameter");
  if (content->is_string()) {
    out.push_back({{"role", role}, {"content", content->get<std::string>()}});
    return;
  }
  if (!content->is_array()) bad_type(p + ".content", "a string or an array of content blocks", *content);
  std::string text, reasoning;
  json calls = json::array();
  bool any_text = false;
  auto flush_user_text = [&] {
    if (!any_text) return;
    out.push_back({{"role", "user"}, {"content", text}});
    text.clear();
    any_text = false;
  };
  for (size_t j = 0; j < content->size(); ++j) {
    const std::string bp = fmt::format("{}.content[{}]", p, j);
    const json& b = (*content)[j];
    if (!b.is_object()) bad_type(bp, "an object", b);
    const std::string type = string_at(b, "type", bp + ".type", true);
    if (type == "text") {
      if (any_text) text += "\n";
      text += string_at(b, "text", bp + ".text", true);
      any_text = true;
    } else if (type == "image" || type == "document") {
      throw ApiError(400, fmt::format("'{}.type' is '{}': this server takes text only", bp, type), bp + ".type",
                     "unsupported_content");
    } else if (type == "tool_use" && role == "assistant") {
      const std::string id = string_at(b, "id", bp + ".id", true);
      const std::string name = string_at(b, "name", bp + ".name", true);
      const json* input = get(b, "input");
      if (input && !input->is_object()) bad_type(bp + ".input", "an object", *input);
      calls.push_back({{"id", id},
                       {"type", "function"},
                       {"function", {{"name", name}, {"arguments", input ? *input : json::object()}}}});
    } else if (type == "thinking" && role == "assistant") {
      reasoning += string_at(b, "thinking", bp + ".thinking", true);
    } else if (type == "redacted_thinking" && role == "assistant") {
      // Encrypted thinking of Anthropic's own models: no text a local model could read.
    } else if (type == "tool_result" && role == "user") {
      flush_user_text();
      const std::string id = string_at(b, "tool_use_id", bp + ".tool_use_id", true);
      const json* c = get(b, "content");
      std::string result = c ? text_of(*c, bp + ".content") : std::string();
      if (bool_at(b, "is_error", bp + ".is_error", false)) result = "Error: " + result;
      out.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", result}});
    } else {
      bad_value(bp + ".type", fmt::format("'{}' is not a content block of a {} message (text, {})", type, role,
                                          role == "user" ? "tool_result" : "thinking, tool_use"));
    }
  }
  if (role == "user") {
    // A message of only text, or text after the last tool result.
    if (any_text || content->empty()) out.push_back({{"role", "user"}, {"content", text}});
    return;
  }
  json a = {{"role", "assistant"}, {"content", text}};
  if (!reasoning.empty()) a["reasoning_content"] = reasoning;
  if (!calls.empty()) a["tool_calls"] = calls;
  out.push_back(std::move(a));
}

json translate_tools(const json& tools) {
  if (!tools.is_array()) bad_type("tools", "an array", tools);
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string p = fmt::format("tools[{}]", i);
    const json& t = tools[i];
    if (!t.is_object()) bad_type(p, "an object", t);
    const std::string type = string_at(t, "type", p + ".type", false, "custom");
    if (type != "custom")
      throw ApiError(400,
                     fmt::format("'{}.type' is '{}': only client tools (name, description, input_schema) are "
                                 "supported, not Anthropic's server tools",
                                 p, type),
                     p + ".type", "unsupported_tool");
    const std::string name = string_at(t, "name", p + ".name", true);
    if (name.empty()) bad_value(p + ".name", "must not be empty");
    json fn = {{"name", name}};
    if (const json* d = get(t, "description")) {
      if (!d->is_string()) bad_type(p + ".description", "a string", *d);
      fn["description"] = *d;
    }
    fn["parameters"] = object_at(t, "input_schema", p + ".input_schema");
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

}  // namespace

MessagesRequest parse_messages(const json& o, bool count_tokens) {
  MessagesRequest r;
  r.model = string_at(o, "model", "model", false);
  if (const json* sys = get(o, "system")) {
    const std::string s = text_of(*sys, "system");
    r.messages.push_back({{"role", "system"}, {"content", s}});
  }
  const json* msgs = get(o, "messages");
  if (!msgs) throw ApiError(400, "'messages' is required", "messages", "missing_required_parameter");
  if (!msgs->is_array()) bad_type("messages", "an array", *msgs);
  if (msgs->empty()) bad_value("messages", "must not be empty");
  for (size_t i = 0; i < msgs->size(); ++i) translate_message((*msgs)[i], i, r.messages);
  if (const json* t = get(o, "tools")) r.tools = translate_tools(*t);
  if (const json* tc = get(o, "tool_choice")) {
    if (!tc->is_object()) bad_type("tool_choice", "an object", *tc);
    const std::string type = string_at(*tc, "type", "tool_choice.type", true);
    if (type != "auto" && type != "none" && type != "any" && type != "tool")
      bad_value("tool_choice.type", fmt::format("must be 'auto', 'any', 'tool' or 'none' (got '{}')", type));
    r.parallel_tool_calls = !bool_at(*tc, "disable_parallel_tool_use", "tool_choice.disable_parallel_tool_use", false);
    // any / tool: the reply is a tool call, constrained to the tools' input schemas (structured.hpp).
    if ((type == "any" || type == "tool") && (r.tools.is_null() || r.tools.empty()))
      bad_value("tool_choice.type", fmt::format("is '{}' but the request has no tools", type));
    if (type == "tool") {
      r.tool_choice_name = string_at(*tc, "name", "tool_choice.name", true);
      bool found = false;
      for (const auto& t : r.tools) found = found || t["function"]["name"] == r.tool_choice_name;
      if (!found)
        bad_value("tool_choice.name", fmt::format("'{}' is not one of the request's tools", r.tool_choice_name));
    }
    r.tool_choice = type == "any" ? "required" : type == "tool" ? "function" : type;
  }
  if (const json* th = get(o, "thinking")) {
    if (!th->is_object()) bad_type("thinking", "an object", *th);
    const std::string type = string_at(*th, "type", "thinking.type", true);
    if (type != "enabled" && type != "disabled")
      bad_value("thinking.type", fmt::format("must be 'enabled' or 'disabled' (got '{}')", type));
    int_at(*th, "budget_tokens", "thinking.budget_tokens", 0, k_int_max);
    r.chat_template_kwargs["enable_thinking"] = type == "enabled";
  }
  if (const json* md = get(o, "metadata"); md && !md->is_object()) bad_type("metadata", "an object", *md);
  if (count_tokens) return r;

  const json* mt = get(o, "max_tokens");
  if (!mt) throw ApiError(400, "'max_tokens' is required", "max_tokens", "missing_required_parameter");
  r.sampling.max_tokens = *int_at(o, "max_tokens", "max_tokens", 1, k_int_max);
  r.sampling.temperature = number_at(o, "temperature", "temperature", 0.0, 2.0);
  r.sampling.top_p = number_at(o, "top_p", "top_p", 0.0, 1.0);
  r.sampling.top_k = int_at(o, "top_k", "top_k", 0, k_int_max);
  if (const json* st = get(o, "stop_sequences")) {
    if (!st->is_array()) bad_type("stop_sequences", "an array of strings", *st);
    for (size_t i = 0; i < st->size(); ++i) {
      const std::string p = fmt::format("stop_sequences[{}]", i);
      if (!(*st)[i].is_string()) bad_type(p, "a string", (*st)[i]);
      if ((*st)[i].get<std::string>().empty()) bad_value(p, "must not be empty");
      r.sampling.stop.push_back((*st)[i].get<std::string>());
    }
  }
  r.stream = bool_at(o, "stream", "stream", false);
  return r;
}

}  // namespace rocky::server::anthropic
