// Multi-sequence ubatches (graph::Graph::seq / pos, ContextOptions::n_seq): several
// sequences at different depths in one ubatch — prefill chunks and decode tokens mixed, sequences
// leaving and coming back, a sequence region left unused — through the backend contract.
//  - every token's logits equal that sequence's logits alone (one single-sequence context, the
//    ordinary prefill + decode): on the CPU oracle, and on Vulkan (f32 kernels: tight; the int8
//    path: the q8_1 bound);
//  - Vulkan batched equals the CPU oracle batched on the same ubatches;
//  - the replayed multi-sequence step equals the recorded one bit for bit;
//  - a step that starts with ≥ 8 prompt tokens of one sequence runs their attention as an ordinary
//    ubatch over that sequence's cells (the tiled kernel on lavapipe), the rest per token;
//  - Logits::LAST with n_out gives the last n_out tokens' logits;
//  - bad (seq, pos) tables are errors naming the token.
// Models: the synth qwen2 (GQA, q/k/v biases), llama and gemma3 (sliding window) files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/vulkan/vulkan_backend.hpp"
#include "common/shared.hpp"
#include "core/error.hpp"
#include "model/model.hpp"
#include "runtime/options.hpp"

using namespace rocky;

namespace {

// One part of a step: `n` tokens of sequence `seq` (its next ones).
struct Part {
  int32_t seq, n;
};
using Step = std::vector<Part>;

// Per sequence: its token list; per (seq, index): the logits of that token.
using Logits = std::map<std::pair<int32_t, int32_t>, std::vector<float>>;

struct Plan {
  std::map<int32_t, std::vector<int32_t>> tokens;  // per sequence, all its tokens in order
  std::vector<Step> steps;
};

// Three sequences (ids 0, 2, 3 of a 4-sequence context: sequence 1's cells stay unused) at
// different depths: long prefills cut into chunks next to decode tokens, one sequence absent
// for some steps, the order of the parts changing.
// deep: sequence 0's prompt is 75 tokens (split decode attention at depth with a 64-position chunk).
Plan make_plan(int32_t n_vocab, uint32_t seed, bool deep = false) {
  Plan p;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, n_vocab - 1);
  p.steps = {
      {{0, deep ? 45 : 13}, {3, 3}},         // prefill chunks of two sequences
      {{0, deep ? 30 : 9}, {2, 5}, {3, 1}},  // sequence 0's second chunk, sequence 2's prompt, one token of 3
      {{3, 1}, {0, 1}, {2, 1}},              // decode, all three
      {{2, 1}, {0, 1}},                      // sequence 3 absent
      {{2, 7}, {0, 1}, {3, 1}},              // sequence 2 gets more prompt while the others decode
      {{0, 1}, {3, 1}, {2, 1}},              // decode
      {{3, 1}, {2, 1}, {0, 1}},              // decode
      {{0, 1}},                              // one sequence alone
      {{2, 1}, {3, 1}, {0, 1}},              // decode: three steps of one shape (recorded once, replayed twice)
      {{3, 1}, {0, 1}, {2, 1}},
      {{0, 1}, {2, 1}, {3, 1}},
  };
  for (const Step& s : p.steps)
    for (const Part& x : s)
      for (int32_t i = 0; i < x.n; ++i) p.tokens[x.seq].push_back(tok(rng));
  return p;
}

constexpr int32_t k_n_seq = 4, k_n_ctx = 96;

