// A generation session: one model, one context (its KV cache) over a backend that may be shared
// with other sessions (the weights are loaded once per backend); the ubatch loop.
//
// Prefill splits the tokens into ubatches of at most n_ubatch tokens (each one graph + plan +
// compute); decode is a 1-token ubatch. A graph depends on n_past only through Graph::n_past, so
// graphs and plans are built once per (tokens, logits) shape and reused with n_past updated
// (decode builds nothing after its first token). Positions run 0 .. n_ctx-1; going past n_ctx is a
// rocky::Error naming the sizes and the fix (-c).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "graph/planner.hpp"
#include "model/model.hpp"

namespace rocky::runtime {

// Index of the first NaN/inf in `v` (exponent bits all ones, so -ffast-math cannot fold it away),
// or k_all_finite. The common all-finite case is one branch-free (vectorised) pass.
constexpr size_t k_all_finite = SIZE_MAX;
size_t first_nonfinite(std::span<const float> v);

// Host wall time of eval() outside the backend's compute(), accumulated (reset_timing() clears it).
struct EvalTiming {
  double graph_ms = 0;    // model::build_graph
  double plan_ms = 0;     // graph::plan_arena
  double compute_ms = 0;  // Context::compute (its own split: Context::stats().host)
  int64_t ubatches = 0;
};

struct SessionOptions {
  int32_t n_ctx = 0;       // KV positions; 0 = the model's n_ctx_train, capped at 4096
  int32_t n_ubatch = 512;  // max tokens per ubatch (-ub); capped to what the backend's bindings
                           // hold (Backend::max_ubatch_tokens; said once on stderr)
  // Every ubatch's logits are checked for NaN/inf (one pass over the logits copied to the host);
  // a non-finite logit is a rocky::Error naming the position and the first non-finite node.
  bool check_finite = true;
  // --swa-full: the sliding-window layers keep KV for every position (n_ctx cells) instead of a
  // ring of window + n_ubatch cells (model::Model::swa_ring; graph.hpp KvShape).
  bool swa_full = false;
};

// A sliding-window ring (graph.hpp KvShape) holds positions from `live_from` on (older ones were
// overwritten); the first n positions can be kept (truncate to n, then evaluate position n) when
// what position n reads of them, (n − window, n), is still there.
inline bool ring_keeps(int32_t n, int32_t live_from, int32_t window) {
  return n == 0 || live_from == 0 || n - window + 1 >= live_from;
}

// Progress of a prefill: tokens done so far, total.
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

class Session {
 public:
  // Loads the model's weights into `be` (tensors already there are skipped) and makes this session's
  // own context (KV cache of n_ctx positions) on it: any number of sessions may share one backend
  // (a std::unique_ptr<Backend> converts: the session then owns its backend alone). `m` must outlive
  // the session.
  Session(const model::Model& m, std::shared_ptr<backend::Backend> be, SessionOptions o);

  // Appends `tokens` to the context and evaluates them. Returns the logits of the last token
  // (n_vocab floats), or with all_logits those of every token, row-major [tokens.size()][n_vocab].
  // A NaN/inf logit is a rocky::Error (SessionOptions::check_finite).
  std::vector<float> eval(std::span<const int32_t> tokens, bool all_logits = false, const ProgressFn& progress = {});
  // The same into `out` (resized, its capacity kept: a decode loop that passes the same vector
  // allocates its n_vocab floats once instead of once per token — : 608 KB of fresh pages per
  // token for a 151,936-token vocabulary).
  void eval_into(std::span<const int32_t> tokens, bool all_logits, const ProgressFn& progress, std::vector<float>& out);
  // Speculative verification: eval_into with every row's logits, its ubatch laid out as a batched
  // step's (each token's position in the per-token table, graph::Graph::pos) so that its commands
  // do not depend on n_past and a GPU context replays them from one verification to the next.
  void eval_draft(std::span<const int32_t> tokens, std::vector<float>& out);

  // Embeddings: evaluates `tokens` from an empty context (the KV cache is reset first) and
  // returns every token's hidden state after output_norm (model::Logits::EMBD), row-major
  // [tokens.size()][n_embd]. The context is left holding them (n_past = tokens.size()).
  std::vector<float> hidden_states(std::span<const int32_t> tokens);

