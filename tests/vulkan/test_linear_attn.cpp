// The hybrid linear-attention ops of qwen35 (SSM_CONV with its state, GATED_DELTA, TAKE_ROWS,
// SIGMOID_MUL) on Vulkan against the CPU oracle (f64 recurrence) on random data of awkward shapes:
// key / value heads 1–3 / 1–6, head dims not multiples of the tile (d_k 16, 40, 96, 128 give 1, 2,
// 3, 4 row parts of gated_delta.comp; d_v 24, 33, 40, 128 leave idle columns), conv kernels 2–5,
// each shape as three ubatches (N, 1, M tokens) through one context, so the states carried across
// ubatches are compared too, then reset() (zeroed states: the first ubatch again gives the same
// values). Validation layer on: zero errors asserted. NMSE ≤ 1e-9 (f32 vs f64).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <random>
#include <string>

#include "backend/cpu/cpu_backend.hpp"
#include "core/error.hpp"
#include "tune/tile.hpp"
#include "vk_test_util.hpp"

namespace rocky::test {
namespace {

using graph::Graph;
using graph::Node;
using graph::Op;

struct Shape {
  int32_t hk, hv, dk, dv, kconv;
};

struct Built {
  Graph g;
  int32_t conv, delta, take, gated;
};

Built build(const Shape& s, int32_t n, const HostWeight& ex, const HostWeight& ea, const HostWeight& eb,
            const HostWeight& ez, const HostWeight& wconv, const HostWeight& A, const graph::KvShape& kv) {
  Built b;
  Graph& g = b.g;
  g.n_tokens = n;
  g.kv = kv;
  const int32_t x = g.add(get_rows_node(ex, n, "x"));
  const int32_t a = g.add(get_rows_node(ea, n, "a"));
  const int32_t bb = g.add(get_rows_node(eb, n, "b"));
  const int32_t z = g.add(get_rows_node(ez, n, "z"));
  const int64_t C = int64_t(2) * s.hk * s.dk + int64_t(s.hv) * s.dv;
  Node cv;
  cv.op = Op::SSM_CONV;
  cv.name = "conv";
  cv.ne0 = C;
  cv.ne1 = n;
  cv.src[0] = x;
  cv.weight = &wconv.info;
  cv.layer = 0;
  b.conv = g.add(cv);
  Node d;
  d.op = Op::GATED_DELTA;
  d.name = "delta";
  d.ne0 = int64_t(s.hv) * s.dv;
  d.ne1 = n;
  d.src = {b.conv, a, bb};
  d.weight = &A.info;
  d.layer = 0;
  d.ssm = graph::SsmParams{s.hk, s.hv, s.dk, s.dv, 1e-6f};
  b.delta = g.add(d);
  Node t;
  t.op = Op::TAKE_ROWS;
  t.name = "take";
  t.first_row = s.hk * s.dk;  // the k rows
  t.ne0 = int64_t(s.hk) * s.dk + 3;
  t.ne1 = n;
  t.src[0] = b.conv;
  b.take = g.add(t);
  Node sm;
  sm.op = Op::SIGMOID_MUL;
  sm.name = "gated";
  sm.ne0 = d.ne0;
  sm.ne1 = n;
  sm.src = {b.delta, z, -1};
  b.gated = g.add(sm);
  g.output = b.gated;
  return b;
}

TEST(VulkanLinearAttn, ConvDeltaTakeRowsSigmoidMulVsCpu) {
  auto& be = shared_backend();
  auto cpu = backend::cpu::make_cpu_backend();
  std::mt19937 rng(20);
  const Shape shapes[] = {{1, 1, 16, 24, 4},   {2, 4, 40, 33, 4},  {3, 6, 96, 40, 3},
                          {2, 2, 128, 128, 4}, {1, 3, 40, 128, 2}, {3, 3, 16, 33, 5}};
  const int32_t ubatches[][3] = {{7, 1, 33}, {1, 1, 65}, {33, 1, 7}, {65, 1, 1}, {7, 1, 13}, {13, 1, 2}};
  for (size_t si = 0; si < std::size(shapes); ++si) {
    const Shape& s = shapes[si];
    const int64_t C = int64_t(2) * s.hk * s.dk + int64_t(s.hv) * s.dv;
    constexpr int64_t k_rows = 61;
    auto ex = make_weight(DType::F32, C, k_rows, rng, "ex");
    auto ea = make_weight(DType::F32, s.hv, k_rows, rng, "ea");
    auto eb = make_weight(DType::F32, s.hv, k_rows, rng, "eb");
    auto ez = make_weight(DType::F32, int64_t(s.hv) * s.dv, k_rows, rng, "ez");
    auto wconv = make_weight(DType::F32, s.kconv, C, rng, "conv1d");
    auto A = make_weight(DType::F32, s.hv, 1, rng, "ssm_a");
    // A = −exp(A_log) < 0: decays exp(softplus(a)·A) between e^−4 and ~1 (memories of a few to
    // hundreds of tokens).
    for (int64_t j = 0; j < s.hv; ++j) {
      const float v = -(0.05f + 1.5f * static_cast<float>(std::fabs(A->deq[size_t(j)])));
      std::memcpy(A->bytes.data() + 4 * j, &v, 4);
      A->deq[size_t(j)] = v;
    }
    A->info.n_dims = 1;
    graph::KvShape kv{1, 8, 128};
    kv.conv_state = int64_t(s.kconv - 1) * C;
    kv.ssm_state = int64_t(s.hv) * s.dk * s.dv;
    const gguf::TensorInfo* ws[] = {&ex->info, &ea->info, &eb->info, &ez->info, &wconv->info, &A->info};
    be.load_weights(ws);
    cpu->load_weights(ws);
    be.init_kv(kv);
    auto cctx = cpu->make_context({kv, 1});
    std::vector<float> first_gpu;
    std::vector<int32_t> first_tok;
    for (int u = 0; u < 4; ++u) {
      const int32_t n = ubatches[si][u % 3];
      if (u == 3) {  // reset() zeroes both states on both backends: the first ubatch again
        be.context().reset();
        cctx->reset();
      }
      Built b = build(s, n, *ex, *ea, *eb, *ez, *wconv, *A, kv);
      auto plan = own_plan(b.g);
      std::uniform_int_distribution<int32_t> tok_d(0, k_rows - 1);
      std::vector<int32_t> tok(static_cast<size_t>(n));
      for (auto& t : tok) t = tok_d(rng);
      if (u == 0) first_tok = tok;
      if (u == 3) tok = first_tok;
      std::vector<float> out_gpu(static_cast<size_t>(s.hv * s.dv * n)), out_cpu(out_gpu.size());
      be.compute(b.g, plan, tok, out_gpu);
      cctx->compute(b.g, plan, tok, out_cpu);
      const std::string what =
          "shape " + std::to_string(si) + " ubatch " + std::to_string(u) + " n=" + std::to_string(n);
      for (int32_t id : {b.conv, b.delta, b.take, b.gated}) {
        const std::vector<float> c = cctx->read_node(b.g, plan, id);
        const std::vector<double> ref(c.begin(), c.end());
        EXPECT_LE(nmse(be.read_node(b.g, plan, id), ref), 1e-9) << b.g.nodes[size_t(id)].name << " " << what;
      }
      if (u == 0) first_gpu = out_gpu;
      if (u == 3) {
        EXPECT_EQ(out_gpu, first_gpu) << what << ": after reset()";
      }
    }
    be.release_weights();
    EXPECT_EQ(be.instance().error_count(), 0u) << "validation errors";
  }
}

void set_f32(HostWeight& w, size_t i, float v) {
  std::memcpy(w.bytes.data() + 4 * i, &v, 4);
  w.deq[i] = v;
}

// The chunked prefill kernel (gated_delta_chunk.comp, VulkanOptions::delta_chunk) and the
// serial one (delta_chunk 0) against the CPU oracle's f64 recurrence: chunk sizes 8 and 32 (the
// default), each over the ubatches 1, 7, C − 1, C, C + 1, 3C + 5 and 300 tokens through one
// context (so every ubatch starts from the state the previous ones left, and the tail chunk is
// every length), heads 1 / 1, 2 / 4 (d_k 40: 4 row parts), 2 / 4 at 128 × 128 (qwen3.5's head
// dims) and 3 / 6 (d_k 96, d_v 40). Gates: the decay input a is, per (token row, head), ordinary
// (N(0, 1)-ish: decays e^−1 … 1), strong (a ≈ 25: g ≈ −25·|A|, the state all but wiped) or ≈ none
// (a ≈ −9); β logits up to ±4; q, k, v in ±2. Bound: NMSE ≤ 1e-10 of every ubatch's output (f32
// vs f64; on lavapipe the serial kernel reaches ≤ 1.1e-13, the chunked one ≤ 4e-12; solving only
// the first 3 rows of the chunk's triangular system gives 0.1).
TEST(VulkanLinearAttn, GatedDeltaChunkedVsCpu) {
  auto cpu = backend::cpu::make_cpu_backend();
  struct DShape {
    int32_t hk, hv, dk, dv;
  };
  const DShape shapes[] = {{1, 1, 16, 24}, {2, 4, 40, 33}, {2, 4, 128, 128}, {3, 6, 96, 40}};
  for (uint32_t chunk : {8u, 32u, 0u}) {
    vulkan::VulkanOptions o;
    o.validation = true;
    o.persist_pipeline_cache = false;
    o.matmul = vulkan::ops::MatmulPath::BASIC;
    o.delta_chunk = chunk;
    vulkan::VulkanBackend be(o);
    std::mt19937 rng(2000 + chunk);
    const int32_t C = chunk == 0 ? 16 : int32_t(chunk);
    const int32_t ubatches[] = {1, 7, C - 1, C, C + 1, 3 * C + 5, 300};
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const DShape& s = shapes[si];
      if (chunk != 0) {  // the chunk runs as asked (not lowered to fit the device's shared memory)
        const vulkan::ops::DeltaTile t{16, s.dk % 16 == 0 ? 16u : s.dk % 10 == 0 ? 10u : 8u, chunk};
        ASSERT_LE(vulkan::ops::delta_chunk_shared_bytes(t, uint32_t(s.dk)), be.info().shared_memory);
      }
      const int64_t Cq = int64_t(2) * s.hk * s.dk + int64_t(s.hv) * s.dv;
      constexpr int64_t k_rows = 97;
      auto ex = make_weight(DType::F32, Cq, k_rows, rng, "ex");
      auto ea = make_weight(DType::F32, s.hv, k_rows, rng, "ea");
      auto eb = make_weight(DType::F32, s.hv, k_rows, rng, "eb");
      auto A = make_weight(DType::F32, s.hv, 1, rng, "ssm_a");
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      std::uniform_int_distribution<int> kind(0, 5);
      for (size_t i = 0; i < size_t(Cq * k_rows); ++i) set_f32(*ex, i, 2.0f * u(rng));
      for (size_t i = 0; i < size_t(s.hv * k_rows); ++i) {
        const int kd = kind(rng);
        set_f32(*ea, i, kd == 0 ? 25.0f + u(rng) : kd == 1 ? -9.0f + u(rng) : 1.5f * u(rng));
        set_f32(*eb, i, 4.0f * u(rng));
      }
      for (size_t j = 0; j < size_t(s.hv); ++j) set_f32(*A, j, -(0.05f + 1.5f * std::fabs(u(rng))));
      A->info.n_dims = 1;
      graph::KvShape kv{1, 8, 1024};  // the ubatches' 505 positions (C 32) fit
      kv.conv_state = 3 * Cq;         // unused here (no SSM_CONV), but a recurrent context holds both parts
      kv.ssm_state = int64_t(s.hv) * s.dk * s.dv;
      const gguf::TensorInfo* ws[] = {&ex->info, &ea->info, &eb->info, &A->info};
      be.load_weights(ws);
      cpu->load_weights(ws);
      be.init_kv(kv);
      auto cctx = cpu->make_context({kv, 1});
      for (int32_t n : ubatches) {
        Graph g;
        g.n_tokens = n;
        g.kv = kv;
        const int32_t x = g.add(get_rows_node(*ex, n, "x"));
        const int32_t a = g.add(get_rows_node(*ea, n, "a"));
        const int32_t bb = g.add(get_rows_node(*eb, n, "b"));
        Node d;
        d.op = Op::GATED_DELTA;
        d.name = "delta";
        d.ne0 = int64_t(s.hv) * s.dv;
        d.ne1 = n;
        d.src = {x, a, bb};
        d.weight = &A->info;
        d.layer = 0;
        d.ssm = graph::SsmParams{s.hk, s.hv, s.dk, s.dv, 1e-6f};
        g.output = g.add(d);
        auto plan = own_plan(g);
        std::uniform_int_distribution<int32_t> tok_d(0, k_rows - 1);
        std::vector<int32_t> tok(static_cast<size_t>(n));
        for (auto& t : tok) t = tok_d(rng);
        std::vector<float> out_gpu(static_cast<size_t>(d.ne0 * n)), out_cpu(out_gpu.size());
        be.compute(g, plan, tok, out_gpu);
        cctx->compute(g, plan, tok, out_cpu);
        const std::vector<double> ref(out_cpu.begin(), out_cpu.end());
        EXPECT_LE(nmse(out_gpu, ref), 1e-10) << "chunk " << chunk << " shape " << si << " n=" << n << " (" << s.hk
                                             << "/" << s.hv << " heads, d_k " << s.dk << ", d_v " << s.dv << ")";
      }
      be.release_weights();
    }
    EXPECT_EQ(be.instance().error_count(), 0u) << "validation errors";
  }
}

// The tuning profile's delta_chunk (ROCKY_TUNE's fragment) and VulkanOptions::delta_chunk: 0 or an
// even 2 … 128; anything else is a rocky::Error naming it.
TEST(VulkanLinearAttn, DeltaChunkOptionIsChecked) {
  for (const char* bad : {"7", "130", "\"x\"", "-2", "1"}) {
    const std::string frag = std::string(R"({"delta_chunk": )") + bad + "}";
    try {
      (void)tune::apply_profile_json(nlohmann::json::parse(frag), tune::builtin_profile("generic"), "ROCKY_TUNE");
      ADD_FAILURE() << frag << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ROCKY_TUNE: delta_chunk"), std::string::npos) << e.what();
    }
  }
  for (uint32_t bad : {3u, 7u, 130u}) {
    vulkan::VulkanOptions o;
    o.persist_pipeline_cache = false;
    o.delta_chunk = bad;
    try {
      vulkan::VulkanBackend be(o);
      ADD_FAILURE() << "VulkanOptions::delta_chunk " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("VulkanOptions::delta_chunk"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace rocky::test