// Runs the plan's steps as multi-sequence ubatches with every token's logits.
Logits run_batched(const model::Model& m, backend::Backend& be, const Plan& plan, bool last_out = false,
                   uint64_t* replays = nullptr) {
  graph::Graph g0 = m.build_graph({1, 0, k_n_ctx, model::Logits::LAST});
  be.load_weights(g0.weights());
  auto ctx = be.make_context(backend::ContextOptions{g0.kv, k_n_seq});
  const int32_t nv = m.hparams().n_vocab;
  std::map<int32_t, int32_t> done;  // per sequence: tokens evaluated
  Logits out;
  for (const Step& s : plan.steps) {
    std::vector<int32_t> toks, seq, pos;
    std::vector<std::pair<int32_t, int32_t>> who;
    for (const Part& x : s)
      for (int32_t i = 0; i < x.n; ++i) {
        const int32_t at = done[x.seq]++;
        toks.push_back(plan.tokens.at(x.seq)[size_t(at)]);
        seq.push_back(x.seq);
        pos.push_back(at);
        who.emplace_back(x.seq, at);
      }
    const int32_t n = int32_t(toks.size());
    // last_out: the logits of the last token of every part that ends the step's decode tail
    // (Logits::LAST, n_out = the parts of one token at the end), else every token's.
    int32_t n_out = n;
    if (last_out) {
      n_out = 0;
      for (auto it = s.rbegin(); it != s.rend() && it->n == 1; ++it) ++n_out;
      n_out = std::max(n_out, 1);
    }
    model::UbatchSpec u{n, 0, k_n_ctx, last_out ? model::Logits::LAST : model::Logits::ALL};
    u.n_out = n_out;
    graph::Graph g = m.build_graph(u);
    g.seq = seq;
    g.pos = pos;
    std::vector<float> lg(size_t(nv) * size_t(n_out));
    ctx->compute(g, graph::plan_arena(g), toks, lg);
    for (int32_t j = n - n_out; j < n; ++j)
      out[who[size_t(j)]].assign(lg.begin() + ptrdiff_t(j - (n - n_out)) * nv,
                                 lg.begin() + ptrdiff_t(j - (n - n_out) + 1) * nv);
  }
  if (replays) *replays = ctx->stats().host.replays;
  return out;
}

// Each sequence alone in a single-sequence context: its first step's part as one prefill ubatch
// (every token's logits), then one token per ubatch.
Logits run_alone(const model::Model& m, backend::Backend& be, const Plan& plan) {
  const int32_t nv = m.hparams().n_vocab;
  Logits out;
  for (const auto& [sq, toks] : plan.tokens) {
    graph::Graph g0 = m.build_graph({1, 0, k_n_ctx, model::Logits::LAST});
    be.load_weights(g0.weights());
    auto ctx = be.make_context(backend::ContextOptions{g0.kv, 1});
    int32_t first = 0;  // the first part of this sequence in the plan
    for (const Step& s : plan.steps) {
      for (const Part& x : s)
        if (x.seq == sq) first = x.n;
      if (first) break;
    }
    graph::Graph g = m.build_graph({first, 0, k_n_ctx, model::Logits::ALL});
    std::vector<float> lg(size_t(nv) * size_t(first));
    ctx->compute(g, graph::plan_arena(g), std::span<const int32_t>(toks.data(), size_t(first)), lg);
    for (int32_t j = 0; j < first; ++j)
      out[{sq, j}].assign(lg.begin() + ptrdiff_t(j) * nv, lg.begin() + ptrdiff_t(j + 1) * nv);
    for (int32_t i = first; i < int32_t(toks.size()); ++i) {
      graph::Graph gd = m.build_graph({1, i, k_n_ctx, model::Logits::LAST});
      std::vector<float> l1(static_cast<size_t>(nv));
      ctx->compute(gd, graph::plan_arena(gd), std::span<const int32_t>(toks.data() + i, 1), l1);
      out[{sq, i}] = l1;
    }
  }
  return out;
}

// Largest |a − b| over the tokens both hold; every token of `ref` must be in `a`.
double worst(const Logits& a, const Logits& ref, size_t* compared = nullptr) {
  double w = 0;
  size_t n = 0;
  for (const auto& [k, r] : ref) {
    auto it = a.find(k);
    if (it == a.end()) continue;
    EXPECT_EQ(it->second.size(), r.size());
    for (size_t i = 0; i < r.size() && i < it->second.size(); ++i)
      w = std::max(w, std::abs(double(it->second[i]) - double(r[i])));
    ++n;
  }
  if (compared) *compared = n;
  return w;
}

double max_abs(const Logits& a) {
  double w = 0;
  for (const auto& [k, r] : a)
    for (float x : r) w = std::max(w, std::abs(double(x)));
  return w;
}

std::unique_ptr<vulkan::VulkanBackend> make_vk(bool f32_kernels, bool kv_f16, bool replay, bool host_io,
                                               const char* split = nullptr, const char* attn = nullptr) {
  vulkan::VulkanOptions o;
  // split: key positions per split (ROCKY_TUNE's attn_rule.split_chunk); attn: ROCKY_SWITCH attn=….
  o.lab = runtime::parse_lab(split ? std::string(R"({"attn_rule": {"split_chunk": )") + split + "}}" : "",
                             attn ? std::string("attn=") + attn : "");
  o.validation = true;
  o.persist_pipeline_cache = false;
  o.kv_f16 = kv_f16;
  o.replay_decode = replay;
  o.host_io = host_io;
  if (f32_kernels) o.matmul = vulkan::ops::MatmulPath::MM;
  return std::make_unique<vulkan::VulkanBackend>(o);
}

