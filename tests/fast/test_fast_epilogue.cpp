// mul_mmq epilogues (fast::MmqEpilogue; VulkanOptions::fuse_epilogue) on lavapipe with validation:
//  - op level: quantize_q8_1 + mul_mmq with a bias / residual epilogue vs an f64 oracle (the
//    dequantized weights times the SAME q8_1 activations read back from the GPU, plus the bias /
//    residual), random data, odd M and N, OpSDot and no-dot variants, row-chunked dispatches (small
//    binding limit), the in-place residual (operand = y); NMSE ≤ 1e-6; outputs poisoned with NaN.
//  - end to end: the synth qwen2 (q/k/v biases) and llama (no biases) q4_K_M models with the real
//    arena planner (outputs reuse freed regions), fused vs unfused: logits within 1e-4 relative,
//    dispatches per layer (counted by label, layer 0) 21 → 16 for qwen2 (3 bias adds + 2 residual
//    adds folded into their matmuls) and 18 → 16 for llama (the 2 residual adds), zero validation
//    errors. Per qwen2 layer unfused: attn_norm (q8_1), q/k/v + 3 biases, 2 rope, 2 KV stores,
//    attention, its quantize_q8_1, attn_out, ffn_inp, ffn_norm (q8_1), gate, up, swiglu (q8_1),
//    ffn_down, l_out = 21.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/vulkan/memory.hpp"
#include "backend/vulkan/ops/matmul_fast.hpp"
#include "backend/vulkan/vulkan_backend.hpp"
#include "common/shared.hpp"
#include "core/error.hpp"
#include "graph/planner.hpp"
#include "model/model.hpp"
#include "quant/quant.hpp"
#include "fast_test_util.hpp"

