// Continuous batching: one context holds the KV cells of n_seq sequences
// (backend::ContextOptions::n_seq); each step is one multi-sequence ubatch (graph::Graph::seq /
// pos) that packs the next token of every decoding sequence and, within the ubatch budget (-ub), a
// chunk of one waiting prefill (--prefill-chunk, default -ub), taking turns with the decode steps,
// so decode keeps flowing while a long prompt is evaluated (a decoder waits for at most one chunk). Every server runs its requests through one BatchEngine (runtime/scheduler).
//
// Threads: each sequence is driven by its own thread (a scheduler slot's worker, through
// BatchSource — a LogitSource, so the Generator, its sampling and stop rules are unchanged); eval()
// queues the tokens and blocks until the steps that carry them are done. The engine's own thread
// runs the steps: a step starts once every active sequence (begin() … end()) has a request waiting,
// or 2 ms after the first one arrived (a slot still streaming its last token does not hold the
// others up for longer). Work that must not run on a request's own path (the prefix cache's
// exports, defer()) runs on the engine's thread between steps.
//
// Shared cells: the sequences together may hold at most n_cells KV cells (the server's -c; each
// one at most n_ctx). A step whose tokens do not fit preempts the newest sequence holding cells:
// its cells count as free and its requests wait; once n_cells has room for its tokens again it
// goes on where it was (its caller only waits longer; nothing is lost). The physical KV is still
// n_seq · n_ctx cells (a sequence owns a fixed range, backend.hpp) and n_cells is the accounting,
// so a preempted sequence's cells are never overwritten and nothing is evaluated again. A new
// prompt starts only when all of it fits beside what the others hold.
//
// Fairness: every waiting decode token goes into every decode step; prefills are admitted first
// come first served, one chunk per step, a chunk after each decode step while both wait; a sequence whose `gone` poll (begin()) says its client left has its
// waiting request failed within one step; end() frees a sequence's cells at once (a cancelled or
// finished job). Results do not depend on the batch: a token's logits are those of its own
// sequence's cells (tests/vulkan/test_multi_seq.cpp).
//
// Hybrid models (recurrent layers): the kernels keep recurrent state for one sequence per context,
// so each sequence gets a Session of its own (its context, its state and its checkpoints) and a
// step evaluates the sequences it carries one after the other; everything above holds the same.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "graph/planner.hpp"
#include "model/model.hpp"
#include "runtime/generator.hpp"
#include "runtime/session.hpp"

namespace rocky::runtime {

struct BatchOptions {
  int32_t n_seq = 1;          // sequences (the server's -np)
  int32_t n_ctx = 0;          // positions per sequence (0: the model's, at most 4096)
  int32_t n_cells = 0;        // KV cells all sequences may hold together (0: n_seq · n_ctx)
  int32_t max_seqs = 0;       // requests per step at most (0: all; 1: --no-cont-batching)
  int32_t n_ubatch = 512;     // tokens per step at most (-ub)
  int32_t prefill_chunk = 0;  // prefill tokens per step at most (--prefill-chunk; 0 = n_ubatch)
  bool check_finite = true;   // a NaN/inf logit is an error for its sequence
  bool swa_full = false;      // --swa-full (SessionOptions::swa_full): no sliding-window ring
};

struct BatchStats {
  int64_t steps = 0;
  int64_t prefill_tokens = 0;  // over all steps
  int64_t decode_tokens = 0;
  int32_t last_seqs = 0;        // sequences in the last step
  int32_t max_seqs = 0;         // the most sequences one step carried
  int64_t preemptions = 0;      // sequences preempted because the shared cells ran out
  int64_t replayed_tokens = 0;  // tokens re-evaluated after a preemption (0 while ranges are private)
  int64_t cancelled = 0;        // requests failed because their client left
  // Where a step's wall time goes (seconds, summed over steps): the step from taking its
  // requests to handing back their logits (step_s), of it ctx->compute (compute_s) and, inside
  // that, the context's own split (HostTiming: recording, fence waits = GPU time, logits
  // readback); gather_s: from a step's end to the next step's start while requests were queued or
  // expected (the callers' sampling and streaming, the 2 ms join window). replays: steps that
  // re-submitted a kept command buffer.
  double step_s = 0, compute_s = 0, gather_s = 0;
  double record_s = 0, submit_wait_s = 0, readback_s = 0;
  int64_t replays = 0;
};

class BatchEngine {
 public:
  BatchEngine(const model::Model& m, std::shared_ptr<backend::Backend> be, BatchOptions o);
  ~BatchEngine();
  BatchEngine(const BatchEngine&) = delete;
  BatchEngine& operator=(const BatchEngine&) = delete;