std::unique_ptr<model::Model> load(const char* file) {
  return model::Model::load(test::shared_path(std::string("reference/models/synth/") + file));
}

const char* const k_models[] = {"synth-qwen2-q4_k_m.gguf", "synth-llama-q4_k_m.gguf", "synth-gemma3-q4_k_m.gguf"};

TEST(MultiSeq, CpuBatchedEqualsAlone) {
  for (const char* f : k_models) {
    SCOPED_TRACE(f);
    auto m = load(f);
    const Plan plan = make_plan(m->hparams().n_vocab, 7);
    auto cpu = backend::cpu::make_cpu_backend();
    const Logits alone = run_alone(*m, *cpu, plan);
    const Logits batched = run_batched(*m, *cpu, plan);
    size_t n = 0;
    const double w = worst(batched, alone, &n);
    EXPECT_EQ(n, alone.size());
    EXPECT_GT(max_abs(alone), 0.1) << "logits are not all ~0";
    std::printf("%s cpu: %zu tokens, batched vs alone max |d| %.3g (max |logit| %.3g)\n", f, n, w, max_abs(alone));
    EXPECT_LE(w, 1e-4) << "a sequence's logits depend on the others in its ubatch";
  }
}

TEST(MultiSeq, CpuLastNOut) {
  auto m = load("synth-qwen2-q4_k_m.gguf");
  const Plan plan = make_plan(m->hparams().n_vocab, 9);
  auto cpu = backend::cpu::make_cpu_backend();
  const Logits all = run_batched(*m, *cpu, plan);
  const Logits last = run_batched(*m, *cpu, plan, /*last_out=*/true);
  size_t n = 0;
  EXPECT_LE(worst(last, all, &n), 1e-5);
  EXPECT_EQ(n, last.size());
  EXPECT_GE(last.size(), 15u);
}

void check_vulkan(const char* f, bool f32_kernels, bool kv_f16, bool host_io, const char* split = nullptr,
                  const char* attn = nullptr) {
  SCOPED_TRACE(std::string(f) + (f32_kernels ? " f32 kernels" : " int8 path") + (kv_f16 ? " f16 KV" : " f32 KV") +
               (host_io ? " host_io" : "") + (split ? " split " + std::string(split) : "") +
               (attn ? " attn=" + std::string(attn) : ""));
  auto m = load(f);
  const Plan plan = make_plan(m->hparams().n_vocab, 11, split != nullptr);
  auto cpu = backend::cpu::make_cpu_backend();
  const Logits cpu_batched = run_batched(*m, *cpu, plan);
  auto vk_rec = make_vk(f32_kernels, kv_f16, false, host_io, split, attn);
  const Logits rec = run_batched(*m, *vk_rec, plan);
  EXPECT_EQ(vk_rec->instance().error_count(), 0u) << "Vulkan validation errors";
  auto vk = make_vk(f32_kernels, kv_f16, true, host_io, split, attn);
  uint64_t replays = 0;
  const Logits batched = run_batched(*m, *vk, plan, false, &replays);
  EXPECT_EQ(vk->instance().error_count(), 0u) << "Vulkan validation errors";
  const Logits alone = run_alone(*m, *vk, plan);
  EXPECT_EQ(vk->instance().error_count(), 0u) << "Vulkan validation errors";
  ASSERT_EQ(batched.size(), rec.size());
  for (const auto& [k, v] : batched)
    ASSERT_EQ(v, rec.at(k)) << "sequence " << k.first << " token " << k.second << ": replay is not bit-exact";
  size_t n_cpu = 0, n_alone = 0;
  const double w_cpu = worst(batched, cpu_batched, &n_cpu), w_alone = worst(batched, alone, &n_alone);
  std::printf(
      "%s f32=%d kv_f16=%d host_io=%d: %zu tokens, vs CPU %.3g, vs alone %.3g (max |logit| %.3g), %llu replays\n", f,
      int(f32_kernels), int(kv_f16), int(host_io), n_cpu, w_cpu, w_alone, max_abs(cpu_batched),
      (unsigned long long)replays);
  EXPECT_EQ(n_cpu, cpu_batched.size());
  EXPECT_EQ(n_alone, alone.size());
  EXPECT_GE(replays, 2u) << "steps of one shape are replayed (the table carries the positions)";
  // f32 kernels: only summation order differs (an f16 cache rounds K/V: 1e-2); the int8 path: the
  // q8_1 bound of every such comparison (../shared/reference/README.md: ≤ 0.35 absolute).
  const double tol_cpu = f32_kernels ? (kv_f16 ? 2e-2 : 2e-3) : 0.35;
  EXPECT_LE(w_cpu, tol_cpu) << "Vulkan batched vs the CPU oracle batched";
  EXPECT_LE(w_alone, f32_kernels ? tol_cpu : 0.35) << "Vulkan batched vs each sequence alone";
}

