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
#include "server/responses_request.hpp"

namespace rocky::server::responses {

using json = nlohmann::ordered_json;

// The conversations of stored responses: each entry is the whole conversation (without
// `instructions`) up to and including that response's output, so the next turn renders the same
// prompt prefix (a prefix-cache hit). Bounded by entries and by their JSON size (each entry holds
// its whole conversation, so a long agent session's entries grow with it): the least recently used
// entry goes first.
class ResponseStore {
 public:
  static constexpr size_t k_max_entries = 1024;
  static constexpr size_t k_max_bytes = size_t{256} << 20;
  explicit ResponseStore(size_t max_entries = k_max_entries, size_t max_bytes = k_max_bytes)
      : max_(max_entries), max_bytes_(max_bytes) {}
  void put(const std::string& id, json messages);
  std::optional<json> get(const std::string& id);
  size_t size();

 private:
  struct Entry {
    json messages;
    size_t bytes = 0;  // of messages.dump()
    std::list<std::string>::iterator at;
  };
  void erase(const std::string& id);
  std::mutex m_;
  size_t max_, max_bytes_, bytes_ = 0;
  std::list<std::string> order_;  // most recent first
  std::unordered_map<std::string, Entry> map_;
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
