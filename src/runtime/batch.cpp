// Continuous batching (see batch.hpp).
#include "runtime/batch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <utility>

#include "core/error.hpp"

namespace rocky::runtime {

BatchEngine::BatchEngine(const model::Model& m, std::shared_ptr<backend::Backend> be, BatchOptions o)
    : model_(m), be_(std::move(be)) {
  if (!be_) fail("batch: no backend");
  if (o.n_seq < 1) fail("batch: {} sequences (-np) asked for, at least 1", o.n_seq);
  if (o.n_ubatch <= 0) fail("ubatch size -ub must be positive (got {})", o.n_ubatch);
  if (o.prefill_chunk < 0) fail("--prefill-chunk must be positive (got {})", o.prefill_chunk);
  if (o.n_ctx < 0) fail("context size -c must be positive (got {})", o.n_ctx);
  const auto& hp = m.hparams();
  n_seq_ = o.n_seq;
  n_ctx_ = o.n_ctx > 0 ? o.n_ctx : std::min(hp.n_ctx_train, 4096);
  check_finite_ = o.check_finite;
  if (o.n_cells < 0) fail("batch: {} shared cells asked for", o.n_cells);
  n_cells_ = o.n_cells > 0 ? o.n_cells : n_seq_ * n_ctx_;
  max_seqs_ = std::max(o.max_seqs, 0);
  // -ub within the context and what one binding holds (as Session::n_ubatch).
  n_ubatch_ = std::min(o.n_ubatch, n_ctx_);
  n_ring_ = m.swa_ring(n_ctx_, n_ubatch_, o.swa_full);
  window_ = hp.n_swa;
  graph::Graph g = m.build_graph(model::UbatchSpec{1, 0, n_ctx_, model::Logits::LAST, 1, n_ring_});
  be_->load_weights(g.weights());
  if (g.kv.recurrent()) {
    // One context per sequence (the recurrent kernels hold one sequence's state; see batch.hpp).
    for (int32_t s = 0; s < n_seq_; ++s)
      sessions_.push_back(
          std::make_unique<Session>(m, be_, SessionOptions{n_ctx_, n_ubatch_, o.check_finite, o.swa_full}));
    n_ubatch_ = sessions_.front()->n_ubatch(false);
  } else {
    ctx_opts_ = backend::ContextOptions{g.kv, n_seq_};
    ctx_ = be_->make_context(ctx_opts_);
  }
  if (n_ctx_ >= 2 && sessions_.empty()) {
    graph::Graph probe = m.build_graph(model::UbatchSpec{2, 0, n_ctx_, model::Logits::LAST, 1, n_ring_});
    std::string why;
    const int64_t cap = std::max<int64_t>(1, be_->max_ubatch_tokens(probe, &why));
    if (cap < n_ubatch_) {
      fmt::print(stderr, "rocky: -ub {} capped to {} tokens on {}: {}\n", n_ubatch_, cap, be_->name(), why);
      n_ubatch_ = static_cast<int32_t>(cap);
    }
  }
  chunk_ = o.prefill_chunk > 0 ? std::min(o.prefill_chunk, n_ubatch_) : n_ubatch_;
  exact_ = be_->mixed_verify_tokens();
  const size_t ns = static_cast<size_t>(n_seq_);
  n_past_.assign(ns, 0);
  live_from_.assign(ns, 0);
  active_.assign(ns, 0);
  ready_.assign(ns, 0);
  preempted_.assign(ns, 0);
  order_.assign(ns, 0);
  hist_.resize(ns);
  gone_.resize(ns);
  deferring_.assign(ns, 0);
  wiped_.assign(ns, 0);
  lost_.assign(ns, {});
  thread_ = std::thread([this] { loop(); });
}

BatchEngine::~BatchEngine() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BatchEngine::begin(int32_t seq, std::function<bool()> gone) {
  check_seq(seq);
  wait_deferred(seq);
  std::lock_guard lk(mu_);
  const size_t s = static_cast<size_t>(seq);
  active_[s] = 1;
  n_past_[s] = 0;
  ready_[s] = 0;
  preempted_[s] = 0;
  order_[s] = ++began_;
  hist_[s].clear();
  ready_[s] = 1;  // position 0: no tokens
  gone_[s] = std::move(gone);
}

void BatchEngine::end(int32_t seq) {
  if (seq < 0 || seq >= n_seq_) return;
  {
    std::lock_guard lk(mu_);
    const size_t s = static_cast<size_t>(seq);
    active_[s] = 0;
    n_past_[s] = 0;  // its cells are free: the next job overwrites them
    preempted_[s] = 0;
    gone_[s] = {};
    lost_[s] = {};
  }
  cv_.notify_all();  // a step waiting for this sequence's next token goes ahead
}

void BatchEngine::set_tokens(int32_t seq, std::span<const int32_t> tokens) {
  check_seq(seq);
  std::lock_guard lk(mu_);
  const size_t s = static_cast<size_t>(seq);
  if (static_cast<int64_t>(tokens.size()) != n_past_[s])
    fail("batch: {} tokens given for sequence {} holding {} positions", tokens.size(), seq, n_past_[s]);
  hist_[s].assign(tokens.begin(), tokens.end());
  ready_[s] = 1;
}

void BatchEngine::defer(int32_t seq, std::function<void()> fn) {
  check_seq(seq);
  {
    std::lock_guard lk(mu_);
    deferred_.push_back({seq, std::move(fn)});
    ++deferring_[static_cast<size_t>(seq)];
  }
  cv_.notify_all();
}

void BatchEngine::wait_deferred(int32_t seq) {
  check_seq(seq);
  std::unique_lock lk(mu_);
  deferred_cv_.wait(lk, [&] { return deferring_[static_cast<size_t>(seq)] == 0; });
}

void BatchEngine::run_deferred(std::unique_lock<std::mutex>& lk) {
  while (!deferred_.empty()) {
    Deferred d = std::move(deferred_.front());
    deferred_.pop_front();
    lk.unlock();
    try {
      d.fn();
    } catch (const std::exception& e) {
      fmt::print(stderr, "rocky: warning: deferred work of sequence {}: {}\n", d.seq, e.what());
    }
    lk.lock();
    --deferring_[static_cast<size_t>(d.seq)];
    deferred_cv_.notify_all();
  }
}

int64_t BatchEngine::used_cells() const {
  std::lock_guard lk(mu_);
  int64_t used = 0;
  for (size_t s = 0; s < n_past_.size(); ++s)
    if (active_[s] && !preempted_[s]) used += n_past_[s];
  return used;
}

double BatchEngine::gpu_ms() const {
  if (ctx_) return ctx_->gpu_ms();
  double ms = 0;
  for (const auto& s : sessions_) ms += s->context().gpu_ms();
  return ms;
}

int32_t BatchEngine::n_past(int32_t seq) const {
  std::lock_guard lk(mu_);
  return n_past_.at(static_cast<size_t>(seq));
}

void BatchEngine::sync_session(int32_t seq) {
  check_seq(seq);
  if (sessions_.empty()) return;
  std::lock_guard lk(mu_);
  n_past_[static_cast<size_t>(seq)] = sessions_[static_cast<size_t>(seq)]->n_past();
  ready_[static_cast<size_t>(seq)] = 0;
}

void BatchEngine::truncate(int32_t seq, int32_t n) {
  check_seq(seq);
  if (n < 0 || n > n_ctx_) fail("batch: truncate sequence {} to {} positions (context {})", seq, n, n_ctx_);
  wait_deferred(seq);
  if (!sessions_.empty()) {
    std::lock_guard c(ctx_mu_);
    Session& s = *sessions_[static_cast<size_t>(seq)];
    if (n == 0) {
      s.reset();
    } else if (n != s.n_past()) {
      fail("batch: a recurrent sequence cannot be cut back to {} of its {} positions", n, s.n_past());
    }
  }
  std::lock_guard lk(mu_);
  if (wiped_[static_cast<size_t>(seq)] && n > 0)
    fail("batch: sequence {}'s cells were lost to a device fault (the context was made again)", seq);
  int32_t& live = live_from_[static_cast<size_t>(seq)];
  if (n == 0) live = 0;
  if (n_ring_ > 0 && !ring_keeps(n, live, window_))
    fail(
        "batch: sequence {}'s sliding-window KV ring ({} cells) no longer holds positions {} … {} that position {} "
        "reads (it holds {} on); evaluate the prefix again, or run with --swa-full",
        seq, n_ring_, std::max(0, n - window_ + 1), n - 1, n, live);
  wiped_[static_cast<size_t>(seq)] = 0;
  n_past_[static_cast<size_t>(seq)] = n;
  ready_[static_cast<size_t>(seq)] = 0;
}

bool BatchEngine::can_keep(int32_t seq, int32_t n) const {
  check_seq(seq);
  if (n_ring_ == 0) return true;
  std::lock_guard lk(mu_);
  return ring_keeps(n, live_from_[static_cast<size_t>(seq)], window_);
}

void BatchEngine::keep_window_only(int32_t seq) {
  check_seq(seq);
  if (n_ring_ == 0) return;
  std::lock_guard lk(mu_);
  const size_t s = static_cast<size_t>(seq);
  live_from_[s] = std::max(live_from_[s], n_past_[s] - window_ + 1);
}

int32_t BatchEngine::live_from(int32_t seq) const {
  check_seq(seq);
  std::lock_guard lk(mu_);
  return live_from_[static_cast<size_t>(seq)];
}

double BatchEngine::gpu_ms() {
  std::lock_guard c(ctx_mu_);
  return ctx_ ? ctx_->gpu_ms() : 0;
}

void BatchEngine::throw_fault(const std::string& error, int fault) {
  if (fault == 1) throw OutOfMemoryError(error);
  throw DeviceLostError(error);
}

void BatchEngine::recover(const std::string& error, int fault, const std::vector<int32_t>& in_step) {
  {
    std::lock_guard c(ctx_mu_);
    try {
      if (!sessions_.empty()) {  // a hybrid model: each sequence's own context
        for (auto& ses : sessions_) ses->rebuild();
      } else {
        ctx_.reset();  // its buffers go before the new ones are asked for
        ctx_ = be_->make_context(ctx_opts_);
      }
    } catch (const std::exception& e) {
      fmt::print(stderr,
                 "rocky: warning: remaking the context after a device fault failed: {}; retrying at the next step\n",
                 e.what());
    }
  }
  for (int32_t s = 0; s < n_seq_; ++s) {
    const auto i = static_cast<size_t>(s);
    n_past_[i] = 0;
    live_from_[i] = 0;
    wiped_[i] = 1;
    if (active_[i] && std::find(in_step.begin(), in_step.end(), s) == in_step.end()) lost_[i] = {error, fault};
  }
  shapes_.clear();  // plans made for the old context's arena
}

void BatchEngine::import_kv(int32_t seq, int32_t p0, int32_t n, std::span<const uint8_t> bytes) {
  check_seq(seq);
  if (!sessions_.empty()) fail("import_kv: a hybrid model's sequence imports through its session()");
  wait_deferred(seq);
  if (p0 < 0 || p0 > n_past(seq))
    fail("import_kv: position {} of sequence {} leaves a gap after its {} positions", p0, seq, n_past(seq));
  {
    std::lock_guard c(ctx_mu_);
    if (!ctx_ && sessions_.empty()) fail("import_kv: no context (a device fault)");
    context().import_kv(p0, n, bytes, sessions_.empty() ? seq : 0);
  }
  if (n_ring_ > 0) {
    std::lock_guard lk(mu_);
    int32_t& live = live_from_[static_cast<size_t>(seq)];
    live = std::max(live, p0 + n - n_ring_);
  }
  truncate(seq, p0 + n);
}

std::vector<uint8_t> BatchEngine::export_kv(int32_t seq, int32_t p0, int32_t n) {
  check_seq(seq);
  if (p0 < 0 || n < 0 || p0 + n > n_ctx_)
    fail("export_kv: positions [{}, {}) outside sequence {}'s {} positions", p0, p0 + n, seq, n_ctx_);
  std::lock_guard l(ctx_mu_);
  if (sessions_.empty() && !ctx_) fail("export_kv: no context (a device fault)");
  backend::Context& c = sessions_.empty() ? *ctx_ : sessions_[static_cast<size_t>(seq)]->context();
  std::vector<uint8_t> out(c.kv_export_bytes(n));
  c.export_kv(p0, n, out, sessions_.empty() ? seq : 0);
  return out;
}

void BatchEngine::preempt(int32_t seq) {
  const size_t s = static_cast<size_t>(seq);
  preempted_[s] = 1;
  stats_.preemptions += 1;
  fmt::print(stderr,
             "rocky: the shared KV ({} cells) is full: sequence {} preempted (it goes on with its {} tokens "
             "when there is room)\n",
             n_cells_, seq, hist_[s].size());
}

BatchStats BatchEngine::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

std::vector<float> BatchEngine::eval(int32_t seq, std::span<const int32_t> tokens, bool all_logits,
                                     const ProgressFn& progress, int32_t* seqs_max, std::vector<float> reuse) {
  Request r = request(seq, tokens, std::move(reuse), "eval");
  r.all_logits = all_logits;
  r.progress = progress;
  return submit(r, seqs_max);
}

std::vector<float> BatchEngine::verify(int32_t seq, std::span<const int32_t> tokens, int32_t* seqs_max,
                                       std::vector<float> reuse) {
  Request r = request(seq, tokens, std::move(reuse), "verify");
  if (recurrent())
    fail("batch: sequence {}: a hybrid model's recurrent state cannot drop rejected drafts (no speculation)", seq);
  r.all_logits = true;
  r.verify = true;
  return submit(r, seqs_max);
}

BatchEngine::Request BatchEngine::request(int32_t seq, std::span<const int32_t> tokens, std::vector<float> reuse,
                                          const char* what) const {
  check_seq(seq);
  if (tokens.empty()) fail("{}: no tokens", what);
  Request r;
  r.out = std::move(reuse);
  r.out.clear();
  r.seq = seq;
  r.tokens.assign(tokens.begin(), tokens.end());
  return r;
}

std::vector<float> BatchEngine::submit(Request& r, int32_t* seqs_max) {
  const int32_t seq = r.seq;
  std::unique_lock lk(mu_);
  if (auto& l = lost_[static_cast<size_t>(seq)]; !l.first.empty()) {
    const auto f = std::exchange(l, {});
    throw_fault(f.first, f.second);
  }
  const int32_t np = n_past_[static_cast<size_t>(seq)];
  if (np + static_cast<int64_t>(r.tokens.size()) > n_ctx_)
    fail("{} tokens do not fit in the context: {} already used of {} (raise -c)", r.tokens.size(), np, n_ctx_);
  if (stop_) fail("batch: shutting down");
  queue_.push_back(&r);
  cv_.notify_all();
  done_cv_.wait(lk, [&] { return r.finished; });
  lk.unlock();
  if (seqs_max) *seqs_max = std::max(*seqs_max, r.seqs_max);
  if (r.fault != 0) throw_fault(r.error, r.fault);
  if (!r.error.empty()) fail("{}", r.error);
  if (r.rows) {  // a decode request: its rows from the step's buffer
    const size_t nv = static_cast<size_t>(n_vocab());
    const auto v = std::span<const float>(*r.rows).subspan(r.row0 * nv, r.n_rows * nv);
    const size_t bad = check_finite_ ? first_nonfinite(v) : k_all_finite;
    if (r.all_logits) {
      r.out.insert(r.out.end(), v.begin(), v.end());  // after the rows of its earlier prompt chunks
    } else {
      r.out.assign(v.begin(), v.end());
    }
    r.rows.reset();  // the buffer is free for a later step
    if (bad != k_all_finite)
      fail("non-finite logits at position {} of sequence {}: a weight or activation is NaN/inf",
           r.pos0 + static_cast<int32_t>(bad / nv), seq);
  }
  return std::move(r.out);
}

void BatchEngine::drop_tail(int32_t seq, int32_t n) {
  check_seq(seq);
  std::lock_guard lk(mu_);
  const size_t s = static_cast<size_t>(seq);
  if (n < 0 || n > n_past_[s]) fail("batch: drop sequence {} back to {} of its {} positions", seq, n, n_past_[s]);
  if (n_ring_ > 0 && n > 0 && !ring_keeps(n, live_from_[s], window_))
    fail(
        "batch: sequence {}'s sliding-window KV ring ({} cells) no longer holds positions {} … {} that position {} "
        "reads (it holds {} on): a draft longer than -ub cannot be taken back; use a shorter --draft-max or "
        "--swa-full",
        seq, n_ring_, std::max(0, n - window_ + 1), n - 1, n, live_from_[s]);
  n_past_[s] = n;
  if (ready_[s] && hist_[s].size() >= static_cast<size_t>(n)) hist_[s].resize(static_cast<size_t>(n));
}

void BatchEngine::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty() || !deferred_.empty(); });
    run_deferred(lk);
    if (stop_) {
      for (Request* r : queue_) {
        r->error = "batch: shutting down";
        r->finished = true;
      }
      queue_.clear();
      done_cv_.notify_all();
      return;
    }
    // Every active sequence's next request joins this step, unless one takes longer than 2 ms.
    auto all_in = [&] {
      for (int32_t s = 0; s < n_seq_; ++s) {
        if (!active_[static_cast<size_t>(s)]) continue;
        if (std::none_of(queue_.begin(), queue_.end(), [s](const Request* r) { return r->seq == s; })) return false;
      }
      return true;
    };
    if (queue_.empty()) continue;
    cv_.wait_for(lk, std::chrono::milliseconds(2), [&] { return stop_ || all_in(); });
    run_deferred(lk);
    if (stop_ || queue_.empty()) continue;
    const auto t0 = std::chrono::steady_clock::now();
    if (last_step_end_) stats_.gather_s += std::chrono::duration<double>(t0 - *last_step_end_).count();
    if (!step(lk)) {
      // Nothing fits yet (a prompt waits for cells): until a sequence ends, a request arrives or
      // 20 ms pass (a waiting client may have left).
      last_step_end_.reset();
      cv_.wait_for(lk, std::chrono::milliseconds(20));
      continue;
    }
    const auto t1 = std::chrono::steady_clock::now();
    stats_.step_s += std::chrono::duration<double>(t1 - t0).count();
    // The gap to the next step counts only while a sequence is active (an idle server is not gathering).
    if (std::any_of(active_.begin(), active_.end(), [](uint8_t a) { return a != 0; })) {
      last_step_end_ = t1;
    } else {
      last_step_end_.reset();
    }
  }
}