// (qwen2 on the f32 kernels: VulkanF16KvHostIo, VulkanSplitAtDepth, VulkanLastNOut.)
TEST(MultiSeq, VulkanF32Kernels) { check_vulkan("synth-gemma3-q4_k_m.gguf", true, false, false); }
TEST(MultiSeq, VulkanInt8Path) { check_vulkan("synth-qwen2-q4_k_m.gguf", false, false, false); }
TEST(MultiSeq, VulkanF16KvHostIo) { check_vulkan("synth-qwen2-q4_k_m.gguf", true, true, true); }
TEST(MultiSeq, VulkanInt8HostIo) { check_vulkan("synth-llama-q4_k_m.gguf", false, false, true); }
// Decode steps at depth 75+ with 64-position chunks: the split kernel with per-token key ranges
// (one sequence at depth, the others in its first chunk: their later chunks write the empty state).
TEST(MultiSeq, VulkanSplitAtDepth) {
  check_vulkan("synth-qwen2-q4_k_m.gguf", true, false, false, "64");
  check_vulkan("synth-gemma3-q4_k_m.gguf", false, true, false, "64");  // int8 path, f16 KV, sliding window
}
// The same with attention_decode (the GPUs' kernel, forced on lavapipe; ≤ 64 tokens): its decode
// steps split per token, and sequence 0's 30-token prompt chunk at position 45 — the lead run, with
// n_past from the push constant — splits too: the scratch is sized for the lead's plan as well.
TEST(MultiSeq, VulkanSplitAtDepthGqaKernel) {
  check_vulkan("synth-qwen2-q4_k_m.gguf", true, false, false, "64", "decode");
  check_vulkan("synth-gemma3-q4_k_m.gguf", false, true, false, "32", "decode");
}

TEST(MultiSeq, VulkanLastNOut) {
  auto m = load("synth-qwen2-q4_k_m.gguf");
  const Plan plan = make_plan(m->hparams().n_vocab, 13);
  auto vk = make_vk(true, false, true, false);
  const Logits all = run_batched(*m, *vk, plan);
  const Logits last = run_batched(*m, *vk, plan, /*last_out=*/true);
  size_t n = 0;
  EXPECT_LE(worst(last, all, &n), 2e-3);
  EXPECT_EQ(n, last.size());
  EXPECT_EQ(vk->instance().error_count(), 0u);
}

