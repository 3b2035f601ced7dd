#include "server/stream.hpp"

#include <chrono>
#include <utility>
#include <vector>

#include "server/http.hpp"

namespace rocky::server {

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

std::shared_ptr<StreamState> collect_pieces(runtime::Job& job, bool with_tokens) {
  auto st = std::make_shared<StreamState>();
  st->with_tokens = with_tokens;
  job.on_token = [st](const runtime::TokenEvent& ev) {
    if (!ev.text.empty() || ev.probs || (st->with_tokens && ev.token >= 0)) {
      std::lock_guard lk(st->m);
      if (st->with_tokens && ev.token >= 0) st->pending_tokens.push_back(ev.token);
      if (!ev.text.empty()) {
        st->pieces.emplace_back(ev.text);
        if (st->with_tokens) st->piece_tokens.push_back(std::exchange(st->pending_tokens, {}));
      }
      if (ev.probs) st->probs.push_back(*ev.probs);
    }
    st->cv.notify_one();
    return true;
  };
  return st;
}

namespace {

// The provider's body: writes the whole stream; false where the client left (write failed).
bool write_stream(const StreamReply& s, httplib::DataSink& sink) {
  runtime::Job& job = *s.job;
  StreamState& st = *s.state;
  chat::ReplyStream reply(s.syntax);
  size_t n_calls = 0;
  auto write = [&](const std::string& text) {
    if (sink.write(text.data(), text.size())) return true;
    job.cancel = true;
    return false;
  };
  if (s.kind == Kind::Chat && !write(sse(s.shapes.role_chunk(s.id)))) return false;
  // Log-probabilities go with the first chunk written after their tokens (OpenAI's chunk shape:
  // choices[0].logprobs.content; native: completion_probabilities); a token whose text is held
  // back (a partial stop string, a tool call) gives its entry to a later chunk.
  std::vector<runtime::TokenProbs> probs;
  auto with_probs = [&](json c) {
    if (probs.empty()) return c;
    const json lp = s.shapes.logprobs_json(s.kind, probs);
    if (s.kind == Kind::Native)
      c["completion_probabilities"] = lp;
    else
      c["choices"][0]["logprobs"] = lp;
    probs.clear();
    return c;
  };
  for (;;) {
    std::deque<std::string> got;
    std::deque<std::vector<int32_t>> got_tokens;
    bool finished = false;
    {
      std::unique_lock lk(st.m);
      st.cv.wait_for(lk, std::chrono::milliseconds(20), [&] { return !st.pieces.empty(); });
      got.swap(st.pieces);
      got_tokens.swap(st.piece_tokens);
      probs.insert(probs.end(), st.probs.begin(), st.probs.end());
      st.probs.clear();
      finished = got.empty() && job.done();
    }
    for (size_t i = 0; i < got.size(); ++i) {
      const std::string& piece = got[i];
      if (s.kind == Kind::Chat) {
        const auto d = reply.push(piece);
        if (!d.empty() && !write(sse(with_probs(s.shapes.chat_delta(s.id, d, n_calls))))) return false;
        continue;
      }
      json c = s.shapes.delta_chunk(s.kind, s.id, piece, job.slot);
      if (s.kind == Kind::Native) c["tokens"] = i < got_tokens.size() ? got_tokens[i] : std::vector<int32_t>{};
      if (!write(sse(with_probs(std::move(c))))) return false;
    }
    if (finished) {
      std::lock_guard lk(st.m);
      if (st.pieces.empty()) break;
    }
    if (got.empty() && !s.probe->alive()) job.cancel = true;
  }
  if (const auto e = s.settle(job)) {  // an error event, never a finish_reason
    write(sse(e->to_json()));
    sink.done();
    return true;
  }
  const runtime::GenerateResult& r = *job.result;
  bool tool_calls = false;
  if (s.kind == Kind::Chat) {
    const auto d = reply.finish();
    if (!d.empty() && !write(sse(with_probs(s.shapes.chat_delta(s.id, d, n_calls))))) return false;
    tool_calls = !reply.result().tool_calls.empty();
  }
  if (s.kind == Kind::Native) {
    json f = s.shapes.final_json(s.kind, s.id, r, job.slot, s.syntax, &job.params);
    f["tokens"] = json::array();  // streamed: the ids went with the chunks' text
    f["content"] = "";
    f.erase("completion_probabilities");  // streamed: they went with the chunks
    if (!probs.empty()) f["completion_probabilities"] = s.shapes.logprobs_json(s.kind, probs);
    write(sse(f));
  } else {
    if (!write(sse(with_probs(s.shapes.finish_chunk(s.kind, s.id, r, tool_calls))))) return false;
    if (s.include_usage && !write(sse(s.shapes.usage_chunk(s.kind, s.id, r)))) return false;
    if (!write("data: [DONE]\n\n")) return false;
  }
  sink.done();
  return true;
}

}  // namespace

void stream_reply(httplib::Response& res, StreamReply s) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  auto job = s.job;
  auto probe = s.probe;
  res.set_chunked_content_provider(
      "text/event-stream", [s = std::move(s)](size_t, httplib::DataSink& sink) { return write_stream(s, sink); },
      [job, probe](bool) {
        // Runs whether or not the provider did (e.g. the client left before the headers).
        job->cancel = true;
        job->wait();
        probe->release();
      });
}

}  // namespace rocky::server
