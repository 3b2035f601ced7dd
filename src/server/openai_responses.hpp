// OpenAI's Responses API (POST /v1/responses, /v1/responses/input_tokens): `input` (a string or
// items: message, function_call, function_call_output, reasoning) translated onto the chat
// template's OpenAI-shaped messages, the `response` object and its stream of events (each with its
// sequence_number), and the bounded in-memory store that serves previous_response_id.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

#include "chat/toolcalls.hpp"
#include "runtime/generator.hpp"
#include "server/event_stream.hpp"
#include "server/request.hpp"

namespace rocky::server::responses {

using json = nlohmann::ordered_json;

struct ResponsesRequest {
  std::string model;
  std::optional<std::string> instructions;  // a system message before the conversation (not stored)
  json input = json::array();               // this turn's items as OpenAI-shaped chat messages
  json tools;                               // null or OpenAI chat tools
  json tools_echo = json::array();          // `tools` as sent (the response object repeats them)
  std::string tool_choice = "auto";         // "auto" | "none" (required / a named function need constrained decoding: 400)
  bool parallel_tool_calls = true;
  std::optional<std::string> previous_response_id;
  bool store = true;  // OpenAI's default
  bool stream = false;
  std::optional<int64_t> max_output_tokens;
  json metadata = json::object();
  SamplingFields sampling;
};

// `input_tokens`: the /v1/responses/input_tokens body (stream, store and sampling unchecked).
// Throws ApiError naming the field (`input[3].type`, `tools[0].type`, `text.format`).
ResponsesRequest parse_responses(const json& body, bool input_tokens);

// The conversations of stored responses: each entry is the whole conversation (without
// `instructions`) up to and including that response's output, so the next turn renders the same
// prompt prefix (a prefix-cache hit). Bounded: the least recently used entry goes first.
class ResponseStore {
 public:
  static constexpr size_t k_max_entries = 1024;
  explicit ResponseStore(size_t max_entries = k_max_entries) : max_(max_entries) {}
  void put(const std::string& id, json messages);
  std::optional<json> get(const std::string& id);
  size_t size();

 private:
  std::mutex m_;
  size_t max_;
  std::list<std::string> order_;  // most recent first
  std::unordered_map<std::string, std::pair<json, std::list<std::string>::iterator>> map_;
};

// What every response object of one request repeats.
struct ResponseHead {
  std::string id;  // "resp_…"
  int64_t created_at = 0;
  std::string model;
  const ResponsesRequest* req = nullptr;
};

// The output items of a parsed reply: reasoning, message (output_text), function_call.
json output_items(const chat::ParsedReply& reply, const std::string& id_seed);
// usage: input_tokens (+ input_tokens_details.cached_tokens), output_tokens, total_tokens.
json usage_json(const runtime::GenerateResult& r);
// The `response` object; `r` null while in progress.
json response_json(const ResponseHead& h, const json& output, const runtime::GenerateResult* r);
// The reply as the assistant message(s) the store keeps (what the template renders next turn).
json assistant_messages(const chat::ParsedReply& reply, const json& output);

// The stream's events; on completion, calls `on_done` with the output items (the server stores them).
class ResponseEvents : public EventSink {
 public:
  ResponseEvents(ResponseHead head, std::function<void(const chat::ParsedReply&, const json&)> on_done)
      : h_(std::move(head)), on_done_(std::move(on_done)) {}
  std::string begin() override;
  std::string delta(const chat::ReplyStream::Delta& d) override;
  std::string finish(const chat::ReplyStream::Delta& last, const chat::ParsedReply& reply,
                     const runtime::GenerateResult& r) override;
  std::string error(const ApiError& e) override;

 private:
  enum class Item { none, message, reasoning };
  std::string ev(const char* type, json data);
  std::string open(Item it);
  std::string close();
  ResponseHead h_;
  std::function<void(const chat::ParsedReply&, const json&)> on_done_;
  int64_t seq_ = 0;
  Item open_ = Item::none;
  std::string item_id_, text_;
  json output_ = json::array();
};

}  // namespace rocky::server::responses
