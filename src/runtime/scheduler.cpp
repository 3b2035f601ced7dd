#include "runtime/scheduler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <malloc.h>

#include "core/error.hpp"

namespace rocky::runtime {

namespace {
// A finished request leaves its transient host buffers (prompts, token pieces, JSON, exports of
// the prefix cache, a rebuilt context's staging) freed in glibc's heaps, which keep the pages: a
// server's RSS then climbed ~20 MiB over its first few hundred requests and levelled off near
// its high-water mark (the soak test). Giving free pages back, at most once a second when a job
// ends, keeps RSS at what is in use (the same soak: +0.1 % after warm-up instead of +2–5 %).
void return_free_memory() {
  static std::atomic<int64_t> last{0};
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  int64_t was = last.load();
  if (now - was > 1'000'000'000 && last.compare_exchange_strong(was, now)) ::malloc_trim(0);
}
}  // namespace

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

// Device-fault hook for a slot's own session (embedding jobs): after a device fault (out of device
// memory, device lost) the session's context is made again (weights kept), otherwise it is only cleared. A failed remake
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

Scheduler::Scheduler(const tok::Tokenizer& tok, std::shared_ptr<BatchEngine> engine, size_t max_queue,
                     std::shared_ptr<PrefixCache> cache, const SlotSpeculation& spec)
    : tok_(tok),
      cache_(std::move(cache)),
      engine_(std::move(engine)),
      max_queue_(max_queue),
      writer_(std::make_unique<TaskQueue>()) {
  if (!engine_) fail("scheduler: no batch engine");
  n_ctx_ = engine_->n_ctx();
  for (int32_t i = 0; i < engine_->n_seq(); ++i) slots_.push_back(std::make_unique<Slot>());
  spec_ = spec;
  if (spec.kind != SlotSpeculation::Kind::None && engine_->recurrent())
    fail(
        "speculative decoding is off for this model: its recurrent (linear-attention) layers keep a state that "
        "cannot be rolled back past rejected drafts; run without --spec-type/-md");
  for (auto& s : slots_) {  // before the workers start: loading the draft weights is not concurrent with compute
    if (spec.kind == SlotSpeculation::Kind::Ngram) {
      s->drafter = std::make_unique<NgramDrafter>(spec.ngram_n, spec.ngram_m);
    } else if (spec.kind == SlotSpeculation::Kind::Model) {
      if (spec.draft == nullptr) fail("scheduler: a draft model was asked for but none given");
      s->draft_session = std::make_unique<Session>(
          *spec.draft, engine_->shared_backend(),
          SessionOptions{spec.n_ctx > 0 ? spec.n_ctx : engine_->n_ctx(), engine_->n_ubatch()});
      make_model_drafter(*s);
    }
  }
  for (size_t i = 0; i < slots_.size(); ++i) slots_[i]->worker = std::thread([this, i] { worker(i); });
}

Scheduler::~Scheduler() {
  close(true);
  for (auto& s : slots_)
    if (s->worker.joinable()) s->worker.join();
  flush_saves();  // the engine's queued exports post to the writer
  writer_.reset();
}

void Scheduler::flush_saves() {
  for (int32_t i = 0; i < engine_->n_seq(); ++i) engine_->wait_deferred(i);
  writer_->flush();
}

Scheduler::Admit Scheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lk(mu_);
    if (closed_) return Admit::ShuttingDown;
    const size_t idle = slots_.size() - static_cast<size_t>(running_);
    if (queue_.size() >= idle + max_queue_) return Admit::QueueFull;
    queue_.push_back(job);
    dispatch();
  }
  return Admit::Accepted;
}

