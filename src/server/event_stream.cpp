#include "server/event_stream.hpp"

#include <chrono>

#include "server/http.hpp"

namespace rocky::server {

std::string named_event(const std::string& name, const json& data) {
  return "event: " + name + "\ndata: " + dump(data) + "\n\n";
}

namespace {

struct Stream {
  std::shared_ptr<runtime::Job> job;
  std::shared_ptr<StreamState> state;
  std::shared_ptr<ConnectionProbe> probe;
  chat::ReplySyntax syntax;
  SettleFn settle;
  std::shared_ptr<EventSink> sink;
};

bool write_events(const Stream& s, httplib::DataSink& out) {
  runtime::Job& job = *s.job;
  StreamState& st = *s.state;
  chat::ReplyStream reply(s.syntax);
  auto last_write = std::chrono::steady_clock::now();
  auto write = [&](const std::string& text) {
    if (text.empty()) return true;
    last_write = std::chrono::steady_clock::now();
    if (out.write(text.data(), text.size())) return true;
    job.cancel = true;
    return false;
  };
  if (!write(s.sink->begin())) return false;
  for (;;) {
    std::deque<std::string> got;
    bool finished = false;
    {
      std::unique_lock lk(st.m);
      st.cv.wait_for(lk, std::chrono::milliseconds(20), [&] { return !st.pieces.empty(); });
      got.swap(st.pieces);
      finished = got.empty() && job.done();
    }
    for (const auto& piece : got) {
      const auto d = reply.push(piece);
      if (!d.empty() && !write(s.sink->delta(d))) return false;
    }
    if (finished) {
      std::lock_guard lk(st.m);
      if (st.pieces.empty()) break;
    }
    if (got.empty() && !s.probe->alive()) job.cancel = true;
    if (got.empty() &&
        std::chrono::steady_clock::now() - last_write > std::chrono::milliseconds(EventSink::k_idle_ms) &&
        !write(s.sink->idle()))
      return false;
  }
  if (const auto e = s.settle(job)) {
    write(s.sink->error(*e));
    out.done();
    return true;
  }
  const auto last = reply.finish();
  if (!write(s.sink->finish(last, reply.result(), *job.result))) return false;
  out.done();
  return true;
}

}  // namespace

void stream_events(httplib::Response& res, std::shared_ptr<runtime::Job> job, std::shared_ptr<StreamState> state,
                   std::shared_ptr<ConnectionProbe> probe, chat::ReplySyntax syntax, SettleFn settle,
                   std::shared_ptr<EventSink> sink) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  Stream s{job, std::move(state), probe, std::move(syntax), std::move(settle), std::move(sink)};
  res.set_chunked_content_provider(
      "text/event-stream", [s = std::move(s)](size_t, httplib::DataSink& out) { return write_events(s, out); },
      [job, probe](bool) {
        job->cancel = true;
        job->wait();
        probe->release();
      });
}

}  // namespace rocky::server