  // Sequence `seq` takes part in the steps (its thread will call eval); starts at position 0.
  // `gone` (optional) is polled before each step that would carry one of its requests: true fails
  // that request ("cancelled") at once. Waits for the sequence's deferred work (defer()).
  void begin(int32_t seq, std::function<bool()> gone = {});
  // Sequence `seq` is done: its cells are free and the steps stop waiting for it.
  void end(int32_t seq);
  // The tokens of positions [0, n_past(seq)) (after a prefix was restored into the cells): what a
  // preemption re-evaluates. Evaluated tokens are added by eval() itself.
  void set_tokens(int32_t seq, std::span<const int32_t> tokens);
  // Runs `fn` on the engine's thread before the next step (holding no lock of the engine; it may
  // call export_kv / session()); begin(), truncate() and import_kv() of `seq` wait for it.
  void defer(int32_t seq, std::function<void()> fn);
  // Cells the active sequences hold now (preempted ones excluded) and the limit.
  int64_t used_cells() const;
  int32_t n_cells() const { return n_cells_; }
  // Appends `tokens` to sequence `seq` and blocks until they are evaluated: the last token's logits
  // (all_logits: every token's, row-major). `seqs_max` (optional) is raised to the most sequences
  // in one step that carried these tokens. rocky::Error when they do not fit the context or the
  // step failed.
  std::vector<float> eval(
      int32_t seq, std::span<const int32_t> tokens, bool all_logits, const ProgressFn& progress,
      int32_t* seqs_max = nullptr,
      std::vector<float> reuse =
          {});  // (reuse: a vector whose capacity the result takes over — the decode loop's last logits.)

  // Speculative verification: [last token + drafted tokens] of sequence `seq` go into a decode
  // step beside the other sequences' tokens (not through the prefill turn, so several slots'
  // drafts share one step) within Backend::mixed_verify_tokens (on Vulkan: a step of their own);
  // every token's logits, row-major. Within -ub; longer ones run as a prefill. Not for hybrid
  // models (their recurrent state cannot drop rejected drafts).
  std::vector<float> verify(int32_t seq, std::span<const int32_t> tokens, int32_t* seqs_max = nullptr,
                            std::vector<float> reuse = {});
  // Drops the positions from n on (n ≤ n_past): the cells of rejected drafts. Only the sequence's
  // own thread, between its evals; its recorded tokens stay in step (a preemption keeps them).
  void drop_tail(int32_t seq, int32_t n);

  int32_t n_past(int32_t seq) const;
  // under batching: the prefix cache moves one sequence's cells (backend::Context::export_kv
  // layout). Only the sequence's own thread calls these, between its evals (no request of `seq`
  // is queued); they wait for a step in flight (the context is not shared while it computes).
  // truncate: the first n positions stay (n ≤ what the cells hold: the caller knows — end() does
  // not erase them); import_kv writes positions [p0, p0 + n) with p0 ≤ n_past and sets n_past to
  // p0 + n; export_kv reads positions that hold tokens (the caller knows: after end() too, until
  // the sequence's next begin()).
  // With a sliding-window ring (graph.hpp KvShape) only an n that can_keep(seq, n) (else rocky::Error;
  // Session::can_keep); live_from(seq): the first position every layer still holds (Session::live_from).
  void truncate(int32_t seq, int32_t n);
  bool can_keep(int32_t seq, int32_t n) const;
  int32_t live_from(int32_t seq) const;
  int32_t n_ring() const { return n_ring_; }
  // With a ring: from now on sequence `seq` counts only the last window of its positions as held in
  // its ring (live_from = n_past − window + 1): a slot file's K/V does not say which older positions
  // its ring still held, so a restored one keeps just what its next token reads.
  void keep_window_only(int32_t seq);
  void import_kv(int32_t seq, int32_t p0, int32_t n, std::span<const uint8_t> bytes);
  std::vector<uint8_t> export_kv(int32_t seq, int32_t p0, int32_t n);
  bool recurrent() const { return !sessions_.empty(); }
  // A hybrid model's sequence `seq` (its own context and recurrent state; nullptr for attention
  // models). Only its own thread between its evals, or a deferred task, may use it; after changing
  // its positions call sync_session().
  Session* session(int32_t seq) { return sessions_.empty() ? nullptr : sessions_.at(static_cast<size_t>(seq)).get(); }
  void sync_session(int32_t seq);
  void wait_deferred(int32_t seq);
  double gpu_ms() const;
  int32_t n_ctx() const { return n_ctx_; }
  int32_t n_seq() const { return n_seq_; }
  int32_t n_vocab() const { return model_.hparams().n_vocab; }
  // The context's GPU time (0 while a device fault left none: see step()).
  double gpu_ms();
  BatchStats stats() const;
  backend::Context& context() { return ctx_ ? *ctx_ : sessions_.front()->context(); }
  backend::Backend& backend() { return *be_; }
  const std::shared_ptr<backend::Backend>& shared_backend() const { return be_; }
  const model::Model& model() const { return model_; }
  int32_t n_ubatch() const { return n_ubatch_; }

