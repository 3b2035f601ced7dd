// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens): the request translated
// onto the chat template's input (OpenAI-shaped messages and tools, as chat completions renders
// them), the `message` body, its stream of events (message_start, content_block_start/delta/stop,
// message_delta, message_stop, ping) and Anthropic's error object. Pure JSON: server.cpp runs it.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/toolcalls.hpp"
#include "runtime/generator.hpp"
#include "server/event_stream.hpp"
#include "server/anthropic_request.hpp"
#include "server/request.hpp"

namespace rocky::server::anthropic {

using json = nlohmann::ordered_json;

// Anthropic's status and error type for an ApiError: 400 invalid_request_error, 401
// authentication_error, 403 permission_error, 404 not_found_error, 413 request_too_large, 429
// rate_limit_error, 503 (busy, loading, shutting down) → 529 overloaded_error, else 500 api_error.
int error_status(const ApiError& e);
json error_json(const ApiError& e);  // {"type": "error", "error": {"type", "message"}}

// end_turn | max_tokens | stop_sequence | tool_use.
const char* stop_reason(const runtime::GenerateResult& r, bool tool_use);

// Anthropic's usage: input_tokens (not read from the cache), cache_read_input_tokens, output_tokens.
json usage_json(const runtime::GenerateResult& r);

// The content blocks of a parsed reply: thinking, text, tool_use (ids "toolu_…" where the model gave none).
json content_blocks(const chat::ParsedReply& reply);

// The whole `message` body.
json message_json(const std::string& id, const std::string& model, const chat::ParsedReply& reply,
                  const runtime::GenerateResult& r);

// The stream's events.
class MessageEvents : public EventSink {
 public:
  MessageEvents(std::string id, std::string model, int64_t n_prompt)
      : id_(std::move(id)), model_(std::move(model)), n_prompt_(n_prompt) {}
  std::string begin() override;
  std::string delta(const chat::ReplyStream::Delta& d) override;
  std::string finish(const chat::ReplyStream::Delta& last, const chat::ParsedReply& reply,
                     const runtime::GenerateResult& r) override;
  std::string error(const ApiError& e) override;
  std::string idle() override;  // a ping, as Anthropic sends them

 private:
  enum class Block { none, text, thinking };
  std::string open(Block b);
  std::string close();
  std::string id_, model_;
  int64_t n_prompt_ = 0;
  int index_ = -1;
  Block open_ = Block::none;
  bool tool_use_ = false;
};

}  // namespace rocky::server::anthropic
