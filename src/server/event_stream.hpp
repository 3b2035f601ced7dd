// The event streams of the agent APIs (Anthropic Messages, OpenAI Responses): the reply is parsed
// as it is generated (content, reasoning, tool calls: chat::ReplyStream) and an EventSink turns
// each parsed delta into its API's SSE events ("event: NAME\ndata: {json}\n\n"). The job, its
// pieces and the connection probe work as in stream.cpp's chat-completion stream.
#pragma once

#include <httplib.h>

#include <memory>
#include <string>

#include "chat/toolcalls.hpp"
#include "runtime/scheduler.hpp"
#include "server/connection.hpp"
#include "server/request.hpp"
#include "server/stream.hpp"

namespace rocky::server {

// One named SSE event.
std::string named_event(const std::string& name, const json& data);

struct EventSink {
  virtual ~EventSink() = default;
  // Before any token (the message/response "started" events).
  virtual std::string begin() = 0;
  // A parsed piece of the reply.
  virtual std::string delta(const chat::ReplyStream::Delta& d) = 0;
  // The generation ended: the last delta, the whole parsed reply and the result.
  virtual std::string finish(const chat::ReplyStream::Delta& last, const chat::ParsedReply& reply,
                             const runtime::GenerateResult& r) = 0;
  // The generation failed or was cut (settle's error): the API's error event.
  virtual std::string error(const ApiError& e) = 0;
  // Written after k_idle_ms without an event (a long prefill), so that clients and proxies with
  // idle timeouts keep the stream; "" = nothing.
  virtual std::string idle() { return {}; }
  static constexpr int k_idle_ms = 5000;
};

// Answers `res` with the job's events; the job is cancelled and waited for when the response ends.
void stream_events(httplib::Response& res, std::shared_ptr<runtime::Job> job, std::shared_ptr<StreamState> state,
                   std::shared_ptr<ConnectionProbe> probe, chat::ReplySyntax syntax, SettleFn settle,
                   std::shared_ptr<EventSink> sink);

}  // namespace rocky::server
