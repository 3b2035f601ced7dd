// Session ubatch loop (see session.hpp).
#include "runtime/session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "core/error.hpp"

namespace rocky::runtime {

namespace {
using Clock = std::chrono::steady_clock;
double ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

}  // namespace

size_t first_nonfinite(std::span<const float> v) {
  // x − x is +0 (all bits 0) for every finite x and NaN for ±inf and NaN: one subtraction and an OR
  // per value, in eight independent lanes (≈ 2× the exponent-mask compare it replaced).
  const size_t n = v.size();
  std::array<uint32_t, 8> acc{};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (size_t j = 0; j < 8; ++j) {
      const float d = v[i + j] - v[i + j];
      uint32_t b;
      std::memcpy(&b, &d, 4);
      acc[j] |= b;
    }
  uint32_t any = 0;
  for (uint32_t a : acc) any |= a;
  for (; i < n; ++i) {
    const float d = v[i] - v[i];
    uint32_t b;
    std::memcpy(&b, &d, 4);
    any |= b;
  }
  if (any == 0) return k_all_finite;
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t b;
    std::memcpy(&b, &v[i], 4);
    if ((b & 0x7f800000u) == 0x7f800000u) return i;
  }
  return k_all_finite;
}

Session::Session(const model::Model& m, std::shared_ptr<backend::Backend> be, SessionOptions o)
    : model_(m), be_(std::move(be)) {
  const auto& hp = m.hparams();
  n_ctx_ = o.n_ctx > 0 ? o.n_ctx : std::min(hp.n_ctx_train, 4096);
  if (o.n_ctx < 0) fail("context size -c must be positive (got {})", o.n_ctx);
  if (o.n_ubatch <= 0) fail("ubatch size -ub must be positive (got {})", o.n_ubatch);
  n_ubatch_ = o.n_ubatch;
  check_finite_ = o.check_finite;
  n_ring_ = m.swa_ring(n_ctx_, n_ubatch_, o.swa_full);
  window_ = hp.n_swa;
  // As llama.cpp: a context longer than the one trained is allowed, with a warning.
  if (o.n_ctx > hp.n_ctx_train && hp.n_ctx_train > 0) {
    fmt::print(stderr,
               "rocky: warning: -c {} is above the model's context_length {}: positions past {} were not trained "
               "(possible training context overflow)\n",
               o.n_ctx, hp.n_ctx_train, hp.n_ctx_train);
  }
  // Every weight any ubatch graph reads: the graph's weight list does not depend on N.
  graph::Graph g = m.build_graph(model::UbatchSpec{1, 0, n_ctx_, model::Logits::LAST, 1, n_ring_});
  auto w = g.weights();
  if (!be_) fail("session: no backend");
  be_->load_weights(w);
  ctx_opts_ = backend::ContextOptions{g.kv, 1};
  ctx_ = be_->make_context(ctx_opts_);
  for (const graph::Node& n : g.nodes)
    if ((n.op == graph::Op::SSM_CONV || n.op == graph::Op::GATED_DELTA) && n.layer >= 0)
      state_layers_.push_back(n.layer);
  std::sort(state_layers_.begin(), state_layers_.end());
  state_layers_.erase(std::unique(state_layers_.begin(), state_layers_.end()), state_layers_.end());
}

void Session::reset() {
  ctx_->reset();
  n_past_ = 0;
  live_from_ = 0;
  ckpts_.clear();
  ckpt_extra_.clear();
}

void Session::rebuild() {
  n_past_ = 0;
  live_from_ = 0;
  ckpts_.clear();
  ckpt_extra_.clear();
  ctx_.reset();  // its buffers go before the new ones are asked for
  ctx_ = be_->make_context(ctx_opts_);
}

std::vector<uint8_t> Session::export_state() {
  if (!recurrent()) fail("export_state: the model has no recurrent state");
  std::vector<uint8_t> out(static_cast<size_t>(state_bytes()));
  ctx_->export_state(state_layers_, out);
  return out;
}

void Session::import_state(int32_t pos, std::span<const uint8_t> bytes) {
  if (!recurrent()) fail("import_state: the model has no recurrent state");
  if (pos < 0 || pos > n_ctx_) fail("import_state: position {} outside the context ({})", pos, n_ctx_);
  if (bytes.size() != state_bytes())
    fail("import_state: a checkpoint of {} bytes given, this model's state has {}", bytes.size(), state_bytes());
  ctx_->import_state(state_layers_, bytes);
  n_past_ = pos;
  while (!ckpts_.empty() && ckpts_.back().pos > pos) ckpts_.pop_back();
}

