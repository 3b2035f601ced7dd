// Memory stays flat: a 2-layer qwen2.5-1.5b q4_K_M synth (small vocab) prefilled with ubatches of
// 64 and 1024 (ROCKY_BENCH_MEMORY_UBS=64,128,… widens the set) on the Vulkan device (lavapipe in
// CI). The backend's peak device allocation must stay within weights + KV cache + the planner's
// arena for that ubatch + the int8 path's q8_1 scratch (+ the token-id buffer); nothing may grow
// with the number of submits: ub 64 prefills 257 tokens (5 submits), ub 1024 1025 tokens (2), and a
// further prefill after reset() must leave the peak unchanged.
// The bound is computed here from the GGUF tensor sizes, the KV shape, graph::plan_arena and the
// matmul shapes. The default int8 path (q8_1 activations + mul_mmq) runs: ≈ 4× faster on lavapipe
// than the f32 tiles (a 1025-token prefill of this model: ≈ 1 min instead of > 4). Its q8_1 scratch
// here is one slot (each activation's q8_1 copy is dead before the next is produced) of the
// largest K·N.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>

#include "backend/vulkan/ops/matmul_fast.hpp"
#include "backend/vulkan/vulkan_backend.hpp"
#include "bench/run_rocky.hpp"
#include "graph/planner.hpp"
#include "model/model.hpp"
#include "runtime/bench.hpp"
#include "runtime/session.hpp"

namespace {

uint64_t round4(uint64_t b) { return (b + 3) / 4 * 4; }

// The ubs to test: ROCKY_BENCH_MEMORY_UBS=64,256,1024 widens the set (default: both ends).
std::vector<int32_t> ubatches() {
  std::vector<int32_t> ubs;
  const char* e = std::getenv("ROCKY_BENCH_MEMORY_UBS");
  std::string s = e ? e : "64,1024";
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    ubs.push_back(std::stoi(s.substr(i, j - i)));
    i = j + 1;
  }
  return ubs;
}

}  // namespace

TEST(BenchMemory, PeakWithinWeightsKvArena) {
  using namespace rocky;
  unsetenv("ROCKY_SWITCH");  // the default path
  const std::string path = test::scratch_dir("bench_memory") + "/q15-2l.gguf";
  auto s = test::run_rocky("bench_memory", {"synth", "--preset", "qwen2.5-1.5b", "--layers", "2", "--type", "q4_k_m",
                                            "--vocab", "2048", "-q", "-o", path});
  ASSERT_EQ(s.rc, 0) << s.err;
  auto model = model::Model::load(path);
  const auto& hp = model->hparams();
  ASSERT_EQ(hp.n_layer, 2);
  ASSERT_EQ(hp.n_embd, 1536);
  ASSERT_EQ(hp.n_ff, 8960);

  const int32_t n_ctx = 1025;
  std::mt19937 rng(7);
  std::vector<int32_t> tokens(n_ctx);
  for (auto& t : tokens) t = int32_t(rng() % uint32_t(hp.n_vocab));

  const graph::Graph g1 = model->build_graph(model::UbatchSpec{1, 0, n_ctx, model::Logits::LAST});
  // One device copy per weight: the GGUF rows of the types the int8 path does not take (the
  // repacked ones are added below, once the device's profile is known).
  uint64_t weights = 0;
  for (const auto* t : g1.weights())
    if (!vulkan::fast::mmq_supports(t->type)) weights += round4(t->n_bytes);
  const uint64_t kv = 2ull * uint64_t(hp.n_layer) * uint64_t(hp.n_embd_kv()) * uint64_t(n_ctx) * 4;

  uint64_t prev_peak = 0;
  for (int32_t ub : ubatches()) {
    SCOPED_TRACE("ub " + std::to_string(ub));
    const int32_t n_prompt = std::min(n_ctx, 4 * ub + 1);  // ≥ 2 submits, the last one short
    uint64_t arena = 0, q81 = 0;
    for (int32_t i0 = 0; i0 < n_prompt; i0 += ub) {
      const int32_t nt = std::min(ub, n_prompt - i0);
      const auto want = i0 + nt == n_prompt ? model::Logits::LAST : model::Logits::NONE;
      const graph::Graph g = model->build_graph({nt, i0, n_ctx, want});
      arena = std::max(arena, graph::plan_arena(g).arena_bytes);
      for (const auto& n : g.nodes)  // q8_1 scratch: K·N bytes of quants + one 8-byte scale pair per 32
        if (n.op == graph::Op::MATMUL && n.weight && n.ne1 > 1) {
          const uint64_t kn = n.weight->ne[0] * uint64_t(n.ne1);
          q81 = std::max(q81, round4(kn) + round4(kn / 32 * 8 + 8));
        }
    }
    const uint64_t toks = round4(4ull * uint64_t(std::min(ub, n_prompt)));
    vulkan::VulkanOptions vo;
    auto be = std::make_unique<vulkan::VulkanBackend>(vo);
    const bool staging = !be->info().uma;
    // The int8 path keeps each mmq-capable weight repacked (fast::upload_for_mmq), as its only copy.
    uint64_t repack = 0;
    const tune::DeviceProfile prof = tune::select_profile(be->info().vendor_id, be->info().driver_name,
                                                          be->info().type == VK_PHYSICAL_DEVICE_TYPE_CPU);
    for (const auto* t : g1.weights())
      if (vulkan::fast::mmq_supports(t->type))
        repack += vulkan::fast::mmq_layout(t->type, t->ne[0], t->rows(), prof.mmq_nibbles(t->type)).bytes;
    runtime::Session sess(*model, std::move(be), runtime::SessionOptions{n_ctx, ub});
    sess.eval(std::span<const int32_t>(tokens.data(), size_t(n_prompt)));
    const uint64_t peak = sess.backend().device_memory_bytes();
    // A discrete (non-UMA) device stages uploads through one ≤ 64 MiB host buffer at load time.
    const uint64_t stage = staging ? (64ull << 20) : 0;
    const uint64_t bound = weights + repack + kv + arena + q81 + toks + stage;
    std::printf(
        "ub %4d, %4d tokens: peak %.3f MiB ≤ weights %.3f + repack %.3f + KV %.3f + arena %.3f + q8_1 %.3f + tokens "
        "%.4f = %.3f MiB\n",
        ub, n_prompt, peak / 1048576.0, weights / 1048576.0, repack / 1048576.0, kv / 1048576.0, arena / 1048576.0,
        q81 / 1048576.0, toks / 1048576.0, (weights + repack + kv + arena + q81 + toks) / 1048576.0);
    EXPECT_LE(peak, bound);
    EXPECT_GE(peak, weights + repack + kv + arena + q81) << "the accounting must see every buffer";
    // Flat: a further prefill (more submits) allocates nothing new.
    sess.reset();
    sess.eval(std::span<const int32_t>(tokens.data(), 3));
    EXPECT_EQ(sess.backend().device_memory_bytes(), peak);
    // Larger ubatches need larger arenas only: the peak grows with ub, never with the token count.
    EXPECT_GE(peak, prev_peak);
    prev_peak = peak;
  }
}