namespace rocky::vulkan {
namespace {

using Harness = test::FastHarness;

using test::random_weights;

std::vector<float> normal(size_t n, float sd, std::mt19937& rng) {
  std::vector<float> v(n);
  std::normal_distribution<float> g(0.0f, sd);
  for (auto& x : v) x = g(rng);
  return v;
}

enum class Mode { BIAS, RESIDUAL, IN_PLACE };  // IN_PLACE: residual operand = y itself
const char* mode_name(Mode m) {
  return m == Mode::BIAS ? "bias" : m == Mode::RESIDUAL ? "residual" : "in-place residual";
}

// quantize_q8_1(x) then mul_mmq with the epilogue; NMSE against the f64 oracle on the same q8_1.
double run_and_compare(Harness& h, const tune::DeviceProfile& prof, DType t, uint32_t m, uint32_t n, uint32_t k,
                       bool use_dot, Mode mode, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> deq;
  const std::vector<uint8_t> wbytes = random_weights(t, k, m, rng, deq);
  const std::vector<float> x = normal(size_t{k} * n, 1.0f, rng);
  const std::vector<float> e = normal(mode == Mode::BIAS ? m : size_t{m} * n, 0.5f, rng);
  Buffer wb = h.mem->create("w", wbytes.size(), BufferKind::DEVICE);
  Buffer xb = h.mem->create("x", x.size() * 4, BufferKind::DEVICE);
  Buffer qb = h.mem->create("qs", fast::q8_1_qs_bytes(k, n), BufferKind::DEVICE);
  Buffer db = h.mem->create("ds", fast::q8_1_ds_bytes(k, n), BufferKind::DEVICE);
  // The operand sits at an unaligned float offset (4 floats in) of its buffer: exercises e_off.
  Buffer eb = h.mem->create("e", (e.size() + 4) * 4, BufferKind::DEVICE);
  Buffer yb = h.mem->create("y", size_t{m} * n * 4, BufferKind::DEVICE);
  h.mem->upload(wb, 0, wbytes.data(), wbytes.size());
  h.mem->upload(xb, 0, x.data(), x.size() * 4);
  h.mem->upload(eb, 16, e.data(), e.size() * 4);
  if (mode == Mode::IN_PLACE) {
    h.mem->upload(yb, 0, e.data(), e.size() * 4);
  } else {
    std::vector<float> poison(size_t{m} * n, std::nanf(""));
    h.mem->upload(yb, 0, poison.data(), poison.size() * 4);
  }
  ops::Weight w{&wb, t, k, m, row_bytes(t, k), "w"};
  Buffer rb = fast::upload_for_mmq(*h.mem, w, wbytes.data(), prof.mmq_q4k_nibbles);
  w.mmq_buf = &rb;
  fast::MmqEpilogue epi;
  epi.kind = mode == Mode::BIAS ? fast::Epilogue::BIAS : fast::Epilogue::RESIDUAL;
  epi.operand = mode == Mode::IN_PLACE ? ops::Region{&yb, 0, yb.size()} : ops::Region{&eb, 16, e.size() * 4};
  h.rec->begin();
  fast::quantize_q8_1(*h.env, {&xb, 0, xb.size()}, k, n, {&qb, 0, qb.size()}, {&db, 0, db.size()}, "q");
  fast::mul_mmq(*h.env, prof, w, {&qb, 0, qb.size()}, {&db, 0, db.size()}, n, {&yb, 0, yb.size()}, use_dot, "mmq", epi);
  h.rec->submit_and_wait();
  std::vector<float> y(size_t{m} * n);
  std::vector<uint32_t> qs(qb.size() / 4);
  std::vector<float> ds(db.size() / 4);
  h.mem->download(yb, 0, y.data(), y.size() * 4);
  h.mem->download(qb, 0, qs.data(), qb.size());
  h.mem->download(db, 0, ds.data(), db.size());
  const uint32_t nb = k / 32;
  double num = 0, den = 0;
  for (uint32_t c = 0; c < n; ++c) {
    std::vector<double> xv(k);
    for (uint32_t b = 0; b < nb; ++b)
      for (uint32_t i = 0; i < 32; ++i) {
        const uint32_t word = qs[(size_t{c} * nb + b) * 8 + i / 4];
        xv[b * 32 + i] = static_cast<double>(ds[2 * (size_t{c} * nb + b)]) * static_cast<int8_t>(word >> (8 * (i % 4)));
      }
    for (uint32_t r = 0; r < m; ++r) {
      double ref = mode == Mode::BIAS ? e[r] : e[size_t{c} * m + r];
      for (uint32_t i = 0; i < k; ++i) ref += static_cast<double>(deq[size_t{r} * k + i]) * xv[i];
      const double got = y[size_t{c} * m + r];
      if (!std::isfinite(got)) return INFINITY;
      num += (got - ref) * (got - ref);
      den += ref * ref;
    }
  }
  return num / den;
}

struct Shape {
  DType t;
  uint32_t m, n, k;
};

void check_epilogues(Harness& h, const tune::DeviceProfile& prof, const std::vector<Shape>& shapes) {
  uint32_t seed = 7;
  for (const Shape& s : shapes)
    for (Mode mode : {Mode::BIAS, Mode::RESIDUAL, Mode::IN_PLACE})
      for (bool dot : {true, false}) {
        if (dot && !h.dev->info().int8_dot) continue;
        const double e = run_and_compare(h, prof, s.t, s.m, s.n, s.k, dot, mode, ++seed);
        std::printf("mul_mmq %-5s M=%-4u N=%-4u K=%-4u %-6s %-17s profile %-13s NMSE %.3g\n", dtype_name(s.t).data(),
                    s.m, s.n, s.k, dot ? "dot" : "nodot", mode_name(mode), prof.name.c_str(), e);
        EXPECT_LE(e, 1e-6) << dtype_name(s.t) << " M=" << s.m << " N=" << s.n << " K=" << s.k
                           << (dot ? " dot " : " nodot ") << mode_name(mode) << " profile " << prof.name;
      }
  EXPECT_EQ(h.inst->error_count(), 0u) << "Vulkan validation errors";
}

TEST(MmqEpilogue, BiasAndResidualOnAwkwardShapes) {
  Harness h(0);
  const DeviceInfo& i = h.dev->info();
  check_epilogues(
      h, tune::select_profile(i.vendor_id, i.driver_name, i.type == VK_PHYSICAL_DEVICE_TYPE_CPU),
      {{DType::Q4_K, 67, 45, 256}, {DType::Q6_K, 129, 3, 256}, {DType::Q8_0, 33, 77, 96}, {DType::Q4_0, 65, 1, 160}});
  // The shipped mali-valhall tile (its kernel variants are what the `mali` label compiles).
  check_epilogues(h, tune::builtin_profile("mali-valhall"), {{DType::Q4_K, 65, 19, 256}});
}

// A binding limit of 8 KiB splits the weight into row chunks (pc.m0 > 0): the epilogue operand
// must follow the chunk's rows.
TEST(MmqEpilogue, RowChunks) {
  Harness h(8192);
  const DeviceInfo& i = h.dev->info();
  check_epilogues(h, tune::select_profile(i.vendor_id, i.driver_name, i.type == VK_PHYSICAL_DEVICE_TYPE_CPU),
                  {{DType::Q8_0, 67, 5, 256}});
}

TEST(MmqEpilogue, RefusesAShortOperand) {
  Harness h(0);
  const DeviceInfo& i = h.dev->info();
  const tune::DeviceProfile& prof =
      tune::select_profile(i.vendor_id, i.driver_name, i.type == VK_PHYSICAL_DEVICE_TYPE_CPU);
  std::mt19937 rng(3);
  std::vector<float> deq;
  const uint32_t m = 33, n = 4, k = 64;
  auto wbytes = random_weights(DType::Q8_0, k, m, rng, deq);
  Buffer wb = h.mem->create("w", wbytes.size(), BufferKind::DEVICE);
  Buffer qb = h.mem->create("qs", fast::q8_1_qs_bytes(k, n), BufferKind::DEVICE);
  Buffer db = h.mem->create("ds", fast::q8_1_ds_bytes(k, n), BufferKind::DEVICE);
  Buffer yb = h.mem->create("y", size_t{m} * n * 4, BufferKind::DEVICE);
  ops::Weight w{&wb, DType::Q8_0, k, m, row_bytes(DType::Q8_0, k), "w"};
  Buffer rb = fast::upload_for_mmq(*h.mem, w, wbytes.data(), false);
  w.mmq_buf = &rb;
  fast::MmqEpilogue epi{fast::Epilogue::RESIDUAL, {&yb, 0, size_t{m} * 4}};  // one column, N = 4 needed
  h.rec->begin();
  EXPECT_THROW(fast::mul_mmq(*h.env, prof, w, {&qb, 0, qb.size()}, {&db, 0, db.size()}, n, {&yb, 0, yb.size()}, false,
                             "mmq", epi),
               Error);
  h.rec->submit_and_wait();
}

// ---- end to end ----

struct Run {
  std::vector<float> logits;
  uint32_t dispatches = 0, fused = 0, int8 = 0;
  std::map<std::string, uint32_t> per_layer;  // "blk.0." dispatches, by label
  bool attn_out_written = true;
};

Run run_model(const model::Model& m, const std::vector<int32_t>& tokens, bool fuse) {
  ::unsetenv("ROCKY_SWITCH");  // the defaults (int8 path, fused epilogues on lavapipe), not a lab override
  VulkanOptions o;
  o.validation = true;
  o.persist_pipeline_cache = false;
  o.profile = true;  // per-dispatch labels (node names)
  o.fuse_epilogue = fuse;
  VulkanBackend be(o);
  const int32_t n = static_cast<int32_t>(tokens.size());
  graph::Graph g = m.build_graph(model::UbatchSpec{n, 0, n + 8, model::Logits::LAST});
  be.load_weights(g.weights());
  be.init_kv(g.kv);
  Run r;
  r.logits.resize(static_cast<size_t>(m.hparams().n_vocab));
  be.compute(g, graph::plan_arena(g), tokens, r.logits);  // the real planner: regions are reused
  r.dispatches = be.recorder().dispatches();
  r.fused = be.fused_epilogues();
  r.int8 = be.int8_matmuls();
  EXPECT_TRUE(be.info().timestamps) << "the per-layer dispatch count reads the profiler's labels";
  for (const auto& t : be.recorder().timings())
    if (t.label.rfind("blk.0.", 0) == 0) ++r.per_layer[t.label];
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].name == "blk.0.attn_out") r.attn_out_written = be.node_written(static_cast<int32_t>(i));
  EXPECT_EQ(be.instance().error_count(), 0u) << "Vulkan validation errors";
  return r;
}

