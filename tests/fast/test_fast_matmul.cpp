// quantize_q8_1 and mul_mmq (OpSDot and no-dot variants) on lavapipe, with validation and
// synchronization validation on, against CPU oracles:
//  - quantize_q8_1 vs a naive CPU q8_1 (ggml's quantize_row_q8_1_ref formula);
//  - mul_mmq vs an f64 product of the dequantized weights (rocky_quant, bit-exact with ggml) and the
//    SAME q8_1 activations read back from the GPU: integer dots are exact, so NMSE ≤ 1e-6;
//  - every output is written (poisoned with NaN first); random data, odd M, N from 1 to 1024.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/vulkan/memory.hpp"
#include "backend/vulkan/ops/matmul_fast.hpp"
#include "backend/vulkan/pipeline_stats.hpp"
#include "backend/vulkan/roofline.hpp"
#include "core/error.hpp"
#include "quant/quant.hpp"
#include "fast_test_util.hpp"

namespace rocky::vulkan {
namespace {

using Harness = test::FastHarness;

Harness& harness() {
  static Harness* h = new Harness(0, true);  // destroyed by the environment below
  return *h;
}
struct HarnessEnv : ::testing::Environment {
  void TearDown() override { EXPECT_EQ(harness().inst->error_count(), 0u) << "Vulkan validation errors"; }
};
::testing::Environment* const k_env = ::testing::AddGlobalTestEnvironment(new HarnessEnv);

using test::random_weights;

struct Q81 {
  std::vector<uint32_t> qs;
  std::vector<float> ds;  // pairs (d, d·Σq)
};

// GPU quantize_q8_1 of x [k, n] followed by mul_mmq; returns y [m, n] and the q8_1 activations.
std::vector<float> run_mmq(const tune::DeviceProfile& prof, DType t, const std::vector<uint8_t>& wbytes,
                           const std::vector<float>& x, uint32_t m, uint32_t n, uint32_t k, bool use_dot, Q81* q) {
  Harness& h = harness();
  Buffer wb = h.mem->create("w", wbytes.size(), BufferKind::DEVICE);
  Buffer xb = h.mem->create("x", x.size() * 4, BufferKind::DEVICE);
  Buffer qb = h.mem->create("qs", fast::q8_1_qs_bytes(k, n), BufferKind::DEVICE);
  Buffer db = h.mem->create("ds", fast::q8_1_ds_bytes(k, n), BufferKind::DEVICE);
  Buffer yb = h.mem->create("y", size_t{m} * n * 4, BufferKind::DEVICE);
  h.mem->upload(wb, 0, wbytes.data(), wbytes.size());
  h.mem->upload(xb, 0, x.data(), x.size() * 4);
  std::vector<float> y(size_t{m} * n, std::nanf(""));
  h.mem->upload(yb, 0, y.data(), y.size() * 4);
  ops::Weight w{&wb, t, k, m, row_bytes(t, k), "w"};
  Buffer rb = fast::upload_for_mmq(*h.mem, w, wbytes.data(), prof.mmq_q4k_nibbles);
  w.mmq_buf = &rb;
  h.rec->begin();
  fast::quantize_q8_1(*h.env, {&xb, 0, xb.size()}, k, n, {&qb, 0, qb.size()}, {&db, 0, db.size()}, "q");
  fast::mul_mmq(*h.env, prof, w, {&qb, 0, qb.size()}, {&db, 0, db.size()}, n, {&yb, 0, yb.size()}, use_dot, "mmq");
  h.rec->submit_and_wait();
  h.mem->download(yb, 0, y.data(), y.size() * 4);
  q->qs.resize(qb.size() / 4);
  q->ds.resize(db.size() / 4);
  h.mem->download(qb, 0, q->qs.data(), qb.size());
  h.mem->download(db, 0, q->ds.data(), db.size());
  return y;
}

double nmse_vs_same_q81(const std::vector<float>& y, const std::vector<float>& deq, const Q81& q, uint32_t m,
                        uint32_t n, uint32_t k) {
  const uint32_t nb = k / 32;
  double num = 0, den = 0;
  for (uint32_t c = 0; c < n; ++c) {
    std::vector<double> xv(k);
    for (uint32_t b = 0; b < nb; ++b)
      for (uint32_t i = 0; i < 32; ++i) {
        uint32_t word = q.qs[(size_t{c} * nb + b) * 8 + i / 4];
        xv[b * 32 + i] =
            static_cast<double>(q.ds[2 * (size_t{c} * nb + b)]) * static_cast<int8_t>(word >> (8 * (i % 4)));
      }
    for (uint32_t r = 0; r < m; ++r) {
      double ref = 0;
      for (uint32_t i = 0; i < k; ++i) ref += static_cast<double>(deq[size_t{r} * k + i]) * xv[i];
      double got = y[size_t{c} * m + r];
      if (!std::isfinite(got)) return INFINITY;  // unwritten (NaN poison) or broken
      num += (got - ref) * (got - ref);
      den += ref * ref;
    }
  }
  return num / den;
}

std::vector<float> random_x(uint32_t k, uint32_t n, std::mt19937& rng) {
  std::vector<float> x(size_t{k} * n);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (auto& v : x) v = g(rng);
  return x;
}

const tune::DeviceProfile& device_profile() {
  const DeviceInfo& i = harness().dev->info();
  return tune::select_profile(i.vendor_id, i.driver_name, i.type == VK_PHYSICAL_DEVICE_TYPE_CPU);
}

TEST(FastMatmul, QuantizeQ81MatchesCpu) {
  std::mt19937 rng(7);
  const uint32_t k = 256, n = 37, nb = k / 32;
  auto x = random_x(k, n, rng);
  for (uint32_t i = 0; i < 32; ++i) x[32 + i] = 0.0f;  // one all-zero block: d = 0, q = 0
  std::vector<float> deq;
  auto w = random_weights(DType::Q8_0, k, 3, rng, deq);
  Q81 q;
  run_mmq(device_profile(), DType::Q8_0, w, x, 3, n, k, harness().dev->info().int8_dot, &q);
  size_t mismatches = 0;
  for (uint32_t c = 0; c < n; ++c)
    for (uint32_t b = 0; b < nb; ++b) {
      const float* xb = &x[size_t{c} * k + b * 32];
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
      const size_t blk = size_t{c} * nb + b;
      EXPECT_NEAR(q.ds[2 * blk], d, 1e-6 * std::max(1.0f, d));
      int sum = 0;
      for (int i = 0; i < 32; ++i) {
        int want = static_cast<int>(std::roundf(xb[i] * id));
        int got = static_cast<int8_t>(q.qs[blk * 8 + i / 4] >> (8 * (i % 4)));
        if (got != want) ++mismatches;  // only a ±1 tie flip from a 1-ulp 1/d difference is tolerated
        EXPECT_LE(std::abs(got - want), 1);
        sum += got;
      }
      EXPECT_NEAR(q.ds[2 * blk + 1], q.ds[2 * blk] * static_cast<float>(sum),
                  1e-5 * std::max(1.0, std::fabs(1.0 * q.ds[2 * blk] * sum)));
    }
  EXPECT_LE(mismatches, size_t{2});
}

struct Shape {
  uint32_t m, n, k;
};

void check_type(DType t, const std::vector<Shape>& shapes, const tune::DeviceProfile& prof) {
  std::mt19937 rng(static_cast<uint32_t>(t) * 1000 + 1);
  const bool has_dot = harness().dev->info().int8_dot;
  for (const Shape& s : shapes) {
    std::vector<float> deq;
    auto w = random_weights(t, s.k, s.m, rng, deq);
    auto x = random_x(s.k, s.n, rng);
    for (bool dot : {true, false}) {
      if (dot && !has_dot) continue;
      Q81 q;
      auto y = run_mmq(prof, t, w, x, s.m, s.n, s.k, dot, &q);
      double e = nmse_vs_same_q81(y, deq, q, s.m, s.n, s.k);
      EXPECT_LE(e, 1e-6) << dtype_name(t) << " M=" << s.m << " N=" << s.n << " K=" << s.k << (dot ? " dot" : " nodot")
                         << " profile " << prof.name;
    }
  }
}

// N from 1 to 1024 (odd included), M odd, K a multiple of the block (256 for the K-quants).
TEST(FastMatmul, MulMmqQ4K) {
  check_type(DType::Q4_K, {{67, 1, 256}, {33, 1024, 256}, {129, 45, 512}}, device_profile());
}
TEST(FastMatmul, MulMmqQ6K) { check_type(DType::Q6_K, {{67, 1, 256}, {129, 45, 512}}, device_profile()); }
TEST(FastMatmul, MulMmqQ8_0) { check_type(DType::Q8_0, {{67, 3, 96}, {65, 77, 160}}, device_profile()); }
TEST(FastMatmul, MulMmqQ4_0) { check_type(DType::Q4_0, {{67, 3, 96}, {65, 77, 160}}, device_profile()); }
// the q5 types (q5_0 signed −16..15; q5_1 and q5_K affine 0..31 with the min term).
TEST(FastMatmul, MulMmqQ5_0) { check_type(DType::Q5_0, {{67, 3, 96}, {65, 77, 896}}, device_profile()); }
TEST(FastMatmul, MulMmqQ5_1) { check_type(DType::Q5_1, {{67, 3, 96}, {65, 77, 160}}, device_profile()); }
TEST(FastMatmul, MulMmqQ5K) { check_type(DType::Q5_K, {{67, 1, 256}, {129, 45, 512}}, device_profile()); }

// Other tile shapes, including two q8_1 blocks per stage (BK 64, K not a multiple of BK) and the
// shipped mali-valhall / nvidia tiles (within lavapipe's limits).
TEST(FastMatmul, MulMmqOtherTiles) {
  tune::DeviceProfile p = tune::builtin_profile("mali-valhall");
  check_type(DType::Q4_K, {{65, 19, 256}}, p);
  p.mmq = {64, 32, 64, 32, 16, 4, 2, 256, 1, 1};  // with prefetch
  check_type(DType::Q4_0, {{65, 19, 96}}, p);
  check_type(DType::Q6_K, {{65, 19, 256}}, p);
  check_type(DType::Q5_K, {{65, 19, 256}}, p);
  check_type(DType::Q5_0, {{65, 19, 96}}, p);
  tune::DeviceProfile nv = tune::builtin_profile("nvidia");
  check_type(DType::Q4_K, {{131, 70, 256}}, nv);  // 5 workgroups < min_workgroups: the 16×64 alternative
  nv.min_workgroups = 0;                          // the main 32×128 4×8 tile (alone: 16×64 pads less)
  const auto alts = nv.mmq_alt;
  nv.mmq_alt.clear();
  ASSERT_EQ(tune::pick_mmq_tile(nv, 131, 70).bm, 32u);
  check_type(DType::Q4_K, {{131, 70, 256}}, nv);
  check_type(DType::Q6_K, {{131, 70, 256}}, nv);
  check_type(DType::Q5_1, {{131, 70, 96}}, nv);
  nv.mmq_alt = alts;
  nv.min_workgroups = 6;  // 32×128: 5 workgroups; 16×64 8×2: 18
  ASSERT_EQ(tune::pick_mmq_tile(nv, 131, 70).bm, 16u);
  check_type(DType::Q8_0, {{131, 70, 96}}, nv);
}

// The mmq repack (ops/matmul_fast.hpp) reproduces rocky_quant's dequantize_row (bit-exact with
// ggml) bit for bit: value i of a block = s0 · q_i (q6_K: s0 / s1 by half; q4_K: s0 · q_i + s1),
// decoded from the layout by fast::mmq_value (the kernels' arithmetic).
TEST(FastMatmul, RepackForMmqIsBitExact) {
  std::mt19937 rng(99);
  for (DType t : {DType::Q4_0, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    for (bool nib : {false, true}) {
      const uint32_t k = 512, m = 7;
      std::vector<float> deq;
      auto w = random_weights(t, k, m, rng, deq);
      const fast::MmqLayout l = fast::mmq_layout(t, k, m, nib);
      EXPECT_EQ(l.nibbles, nib && (t == DType::Q4_K || t == DType::Q6_K));  // q6_K nibbles + high bits
      EXPECT_EQ(l.s_offset % 256, 0u);
      std::vector<uint8_t> r(l.bytes);
      fast::repack_for_mmq(t, w.data(), k, m, nib, r.data());
      size_t bad = 0;
      for (uint32_t row = 0; row < m; ++row)
        for (uint32_t i = 0; i < k; ++i) {
          const float v = fast::mmq_value(t, l, r.data(), row, i);  // as the kernels dequantize it
          const float want = deq[size_t{row} * k + i];
          uint32_t vb, wb;
          std::memcpy(&vb, &v, 4);
          std::memcpy(&wb, &want, 4);
          bad += vb != wb;
        }
      EXPECT_EQ(bad, 0u) << dtype_name(t) << (nib ? " nibbles" : " int8");
    }
  EXPECT_THROW(fast::mmq_layout(DType::Q4_K, 100, 3, false), rocky::Error);
  EXPECT_THROW(fast::mmq_layout(DType::F16, 256, 3, false), rocky::Error);
  // An unsupported type is refused with the supported list.
  try {
    fast::mmq_layout(DType::Q3_K, 256, 3, false);
    ADD_FAILURE() << "q3_K accepted";
  } catch (const rocky::Error& e) {
    EXPECT_NE(std::string(e.what()).find("q3_K"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(fast::mmq_supported_types()), std::string::npos) << e.what();
  }
}

// q4_K in both repack layouts through the kernel, and the shape-aware tile choice: with
// min_workgroups above the main tile's grid an alternative tile runs (odd M, several N).
TEST(FastMatmul, MulMmqNibblesAndAltTiles) {
  tune::DeviceProfile p = tune::builtin_profile("llvmpipe");
  p.mmq_q4k_nibbles = true;
  check_type(DType::Q4_K, {{67, 5, 256}, {33, 70, 512}}, p);
  p.mmq_q4k_nibbles = false;
  p.mmq_alt = {{16, 32, 64, 16, 16, 4, 4, 32, 1, 1}, {16, 16, 32, 16, 16, 4, 2, 32, 1, 0}};
  p.min_workgroups = 1000;                            // none reaches it: the tile with the most workgroups runs
  EXPECT_EQ(tune::pick_mmq_tile(p, 67, 37).bn, 16u);  // 32×32: 6, 16×32: 10, 16×16: 15
  EXPECT_EQ(tune::pick_mmq_tile(p, 67, 5).bn, 32u);   // 3, 5, 5: the first of equals
  check_type(DType::Q4_K, {{67, 5, 256}}, p);
  check_type(DType::Q6_K, {{67, 37, 256}}, p);
  p.min_workgroups = 4;  // 67×5: 32×32 gives 3, 16×32 and 16×16 give 5; N 5 < BN 32: the least padding
  EXPECT_EQ(tune::pick_mmq_tile(p, 67, 5).bm, 16u);
  EXPECT_EQ(tune::pick_mmq_tile(p, 67, 5).bn, 16u);   // 80×16 computed against 16×32's 80×32
  EXPECT_EQ(tune::pick_mmq_tile(p, 67, 64).bm, 32u);  // 3 × 2 = 6: the main tile
  check_type(DType::Q8_0, {{67, 5, 96}}, p);
  p.mmq_alt[1].tm = 8;  // an alternative over the device's limits is refused even when unused
  EXPECT_THROW(check_type(DType::Q8_0, {{67, 5, 96}}, p), rocky::Error);
}

// mul_mm: weights dequantized into f32 (NMSE ≤ 1e-6) or f16 (≤ 5e-4) shared tiles vs an f64 product
// of the dequantized weights and the f32 activations.
void check_mm(DType t, const std::vector<Shape>& shapes, const tune::DeviceProfile& prof) {
  Harness& h = harness();
  std::mt19937 rng(static_cast<uint32_t>(t) * 77 + 5);
  for (const Shape& s : shapes) {
    std::vector<float> deq;
    std::vector<uint8_t> wbytes;
    if (t == DType::F32 || t == DType::F16) {
      std::uniform_real_distribution<float> u(-1, 1);
      deq.resize(size_t{s.k} * s.m);
      wbytes.resize(row_bytes(t, s.k) * s.m);
      for (size_t i = 0; i < deq.size(); ++i) {
        float f = u(rng);
        if (t == DType::F32) {
          std::memcpy(&wbytes[4 * i], &f, 4);
        } else {
          uint16_t hv = quant::f32_to_f16(f);
          std::memcpy(&wbytes[2 * i], &hv, 2);
          f = quant::f16_to_f32(hv);
        }
        deq[i] = f;
      }
    } else {
      wbytes = random_weights(t, s.k, s.m, rng, deq);
    }
    auto x = random_x(s.k, s.n, rng);
    for (bool f16 : {false, true}) {
      if (f16 && !h.dev->info().fp16) continue;
      Buffer wb = h.mem->create("w", wbytes.size(), BufferKind::DEVICE);
      Buffer xb = h.mem->create("x", x.size() * 4, BufferKind::DEVICE);
      Buffer yb = h.mem->create("y", size_t{s.m} * s.n * 4, BufferKind::DEVICE);
      h.mem->upload(wb, 0, wbytes.data(), wbytes.size());
      h.mem->upload(xb, 0, x.data(), x.size() * 4);
      std::vector<float> y(size_t{s.m} * s.n, std::nanf(""));
      h.mem->upload(yb, 0, y.data(), y.size() * 4);
      ops::Weight w{&wb, t, s.k, s.m, row_bytes(t, s.k), "w"};
      h.rec->begin();
      fast::mul_mm(*h.env, prof, w, {&xb, 0, xb.size()}, s.n, {&yb, 0, yb.size()}, f16, "mm");
      h.rec->submit_and_wait();
      h.mem->download(yb, 0, y.data(), y.size() * 4);
      double num = 0, den = 0;
      bool finite = true;
      for (uint32_t c = 0; c < s.n; ++c)
        for (uint32_t r = 0; r < s.m; ++r) {
          double ref = 0;
          for (uint32_t i = 0; i < s.k; ++i)
            ref += static_cast<double>(deq[size_t{r} * s.k + i]) * x[size_t{c} * s.k + i];
          double got = y[size_t{c} * s.m + r];
          finite = finite && std::isfinite(got);
          num += (got - ref) * (got - ref);
          den += ref * ref;
        }
      EXPECT_TRUE(finite) << "unwritten output";
      EXPECT_LE(num / den, f16 ? 5e-4 : 1e-6) << dtype_name(t) << " M=" << s.m << " N=" << s.n << " K=" << s.k
                                              << (f16 ? " f16 tiles" : " f32 tiles") << " profile " << prof.name;
    }
  }
}

TEST(FastMatmul, MulMmAllWeightTypes) {
  const auto& p = device_profile();
  check_mm(DType::Q4_K, {{67, 1, 256}, {33, 1024, 256}}, p);
  check_mm(DType::Q6_K, {{67, 45, 256}}, p);
  check_mm(DType::Q8_0, {{65, 77, 96}}, p);
  check_mm(DType::Q4_0, {{65, 7, 160}}, p);
  check_mm(DType::F16, {{63, 29, 100}}, p);
  check_mm(DType::F32, {{63, 29, 100}}, p);
  check_mm(DType::Q4_K, {{65, 19, 256}}, tune::builtin_profile("mali-valhall"));
}

// Producers: rms_norm and silu·mul written straight to q8_1 equal the CPU op followed by the q8_1
// quantizer (a ±1 flip at a rounding tie from float summation order is tolerated, rarely).
void check_q81(const std::vector<float>& f, uint32_t ne0, uint32_t n_cols, const Q81& q) {
  const uint32_t nb = ne0 / 32;
  size_t flips = 0;
  for (uint32_t c = 0; c < n_cols; ++c)
    for (uint32_t b = 0; b < nb; ++b) {
      const float* v = &f[size_t{c} * ne0 + b * 32];
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[i]));
      const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
      const size_t blk = size_t{c} * nb + b;
      EXPECT_NEAR(q.ds[2 * blk], d, 1e-5 * d + 1e-12);
      for (int i = 0; i < 32; ++i) {
        int want = static_cast<int>(std::roundf(v[i] * id));
        int got = static_cast<int8_t>(q.qs[blk * 8 + i / 4] >> (8 * (i % 4)));
        EXPECT_LE(std::abs(got - want), 1);
        flips += got != want;
      }
    }
  EXPECT_LE(flips, size_t{ne0} * n_cols / 200) << "q8_1 values differing from the CPU";
}

TEST(FastMatmul, ProducersWriteQ81) {
  Harness& h = harness();
  std::mt19937 rng(11);
  const uint32_t ne0 = 320, n = 7;
  auto x = random_x(ne0, n, rng), g = random_x(ne0, n, rng), w = random_x(ne0, 1, rng);
  Buffer xb = h.mem->create("x", x.size() * 4, BufferKind::DEVICE),
         gb = h.mem->create("g", g.size() * 4, BufferKind::DEVICE);
  Buffer wb = h.mem->create("w", w.size() * 4, BufferKind::DEVICE);
  Buffer q1 = h.mem->create("qs1", fast::q8_1_qs_bytes(ne0, n), BufferKind::DEVICE);
  Buffer d1 = h.mem->create("ds1", fast::q8_1_ds_bytes(ne0, n), BufferKind::DEVICE);
  Buffer q2 = h.mem->create("qs2", fast::q8_1_qs_bytes(ne0, n), BufferKind::DEVICE);
  Buffer d2 = h.mem->create("ds2", fast::q8_1_ds_bytes(ne0, n), BufferKind::DEVICE);
  h.mem->upload(xb, 0, x.data(), x.size() * 4);
  h.mem->upload(gb, 0, g.data(), g.size() * 4);
  h.mem->upload(wb, 0, w.data(), w.size() * 4);
  const float eps = 1e-6f;
  h.rec->begin();
  fast::rms_norm_q8_1(*h.env, {&xb, 0, xb.size()}, {&wb, 0, wb.size()}, ne0, n, eps, {&q1, 0, q1.size()},
                      {&d1, 0, d1.size()}, "rms_norm_q8_1");
  fast::silu_mul_q8_1(*h.env, {&gb, 0, gb.size()}, {&xb, 0, xb.size()}, ne0, n, {&q2, 0, q2.size()},
                      {&d2, 0, d2.size()}, "silu_mul_q8_1");
  h.rec->submit_and_wait();
  Q81 a, b;
  a.qs.resize(q1.size() / 4);
  a.ds.resize(d1.size() / 4);
  b.qs.resize(q2.size() / 4);
  b.ds.resize(d2.size() / 4);
  h.mem->download(q1, 0, a.qs.data(), q1.size());
  h.mem->download(d1, 0, a.ds.data(), d1.size());
  h.mem->download(q2, 0, b.qs.data(), q2.size());
  h.mem->download(d2, 0, b.ds.data(), d2.size());
  std::vector<float> rn(x.size()), sm(x.size());
  for (uint32_t c = 0; c < n; ++c) {
    double ss = 0;
    for (uint32_t i = 0; i < ne0; ++i) ss += double{x[size_t{c} * ne0 + i]} * x[size_t{c} * ne0 + i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / ne0 + eps));
    for (uint32_t i = 0; i < ne0; ++i) rn[size_t{c} * ne0 + i] = x[size_t{c} * ne0 + i] * inv * w[i];
  }
  for (size_t i = 0; i < x.size(); ++i) sm[i] = g[i] / (1.0f + std::exp(-g[i])) * x[i];
  check_q81(rn, ne0, n, a);
  check_q81(sm, ne0, n, b);
}

// The producers' q8_1 is bit-identical to the f32 op (rms_norm at the same workgroup size, so the
// same Σx² order — for more than 8 columns; silu_mul) followed by quantize_q8_1, on awkward shapes: ne0 = 32·odd, odd and
// single columns, and inputs at f32 offsets that are not 16-byte aligned (the producers' scalar
// load path) as well as aligned ones (vec4 loads). Also against the CPU (check_q81) on the same data.
TEST(FastMatmul, ProducersEqualQuantizeOfTheF32Op) {
  Harness& h = harness();
  struct Case {
    uint32_t ne0, n, off;  // off: f32 elements before x, w and gate in their buffers
  };
  std::mt19937 rng(23);
  for (const Case& c : {Case{96, 5, 0}, Case{352, 3, 1}, Case{32, 1, 3}, Case{2080, 9, 4}, Case{1120, 33, 2}}) {
    const uint32_t ne0 = c.ne0, n = c.n;
    auto x = random_x(ne0, n, rng), g = random_x(ne0, n, rng), w = random_x(ne0, 1, rng);
    for (uint32_t i = 0; i < 32; ++i) x[i] = 0.0f;  // an all-zero rms block of column 0 is not zero after
    for (uint32_t i = 0; i < 32; ++i) g[(n - 1) * size_t{ne0} + i] = 0.0f;  // silu(0)·up = 0: d = 0
    for (auto& v : g) v *= 4.0f;                                            // silu's tails
    const uint64_t off = uint64_t{c.off} * 4, bytes = x.size() * 4;
    Buffer xb = h.mem->create("x", off + bytes, BufferKind::DEVICE),
           gb = h.mem->create("g", off + bytes, BufferKind::DEVICE);
    Buffer wb = h.mem->create("w", off + ne0 * 4, BufferKind::DEVICE);
    Buffer fb = h.mem->create("f32", bytes, BufferKind::DEVICE),
           sb = h.mem->create("silu f32", bytes, BufferKind::DEVICE);
    std::vector<Buffer> q, d;
    for (int i = 0; i < 5; ++i) {
      q.push_back(h.mem->create("qs", fast::q8_1_qs_bytes(ne0, n), BufferKind::DEVICE));
      d.push_back(h.mem->create("ds", fast::q8_1_ds_bytes(ne0, n), BufferKind::DEVICE));
    }
    h.mem->upload(xb, off, x.data(), bytes);
    h.mem->upload(gb, off, g.data(), bytes);
    h.mem->upload(wb, off, w.data(), ne0 * 4);
    const ops::Region xr{&xb, off, bytes}, gr{&gb, off, bytes}, wr{&wb, off, uint64_t{ne0} * 4};
    const float eps = 1e-5f;
    auto qr = [&](int i) { return ops::Region{&q[i], 0, q[i].size()}; };
    auto dr = [&](int i) { return ops::Region{&d[i], 0, d[i].size()}; };
    const uint32_t wg = h.env->wg;
    h.env->wg = fast::rms_norm_q8_1_wg(ops::profile(*h.env), h.dev->info());  // rms_norm.comp at rms_norm_q8_1's size
    h.rec->begin();
    fast::rms_norm_q8_1(*h.env, xr, wr, ne0, n, eps, qr(0), dr(0), "rms_norm_q8_1");
    ops::rms_norm(*h.env, xr, wr, ne0, n, eps, {&fb, 0, bytes}, "rms_norm");
    fast::quantize_q8_1(*h.env, {&fb, 0, bytes}, ne0, n, qr(1), dr(1), "q8_1 of rms_norm");
    fast::silu_mul_q8_1(*h.env, gr, xr, ne0, n, qr(2), dr(2), "silu_mul_q8_1");
    ops::silu_mul(*h.env, gr, xr, uint64_t{ne0} * n, {&sb, 0, bytes}, "silu_mul");
    fast::quantize_q8_1(*h.env, {&sb, 0, bytes}, ne0, n, qr(3), dr(3), "q8_1 of silu_mul");
    fast::quantize_q8_1(*h.env, xr, ne0, n, qr(4), dr(4), "q8_1 of x");  // x at f32 offset c.off
    h.rec->submit_and_wait();
    h.env->wg = wg;
    std::vector<Q81> r(5);
    for (int i = 0; i < 5; ++i) {
      r[i].qs.resize(q[i].size() / 4);
      r[i].ds.resize(d[i].size() / 4);
      h.mem->download(q[i], 0, r[i].qs.data(), q[i].size());
      h.mem->download(d[i], 0, r[i].ds.data(), d[i].size());
    }
    const std::string what = "ne0 " + std::to_string(ne0) + " n " + std::to_string(n) + " off " + std::to_string(c.off);
    for (int p : {0, 2}) {
      // ≤ 8 columns: rms_norm_q8_1 sums Σx² in two flat passes (FLAT), another order than
      // rms_norm.comp's tree — held to the CPU oracle below instead.
      if (p == 0 && n <= fast::k_matvec_max_cols) continue;
      EXPECT_EQ(r[p].qs, r[p + 1].qs) << (p ? "silu_mul_q8_1 " : "rms_norm_q8_1 ") << what;
      EXPECT_EQ(0, std::memcmp(r[p].ds.data(), r[p + 1].ds.data(), r[p].ds.size() * 4))
          << (p ? "silu_mul_q8_1 " : "rms_norm_q8_1 ") << what;
    }
    // Independent oracles: the CPU ops (f64 Σx²) quantized on the CPU, and the CPU quantizer of the
    // GPU's own f32 silu_mul (quantize_q8_1 from an offset-0 region) and of x (from offset c.off).
    std::vector<float> rn(x.size()), sm(x.size()), sg(x.size());
    for (uint32_t col = 0; col < n; ++col) {
      double ss = 0;
      for (uint32_t i = 0; i < ne0; ++i) ss += double{x[size_t{col} * ne0 + i]} * x[size_t{col} * ne0 + i];
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / ne0 + eps));
      for (uint32_t i = 0; i < ne0; ++i) rn[size_t{col} * ne0 + i] = x[size_t{col} * ne0 + i] * inv * w[i];
    }
    for (size_t i = 0; i < x.size(); ++i) sm[i] = g[i] / (1.0f + std::exp(-g[i])) * x[i];
    h.mem->download(sb, 0, sg.data(), bytes);
    check_q81(rn, ne0, n, r[0]);
    check_q81(sm, ne0, n, r[2]);
    check_q81(sg, ne0, n, r[3]);
    check_q81(x, ne0, n, r[4]);
    const size_t zero_blk = size_t{n - 1} * (ne0 / 32);
    EXPECT_EQ(r[2].ds[2 * zero_blk], 0.0f) << what;
    EXPECT_EQ(r[2].qs[zero_blk * 8], 0u) << what;
  }
}