void Scheduler::dispatch() {
  bool assigned = false;
  for (auto it = queue_.begin(); it != queue_.end();) {
    const std::shared_ptr<Job> job = *it;
    // Admission: the prompt must fit the shared cells beside what the running jobs hold (a job
    // alone always runs: its prompt was checked against the context).
    if (running_ > 0 && !closed_) {
      const int64_t free = engine_->n_cells() - engine_->used_cells() - reserved_;
      if (static_cast<int64_t>(job->prompt.size()) > free) break;
    }
    // The slot a request asked for (id_slot; it waits while that slot is busy, the jobs behind it
    // go on), else the idle slot whose cells share the longest prefix with the prompt.
    int best = -1;
    size_t best_len = 0;
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& s = *slots_[i];
      if (s.busy || (job->id_slot >= 0 && static_cast<size_t>(job->id_slot) != i)) continue;
      size_t len = 0;
      if (!s.forget)
        while (len < s.tokens.size() && len < job->prompt.size() && s.tokens[len] == job->prompt[len]) ++len;
      if (best < 0 || len > best_len) {
        best = static_cast<int>(i);
        best_len = len;
      }
    }
    if (best < 0) {
      if (job->id_slot >= 0) {
        ++it;
        continue;
      }
      break;
    }
    Slot& s = *slots_[static_cast<size_t>(best)];
    s.job = job;
    s.busy = true;
    s.reserved = static_cast<int64_t>(job->prompt.size());
    reserved_ += s.reserved;
    ++running_;
    it = queue_.erase(it);
    assigned = true;
  }
  if (assigned) cv_.notify_all();
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
    dispatch();
  }
  cv_.notify_all();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats st;
  std::lock_guard lk(mu_);
  st.n_slots = static_cast<int>(slots_.size());
  st.queued = static_cast<int64_t>(queue_.size());
  st.n_ctx = n_ctx_;
  st.n_cells = engine_->n_cells();
  st.batch = engine_->stats();
  st.draft_n = draft_n_.load();
  st.draft_n_accepted = draft_n_accepted_.load();
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
      cv_.wait(lk, [&] { return s.job != nullptr || (closed_ && queue_.empty()); });
      if (!s.job) return;  // closed and drained
      job = s.job;
    }
    job->slot = static_cast<int>(i);
    run_job(i, *job);
    {
      std::lock_guard lk(mu_);
      s.job.reset();
      --running_;
      s.busy = false;
      reserved_ -= s.reserved;
      s.reserved = 0;
      dispatch();  // its cells are free: a waiting job may fit now
    }
    {
      std::lock_guard lk(job->m_);
      job->done_ = true;
    }
    job->cv_.notify_all();
  }
}

void Scheduler::run_job(size_t i, Job& job) {
  Slot& s = *slots_[i];
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
  if (job.embed) {
    run_embed(s, job);
    return;
  }
  if (job.slot_action) {
    run_slot_action(s, static_cast<int32_t>(i), job);
    return;
  }
  const int32_t seq = static_cast<int32_t>(i);
  GenerateParams p = job.params;
  const bool use_cache = job.params.cache_prompt;
  // The saves queued so far (any slot's) reach the cache first: the next turn of an agent finds
  // its blocks on any slot (this waits on the new request's path, never on a stream's).
  if (cache_ && use_cache) flush_saves();
  engine_->begin(seq, gone);
  if (s.forget.exchange(false)) s.tokens.clear();
  const auto t_restore = std::chrono::steady_clock::now();
  try {
    // The sequence's cells still hold the slot's last tokens (end() does not erase them).
    if (!engine_->recurrent())
      engine_->truncate(seq, static_cast<int32_t>(std::min<size_t>(s.tokens.size(), size_t(engine_->n_ctx()))));
    job.cache_hit = restore_prefix(*engine_, seq, cache_.get(), s.tokens, job.prompt, use_cache);
  } catch (const std::exception& e) {
    fmt::print(stderr, "rocky: warning: prefix cache: {}; recomputing the prompt\n", e.what());
    engine_->truncate(seq, 0);
    job.cache_hit = {};
  }
  p.n_cached = job.cache_hit.n_cached;
  p.drafter = slot_drafter(s, p);
  s.tokens.assign(job.prompt.begin(), job.prompt.begin() + p.n_cached);
  engine_->set_tokens(seq, s.tokens);
  const double cache_ms = ms_since(t_restore);
  const int64_t n_prompt = static_cast<int64_t>(job.prompt.size());
  s.kv = n_prompt;
  const bool save = cache_ && use_cache;
  TokenFn cb = [&](const TokenEvent& ev) {
    if (ev.token >= 0) s.kv = n_prompt + ev.index;
    if (ev.index == 0 && ev.token >= 0) {
      // The prompt is in the cells: its reservation ends, and its blocks go to the cache (off this path).
      {
        std::lock_guard lk(mu_);
        reserved_ -= s.reserved;
        s.reserved = 0;
        dispatch();
      }
      if (save) save_prefix_async(*engine_, seq, cache_, job.prompt, *writer_);
    }
    const bool go_on = !job.on_token || job.on_token(ev);
    return go_on && !gone();
  };
  try {
    BatchSource src(*engine_, seq);
    Generator g(src, tok_);
    GenerateResult r = g.generate(job.prompt, p, cb);
    r.cache_ms = cache_ms;
    r.batch_seqs_max = src.seqs_max();
    draft_n_ += r.draft_n;
    draft_n_accepted_ += r.draft_n_accepted;
    s.tokens = tokens_held(job.prompt, r, engine_->n_past(seq));
    job.result = std::move(r);
    if (save && !s.tokens.empty()) save_prefix_async(*engine_, seq, cache_, s.tokens, *writer_);
  } catch (const std::exception& e) {
    if (gone()) {
      // The engine failed its request because the client left (within one step).
      GenerateResult r;
      r.reason = StopReason::Cancelled;
      r.n_prompt = static_cast<int32_t>(job.prompt.size());
      job.result = std::move(r);
    } else {
      job.error = e.what();
      job.fault = is_device_fault(e);  // the engine has made its context again (BatchEngine::recover)
    }
    s.tokens.clear();
    if (s.draft_session) {  // what the draft context holds is unknown now: it starts afresh
      recover_session(*s.draft_session, job.fault);
      make_model_drafter(s);
    }
  }
  engine_->end(seq);  // the steps stop waiting for it; the cells keep s.tokens for the next job
  return_free_memory();
  s.kv = 0;
}