uint32_t total(const std::map<std::string, uint32_t>& m) {
  uint32_t s = 0;
  for (const auto& [k, v] : m) s += v;
  return s;
}

void check_model(const std::string& file, uint32_t per_layer_unfused, uint32_t per_layer_fused,
                 const std::vector<std::string>& fused_labels) {
  auto m = model::Model::load(test::shared_path("reference/models/synth/" + file));
  const int32_t n_layer = m->hparams().n_layer;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> tok(0, m->hparams().n_vocab - 1);
  std::vector<int32_t> tokens(37);  // odd N: partial token tiles
  for (auto& t : tokens) t = tok(rng);
  const Run fused = run_model(*m, tokens, true), plain = run_model(*m, tokens, false);
  ASSERT_EQ(fused.logits.size(), plain.logits.size());
  double maxd = 0, maxa = 0;
  for (size_t i = 0; i < plain.logits.size(); ++i) {
    maxd = std::max(maxd, std::abs(double(fused.logits[i]) - plain.logits[i]));
    maxa = std::max(maxa, std::abs(double(plain.logits[i])));
  }
  std::printf(
      "%s: %d layers, %u int8 matmuls, %u with a fused epilogue; dispatches %u → %u (layer 0: %u → %u); "
      "max |Δlogit| %.3g of max |logit| %.3g\n",
      file.c_str(), n_layer, fused.int8, fused.fused, plain.dispatches, fused.dispatches, total(plain.per_layer),
      total(fused.per_layer), maxd, maxa);
  for (const auto& [label, c] : fused.per_layer) std::printf("  fused layer 0: %ux %s\n", c, label.c_str());
  ASSERT_GT(maxa, 0.0);
  EXPECT_LE(maxd, 1e-4 * maxa) << "fused vs unfused logits";
  const uint32_t per = per_layer_unfused - per_layer_fused;
  EXPECT_EQ(fused.int8, 7u * uint32_t(n_layer));
  EXPECT_EQ(fused.fused, per * uint32_t(n_layer));
  EXPECT_EQ(plain.fused, 0u);
  EXPECT_EQ(plain.dispatches, fused.dispatches + per * uint32_t(n_layer));
  EXPECT_EQ(total(plain.per_layer), per_layer_unfused);
  EXPECT_EQ(total(fused.per_layer), per_layer_fused);
  // Fused dispatches are labelled "blk.N.<matmul>+<consumer>" (--profile groups them per op).
  for (const std::string& l : fused_labels) EXPECT_EQ(fused.per_layer.count(l), 1u) << l;
  EXPECT_FALSE(fused.attn_out_written) << "attn_out wrote ffn_inp through its epilogue";
  EXPECT_TRUE(plain.attn_out_written);
}