// A request whose client left fails here, within one step of leaving.
void BatchEngine::drop_gone() {
  bool dropped = false;
  for (Request* r : queue_) {
    const auto& gone = gone_[static_cast<size_t>(r->seq)];
    if (gone && gone()) {
      r->error = "cancelled: the client left";
      r->finished = true;
      stats_.cancelled += 1;
      dropped = true;
    }
  }
  if (dropped) {
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [](const Request* r) { return r->finished; }),
                 queue_.end());
    done_cv_.notify_all();
  }
}

// One step of the shared context: its graph for this shape (cached), computed into `logits`.
void BatchEngine::compute_shared(model::Logits want, int32_t n_out, const std::vector<int32_t>& toks,
                                 const std::vector<int32_t>& seq, const std::vector<int32_t>& pos,
                                 std::vector<float>& logits, double& compute_s, backend::HostTiming& host_d,
                                 bool& replayed) {
  const int32_t n = static_cast<int32_t>(toks.size());
  auto key = std::make_tuple(n, static_cast<int>(want), want == model::Logits::LAST ? n_out : 0);
  auto it = shapes_.find(key);
  if (it == shapes_.end()) {
    if (shapes_.size() >= 32) shapes_.clear();
    model::UbatchSpec u{n, 0, n_ctx_, want};
    u.n_ring = n_ring_;
    u.n_out = std::max(n_out, 1);
    it = shapes_.emplace(key, Shape{model_.build_graph(u), {}}).first;
    it->second.p = graph::plan_arena(it->second.g);
  }
  graph::Graph& g = it->second.g;
  g.seq = seq;
  g.pos = pos;
  std::lock_guard c(ctx_mu_);
  if (!ctx_) ctx_ = be_->make_context(ctx_opts_);  // the last recover() could not make it
  const backend::HostTiming h0 = ctx_->stats().host;
  const auto t0 = std::chrono::steady_clock::now();
  ctx_->compute(g, it->second.p, toks, logits);
  compute_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const backend::HostTiming h1 = ctx_->stats().host;
  host_d = {h1.setup_ms - h0.setup_ms, h1.record_ms - h0.record_ms, h1.submit_wait_ms - h0.submit_wait_ms,
            h1.readback_ms - h0.readback_ms};
  replayed = h1.replays > h0.replays;
}