int32_t Session::n_ubatch(bool all_logits) {
  int64_t& cap = ub_cap_[all_logits ? 1 : 0];
  if (cap == 0) {
    cap = INT64_MAX;
    if (n_ctx_ >= 2) {  // a 2-token graph tells per-token node outputs from fixed ones
      graph::Graph probe = model_.build_graph(
          model::UbatchSpec{2, 0, n_ctx_, all_logits ? model::Logits::ALL : model::Logits::LAST, 1, n_ring_});
      cap = std::max<int64_t>(1, be_->max_ubatch_tokens(probe, &ub_cap_why_));
    }
  }
  return static_cast<int32_t>(std::min<int64_t>(n_ubatch_, cap));
}

void Session::fail_nonfinite(graph::Graph& g, std::span<const int32_t> toks, std::span<const float> logits,
                             size_t index, bool all) {
  const size_t nv = static_cast<size_t>(n_vocab());
  const size_t col = all ? index / nv : static_cast<size_t>(g.n_tokens) - 1;
  const float v = logits[index];
  // Which node: the same ubatch again with every node in its own arena region (the KV columns it
  // writes get the same values), read back node by node. Best effort: the error stands without it.
  std::string node;
  try {
    graph::Plan p = graph::plan_arena(g, 256, /*reuse=*/false);
    std::vector<float> out(logits.size());
    ctx_->compute(g, p, toks, out);
    for (int32_t i = 0; i < static_cast<int32_t>(g.nodes.size()) && node.empty(); ++i) {
      if (p.offset[static_cast<size_t>(i)] == graph::k_no_offset) continue;
      std::vector<float> x;
      try {
        x = ctx_->read_node(g, p, i);  // a node the backend did not write in f32 (Vulkan's q8_1-only) throws
      } catch (const Error&) {
        continue;
      }
      if (first_nonfinite(x) == k_all_finite) continue;
      const graph::Node& n = g.nodes[static_cast<size_t>(i)];
      node = fmt::format("; first non-finite node: {} ({}{})", n.name, graph::op_name(n.op),
                         n.weight ? " of " + n.weight->name : std::string());
    }
  } catch (const std::exception&) {}
  fail(
      "non-finite logits ({}) at position {} (token {}), output id {}{}: a weight or activation is NaN/inf or "
      "overflowed (corrupt model file?); rocky verify --bisect compares every node with the CPU",
      v != v ? "NaN" : "inf", g.n_past + static_cast<int64_t>(col), toks[col], index % nv, node);
}

void Session::truncate(int32_t n) {
  if (n < 0 || n > n_past_) fail("truncate: {} positions asked, the context holds {}", n, n_past_);
  if (n < n_past_ && ctx_->kv().recurrent()) {
    fail(
        "truncate: the model's recurrent (linear-attention) state cannot be cut back from {} to {} positions; "
        "reset and evaluate the prefix again",
        n_past_, n);
  }
  if (!can_keep(n))
    fail(
        "truncate: the sliding-window layers' KV ring ({} cells) no longer holds positions {} … {} that position {} "
        "reads (it holds {} on); reset and evaluate the prefix again, or run with --swa-full",
        n_ring_, std::max(0, n - window_ + 1), n - 1, n, live_from_);
  n_past_ = n;
  if (n == 0) live_from_ = 0;
}

std::vector<uint8_t> Session::export_kv(int32_t p0, int32_t n) {
  if (p0 < 0 || n < 0 || p0 + n > n_past_)
    fail("export_kv: positions [{}, {}) not all in the context ({} held)", p0, p0 + n, n_past_);
  std::vector<uint8_t> out(static_cast<size_t>(ctx_->kv_export_bytes(n)));
  ctx_->export_kv(p0, n, out);
  return out;
}

void Session::import_kv(int32_t p0, int32_t n, std::span<const uint8_t> bytes) {
  if (p0 != n_past_) fail("import_kv: positions from {} given, the context holds {}", p0, n_past_);
  if (n < 0 || p0 + n > n_ctx_) fail("import_kv: {} positions from {} do not fit the context ({})", n, p0, n_ctx_);
  ctx_->import_kv(p0, n, bytes);
  n_past_ = p0 + n;
  if (n_ring_ > 0) live_from_ = std::max(live_from_, n_past_ - n_ring_);
}

std::vector<float> Session::eval(std::span<const int32_t> tokens, bool all_logits, const ProgressFn& progress) {
  std::vector<float> out;
  eval_into(tokens, all_logits, progress, out);
  return out;
}

void Session::eval_into(std::span<const int32_t> tokens, bool all_logits, const ProgressFn& progress,
                        std::vector<float>& out) {
  run_ubatches(tokens, all_logits ? model::Logits::ALL : model::Logits::LAST, progress, out);
}

std::vector<float> Session::hidden_states(std::span<const int32_t> tokens) {
  reset();
  std::vector<float> out;
  run_ubatches(tokens, model::Logits::EMBD, {}, out);
  return out;
}

void Session::eval_draft(std::span<const int32_t> tokens, std::vector<float>& out) {
  run_ubatches(tokens, model::Logits::ALL, {}, out, true);
}

