// Two (and three) contexts on ONE Vulkan backend (backend/backend.hpp): the weights are uploaded
// once and shared, each context has its own KV cache, arena and command buffers. Sessions over the
// shared backend interleave different prompts — prefill of one, prefill of the other, then decode
// steps alternating — on stories260K (f32 kernels) and on a q4_K_M synth model (the int8 path:
// q8_1 slots, mul_mmq, epilogues), and each session's logits must equal, bit for bit, those of the
// same evals run alone on a fresh backend. Device memory (Backend::stats()) may grow by the new
// context's KV cache + arena + its small I/O buffers only: never by weights. A last case runs two
// contexts from two threads at once (the backend's pipeline cache, allocator and queue are shared).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/vulkan/ops/matmul_fast.hpp"
#include "backend/vulkan/vulkan_backend.hpp"
#include "common/shared.hpp"
#include "model/model.hpp"
#include "runtime/sampler.hpp"
#include "runtime/session.hpp"

namespace rocky::test {
namespace {

std::shared_ptr<backend::Backend> fresh_backend() {
  vulkan::VulkanOptions o;
  o.validation = true;
  o.persist_pipeline_cache = false;
  return std::make_shared<vulkan::VulkanBackend>(o);
}

uint64_t validation_errors(const backend::Backend& be) { return be.stats().validation_errors; }

// One stream of evals: a prefill of `prompt`, then `steps` greedy decode steps. step() runs the next
// eval and appends its logits; the script is the same whether the stream runs alone or interleaved.
struct Stream {
  const model::Model* m = nullptr;
  std::vector<int32_t> prompt;
  int steps = 0;
  std::unique_ptr<runtime::Session> s;
  std::vector<std::vector<float>> logits;  // per eval
  int done = 0;                            // evals run