void BatchEngine::record_step(int32_t chunk, int64_t n_dec, int32_t n_seqs, double compute_s,
                              const backend::HostTiming& host_d, bool replayed) {
  stats_.steps += 1;
  stats_.prefill_tokens += chunk;
  stats_.decode_tokens += n_dec;
  stats_.last_seqs = n_seqs;
  stats_.max_seqs = std::max(stats_.max_seqs, n_seqs);
  stats_.compute_s += compute_s;
  stats_.record_s += host_d.record_ms / 1e3;
  stats_.submit_wait_s += host_d.submit_wait_ms / 1e3;
  stats_.readback_s += host_d.readback_ms / 1e3;
  stats_.replays += replayed ? 1 : 0;
}

bool BatchEngine::fits_decode(const std::vector<Request*>& dec, int64_t n_dec, const Request* r) const {
  const size_t max_dec = max_seqs_ > 0 ? static_cast<size_t>(max_seqs_) : static_cast<size_t>(n_ubatch_);
  const size_t k = decode_tokens(r);
  if (k == 0 || dec.size() >= max_dec || n_dec + static_cast<int64_t>(k) > n_ubatch_) return false;
  // A step with a verification stays within Backend::mixed_verify_tokens unless the verification
  // is alone in it.
  const bool spec = r->verify || std::any_of(dec.begin(), dec.end(), [](const Request* d) { return d->verify; });
  return !spec || dec.empty() || n_dec + static_cast<int64_t>(k) <= exact_;
}

