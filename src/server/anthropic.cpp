#include "server/anthropic.hpp"

#include <fmt/format.h>

#include "server/responses.hpp"

namespace rocky::server::anthropic {

int error_status(const ApiError& e) {
  switch (e.status) {
    case 400:
    case 401:
    case 403:
    case 404:
    case 413:
    case 429: return e.status;
    case 503: return 529;
    default: return e.status >= 400 && e.status < 500 ? 400 : 500;
  }
}

json error_json(const ApiError& e) {
  const char* type = "api_error";
  switch (error_status(e)) {
    case 400: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 529: type = "overloaded_error"; break;
    default: break;
  }
  return {{"type", "error"}, {"error", {{"type", type}, {"message", e.message}}}};
}

const char* stop_reason(const runtime::GenerateResult& r, bool tool_use) {
  if (tool_use) return "tool_use";
  switch (r.reason) {
    case runtime::StopReason::Length:
    case runtime::StopReason::ContextFull: return "max_tokens";
    case runtime::StopReason::StopString: return "stop_sequence";
    default: return "end_turn";
  }
}

json usage_json(const runtime::GenerateResult& r) {
  return {{"input_tokens", r.n_prompt - r.n_cached},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", r.n_cached},
          {"output_tokens", static_cast<int64_t>(r.tokens.size())}};
}

namespace {
std::string tool_use_id(const chat::ToolCall& c) {
  return c.id.empty() ? "toolu_" + chat::random_tool_call_id() : c.id;
}
json tool_input(const chat::ToolCall& c) {
  json in = json::parse(c.arguments, nullptr, false);
  return in.is_object() ? in : json::object();
}
}  // namespace

json content_blocks(const chat::ParsedReply& reply) {
  json blocks = json::array();
  if (!reply.reasoning_content.empty())
    blocks.push_back({{"type", "thinking"}, {"thinking", reply.reasoning_content}, {"signature", ""}});
  if (!reply.content.empty()) blocks.push_back({{"type", "text"}, {"text", reply.content}});
  for (const auto& c : reply.tool_calls)
    blocks.push_back({{"type", "tool_use"}, {"id", tool_use_id(c)}, {"name", c.name}, {"input", tool_input(c)}});
  return blocks;
}

json message_json(const std::string& id, const std::string& model, const chat::ParsedReply& reply,
                  const runtime::GenerateResult& r) {
  const bool tool_use = !reply.tool_calls.empty();
  return {{"id", id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model},
          {"content", content_blocks(reply)},
          {"stop_reason", stop_reason(r, tool_use)},
          {"stop_sequence", r.reason == runtime::StopReason::StopString && !tool_use ? json(r.stop_word) : json()},
          {"usage", usage_json(r)}};
}

std::string MessageEvents::begin() {
  json msg = {{"id", id_},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model_},
              {"content", json::array()},
              {"stop_reason", nullptr},
              {"stop_sequence", nullptr},
              {"usage",
               {{"input_tokens", n_prompt_},
                {"cache_creation_input_tokens", 0},
                {"cache_read_input_tokens", 0},
                {"output_tokens", 0}}}};
  return named_event("message_start", {{"type", "message_start"}, {"message", msg}}) +
         named_event("ping", {{"type", "ping"}});
}

std::string MessageEvents::close() {
  if (open_ == Block::none) return {};
  open_ = Block::none;
  return named_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
}

std::string MessageEvents::open(Block b) {
  if (open_ == b) return {};
  std::string out = close();
  open_ = b;
  ++index_;
  const json block = b == Block::text ? json{{"type", "text"}, {"text", ""}}
                                      : json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
  return out + named_event("content_block_start",
                           {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
}

std::string MessageEvents::delta(const chat::ReplyStream::Delta& d) {
  std::string out;
  auto block_delta = [&](json delta) {
    out += named_event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", delta}});
  };
  if (!d.reasoning_content.empty()) {
    out += open(Block::thinking);
    block_delta({{"type", "thinking_delta"}, {"thinking", d.reasoning_content}});
  }
  if (!d.content.empty()) {
    out += open(Block::text);
    block_delta({{"type", "text_delta"}, {"text", d.content}});
  }
  for (const auto& c : d.tool_calls) {
    out += close();
    ++index_;
    tool_use_ = true;
    out += named_event("content_block_start",
                       {{"type", "content_block_start"},
                        {"index", index_},
                        {"content_block",
                         {{"type", "tool_use"}, {"id", tool_use_id(c)}, {"name", c.name}, {"input", json::object()}}}});
    block_delta({{"type", "input_json_delta"}, {"partial_json", tool_input(c).dump()}});
    out += named_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  }
  return out;
}

std::string MessageEvents::finish(const chat::ReplyStream::Delta& last, const chat::ParsedReply&,
                                  const runtime::GenerateResult& r) {
  std::string out = delta(last) + close();
  json d = {{"stop_reason", stop_reason(r, tool_use_)},
            {"stop_sequence", r.reason == runtime::StopReason::StopString && !tool_use_ ? json(r.stop_word) : json()}};
  out += named_event("message_delta", {{"type", "message_delta"}, {"delta", d}, {"usage", usage_json(r)}});
  out += named_event("message_stop", {{"type", "message_stop"}});
  return out;
}

std::string MessageEvents::error(const ApiError& e) { return named_event("error", error_json(e)); }

std::string MessageEvents::idle() { return named_event("ping", {{"type", "ping"}}); }

}  // namespace rocky::server::anthropic
