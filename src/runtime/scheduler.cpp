#include "runtime/scheduler.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "core/error.hpp"

namespace rocky::runtime {

namespace {
// What a context holds after a generation: the prompt and every generated token that was fed back
// (all kept tokens after an end-of-generation id, all but the last otherwise). Empty when that
// does not match the context's n_past (not expected): the slot then starts over.
std::vector<int32_t> tokens_held(std::span<const int32_t> prompt, const GenerateResult& r, int32_t n_past) {
  std::vector<int32_t> t(prompt.begin(), prompt.end());
  const size_t fed = r.reason == StopReason::Eog || r.tokens.empty() ? r.tokens.size() : r.tokens.size() - 1;
  t.insert(t.end(), r.tokens.begin(), r.tokens.begin() + static_cast<std::ptrdiff_t>(fed));
  if (static_cast<int32_t>(t.size()) != n_past) t.clear();
  return t;
}

// Device-fault hook: after a step failed with a device fault (out of device memory, device lost) the
// session's context is made again (weights kept), otherwise it is only cleared. A failed remake
// leaves the session unusable; the next job tries again first (fault_guard).
void recover_session(Session& session, bool fault) {
  if (!fault) return session.reset();
  try {
    session.rebuild();
  } catch (const std::exception& e) {
    fmt::print(stderr,
               "rocky: warning: remaking the context after a device fault failed: {}; retrying at the next job\n",
               e.what());
  }
}

// Before a job runs on a session that a device fault left without a context: make it again; when
// that fails too the job ends with the fault (503) and false is returned.
bool fault_guard(Session& session, Job& job) {
  if (session.usable()) return true;
  try {
    session.rebuild();
    return true;
  } catch (const std::exception& e) {
    job.error = e.what();
    job.fault = is_device_fault(e);
    return false;
  }
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

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

Scheduler::Scheduler(const tok::Tokenizer& tok, std::vector<std::unique_ptr<Session>> slots, size_t max_queue,
                     std::shared_ptr<PrefixCache> cache)
    : tok_(tok), cache_(std::move(cache)), max_queue_(max_queue) {
  for (auto& s : slots) {
    auto slot = std::make_unique<Slot>();
    n_ctx_ = s->n_ctx();
    slot->session = std::move(s);
    slots_.push_back(std::move(slot));
  }
  for (size_t i = 0; i < slots_.size(); ++i) slots_[i]->worker = std::thread([this, i] { worker(i); });
}

Scheduler::Scheduler(const tok::Tokenizer& tok, std::shared_ptr<BatchEngine> engine, size_t max_queue,
                     std::shared_ptr<PrefixCache> cache)
    : tok_(tok), cache_(std::move(cache)), engine_(std::move(engine)), max_queue_(max_queue) {
  if (!engine_) fail("scheduler: no batch engine");
  n_ctx_ = engine_->n_ctx();
  for (int32_t i = 0; i < engine_->n_seq(); ++i) slots_.push_back(std::make_unique<Slot>());
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
  if (engine_) {
    st.batched = true;
    st.batch = engine_->stats();
  }
  for (const auto& s : slots_) {
    st.slots_busy += s->busy ? 1 : 0;
    st.kv_used += s->kv;
    st.slots.push_back({s->busy.load(), s->kv.load()});
  }
  return st;
}

void Scheduler::forget_device_prefixes() {
  for (auto& s : slots_) s->forget = true;
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
    if (engine_) {
      run_batched_job(i, *job);
    } else {
      run_job(s, *job);
    }
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
  if (!fault_guard(session, job)) return s.tokens.clear();
  if (s.forget.exchange(false)) s.tokens.clear();
  if (job.embed) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      job.hidden = session.hidden_states(job.prompt);
      GenerateResult r;
      r.reason = StopReason::Eog;
      r.n_prompt = static_cast<int32_t>(job.prompt.size());
      r.prompt_ms = ms_since(t0);
      job.result = std::move(r);
    } catch (const std::exception& e) {
      job.error = e.what();
    }
    session.reset();
    s.tokens.clear();
    s.kv = 0;
    return;
  }
  GenerateParams p = job.params;
  const auto t_restore = std::chrono::steady_clock::now();
  try {
    // : the slot's own prefix, then cached blocks.
    job.cache_hit = restore_prefix(session, cache_.get(), s.tokens, job.prompt, job.params.cache_prompt);
  } catch (const std::exception& e) {
    fmt::print(stderr, "rocky: warning: prefix cache: {}; recomputing the prompt\n", e.what());
    recover_session(session, is_device_fault(e));
    job.cache_hit = {};
  }
  s.tokens.assign(job.prompt.begin(), job.prompt.begin() + job.cache_hit.n_cached);
  p.n_cached = job.cache_hit.n_cached;
  const double cache_ms = ms_since(t_restore);
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
    r.cache_ms = cache_ms;
    s.tokens = tokens_held(job.prompt, r, session.n_past());
    job.result = std::move(r);
    if (cache_ && !s.tokens.empty()) {
      try {
        save_prefix(session, *cache_, s.tokens);
      } catch (const std::exception& e) {
        fmt::print(stderr, "rocky: warning: prefix cache: could not save the prompt's blocks: {}\n", e.what());
      }
    }
  } catch (const std::exception& e) {
    job.error = e.what();
    job.fault = is_device_fault(e);
    recover_session(session, job.fault);
    s.tokens.clear();
  }
  s.kv = session.n_past();
}

