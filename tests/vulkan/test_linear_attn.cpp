// [N9] The hybrid linear-attention ops of qwen35 (SSM_CONV with its state, GATED_DELTA, TAKE_ROWS,
// SIGMOID_MUL) on Vulkan against the CPU oracle (f64 recurrence) on random data of awkward shapes:
// key / value heads 1–3 / 1–6, head dims not multiples of the tile (d_k 16, 40, 96, 128 give 1, 2,
// 3, 4 row parts of gated_delta.comp; d_v 24, 33, 40, 128 leave idle columns), conv kernels 2–5,
// each shape as three ubatches (N, 1, M tokens) through one context, so the states carried across
// ubatches are compared too, then reset() (zeroed states: the first ubatch again gives the same
// values). Validation layer on: zero errors asserted. NMSE ≤ 1e-9 (f32 vs f64).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backend/cpu/cpu_backend.hpp"
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

}  // namespace
}  // namespace rocky::test