void Scheduler::make_model_drafter(Slot& s) {
  s.drafter = std::make_unique<ModelDrafter>(*s.draft_session, SamplerParams{}, spec_.n_vocab, 0.75f);
}

Drafter* Scheduler::slot_drafter(Slot& s, const GenerateParams& p) {
  if (!s.drafter || !p.speculative || p.draft_max <= 0 || p.sampling.mirostat != 0) return nullptr;
  if (s.draft_session && !s.draft_session->usable()) {
    try {
      s.draft_session->rebuild();  // lost to a device fault
      make_model_drafter(s);
    } catch (const std::exception& e) {
      fmt::print(stderr,
                 "rocky: warning: the draft context could not be made again ({}); this job runs without drafts\n",
                 e.what());
      return nullptr;
    }
  }
  if (auto* md = dynamic_cast<ModelDrafter*>(s.drafter.get())) md->set_request(p.sampling, p.draft_p_min);
  return s.drafter.get();
}

void Scheduler::run_slot_action(Slot& s, int32_t seq, Job& job) {
  if (s.forget.exchange(false)) s.tokens.clear();  // DELETE /cache: what the cells hold is not reused
  try {
    job.slot_action(*engine_, seq, s.tokens);
    GenerateResult r;
    r.reason = StopReason::Eog;
    job.result = std::move(r);
  } catch (const std::exception& e) {
    job.error = e.what();
    job.fault = is_device_fault(e);
    s.tokens.clear();  // the action may have left the cells anywhere: the next job starts afresh
    try {
      engine_->truncate(seq, 0);
    } catch (const std::exception&) {}
  }
}

void Scheduler::run_embed(Slot& s, Job& job) {
  // The batched graph yields logits, not hidden states: an embedding job runs on a Session of the
  // slot's own, made on its first such job (an --embedding server serves nothing else).
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (!s.embed_session)
      s.embed_session = std::make_unique<Session>(engine_->model(), engine_->shared_backend(),
                                                  SessionOptions{engine_->n_ctx(), engine_->n_ubatch()});
  } catch (const std::exception& e) {
    job.error = e.what();
    job.fault = is_device_fault(e);
    return;
  }
  Session& session = *s.embed_session;
  if (!fault_guard(session, job)) return;
  bool fault = false;
  try {
    job.hidden = session.hidden_states(job.prompt);
    GenerateResult r;
    r.reason = StopReason::Eog;
    r.n_prompt = static_cast<int32_t>(job.prompt.size());
    r.prompt_ms = ms_since(t0);
    job.result = std::move(r);
  } catch (const std::exception& e) {
    job.error = e.what();
    job.fault = fault = is_device_fault(e);
  }
  recover_session(session, fault);  // cleared, or made again after a device fault
  s.kv = 0;
}

}  // namespace rocky::runtime