void Scheduler::run_batched_job(size_t i, Job& job) {
  Slot& s = *slots_[i];
  auto gone = [&job] { return job.cancel.load() || (job.alive && !job.alive()); };
  if (gone()) {
    GenerateResult r;
    r.reason = StopReason::Cancelled;
    r.n_prompt = static_cast<int32_t>(job.prompt.size());
    job.result = std::move(r);
    return;
  }
  job.started = true;
  if (job.embed) {  // the server refuses --embedding with --cont-batching
    job.error = "embedding jobs need per-slot sessions (a server without --cont-batching)";
    return;
  }
  const int32_t seq = static_cast<int32_t>(i);
  GenerateParams p = job.params;
  p.n_cached = 0;
  const int64_t n_prompt = static_cast<int64_t>(job.prompt.size());
  s.kv = n_prompt;
  TokenFn cb = [&](const TokenEvent& ev) {
    if (ev.token >= 0) s.kv = n_prompt + ev.index;
    const bool go_on = !job.on_token || job.on_token(ev);
    return go_on && !gone();
  };
  engine_->begin(seq);
  if (s.forget.exchange(false)) s.tokens.clear();
  const bool cached = cache_ && !engine_->recurrent();
  const auto t_restore = std::chrono::steady_clock::now();
  if (cached) {
    try {
      // The sequence's cells still hold the slot's last tokens (end() does not erase them).
      engine_->truncate(seq, static_cast<int32_t>(std::min<size_t>(s.tokens.size(), size_t(engine_->n_ctx()))));
      job.cache_hit = restore_prefix(*engine_, seq, cache_.get(), s.tokens, job.prompt, job.params.cache_prompt);
    } catch (const std::exception& e) {
      fmt::print(stderr, "rocky: warning: prefix cache: {}; recomputing the prompt\n", e.what());
      engine_->truncate(seq, 0);
      job.cache_hit = {};
    }
    p.n_cached = job.cache_hit.n_cached;
  }
  s.tokens.assign(job.prompt.begin(), job.prompt.begin() + p.n_cached);
  const double cache_ms = ms_since(t_restore);
  try {
    BatchSource src(*engine_, seq);
    Generator g(src, tok_);
    GenerateResult r = g.generate(job.prompt, p, cb);
    r.cache_ms = cache_ms;
    r.batch_seqs_max = src.seqs_max();
    s.tokens = tokens_held(job.prompt, r, engine_->n_past(seq));
    job.result = std::move(r);
    if (cached && !s.tokens.empty()) {
      try {
        save_prefix(*engine_, seq, *cache_, s.tokens);
      } catch (const std::exception& e) {
        fmt::print(stderr, "rocky: warning: prefix cache: could not save the prompt's blocks: {}\n", e.what());
      }
    }
  } catch (const std::exception& e) {
    job.error = e.what();
    job.fault = is_device_fault(e);  // the engine has made its context again (BatchEngine::recover)
    s.tokens.clear();
  }
  engine_->end(seq);  // the steps stop waiting for it; the cells keep s.tokens for the next job
  s.kv = 0;
}

}  // namespace rocky::runtime