  void reset();  // clears the KV cache, n_past = 0
  // Makes the context again (the weights stay loaded on the backend): the recovery from a device
  // fault (rocky::is_device_fault), after which the old context's buffers and command state are
  // not to be trusted. n_past = 0, checkpoints dropped. When making it fails (another fault) the
  // error propagates and the session holds no context: usable() is false until a rebuild()
  // succeeds; nothing else may be called before.
  void rebuild();
  bool usable() const { return ctx_ != nullptr; }
  // Keeps the first n positions of the context (0 ≤ n ≤ n_past); later evals overwrite the rest.
  // With a sliding-window ring, only an n that can_keep(n) (else rocky::Error).
  void truncate(int32_t n);
  bool can_keep(int32_t n) const { return n >= n_past_ || ring_keeps(n, live_from_, window_); }
  // The first position whose K/V every layer still holds: 0, or with a sliding-window ring
  // (n_ring() > 0) n_past − n_ring after a longer sequence (export_kv of older positions gives what
  // the ring's cells hold now for those layers: a block of them is not a prefix-cache block).
  int32_t live_from() const { return live_from_; }
  int32_t n_ring() const { return n_ring_; }
  // The KV cells of positions [p0, p0 + n) (p0 + n ≤ n_past) as host bytes (Context::export_kv).
  std::vector<uint8_t> export_kv(int32_t p0, int32_t n);
  // Appends n positions from host bytes made by export_kv of the same model and KV type at the
  // same positions: needs p0 == n_past; afterwards n_past = p0 + n.
  void import_kv(int32_t p0, int32_t n, std::span<const uint8_t> bytes);
  // --- Recurrent-state checkpoints (hybrid models; runtime/prefix_cache.hpp) ---
  // A recurrent state cannot be cut back (truncate), so a hybrid context returns to an earlier
  // position only through a checkpoint: the state of every recurrent layer (state_layers(), as
  // Context::export_state lays it out) right after position pos − 1.
  struct StateCheckpoint {
    int32_t pos = 0;
    std::vector<uint8_t> state;  // Context::export_state(state_layers()) bytes
  };
  // Layers whose state the graph reads (SSM_CONV / GATED_DELTA nodes), ascending; empty for a
  // pure-attention model.
  const std::vector<int32_t>& state_layers() const { return state_layers_; }
  bool recurrent() const { return !state_layers_.empty(); }
  uint64_t state_bytes() const { return ctx_->state_export_bytes(state_layers_.size()); }
  std::vector<uint8_t> export_state();  // the state after position n_past − 1
  // Sets the state to `bytes` (export_state of the same model) taken after position pos − 1, and
  // n_past = pos: positions [0, pos) of the KV cache must hold that prefix already (kept or
  // imported); 0 ≤ pos ≤ n_ctx. Checkpoints after pos are dropped.
  void import_state(int32_t pos, std::span<const uint8_t> bytes);
  // With stride B > 0 on a hybrid model, eval() ends a ubatch at the last multiple of B it reaches
  // (prompt: the last block boundary ≤ its end; decode: each token that completes a block) and
  // keeps the state there as a checkpoint. Policy (memory): at most k_max_checkpoints are held, the
  // oldest dropped first; take_checkpoints() hands them over (the prefix cache stores them with
  // their blocks), reset() drops them. Stride 0 (default) or a pure-attention model: nothing.
  static constexpr size_t k_max_checkpoints = 4;
  void set_checkpoint_stride(int32_t b) { ckpt_stride_ = b; }
  // Also keep the state at `pos` (a block boundary another prompt shares, prefix_cache.hpp) when
  // an eval() reaches it with a stride set; forgotten by reset() and take_checkpoints().
  void checkpoint_at(int32_t pos) { ckpt_extra_.push_back(pos); }
  int32_t checkpoint_stride() const { return ckpt_stride_; }
  const std::vector<StateCheckpoint>& checkpoints() const { return ckpts_; }
  std::vector<StateCheckpoint> take_checkpoints() {
    ckpt_extra_.clear();
    return std::exchange(ckpts_, {});
  }
  int32_t n_past() const { return n_past_; }
  int32_t n_ctx() const { return n_ctx_; }
  // Tokens per prefill ubatch: -ub, capped to what the backend holds (all_logits: every column of
  // the logits too).
  int32_t n_ubatch(bool all_logits);
  int32_t n_vocab() const { return model_.hparams().n_vocab; }
  backend::Backend& backend() { return *be_; }
  const std::shared_ptr<backend::Backend>& shared_backend() const { return be_; }
  backend::Context& context() { return *ctx_; }
  const backend::Context& context() const { return *ctx_; }
  const EvalTiming& timing() const { return timing_; }
  void reset_timing() { timing_ = {}; }

 private:
  const model::Model& model_;
  std::shared_ptr<backend::Backend> be_;
  std::unique_ptr<backend::Context> ctx_;  // destroyed before be_ (declared after it)
  backend::ContextOptions ctx_opts_;       // what ctx_ was made with (rebuild)
  int32_t n_ctx_ = 0;
  int32_t n_ring_ = 0, window_ = 0, live_from_ = 0;  // the sliding-window ring (0: none), live_from()
  int32_t n_ubatch_ = 0;
  int32_t n_past_ = 0;
  bool check_finite_ = true;
  int64_t ub_cap_[2] = {0, 0};  // [all_logits] Backend::max_ubatch_tokens, 0 = not asked yet
  std::string ub_cap_why_;
  bool ub_cap_said_ = false;
  EvalTiming timing_;
  std::vector<int32_t> state_layers_;
  int32_t ckpt_stride_ = 0;             // 0 = no checkpoints
  std::vector<StateCheckpoint> ckpts_;  // ascending pos, all ≤ n_past_
  std::vector<int32_t> ckpt_extra_;     // checkpoint_at() positions
  // eval_into's loop; `all` is ALL (every token's logits), EMBD (every token's hidden state) or
  // LAST (the last token's logits; earlier ubatches compute none).
  // table: positions in the per-token table (eval_draft).
  void run_ubatches(std::span<const int32_t> tokens, model::Logits all, const ProgressFn& progress,
                    std::vector<float>& out, bool table = false);
  // A non-finite logit at `index` of the ubatch just computed (graph `g`, tokens `toks`): fails
  // naming the position and the first non-finite node (that ubatch re-run unshared).
  [[noreturn]] void fail_nonfinite(graph::Graph& g, std::span<const int32_t> toks, std::span<const float> logits,
                                   size_t index, bool all);
  struct Shape {
    graph::Graph g;
    graph::Plan p;
  };
  std::map<std::tuple<int32_t, int, bool>, Shape> shapes_;  // (n_tokens, model::Logits, table) → graph + plan
};

}  // namespace rocky::runtime
