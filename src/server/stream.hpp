// Server-sent events: a streamed generation's chunks, as the OpenAI SDKs and llama-server's
// clients read them ("data: {json}\n\n" per event, "data: [DONE]" last for the OpenAI APIs). The
// job's tokens are queued by the scheduler's thread and written by cpp-httplib's chunked content
// provider on the connection's thread; a client gone (write failed, socket closed) cancels the job.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "chat/toolcalls.hpp"
#include "runtime/scheduler.hpp"
#include "server/connection.hpp"
#include "server/request.hpp"
#include "server/responses.hpp"

namespace rocky::server {

// One SSE event.
std::string sse(const json& j);

// The text pieces a job has produced and the stream has not written yet.
struct StreamState {
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::string> pieces;
  std::vector<runtime::TokenProbs> probs;  // with logprobs: the tokens' since the last write
  // With with_tokens: beside each piece, the ids sampled since the previous piece (a token whose
  // text is held back, e.g. a partial stop string, goes with the next piece's).
  bool with_tokens = false;
  std::deque<std::vector<int32_t>> piece_tokens;
  std::vector<int32_t> pending_tokens;
};

// Sets the job's on_token to queue its text pieces (before it is admitted); with_tokens also
// queues each piece's token ids (the native stream's chunks carry them, as llama-server's).
std::shared_ptr<StreamState> collect_pieces(runtime::Job& job, bool with_tokens = false);

// A finished job's error answer, if it has one (server.cpp's settle: it also records the metrics).
using SettleFn = std::function<std::optional<ApiError>(const runtime::Job&)>;

struct StreamReply {
  std::shared_ptr<runtime::Job> job;  // admitted
  std::shared_ptr<StreamState> state;
  std::shared_ptr<ConnectionProbe> probe;
  Shapes shapes;
  Kind kind = Kind::Chat;
  std::string id;
  bool include_usage = false;  // stream_options.include_usage
  chat::ReplySyntax syntax;    // chat: content / reasoning / tool-call deltas
  SettleFn settle;
};

// Answers `res` with the job's event stream. Chat: the role chunk, then content, reasoning and
// tool-call deltas as the reply parses; the other APIs: the text pieces. Then the finish chunk
// (and the usage chunk), or an error event where settle() gives one — never a finish_reason for a
// cut generation. Whatever happens, the job is cancelled and waited for when the response ends.
void stream_reply(httplib::Response& res, StreamReply s);

}  // namespace rocky::server