// The decode group: every request with one token left (a decode, or a prefill's last token) or a
// speculative verification (its tokens together) of a sequence that holds its cells, in arrival
// order, at most -ub tokens (one request with max_seqs 1). `free` (the shared cells) loses theirs.
void BatchEngine::pick_decodes(std::vector<Request*>& dec, int64_t& n_dec, int64_t& free) {
  auto held = [&](const Request* r) { return !preempted_[static_cast<size_t>(r->seq)]; };
  for (Request* r : queue_)
    if (held(r) && fits_decode(dec, n_dec, r)) {
      dec.push_back(r);
      n_dec += static_cast<int64_t>(decode_tokens(r));
    }
  // Not enough cells for them: the newest sequence holding cells (its tokens known) gives them up.
  while (n_dec > free) {
    int32_t victim = -1;
    for (int32_t s = 0; s < n_seq_; ++s) {
      const size_t u = static_cast<size_t>(s);
      if (!active_[u] || preempted_[u] || !ready_[u] || n_past_[u] == 0) continue;
      if (victim < 0 || order_[u] > order_[static_cast<size_t>(victim)]) victim = s;
    }
    if (victim < 0) break;
    free += n_past_[static_cast<size_t>(victim)];
    preempt(victim);
    dec.erase(std::remove_if(dec.begin(), dec.end(), [&](const Request* r) { return r->seq == victim; }), dec.end());
    n_dec = 0;
    for (const Request* r : dec) n_dec += static_cast<int64_t>(decode_tokens(r));
  }
  while (n_dec > free && !dec.empty()) {
    n_dec -= static_cast<int64_t>(decode_tokens(dec.back()));
    dec.pop_back();
  }
  free -= n_dec;
}