 private:
  struct Request {
    int32_t seq = 0;
    std::vector<int32_t> tokens;
    size_t done = 0;  // tokens evaluated
    bool all_logits = false;
    ProgressFn progress;
    std::vector<float> out;
    int32_t seqs_max = 0;
    bool finished = false;
    std::string error;
    int fault = 0;        // the error is a device fault: 1 out of device memory, 2 device lost
    size_t replay = 0;    // leading tokens re-evaluated after a preemption (no logits wanted)
    bool verify = false;  // verify(): all its tokens go into one decode step (every row's logits)
    // A decode request's logits stay in the step's buffer: its own thread copies (and checks) them
    // after the step, outside the engine's lock and beside the other requests' threads.
    std::shared_ptr<const std::vector<float>> rows;
    size_t row0 = 0, n_rows = 0;  // its rows in `rows` (each n_vocab floats)
    int32_t pos0 = 0;             // the position of its first row (for the non-finite error)
  };
  // A request of `tokens` for `seq` (checked; `what` names the caller in the error), its logits
  // written into `reuse`'s storage.
  Request request(int32_t seq, std::span<const int32_t> tokens, std::vector<float> reuse, const char* what) const;
  std::vector<float> submit(Request& r, int32_t* seqs_max);
  // Tokens a request puts into a decode step (0: it is a prefill).
  size_t decode_tokens(const Request* r) const {
    const size_t left = r->tokens.size() - r->done;
    return left == 1 || (r->verify && left <= static_cast<size_t>(n_ubatch_)) ? left : 0;
  }
  // After a device fault in a step: the context is made again (weights kept); every sequence's
  // cells are gone, so an active sequence's next eval fails with the same fault (its job ends with
  // 503) and a kept prefix cannot be reused (truncate to more than 0 positions fails until the
  // sequence starts over). ctx_ stays null when making it fails; the next step tries again.
  void recover(const std::string& error, int fault, const std::vector<int32_t>& in_step);
  [[noreturn]] static void throw_fault(const std::string& error, int fault);
  void loop();
  void run_deferred(std::unique_lock<std::mutex>& lk);
  void drop_gone();
  void compute_shared(model::Logits want, int32_t n_out, const std::vector<int32_t>& toks,
                      const std::vector<int32_t>& seq, const std::vector<int32_t>& pos, std::vector<float>& logits,
                      double& compute_s, backend::HostTiming& host_d, bool& replayed);
  void record_step(int32_t chunk, int64_t n_dec, int32_t n_seqs, double compute_s, const backend::HostTiming& host_d,
                   bool replayed);
  void preempt(int32_t seq);
  void compute_sessions(const std::vector<Request*>& dec, Request* pf, int32_t chunk, bool all, bool pf_last,
                        const std::vector<int32_t>& pos, std::vector<float>& logits);
  void check_seq(int32_t seq) const {
    if (seq < 0 || seq >= n_seq_) fail("batch: sequence {} outside 0 .. {}", seq, n_seq_ - 1);
  }
  bool step(std::unique_lock<std::mutex>& lk);  // false: nothing could run
  bool fits_decode(const std::vector<Request*>& dec, int64_t n_dec, const Request* r) const;
  void pick_decodes(std::vector<Request*>& dec, int64_t& n_dec, int64_t& free);