  void open(const std::shared_ptr<backend::Backend>& be, int32_t n_ctx, int32_t n_ubatch) {
    s = std::make_unique<runtime::Session>(*m, be, runtime::SessionOptions{n_ctx, n_ubatch});
  }
  bool step() {
    if (done > steps) return false;
    if (done == 0) {
      logits.push_back(s->eval(prompt));
    } else {
      const int32_t t = runtime::argmax(logits.back());
      logits.push_back(s->eval(std::span<const int32_t>(&t, 1)));
    }
    ++done;
    return true;
  }
};

std::vector<int32_t> tokens(int32_t n, int32_t n_vocab, uint32_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint32_t x = seed;
  for (auto& v : t) {
    x = x * 1664525u + 1013904223u;
    v = 1 + static_cast<int32_t>((x >> 8) % uint32_t(n_vocab - 1));
  }
  return t;
}

// The largest arena the session's evals plan (what the context's arena grows to).
uint64_t arena_of(const model::Model& m, int32_t n_prompt, int32_t n_ctx, int32_t n_ubatch) {
  uint64_t a = 0;
  for (int32_t i0 = 0; i0 < n_prompt; i0 += n_ubatch) {
    const int32_t nt = std::min(n_ubatch, n_prompt - i0);
    const auto want = i0 + nt == n_prompt ? model::Logits::LAST : model::Logits::NONE;
    a = std::max(a, graph::plan_arena(m.build_graph({nt, i0, n_ctx, want})).arena_bytes);
  }
  return std::max(a, graph::plan_arena(m.build_graph({1, n_prompt, n_ctx, model::Logits::LAST})).arena_bytes);
}

uint64_t round4(uint64_t b) { return std::max<uint64_t>(4, (b + 3) & ~uint64_t{3}); }

// Streams a and b: alone (each on a fresh backend), then interleaved on one shared backend.
// a_int8 / b_int8: the model's prefill runs on the int8 path (quantized weights), else basic f32.
void check_interleaved(const model::Model& ma, const model::Model& mb, bool a_int8, bool b_int8) {
  const bool expect_int8 = b_int8;
  const int32_t n_ctx = 96, n_ub = 16;
  Stream a{&ma, tokens(37, ma.hparams().n_vocab, 1), 6};
  Stream b{&mb, tokens(21, mb.hparams().n_vocab, 2), 9};

  std::vector<std::vector<float>> alone_a, alone_b;
  for (Stream* st : {&a, &b}) {
    auto be = fresh_backend();
    Stream solo{st->m, st->prompt, st->steps};
    solo.open(be, n_ctx, n_ub);
    while (solo.step()) {}
    solo.s.reset();
    EXPECT_EQ(validation_errors(*be), 0u);
    (st == &a ? alone_a : alone_b) = solo.logits;
  }

  auto be = fresh_backend();
  a.open(be, n_ctx, n_ub);
  a.step();  // a's prefill: its arena is allocated
  const backend::BackendStats one = be->stats();
  const backend::ContextStats ca = a.s->context().stats();
  // (of the last compute: a's prefill's last ubatch, 37 % 16 = 5 tokens: on the int8 path's model
  // the multi-column matvec over the repack takes ubatches of ≤ 8 tokens, VulkanOptions::matvec_max_cols)
  EXPECT_EQ(ca.matmul_path, a_int8 ? "mmv" : "basic");
  EXPECT_GT(one.memory.weights, 0u);
  EXPECT_EQ(one.memory.total(), one.memory.weights + ca.memory.total()) << "one context: weights + its buffers";

  b.open(be, n_ctx, n_ub);
  // Interleave: b's prefill between a's prefill and a's decode, then alternate decode steps.
  b.step();
  EXPECT_EQ(b.s->context().stats().matmul_path, b_int8 ? "mmv" : "basic");  // b's prefill: 21 % 16 = 5 tokens
  while (true) {
    const bool sb = b.step();
    const bool sa = a.step();
    if (!sa && !sb) break;
  }
  const backend::BackendStats two = be->stats();
  const backend::ContextStats cb = b.s->context().stats();
  const uint64_t same_model_weights = &ma == &mb ? 0 : two.memory.weights - one.memory.weights;
  std::printf(
      "%s + %s: weights %.3f MiB (+%.3f), context a: KV %.3f + arena %.3f + other %.4f MiB; b: KV %.3f + "
      "arena %.3f + other %.4f MiB; total %.3f → %.3f MiB\n",
      ma.hparams().arch_str.c_str(), mb.hparams().arch_str.c_str(), one.memory.weights / 1048576.0,
      same_model_weights / 1048576.0, ca.memory.kv / 1048576.0, ca.memory.arena / 1048576.0,
      ca.memory.other / 1048576.0, cb.memory.kv / 1048576.0, cb.memory.arena / 1048576.0, cb.memory.other / 1048576.0,
      one.memory.total() / 1048576.0, two.memory.total() / 1048576.0);
  if (&ma == &mb) {
    // The second context of the same model costs no weight memory: only its KV cache + arena
    // (+ token ids, logits readback and q8_1 copies, its "other").
    EXPECT_EQ(two.memory.weights, one.memory.weights);
    EXPECT_EQ(two.memory.total() - one.memory.total(), cb.memory.kv + cb.memory.arena + cb.memory.other);
  }
  const auto& hb = mb.hparams();
  EXPECT_EQ(cb.memory.kv, 2ull * uint64_t(hb.n_layer) * uint64_t(hb.n_embd_kv()) * uint64_t(n_ctx) * 4);
  EXPECT_EQ(cb.memory.arena, round4(arena_of(mb, int32_t(b.prompt.size()), n_ctx, n_ub)));
  // "other": the token ids of its largest ubatch, a logits readback, q8_1 activation copies (int8 path).
  uint64_t q81 = 0;  // one slot's q8_1 copy (values + scales) of the largest matmul input
  if (expect_int8) {
    const graph::Graph g = mb.build_graph({n_ub, 0, n_ctx, model::Logits::NONE});
    for (const auto& n : g.nodes)
      if (n.op == graph::Op::MATMUL) {
        const uint64_t k = n.weight->ne[0], cols = uint64_t(n.ne1);
        q81 =
            std::max(q81, round4(vulkan::fast::q8_1_qs_bytes(k, cols)) + round4(vulkan::fast::q8_1_ds_bytes(k, cols)));
      }
  }
  EXPECT_LE(cb.memory.other, round4(4ull * n_ub) + round4(4ull * uint64_t(hb.n_vocab)) + 4 * q81);
  if (expect_int8) {
    EXPECT_GE(cb.memory.other, q81) << "the q8_1 copies are the context's";
  }
  EXPECT_EQ(two.memory.total(), two.memory.weights + a.s->context().stats().memory.total() + cb.memory.total());

  ASSERT_EQ(a.logits.size(), alone_a.size());
  ASSERT_EQ(b.logits.size(), alone_b.size());
  for (size_t i = 0; i < a.logits.size(); ++i) EXPECT_EQ(a.logits[i], alone_a[i]) << "stream a, eval " << i;
  for (size_t i = 0; i < b.logits.size(); ++i) EXPECT_EQ(b.logits[i], alone_b[i]) << "stream b, eval " << i;

  // Contexts freed: their memory goes back; the weights stay.
  a.s.reset();
  b.s.reset();
  EXPECT_EQ(be->stats().memory.total(), be->stats().memory.weights);
  EXPECT_EQ(be->stats().memory.weights, two.memory.weights);
  EXPECT_EQ(validation_errors(*be), 0u) << "Vulkan validation errors";
}

TEST(TwoContexts, Stories260KInterleavedPrompts) {
  auto m = model::Model::load(shared_path("reference/models/stories260K.gguf"));
  check_interleaved(*m, *m, false, false);
}

TEST(TwoContexts, SynthQ4KMInterleavedPromptsInt8Path) {
  auto m = model::Model::load(shared_path("reference/models/synth/synth-llama-q4_k_m.gguf"));
  check_interleaved(*m, *m, true, true);
}

// Contexts of two different models on one backend: both models' weights live side by side.
TEST(TwoContexts, TwoModelsOneBackend) {
  auto s = model::Model::load(shared_path("reference/models/stories260K.gguf"));
  auto q = model::Model::load(shared_path("reference/models/synth/synth-llama-q4_k_m.gguf"));
  check_interleaved(*s, *q, false, true);
}

// Two contexts computing at the same time from two threads: the same logits as alone.
TEST(TwoContexts, ConcurrentThreads) {
  auto m = model::Model::load(shared_path("reference/models/synth/synth-llama-q4_k_m.gguf"));
  const int32_t n_ctx = 64, n_ub = 16;
  std::vector<Stream> streams;
  for (uint32_t i = 0; i < 2; ++i)
    streams.push_back(Stream{m.get(), tokens(19 + int32_t(i) * 11, m->hparams().n_vocab, 10 + i), 8});
  std::vector<std::vector<std::vector<float>>> alone;
  {
    auto be = fresh_backend();
    for (auto& st : streams) {
      Stream solo{st.m, st.prompt, st.steps};
      solo.open(be, n_ctx, n_ub);
      while (solo.step()) {}
      alone.push_back(solo.logits);
    }
  }
  auto be = fresh_backend();
  for (auto& st : streams) st.open(be, n_ctx, n_ub);
  std::vector<std::thread> th;
  std::vector<std::string> errors(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    th.emplace_back([&, i] {
      try {
        while (streams[i].step()) {}
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : th) t.join();
  for (size_t i = 0; i < streams.size(); ++i) {
    EXPECT_EQ(errors[i], "") << "stream " << i;
    ASSERT_EQ(streams[i].logits.size(), alone[i].size());
    for (size_t k = 0; k < alone[i].size(); ++k)
      EXPECT_EQ(streams[i].logits[k], alone[i][k]) << "stream " << i << " eval " << k;
  }
  streams.clear();
  EXPECT_EQ(validation_errors(*be), 0u) << "Vulkan validation errors";
}

}  // namespace
}  // namespace rocky::test
