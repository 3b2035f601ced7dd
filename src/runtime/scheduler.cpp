#include "runtime/scheduler.hpp"

#include <chrono>

namespace rocky::runtime {

void Job::wait() {
  std::unique_lock lk(m_);
  cv_.wait(lk, [&] { return done_; });
}

bool Job::wait_for_ms(int ms) {
  std::unique_lock lk(m_);
  return cv_.wait_for(lk, std::chrono::milliseconds(ms), [&] { return done_; });
}

bool Job::done() const {
  std::lock_guard lk(m_);
  return done_;
}

int32_t match_cached_prefix(const std::vector<int32_t>& /*context_tokens*/, const std::vector<int32_t>& /*prompt*/) {
  return 0;
}

Scheduler::Scheduler(const tok::Tokenizer& tok, std::vector<std::unique_ptr<Session>> slots, size_t max_queue)
    : tok_(tok), max_queue_(max_queue) {
  for (auto& s : slots) {
    auto slot = std::make_unique<Slot>();
    n_ctx_ = s->n_ctx();
    slot->session = std::move(s);
    slots_.push_back(std::move(slot));
  }
  for (size_t i = 0; i < slots_.size(); ++i) slots_[i]->worker = std::thread([this, i] { worker(i); });
}

Scheduler::~Scheduler() {
  close(true);
  for (auto& s : slots_)
    if (s->worker.joinable()) s->worker.join();
}

Scheduler::Admit Scheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lk(mu_);
    if (closed_) return Admit::ShuttingDown;
    const size_t idle = slots_.size() - static_cast<size_t>(running_);
    if (queue_.size() >= idle + max_queue_) return Admit::QueueFull;
    queue_.push_back(job);
  }
  cv_.notify_one();
  return Admit::Accepted;
}

void Scheduler::close(bool cancel) {
  {
    std::lock_guard lk(mu_);
    closed_ = true;
    if (cancel) {
      for (auto& j : queue_) j->cancel = true;
      for (auto& s : slots_)
        if (s->job) s->job->cancel = true;
    }
  }
  cv_.notify_all();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats st;
  std::lock_guard lk(mu_);
  st.n_slots = static_cast<int>(slots_.size());
  st.queued = static_cast<int64_t>(queue_.size());
  st.n_ctx = n_ctx_;
  for (const auto& s : slots_) {
    st.slots_busy += s->busy ? 1 : 0;
    st.kv_used += s->kv;
  }
  return st;
}

void Scheduler::worker(size_t i) {
  Slot& s = *slots_[i];
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return closed_ || !queue_.empty(); });
      if (queue_.empty()) return;  // closed and drained
      job = std::move(queue_.front());
      queue_.pop_front();
      s.job = job;
      ++running_;
      s.busy = true;
    }
    job->slot = static_cast<int>(i);
    run_job(s, *job);
    {
      std::lock_guard lk(mu_);
      s.job.reset();
      --running_;
      s.busy = false;
    }
    {
      std::lock_guard lk(job->m_);
      job->done_ = true;
    }
    job->cv_.notify_all();
  }
}

void Scheduler::run_job(Slot& s, Job& job) {
  auto gone = [&job] { return job.cancel.load() || (job.alive && !job.alive()); };
  if (gone()) {
    // Cancelled while queued: nothing ran.
    GenerateResult r;
    r.reason = StopReason::Cancelled;
    r.n_prompt = static_cast<int32_t>(job.prompt.size());
    job.result = std::move(r);
    return;
  }
  job.started = true;
  Session& session = *s.session;
  // [N3]: keep the matched prefix, drop the rest (today: always everything).
  int32_t keep = match_cached_prefix(s.tokens, job.prompt);
  if (keep == 0 || keep != session.n_past()) {
    session.reset();
    s.tokens.clear();
    keep = 0;
  }
  GenerateParams p = job.params;
  p.n_cached = keep;
  const int64_t n_prompt = static_cast<int64_t>(job.prompt.size());
  s.kv = n_prompt;
  TokenFn cb = [&](const TokenEvent& ev) {
    if (ev.token >= 0) s.kv = n_prompt + ev.index;
    const bool go_on = !job.on_token || job.on_token(ev);
    return go_on && !gone();
  };
  try {
    SessionSource src(session);
    Generator g(src, tok_);
    GenerateResult r = g.generate(job.prompt, p, cb);
    // What the KV holds now: the prompt and every generated token that was fed back (all kept
    // tokens after an end-of-generation id, all but the last otherwise).
    s.tokens = job.prompt;
    const size_t fed = r.reason == StopReason::Eog || r.tokens.empty() ? r.tokens.size() : r.tokens.size() - 1;
    s.tokens.insert(s.tokens.end(), r.tokens.begin(), r.tokens.begin() + static_cast<std::ptrdiff_t>(fed));
    job.result = std::move(r);
  } catch (const std::exception& e) {
    job.error = e.what();
    session.reset();
    s.tokens.clear();
  }
  s.kv = session.n_past();
}

}  // namespace rocky::runtime