// A batched decode step costs the dispatches of one decode token: one token of each of 4
// sequences runs exactly as many dispatches as a 1-token decode in a single-sequence context (the
// matmuls as multi-column matvecs, rope + KV stores fused (rope_kv), one attention per layer over
// all the step's tokens) and as a 1-token multi-sequence step, and both are replayed after the
// first step (nothing recorded). Dispatch counts are ContextStats::host.dispatches per compute.
TEST(MultiSeq, BatchedStepDispatchesEqualOneToken) {
  for (const char* f : {"synth-qwen2-q4_k_m.gguf", "synth-gemma3-q4_k_m.gguf"}) {
    SCOPED_TRACE(f);
    auto m = load(f);
    auto vk = make_vk(false, true, true, false);  // the GPU defaults: int8 path, f16 KV, replay
    graph::Graph g0 = m->build_graph({1, 0, k_n_ctx, model::Logits::LAST});
    vk->load_weights(g0.weights());
    const int32_t nv = m->hparams().n_vocab, n_prompt = 5;
    std::vector<int32_t> prompt{3, 1, 4, 1, 5};
    // dispatches and replays of `steps` computes of graph g (tokens: tok, the same each time)
    auto per_step = [&](backend::Context& ctx, graph::Graph& g, std::vector<int32_t> tok, int32_t steps,
                        bool advance_n_past) {
      const backend::HostTiming h0 = ctx.stats().host;
      std::vector<float> lg(size_t(nv) * size_t(g.n_tokens));
      for (int32_t i = 0; i < steps; ++i) {
        ctx.compute(g, graph::plan_arena(g), tok, lg);
        if (advance_n_past) {
          ++g.n_past;
        } else {
          for (auto& x : g.pos) ++x;
        }
      }
      const backend::HostTiming h1 = ctx.stats().host;
      return std::make_pair((h1.dispatches - h0.dispatches) / uint64_t(steps), h1.replays - h0.replays);
    };
    // One sequence, the ordinary decode (n_past in the step buffer).
    auto c1 = vk->make_context(backend::ContextOptions{g0.kv, 1});
    graph::Graph gp = m->build_graph({n_prompt, 0, k_n_ctx, model::Logits::NONE});
    c1->compute(gp, graph::plan_arena(gp), prompt, {});
    graph::Graph gd = m->build_graph({1, n_prompt, k_n_ctx, model::Logits::LAST});
    const auto [d1, r1] = per_step(*c1, gd, {7}, 3, true);
    // Four sequences: each one's prompt, then steps of one token of each (and of one sequence).
    auto c4 = vk->make_context(backend::ContextOptions{g0.kv, 4});
    for (int32_t sq = 0; sq < 4; ++sq) {
      graph::Graph g = m->build_graph({n_prompt, 0, k_n_ctx, model::Logits::NONE});
      g.seq.assign(size_t(n_prompt), sq);
      for (int32_t j = 0; j < n_prompt; ++j) g.pos.push_back(j);
      c4->compute(g, graph::plan_arena(g), prompt, {});
    }
    model::UbatchSpec u4{4, 0, k_n_ctx, model::Logits::LAST};
    u4.n_out = 4;
    graph::Graph g4 = m->build_graph(u4);
    g4.seq = {2, 0, 3, 1};
    g4.pos.assign(4, n_prompt);
    const auto [d4, r4] = per_step(*c4, g4, {7, 8, 9, 10}, 3, false);
    graph::Graph gm = m->build_graph({1, 0, k_n_ctx, model::Logits::LAST});
    gm.seq = {1};
    gm.pos = {n_prompt + 3};
    const auto [dm, rm] = per_step(*c4, gm, {11}, 3, false);
    std::printf("%s: dispatches per step: decode %llu, 4-sequence step %llu, 1-sequence step %llu\n", f,
                (unsigned long long)d1, (unsigned long long)d4, (unsigned long long)dm);
    EXPECT_EQ(d4, d1) << "a 4-sequence step runs the dispatches of a 1-token decode";
    EXPECT_EQ(dm, d1);
    EXPECT_EQ(r1, 2u);
    EXPECT_EQ(r4, 2u) << "the 4-sequence step is replayed after its first recording";
    EXPECT_EQ(rm, 2u);
    EXPECT_EQ(vk->instance().error_count(), 0u);
  }
}

TEST(MultiSeq, BadTablesAreErrors) {
  auto m = load("synth-qwen2-q4_k_m.gguf");
  auto cpu = backend::cpu::make_cpu_backend();
  auto vk = make_vk(true, false, true, false);
  for (backend::Backend* be : {static_cast<backend::Backend*>(cpu.get()), static_cast<backend::Backend*>(vk.get())}) {
    graph::Graph g = m->build_graph({3, 0, k_n_ctx, model::Logits::LAST});
    be->load_weights(g.weights());
    auto ctx = be->make_context(backend::ContextOptions{g.kv, 2});
    std::vector<int32_t> toks{1, 2, 3};
    std::vector<float> lg(size_t(m->hparams().n_vocab));
    const graph::Plan p = graph::plan_arena(g);
    auto expect_error = [&](std::vector<int32_t> seq, std::vector<int32_t> pos, const char* what) {
      g.seq = std::move(seq);
      g.pos = std::move(pos);
      try {
        ctx->compute(g, p, toks, lg);
        ADD_FAILURE() << "no error for " << what;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      }
    };
    expect_error({0, 2, 1}, {0, 0, 0}, "sequence 2 outside");
    expect_error({0, 1, 1}, {0, 5, k_n_ctx}, "position 96 outside");
    expect_error({1, 1, 0}, {4, 4, 4}, "sequence 1 position 4 appears twice");
    expect_error({0, 0}, {0, 1}, "2 positions and 2 sequence ids for a ubatch of 3");
    // A good table after the errors still computes.
    g.seq = {1, 0, 1};
    g.pos = {0, 0, 1};
    EXPECT_NO_THROW(ctx->compute(g, p, toks, lg));
  }
}

}  // namespace