TEST(FastMatmul, RefusesTilesOverTheBudget) {
  tune::DeviceProfile p = tune::builtin_profile("mali-valhall");
  p.mmq = {128, 128, 32, 64, 64, 8, 8, 256, 1};  // 128 accumulator registers > 16
  Harness& h = harness();
  Buffer wb = h.mem->create("w", row_bytes(DType::Q4_K, 256) * 5, BufferKind::DEVICE);
  Buffer qb = h.mem->create("qs", fast::q8_1_qs_bytes(256, 4), BufferKind::DEVICE);
  Buffer db = h.mem->create("ds", fast::q8_1_ds_bytes(256, 4), BufferKind::DEVICE);
  Buffer yb = h.mem->create("y", 5 * 4 * 4, BufferKind::DEVICE);
  ops::Weight w{&wb, DType::Q4_K, 256, 5, row_bytes(DType::Q4_K, 256), "w"};
  Buffer rb = h.mem->create("mmq", fast::mmq_layout(DType::Q4_K, 256, 5, false).bytes, BufferKind::DEVICE);
  w.mmq_buf = &rb;
  h.rec->begin();
  try {
    fast::mul_mmq(*h.env, p, w, {&qb, 0, qb.size()}, {&db, 0, db.size()}, 4, {&yb, 0, yb.size()}, false, "mmq");
    ADD_FAILURE() << "a 64-accumulator tile ran under a 16-accumulator budget";
  } catch (const rocky::Error& e) {
    EXPECT_NE(std::string(e.what()).find("accumulator registers"), std::string::npos) << e.what();
  }
  h.rec->submit_and_wait();  // nothing was recorded
}

TEST(FastMatmul, RooflineOnLavapipe) {
  RooflineOptions o;
  o.reps = 1;
  o.target_ms = 2;
  o.copy_bytes = 4 << 20;
  Roofline r = measure_roofline(*harness().dev, o);
  EXPECT_GT(r.fp32_tflops, 0);
  EXPECT_GT(r.copy_gbs, 0);
  if (harness().dev->info().fp16) {
    EXPECT_GT(r.fp16_tflops, 0);
  }
  if (harness().dev->info().int8_dot) {
    EXPECT_GT(r.int8_dot_tops, 0);
  }
  // lavapipe has no VK_KHR_pipeline_executable_properties: statistics are empty, nothing refused.
  for (const auto& s : collect_statistics(*harness().pipes)) EXPECT_FALSE(s.spills) << s.pipeline;
}

}  // namespace
}  // namespace rocky::vulkan
