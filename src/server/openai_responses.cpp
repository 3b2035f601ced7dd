#include "server/openai_responses.hpp"

#include <fmt/format.h>

#include "server/responses.hpp"

namespace rocky::server::responses {

void ResponseStore::erase(const std::string& id) {
  auto it = map_.find(id);
  if (it == map_.end()) return;
  bytes_ -= it->second.bytes;
  order_.erase(it->second.at);
  map_.erase(it);
}

void ResponseStore::put(const std::string& id, json messages) {
  const size_t bytes = messages.dump(-1, ' ', false, json::error_handler_t::replace).size();
  std::lock_guard lk(m_);
  erase(id);
  if (bytes > max_bytes_) return;  // larger than the whole store: not kept (the id is then unknown)
  order_.push_front(id);
  map_.emplace(id, Entry{std::move(messages), bytes, order_.begin()});
  bytes_ += bytes;
  while (map_.size() > max_ || bytes_ > max_bytes_) erase(order_.back());
}

std::optional<json> ResponseStore::get(const std::string& id) {
  std::lock_guard lk(m_);
  auto it = map_.find(id);
  if (it == map_.end()) return std::nullopt;
  order_.splice(order_.begin(), order_, it->second.at);
  return it->second.messages;
}

size_t ResponseStore::size() {
  std::lock_guard lk(m_);
  return map_.size();
}

namespace {
json message_item(const std::string& id, const std::string& text, const char* status) {
  json content = json::array();
  if (std::string(status) == "completed")
    content.push_back({{"type", "output_text"}, {"text", text}, {"annotations", json::array()}});
  return {{"type", "message"}, {"id", id}, {"status", status}, {"role", "assistant"}, {"content", content}};
}
json reasoning_item(const std::string& id, const std::string& text, bool done) {
  json content = json::array();
  if (done) content.push_back({{"type", "reasoning_text"}, {"text", text}});
  return {{"type", "reasoning"}, {"id", id}, {"summary", json::array()}, {"content", content}};
}
json function_item(const chat::ToolCall& c, const std::string& arguments, const char* status) {
  return {{"type", "function_call"},
          {"id", random_id("fc_")},
          {"call_id", c.id.empty() ? "call_" + chat::random_tool_call_id() : c.id},
          {"name", c.name},
          {"arguments", arguments},
          {"status", status}};
}
}  // namespace

json output_items(const chat::ParsedReply& reply, const std::string&) {
  json out = json::array();
  if (!reply.reasoning_content.empty()) out.push_back(reasoning_item(random_id("rs_"), reply.reasoning_content, true));
  if (!reply.content.empty() || reply.tool_calls.empty())
    out.push_back(message_item(random_id("msg_"), reply.content, "completed"));
  for (const auto& c : reply.tool_calls) out.push_back(function_item(c, c.arguments, "completed"));
  return out;
}

json usage_json(const runtime::GenerateResult& r) {
  const int64_t n_out = static_cast<int64_t>(r.tokens.size());
  return {{"input_tokens", r.n_prompt},
          {"input_tokens_details", {{"cached_tokens", r.n_cached}}},
          {"output_tokens", n_out},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", r.n_prompt + n_out}};
}

json response_json(const ResponseHead& h, const json& output, const runtime::GenerateResult* r) {
  const ResponsesRequest& q = *h.req;
  const bool cut = r && (r->reason == runtime::StopReason::Length || r->reason == runtime::StopReason::ContextFull);
  const char* status = !r ? "in_progress" : cut ? "incomplete" : "completed";
  auto opt = [](const auto& v) { return v ? json(*v) : json(); };
  return {{"id", h.id},
          {"object", "response"},
          {"created_at", h.created_at},
          {"status", status},
          {"background", false},
          {"error", nullptr},
          {"incomplete_details", cut ? json{{"reason", "max_output_tokens"}} : json()},
          {"instructions", opt(q.instructions)},
          {"max_output_tokens", opt(q.max_output_tokens)},
          {"model", h.model},
          {"output", output},
          {"parallel_tool_calls", q.parallel_tool_calls},
          {"previous_response_id", opt(q.previous_response_id)},
          {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
          {"store", q.store},
          {"temperature", q.sampling.temperature.value_or(1.0)},
          {"text", {{"format", q.text_format}}},
          {"tool_choice", q.tool_choice_echo},
          {"tools", q.tools_echo},
          {"top_p", q.sampling.top_p.value_or(1.0)},
          {"truncation", "disabled"},
          {"usage", r ? usage_json(*r) : json()},
          {"user", nullptr},
          {"metadata", q.metadata}};
}

json assistant_messages(const chat::ParsedReply&, const json& output) {
  json a = {{"role", "assistant"}, {"content", ""}};
  for (const auto& item : output) {
    const std::string type = item.value("type", "");
    if (type == "reasoning") {
      for (const auto& c : item["content"]) a["reasoning_content"] = c.value("text", "");
    } else if (type == "message") {
      for (const auto& c : item["content"]) a["content"] = c.value("text", "");
    } else if (type == "function_call") {
      if (!a.contains("tool_calls")) a["tool_calls"] = json::array();
      a["tool_calls"].push_back({{"id", item["call_id"]},
                                 {"type", "function"},
                                 {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
    }
  }
  return json::array({a});
}

std::string ResponseEvents::ev(const char* type, json data) {
  json e = {{"type", type}, {"sequence_number", seq_++}};
  for (auto& [k, v] : data.items()) e[k] = v;
  return named_event(type, e);
}

std::string ResponseEvents::open(Item it) {
  if (open_ == it) return {};
  std::string out = close();
  open_ = it;
  text_.clear();
  const int64_t index = static_cast<int64_t>(output_.size());
  if (it == Item::message) {
    item_id_ = random_id("msg_");
    out += ev("response.output_item.added",
              {{"output_index", index}, {"item", message_item(item_id_, "", "in_progress")}});
    out += ev("response.content_part.added",
              {{"item_id", item_id_},
               {"output_index", index},
               {"content_index", 0},
               {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
  } else {
    item_id_ = random_id("rs_");
    out += ev("response.output_item.added", {{"output_index", index}, {"item", reasoning_item(item_id_, "", false)}});
  }
  return out;
}

std::string ResponseEvents::close() {
  if (open_ == Item::none) return {};
  const int64_t index = static_cast<int64_t>(output_.size());
  std::string out;
  json item;
  if (open_ == Item::message) {
    out += ev("response.output_text.done", {{"item_id", item_id_},
                                            {"output_index", index},
                                            {"content_index", 0},
                                            {"text", text_},
                                            {"logprobs", json::array()}});
    out += ev("response.content_part.done",
              {{"item_id", item_id_},
               {"output_index", index},
               {"content_index", 0},
               {"part", {{"type", "output_text"}, {"text", text_}, {"annotations", json::array()}}}});
    item = message_item(item_id_, text_, "completed");
  } else {
    out += ev("response.reasoning_text.done",
              {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"text", text_}});
    item = reasoning_item(item_id_, text_, true);
  }
  out += ev("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
  open_ = Item::none;
  return out;
}

std::string ResponseEvents::begin() {
  const json r = response_json(h_, json::array(), nullptr);
  std::string out = ev("response.created", {{"response", r}});  // numbered in this order
  out += ev("response.in_progress", {{"response", r}});
  return out;
}

std::string ResponseEvents::delta(const chat::ReplyStream::Delta& d) {
  std::string out;
  const auto index = [&] { return static_cast<int64_t>(output_.size()); };
  if (!d.reasoning_content.empty()) {
    out += open(Item::reasoning);
    text_ += d.reasoning_content;
    out += ev("response.reasoning_text.delta",
              {{"item_id", item_id_}, {"output_index", index()}, {"content_index", 0}, {"delta", d.reasoning_content}});
  }
  if (!d.content.empty()) {
    out += open(Item::message);
    text_ += d.content;
    out += ev("response.output_text.delta", {{"item_id", item_id_},
                                             {"output_index", index()},
                                             {"content_index", 0},
                                             {"delta", d.content},
                                             {"logprobs", json::array()}});
  }
  for (const auto& c : d.tool_calls) {
    out += close();
    json item = function_item(c, "", "in_progress");
    const std::string id = item["id"];
    out += ev("response.output_item.added", {{"output_index", index()}, {"item", item}});
    out += ev("response.function_call_arguments.delta",
              {{"item_id", id}, {"output_index", index()}, {"delta", c.arguments}});
    out += ev("response.function_call_arguments.done",
              {{"item_id", id}, {"output_index", index()}, {"name", c.name}, {"arguments", c.arguments}});
    item["arguments"] = c.arguments;
    item["status"] = "completed";
    out += ev("response.output_item.done", {{"output_index", index()}, {"item", item}});
    output_.push_back(std::move(item));
  }
  return out;
}

std::string ResponseEvents::finish(const chat::ReplyStream::Delta& last, const chat::ParsedReply& reply,
                                   const runtime::GenerateResult& r) {
  std::string out = delta(last);
  bool any_message = open_ == Item::message, any_call = false;
  for (const auto& item : output_) {
    any_message = any_message || item["type"] == "message";
    any_call = any_call || item["type"] == "function_call";
  }
  if (!any_message && !any_call) out += open(Item::message);  // an empty reply is still a message
  out += close();
  if (on_done_) on_done_(reply, output_);
  const json resp = response_json(h_, output_, &r);
  out += ev(resp["status"] == "incomplete" ? "response.incomplete" : "response.completed", {{"response", resp}});
  return out;
}

std::string ResponseEvents::error(const ApiError& e) {
  return ev("error", {{"code", e.code.empty() ? json() : json(e.code)},
                      {"message", e.message},
                      {"param", e.param.empty() ? json() : json(e.param)}});
}

}  // namespace rocky::server::responses