  const model::Model& model_;
  std::shared_ptr<backend::Backend> be_;
  std::unique_ptr<backend::Context> ctx_;
  std::vector<std::unique_ptr<Session>> sessions_;  // hybrid models: one per sequence (ctx_ is null)
  backend::ContextOptions ctx_opts_;                // what ctx_ is made with (recover)
  int32_t n_seq_ = 1, n_ctx_ = 0, n_ubatch_ = 512, chunk_ = 512, n_cells_ = 0, max_seqs_ = 0;
  int32_t n_ring_ = 0, window_ = 0;  // the sliding-window ring (0: none)
  int64_t exact_ = INT64_MAX;        // Backend::mixed_verify_tokens: a verification joins others' tokens within it
  bool check_finite_ = true;
  mutable std::mutex mu_;
  std::mutex ctx_mu_;                // held while ctx_ computes or moves KV cells (never while waiting on mu_)
  std::condition_variable cv_;       // engine: requests arrived / stop
  std::condition_variable done_cv_;  // callers: a request finished
  std::vector<int32_t> n_past_;      // per sequence
  std::vector<int32_t> live_from_;   // per sequence: live_from() (kept past end(): a save reads the cells then)
  std::vector<uint8_t> active_;      // per sequence: between begin() and end()
  std::vector<uint8_t> ready_;       // per sequence: its tokens are known (set_tokens or an eval since begin)
  std::vector<uint8_t> preempted_;   // per sequence: its cells were given up (n_past_ stays its position)
  std::vector<uint8_t> wiped_;       // per sequence: its cells were lost to a device fault (recover)
  std::vector<std::pair<std::string, int>> lost_;  // per sequence: the fault its next eval reports
  std::vector<uint64_t> order_;                    // per sequence: when it began (the newest is preempted first)
  std::vector<std::vector<int32_t>> hist_;         // per sequence: the tokens of its positions
  std::vector<std::function<bool()>> gone_;        // per sequence: its client left
  uint64_t began_ = 0;
  bool prefill_due_ = false;  // the last step ran decodes while a prefill waited: the chunk goes next
  struct Deferred {
    int32_t seq;
    std::function<void()> fn;
  };
  std::deque<Deferred> deferred_;
  std::vector<int32_t> deferring_;  // per sequence: deferred tasks queued or running
  std::condition_variable deferred_cv_;
  std::optional<std::chrono::steady_clock::time_point> last_step_end_;  // BatchStats::gather_s
  // step()'s logits buffers, kept between steps (loop thread only): a step writes into one that no
  // request still reads its rows from.
  std::vector<std::shared_ptr<std::vector<float>>> step_bufs_;
  std::deque<Request*> queue_;  // waiting requests, in arrival order
  BatchStats stats_;
  bool stop_ = false;
  struct Shape {
    graph::Graph g;
    graph::Plan p;
  };
  std::map<std::tuple<int32_t, int, int32_t>, Shape> shapes_;  // (n_tokens, logits, n_out)
  std::thread thread_;
};

// One sequence of a BatchEngine as the Generator's LogitSource.
class BatchSource final : public LogitSource {
 public:
  BatchSource(BatchEngine& e, int32_t seq) : e_(e), seq_(seq) {}
  std::vector<float> eval(std::span<const int32_t> tokens, bool all_logits, const ProgressFn& progress) override {
    return e_.eval(seq_, tokens, all_logits, progress, &seqs_max_);
  }
  void eval_into(std::span<const int32_t> tokens, bool all_logits, const ProgressFn& progress,
                 std::vector<float>& out) override {
    out = e_.eval(seq_, tokens, all_logits, progress, &seqs_max_, std::move(out));
  }
  int32_t n_past() const override { return e_.n_past(seq_); }
  int32_t n_ctx() const override { return e_.n_ctx(); }
  int32_t n_vocab() const override { return e_.n_vocab(); }
  // The shared context's: a step's GPU time counts for every sequence it carried.
  double gpu_ms() const override { return e_.gpu_ms(); }
  void eval_draft(std::span<const int32_t> tokens, std::vector<float>& out) override {
    out = e_.verify(seq_, tokens, &seqs_max_, std::move(out));
  }
  void truncate(int32_t n) override { e_.drop_tail(seq_, n); }
  bool can_truncate() const override { return !e_.recurrent(); }
  int32_t seqs_max() const { return seqs_max_; }

 private:
  BatchEngine& e_;
  int32_t seq_;
  int32_t seqs_max_ = 0;
};

}  // namespace rocky::runtime