void Session::run_ubatches(std::span<const int32_t> tokens, model::Logits all, const ProgressFn& progress,
                           std::vector<float>& out, bool table) {
  const bool all_logits = all != model::Logits::LAST;
  const bool embd = all == model::Logits::EMBD;
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) fail("eval: no tokens");
  if (n_past_ + n > n_ctx_) {
    fail("{} tokens do not fit in the context: {} already used of {} (raise -c)", n, n_past_, n_ctx_);
  }
  const int64_t n_vocab = embd ? model_.hparams().n_embd : model_.hparams().n_vocab;  // floats per output row
  out.resize(static_cast<size_t>((all_logits ? n : 1) * n_vocab));
  const int32_t n_ub = n > 1 ? n_ubatch(all_logits) : n_ubatch_;
  if (n_ub < n_ubatch_ && n > n_ub && !ub_cap_said_) {
    fmt::print(stderr, "rocky: -ub {} capped to {} tokens on {}: {}\n", n_ubatch_, n_ub, be_->name(), ub_cap_why_);
    ub_cap_said_ = true;
  }
  // Where a ubatch ends and the state is kept (relative to the eval's first token): the last
  // block boundary this eval reaches, and the positions asked for with checkpoint_at().
  std::vector<int64_t> cuts;
  if (ckpt_stride_ > 0 && recurrent()) {
    const int64_t b = (static_cast<int64_t>(n_past_) + n) / ckpt_stride_ * ckpt_stride_;
    if (b > n_past_) cuts.push_back(b - n_past_);
    for (int32_t x : ckpt_extra_)
      if (x > n_past_ && x <= n_past_ + n) cuts.push_back(x - n_past_);
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  }
  size_t next_cut = 0;
  for (int64_t i0 = 0, nt_i = 0; i0 < n; i0 += nt_i) {
    nt_i = std::min<int64_t>(n_ub, n - i0);
    if (next_cut < cuts.size() && cuts[next_cut] < i0 + nt_i) nt_i = cuts[next_cut] - i0;
    const int32_t nt = static_cast<int32_t>(nt_i);
    const bool last = i0 + nt == n;
    // Only the last ubatch's last token is needed unless all logits are asked for.
    const model::Logits want = all_logits ? all : last ? model::Logits::LAST : model::Logits::NONE;
    const auto t0 = Clock::now();
    auto key = std::make_tuple(nt, static_cast<int>(want), table);
    auto it = shapes_.find(key);
    if (it == shapes_.end()) {
      // Bounded: a run uses a few shapes (ubatch, last, decode) and, speculating, one per draft length.
      if (shapes_.size() >= 32) shapes_.clear();
      it = shapes_.emplace(key, Shape{model_.build_graph(model::UbatchSpec{nt, n_past_, n_ctx_, want, 1, n_ring_}), {}})
               .first;
    }
    graph::Graph& g = it->second.g;
    g.n_past = n_past_;
    if (table) {
      g.seq.assign(static_cast<size_t>(nt), 0);
      g.pos.resize(static_cast<size_t>(nt));
      std::iota(g.pos.begin(), g.pos.end(), n_past_);
    }
    const auto t1 = Clock::now();
    if (it->second.p.offset.empty()) it->second.p = graph::plan_arena(g);
    const graph::Plan& p = it->second.p;
    const auto t2 = Clock::now();
    std::span<float> dst;
    if (all_logits) {
      dst = std::span<float>(out).subspan(static_cast<size_t>(i0 * n_vocab), static_cast<size_t>(nt * n_vocab));
    } else if (want == model::Logits::LAST) {
      dst = std::span<float>(out);
    }
    const auto toks = tokens.subspan(static_cast<size_t>(i0), static_cast<size_t>(nt));
    ctx_->compute(g, p, toks, dst);
    if (check_finite_) {
      if (const size_t bad = first_nonfinite(dst); bad != k_all_finite) {
        if (embd)
          fail("a non-finite hidden state ({}) at position {}", dst[bad],
               n_past_ + static_cast<int64_t>(bad) / n_vocab);
        fail_nonfinite(g, toks, dst, bad, want == model::Logits::ALL);
      }
    }
    const auto t3 = Clock::now();
    timing_.graph_ms += ms(t0, t1);
    timing_.plan_ms += ms(t1, t2);
    timing_.compute_ms += ms(t2, t3);
    timing_.ubatches += 1;
    n_past_ += nt;
    if (n_ring_ > 0) live_from_ = std::max(live_from_, n_past_ - n_ring_);
    if (next_cut < cuts.size() && i0 + nt == cuts[next_cut]) {
      ++next_cut;
      if (ckpts_.size() >= k_max_checkpoints) ckpts_.erase(ckpts_.begin());
      ckpts_.push_back(StateCheckpoint{n_past_, export_state()});
    }
    if (progress) progress(i0 + nt, n);
  }
}

}  // namespace rocky::runtime