bool BatchEngine::step(std::unique_lock<std::mutex>& lk) {
  drop_gone();
  // The shared cells: what the active sequences hold, and what this step may add.
  int64_t free = n_cells_;
  for (size_t s = 0; s < n_past_.size(); ++s)
    if (active_[s] && !preempted_[s]) free -= n_past_[s];
  std::vector<Request*> dec;
  int64_t n_dec = 0;  // their tokens
  pick_decodes(dec, n_dec, free);
  auto dec_fits = [&](const Request* r) { return fits_decode(dec, n_dec, r); };
  // Then the first waiting prefill whose whole remaining prompt fits the free cells (a preempted
  // sequence's: its kept tokens, then its request), unless max_seqs is already reached.
  Request* pf = nullptr;
  const bool room_for_pf = max_seqs_ == 0 || static_cast<int32_t>(dec.size()) < max_seqs_;
  for (Request* r : queue_) {
    if (!room_for_pf) break;
    if (std::find(dec.begin(), dec.end(), r) != dec.end()) continue;
    const size_t s = static_cast<size_t>(r->seq);
    const size_t left = r->tokens.size() - r->done;
    if (preempted_[s]) {
      if (static_cast<int64_t>(hist_[s].size() + left) > free) continue;
      // Back in: its cells were never written while it waited (a sequence owns its range of the
      // device KV), so they hold exactly what they held — nothing is evaluated again (evaluating
      // the kept tokens as a prompt would go through the prefill kernels and could change a greedy
      // pick). Its request goes on where it was.
      preempted_[s] = 0;
      free -= static_cast<int64_t>(hist_[s].size());
      if (decode_tokens(r) > 0) {
        if (dec_fits(r) && free >= static_cast<int64_t>(left)) {
          dec.push_back(r);
          n_dec += static_cast<int64_t>(left);
          free -= static_cast<int64_t>(left);
        }
        continue;
      }
      pf = r;
      break;
    }
    if (decode_tokens(r) > 0 || static_cast<int64_t>(left) > free) continue;
    pf = r;
    break;
  }
  // Decode tokens and a prefill chunk take turns instead of sharing a ubatch: a decode column in a
  // prompt-sized ubatch would go through the prefill kernels (int8 activations), and its greedy
  // pick could differ from the same request's alone. A decoder waits for at most one chunk.
  if (!dec.empty() && pf != nullptr) {
    if (prefill_due_) {
      dec.clear();
      n_dec = 0;
    } else {
      pf = nullptr;
    }
  }
  prefill_due_ = pf == nullptr && std::any_of(queue_.begin(), queue_.end(), [&](const Request* r) {
                   return decode_tokens(r) == 0 || preempted_[static_cast<size_t>(r->seq)];
                 });
  int32_t chunk = 0;
  if (pf != nullptr) {
    const int32_t room = n_ubatch_ - static_cast<int32_t>(n_dec);
    chunk = static_cast<int32_t>(std::min<size_t>(
        {static_cast<size_t>(std::max(room, 0)), static_cast<size_t>(chunk_), pf->tokens.size() - pf->done}));
    if (chunk == 0) pf = nullptr;
  }
  if (dec.empty() && pf == nullptr) return false;
  // Ubatch layout: [prefill chunk][decode tokens], so the logits wanted are the last n_out columns.
  std::vector<int32_t> toks, seq, pos;
  if (pf != nullptr) {
    const int32_t np = n_past_[static_cast<size_t>(pf->seq)];
    for (int32_t i = 0; i < chunk; ++i) {
      toks.push_back(pf->tokens[pf->done + static_cast<size_t>(i)]);
      seq.push_back(pf->seq);
      pos.push_back(np + i);
    }
  }
  for (Request* r : dec) {
    const size_t k = decode_tokens(r);
    for (size_t j = 0; j < k; ++j) {
      toks.push_back(r->tokens[r->done + j]);
      seq.push_back(r->seq);
      pos.push_back(n_past_[static_cast<size_t>(r->seq)] + static_cast<int32_t>(j));
    }
  }
  const bool pf_last = pf != nullptr && pf->done + static_cast<size_t>(chunk) == pf->tokens.size();
  const bool all = pf != nullptr && pf->all_logits;
  const int32_t n = static_cast<int32_t>(toks.size());
  const int32_t n_out = all ? n : static_cast<int32_t>(n_dec) + (pf_last ? 1 : 0);
  const model::Logits want = all ? model::Logits::ALL : n_out > 0 ? model::Logits::LAST : model::Logits::NONE;
  const int32_t n_seqs = static_cast<int32_t>(dec.size()) + (pf != nullptr ? 1 : 0);
  lk.unlock();
  // Compute outside the lock: callers keep queueing; these requests stay put (their threads wait).
  std::string error;
  int fault = 0;
  // A buffer no request reads from any more (one whose thread has not copied its rows yet keeps
  // its own alive).
  std::shared_ptr<std::vector<float>> buf;
  for (auto& b : step_bufs_)
    if (b.use_count() == 1) buf = b;
  if (buf) {
    std::atomic_thread_fence(std::memory_order_acquire);  // after the last reader's release of it
  } else {
    buf = step_bufs_.emplace_back(std::make_shared<std::vector<float>>());
  }
  std::vector<float>& logits = *buf;
  // Kept between steps, but not at the size of one all-logits step: more than 4× a decode step's
  // need (n_seq rows) is given back.
  if (logits.capacity() > 4 * static_cast<size_t>(n_vocab()) * static_cast<size_t>(std::max(n_seq_, 1)))
    std::vector<float>().swap(logits);
  double compute_s = 0;
  backend::HostTiming host_d;
  bool replayed = false;
  const size_t nv = static_cast<size_t>(n_vocab());
  try {
    if (!sessions_.empty()) {
      logits.resize(want == model::Logits::NONE ? 0 : nv * static_cast<size_t>(want == model::Logits::ALL ? n : n_out));
      const auto t0 = std::chrono::steady_clock::now();
      compute_sessions(dec, pf, chunk, all, pf_last, pos, logits);
      compute_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } else {
      logits.resize(want == model::Logits::NONE ? 0 : nv * static_cast<size_t>(want == model::Logits::ALL ? n : n_out));
      compute_shared(want, n_out, toks, seq, pos, logits, compute_s, host_d, replayed);
    }
  } catch (const std::exception& e) {
    error = e.what();
    if (is_device_fault(e)) fault = dynamic_cast<const OutOfMemoryError*>(&e) != nullptr ? 1 : 2;
  }
  if (pf != nullptr && pf->progress && error.empty() && pf->done + static_cast<size_t>(chunk) > pf->replay)
    pf->progress(static_cast<int64_t>(pf->done + static_cast<size_t>(chunk) - pf->replay),
                 static_cast<int64_t>(pf->tokens.size() - pf->replay));
  lk.lock();
  if (fault != 0) recover(error, fault, seq);
  const int32_t first = want == model::Logits::ALL ? 0 : n - n_out;  // the ubatch column of logits' first row
  auto row = [&](int32_t col) {                                      // logits of ubatch column col
    return std::span<const float>(logits).subspan(static_cast<size_t>(col - first) * nv, nv);
  };
  auto finite = [](std::span<const float> v) { return first_nonfinite(v) == k_all_finite; };
  if (pf != nullptr) {
    pf->seqs_max = std::max(pf->seqs_max, n_seqs);
    if (!error.empty()) {
      pf->error = error;
      pf->fault = fault;
      pf->finished = true;
    } else {
      if (all) {
        for (int32_t i = 0; i < chunk; ++i) {
          if (pf->done + static_cast<size_t>(i) < pf->replay) continue;  // a re-evaluated kept token
          auto r = row(i);
          pf->out.insert(pf->out.end(), r.begin(), r.end());
        }
      } else if (pf_last) {
        auto r = row(chunk - 1);
        pf->out.assign(r.begin(), r.end());
      }
      auto& h = hist_[static_cast<size_t>(pf->seq)];
      h.insert(h.end(), pf->tokens.begin() + static_cast<std::ptrdiff_t>(pf->done),
               pf->tokens.begin() + static_cast<std::ptrdiff_t>(pf->done) + chunk);
      pf->done += static_cast<size_t>(chunk);
      n_past_[static_cast<size_t>(pf->seq)] += chunk;
      if (n_ring_ > 0)
        live_from_[static_cast<size_t>(pf->seq)] =
            std::max(live_from_[static_cast<size_t>(pf->seq)], n_past_[static_cast<size_t>(pf->seq)] - n_ring_);
      if (pf_last) pf->finished = true;
      if (pf_last && check_finite_ && !finite(pf->out))
        pf->error = fmt::format("non-finite logits at position {} of sequence {}: a weight or activation is NaN/inf",
                                n_past_[static_cast<size_t>(pf->seq)] - 1, pf->seq);
    }
  }
  int32_t col = chunk;  // the next decode column
  for (Request* r : dec) {
    const size_t k = decode_tokens(r);
    r->seqs_max = std::max(r->seqs_max, n_seqs);
    r->finished = true;
    if (!error.empty()) {
      r->error = error;
      r->fault = fault;
      continue;
    }
    // Its rows (every one, or the last) are copied by its own thread (submit()).
    r->rows = buf;
    r->row0 = static_cast<size_t>(col - first) + (r->all_logits ? 0 : k - 1);
    r->n_rows = r->all_logits ? k : 1;
    r->pos0 = n_past_[static_cast<size_t>(r->seq)] + static_cast<int32_t>(r->all_logits ? 0 : k - 1);
    for (size_t j = 0; j < k; ++j, ++col) {
      hist_[static_cast<size_t>(r->seq)].push_back(r->tokens[r->done]);
      r->done += 1;
      n_past_[static_cast<size_t>(r->seq)] += 1;
      if (n_ring_ > 0)
        live_from_[static_cast<size_t>(r->seq)] =
            std::max(live_from_[static_cast<size_t>(r->seq)], n_past_[static_cast<size_t>(r->seq)] - n_ring_);
    }
  }
  if (error.empty()) record_step(chunk, n_dec, n_seqs, compute_s, host_d, replayed);
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [](const Request* r) { return r->finished; }),
               queue_.end());
  done_cv_.notify_all();
  return true;
}