// Decode (one token, matvec_mmq over the repack): the same bias / residual consumers go into
// fast::matvec_mmq's epilogue (labels "blk.N.<matmul>+<consumer>"); logits as unfused.
void check_decode(const std::string& file, uint32_t per_layer_fused, const std::vector<std::string>& fused_labels) {
  auto m = model::Model::load(test::shared_path("reference/models/synth/" + file));
  const int32_t n_layer = m->hparams().n_layer;
  const std::vector<int32_t> tokens{static_cast<int32_t>(m->hparams().n_vocab / 3)};
  const Run fused = run_model(*m, tokens, true), plain = run_model(*m, tokens, false);
  double maxd = 0, maxa = 0;
  for (size_t i = 0; i < plain.logits.size(); ++i) {
    maxd = std::max(maxd, std::abs(double(fused.logits[i]) - plain.logits[i]));
    maxa = std::max(maxa, std::abs(double(plain.logits[i])));
  }
  std::printf("%s decode: %u fused epilogues; dispatches %u → %u; max |Δlogit| %.3g of %.3g\n", file.c_str(),
              fused.fused, plain.dispatches, fused.dispatches, maxd, maxa);
  ASSERT_GT(maxa, 0.0);
  EXPECT_LE(maxd, 1e-5 * maxa) << "fused vs unfused decode logits";
  EXPECT_EQ(fused.int8, 0u);
  EXPECT_EQ(fused.fused, per_layer_fused * uint32_t(n_layer));
  EXPECT_EQ(plain.fused, 0u);
  EXPECT_EQ(plain.dispatches, fused.dispatches + per_layer_fused * uint32_t(n_layer));
  for (const std::string& l : fused_labels) EXPECT_EQ(fused.per_layer.count(l), 1u) << l;
  EXPECT_FALSE(fused.attn_out_written);
}

TEST(MmqEpilogue, DecodeQwen2) {
  check_decode("synth-qwen2-q4_k_m.gguf", 5,
               {"blk.0.attn_q+attn_q_b", "blk.0.attn_k+attn_k_b", "blk.0.attn_v+attn_v_b", "blk.0.attn_out+ffn_inp",
                "blk.0.ffn_out+l_out"});
}
TEST(MmqEpilogue, DecodeLlama) {
  check_decode("synth-llama-q4_k_m.gguf", 2, {"blk.0.attn_out+ffn_inp", "blk.0.ffn_out+l_out"});
}

TEST(MmqEpilogue, Qwen2BiasesAndResidualsFused) {
  check_model("synth-qwen2-q4_k_m.gguf", 21, 16,
              {"blk.0.attn_q+attn_q_b", "blk.0.attn_k+attn_k_b", "blk.0.attn_v+attn_v_b", "blk.0.attn_out+ffn_inp",
               "blk.0.ffn_out+l_out"});
  ;
}
TEST(MmqEpilogue, LlamaResidualsFused) {
  check_model("synth-llama-q4_k_m.gguf", 18, 16, {"blk.0.attn_out+ffn_inp", "blk.0.ffn_out+l_out"});
}

}  // namespace
}  // namespace rocky::vulkan