void BatchEngine::compute_sessions(const std::vector<Request*>& dec, Request* pf, int32_t chunk, bool all, bool pf_last,
                                   const std::vector<int32_t>& pos, std::vector<float>& logits) {
  // The columns of the one-context step, each sequence on its own context (batch.hpp).
  const size_t nv = static_cast<size_t>(n_vocab());
  std::lock_guard c(ctx_mu_);
  auto at = [&](Request* r, int32_t p) -> Session& {
    Session& s = *sessions_[static_cast<size_t>(r->seq)];
    if (s.n_past() != p) {
      if (p != 0) fail("batch: sequence {} is at {} but its context at {}", r->seq, p, s.n_past());
      s.reset();  // preempted: its kept tokens are evaluated again from position 0
    }
    return s;
  };
  std::vector<float> out;
  size_t col = 0;  // next row of `logits` to fill
  if (pf != nullptr) {
    Session& s = at(pf, pos.front());
    s.eval_into(std::span<const int32_t>(pf->tokens).subspan(pf->done, static_cast<size_t>(chunk)), all, {}, out);
    if (all || pf_last) {
      std::copy(out.begin(), out.end(), logits.begin() + static_cast<std::ptrdiff_t>(col * nv));
      col += out.size() / nv;
    }
  }
  for (size_t i = 0; i < dec.size(); ++i) {
    Request* r = dec[i];
    Session& s = at(r, pos[static_cast<size_t>(chunk) + i]);
    s.eval_into(std::span<const int32_t>(&r->tokens[r->done], 1), false, {}, out);
    std::copy(out.begin(), out.end(), logits.begin() + static_cast<std::ptrdiff_t>(col * nv));
    col += 1;
  }
}

}  // namespace rocky::runtime
