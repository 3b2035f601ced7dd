// The int8-dot matvec (shaders/common/matvec_q8.glsl: matvec_q8.comp with subgroup
// reductions, matvec_q8_shared.comp without; fast::matvec_q8) on lavapipe with validation on:
//  - every weight type mul_mmq takes (q4_0, q5_0, q5_1, q8_0, q4_K with and without nibbles, q5_K,
//    q6_K with and without nibbles), M = 1, 37, 259, K = 32 · odd or 256 · k, n = 1, 3, 8, 12 and
//    21 columns (groups of ≤ 8 per workgroup), x quantized to q8_1 on the GPU: NMSE ≤ 1e-10
//    against an f64 product of the dequantized weights (rocky_quant, bit-exact with ggml) and the
//    SAME q8_1 activations read back (the integer dots are exact), every output written (NaN
//    poison), for shape variants (the device's default, 4 … 64 invocations, 1 … 8 rows, 1 or 2
//    blocks per iteration) with both reductions;
//  - it agrees with mul_mmq on the same q8_1 input (NMSE ≤ 1e-10: only the f32 summation order
//    differs; q4_K's min term cancels, so one output of M = 1 reaches ≈ 6e-12), and mul_mmq hands n ≤ Env::mmv_q8 columns to it (bit-identical to the direct call);
//  - the bias and residual epilogues (the residual also when the operand IS y);
//  - a 4 KiB binding limit (row windows) gives the same values;
//  - bad calls (0 or 65 columns, a device without int8 dot, small regions) are rocky::Errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/vulkan/memory.hpp"
#include "backend/vulkan/ops/matmul_fast.hpp"
#include "core/error.hpp"
#include "quant/quant.hpp"
#include "fast_test_util.hpp"

namespace rocky::vulkan {
namespace {

using Harness = test::FastHarness;

Harness& harness() {
  static Harness* h = new Harness();
  return *h;
}
struct HarnessEnv : ::testing::Environment {
  void TearDown() override { EXPECT_EQ(harness().inst->error_count(), 0u) << "Vulkan validation errors"; }
};
::testing::Environment* const k_env = ::testing::AddGlobalTestEnvironment(new HarnessEnv);

using test::mmv_profile;
using test::random_weights;

enum class Kernel { MATVEC_Q8, MUL_MMQ, MUL_MMQ_ROUTED };

struct Case {
  DType t;
  bool nib;
  uint32_t m, k, n;
};

struct Variant {
  const char* shape = nullptr;  // WG,ROWS[,SPLIT[,UNROLL]] (mmv_profile; nullptr: the device's default)
  bool subgroup = true;
  uint32_t cols_wg = 0, cols_rows = 0;   // the profile's shape for several columns (0: the profile's own)
  uint32_t q8_group = 8, q8_wouter = 0;  // columns per workgroup, and the order for more than 8
};

struct Result {
  std::vector<float> y;      // [M, n]
  std::vector<uint32_t> qs;  // the q8_1 activations the GPU made
  std::vector<float> ds;     // (d, d·Σq) pairs
};

// quantize_q8_1(x) then the product; y at an odd float offset. epi RESIDUAL: y holds the operand.
Result run(Recorder& rec, const Case& c, const std::vector<uint8_t>& wbytes, const std::vector<float>& x, Kernel kern,
           const Variant& var = {}, fast::Epilogue epi = fast::Epilogue::NONE, const std::vector<float>& operand = {}) {
  Harness& h = harness();
  DeviceInfo info = h.dev->info();
  info.subgroup_arith = info.subgroup_arith && var.subgroup;
  ops::Env env{rec, *h.pipes, info, {}, 128, false};
  env.mmv_q8 = kern == Kernel::MUL_MMQ ? 0 : fast::k_matvec_q8_max_cols;
  tune::DeviceProfile prof = mmv_profile(info, var.shape);
  if (var.cols_wg != 0) {
    prof.mmv.cols_wg = var.cols_wg;
    prof.mmv.cols_rows = var.cols_rows;
  }
  prof.mmv.q8_group = var.q8_group;
  prof.mmv.q8_wouter = var.q8_wouter;
  env.prof = &prof;
  const uint64_t yo = 5 * 4, ybytes = uint64_t{c.m} * c.n * 4;
  Buffer wb = h.mem->create("w", wbytes.size(), BufferKind::DEVICE);
  Buffer xb = h.mem->create("x", x.size() * 4, BufferKind::DEVICE);
  Buffer qb = h.mem->create("qs", fast::q8_1_qs_bytes(c.k, c.n), BufferKind::DEVICE);
  Buffer db = h.mem->create("ds", fast::q8_1_ds_bytes(c.k, c.n), BufferKind::DEVICE);
  Buffer yb = h.mem->create("y", yo + ybytes, BufferKind::DEVICE);
  Buffer eb = h.mem->create("e", 7 * 4 + uint64_t{c.m} * 4, BufferKind::DEVICE);
  h.mem->upload(wb, 0, wbytes.data(), wbytes.size());
  h.mem->upload(xb, 0, x.data(), x.size() * 4);
  std::vector<float> y(size_t{c.m} * c.n, std::nanf(""));
  h.mem->upload(yb, yo, y.data(), y.size() * 4);
  ops::Weight w{&wb, c.t, c.k, c.m, row_bytes(c.t, c.k), "w"};
  Buffer rb = fast::upload_for_mmq(*h.mem, w, wbytes.data(), c.nib);
  w.mmq_buf = &rb;
  fast::MmqEpilogue e{epi, {}};
  if (epi == fast::Epilogue::BIAS) {
    h.mem->upload(eb, 7 * 4, operand.data(), operand.size() * 4);
    e.operand = {&eb, 7 * 4, uint64_t{c.m} * 4};
  } else if (epi == fast::Epilogue::RESIDUAL) {
    h.mem->upload(yb, yo, operand.data(), operand.size() * 4);
    e.operand = {&yb, yo, ybytes};
  }
  const ops::Region qr{&qb, 0, qb.size()}, dr{&db, 0, db.size()}, yr{&yb, yo, ybytes};
  rec.begin();
  fast::quantize_q8_1(env, {&xb, 0, xb.size()}, c.k, c.n, qr, dr, "q");
  if (kern == Kernel::MATVEC_Q8)
    fast::matvec_q8(env, w, qr, dr, c.n, yr, "matvec_q8", e);
  else
    fast::mul_mmq(env, prof, w, qr, dr, c.n, yr, true, "mul_mmq", e);
  rec.submit_and_wait();
  Result r;
  r.y.resize(y.size());
  h.mem->download(yb, yo, r.y.data(), ybytes);
  r.qs.resize(qb.size() / 4);
  r.ds.resize(db.size() / 4);
  h.mem->download(qb, 0, r.qs.data(), qb.size());
  h.mem->download(db, 0, r.ds.data(), db.size());
  return r;
}

// NMSE of y [M, n] (minus `sub`, when given) against the f64 product of the dequantized weights and
// the q8_1 activations of r.
double nmse_vs_q81(const Result& r, const std::vector<float>& deq, const Case& c, const std::vector<float>& sub = {}) {
  const uint32_t nb = c.k / 32;
  double num = 0, den = 0;
  for (uint32_t col = 0; col < c.n; ++col) {
    std::vector<double> xv(c.k);
    for (uint32_t b = 0; b < nb; ++b)
      for (uint32_t i = 0; i < 32; ++i) {
        const uint32_t word = r.qs[(size_t{col} * nb + b) * 8 + i / 4];
        xv[b * 32 + i] =
            static_cast<double>(r.ds[2 * (size_t{col} * nb + b)]) * static_cast<int8_t>(word >> (8 * (i % 4)));
      }
    for (uint32_t row = 0; row < c.m; ++row) {
      double ref = 0;
      for (uint32_t i = 0; i < c.k; ++i) ref += static_cast<double>(deq[size_t{row} * c.k + i]) * xv[i];
      double got = r.y[size_t{col} * c.m + row];
      if (!sub.empty()) got -= sub[sub.size() == c.m ? row : size_t{col} * c.m + row];
      if (!std::isfinite(got)) return INFINITY;  // unwritten (NaN poison) or broken
      num += (got - ref) * (got - ref);
      den += ref * ref;
    }
  }
  return num / den;
}

double nmse_between(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return num / den;
}

std::vector<float> random_x(uint32_t k, uint32_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(size_t{k} * n);
  for (auto& v : x) v = g(rng);
  return x;
}

const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = [] {
    std::vector<Variant> r;
    for (const char* s :
         {static_cast<const char*>(nullptr), "64,8,0", "32,4,0,2", "4,1", "16,3,0,2", "8,2,0,1", "32,1,0,2"})
      for (bool sg : {true, false}) r.push_back({s, sg});
    // NVIDIA's batched-step shape (MatvecRule cols 32 × 2) and an odd one, on this device.
    for (bool sg : {true, false}) {
      r.push_back({nullptr, sg, 32, 2});
      r.push_back({nullptr, sg, 16, 3});
    }
    // Groups of up to 16 columns, the activations in registers or streamed past the weight units.
    for (bool sg : {true, false})
      for (uint32_t wo : {0u, 1u}) {
        r.push_back({nullptr, sg, 0, 0, 16, wo});
        r.push_back({nullptr, sg, 32, 2, 16, wo});
      }
    return r;
  }();
  return v;
}

void check(DType t, bool nib, std::vector<uint32_t> ks) {
  std::mt19937 rng(4321 + static_cast<unsigned>(t) * 11 + nib);
  for (uint32_t k : ks)
    for (uint32_t m : {1u, 37u, 259u}) {
      std::vector<float> deq;
      auto wbytes = random_weights(t, k, m, rng, deq);
      for (uint32_t n : {1u, 3u, 8u, 9u, 12u, 21u}) {
        const Case c{t, nib, m, k, n};
        auto x = random_x(k, n, rng);
        const Result ref = run(*harness().rec, c, wbytes, x, Kernel::MUL_MMQ);
        double worst = 0;
        const bool all = n == 1 || n == 8 || n == 21;  // every variant; the default shape otherwise
        for (const Variant& var : variants()) {
          if (!all && (var.shape != nullptr || var.cols_wg != 0)) continue;
          if (var.cols_wg != 0 && n == 1) continue;  // the column shape serves 2 … 16 columns
          const Result r = run(*harness().rec, c, wbytes, x, Kernel::MATVEC_Q8, var);
          const double e = nmse_vs_q81(r, deq, c);
          worst = std::max(worst, e);
          const std::string what = std::string(dtype_name(t)) + " nib " + std::to_string(nib) + " M " +
                                   std::to_string(m) + " K " + std::to_string(k) + " n " + std::to_string(n) +
                                   " shape " + (var.shape ? var.shape : "default") + " cols " +
                                   std::to_string(var.cols_wg) + "x" + std::to_string(var.cols_rows) + " subgroup " +
                                   std::to_string(var.subgroup);
          EXPECT_LE(e, 1e-10) << what;
          EXPECT_EQ(0, std::memcmp(r.qs.data(), ref.qs.data(), r.qs.size() * 4)) << what;  // same q8_1 input
          EXPECT_LE(nmse_between(r.y, ref.y), 1e-10) << what << " (vs mul_mmq)";
        }
        // mul_mmq with Env::mmv_q8 ≥ n runs matvec_q8 (the device's default shape): bit-identical.
        const Result direct = run(*harness().rec, c, wbytes, x, Kernel::MATVEC_Q8);
        const Result routed = run(*harness().rec, c, wbytes, x, Kernel::MUL_MMQ_ROUTED);
        EXPECT_EQ(0, std::memcmp(direct.y.data(), routed.y.data(), direct.y.size() * 4))
            << dtype_name(t) << " M " << m << " n " << n;
        std::printf("matvec_q8 %-5s nib %d M %4u K %5u n %2u  worst NMSE %.3g\n", std::string(dtype_name(t)).c_str(),
                    nib, m, k, n, worst);
      }
    }
}

TEST(MatvecQ8, Q4_0) { check(DType::Q4_0, false, {32, 32 * 33}); }
TEST(MatvecQ8, Q5_0) { check(DType::Q5_0, false, {96}); }
TEST(MatvecQ8, Q5_1) { check(DType::Q5_1, false, {32 * 33}); }
TEST(MatvecQ8, Q8_0) { check(DType::Q8_0, false, {32, 96}); }
TEST(MatvecQ8, Q4K) { check(DType::Q4_K, false, {256}); }
TEST(MatvecQ8, Q4KNibbles) { check(DType::Q4_K, true, {256, 768}); }
TEST(MatvecQ8, Q5K) { check(DType::Q5_K, false, {768}); }
TEST(MatvecQ8, Q6K) { check(DType::Q6_K, false, {256}); }
TEST(MatvecQ8, Q6KNibbles) { check(DType::Q6_K, true, {256, 768}); }

// Bias and residual epilogues: y − operand is the product (residual: operand [M, n] in y itself).
TEST(MatvecQ8, Epilogues) {
  std::mt19937 rng(77);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (auto [t, nib] : {std::tuple{DType::Q4_K, true}, std::tuple{DType::Q6_K, true}, std::tuple{DType::Q8_0, false}})
    for (uint32_t n : {1u, 5u, 11u}) {
      const Case c{t, nib, 101, 512, n};
      std::vector<float> deq;
      auto wbytes = random_weights(t, c.k, c.m, rng, deq);
      auto x = random_x(c.k, n, rng);
      std::vector<float> bias(c.m), resid(size_t{c.m} * n);
      for (auto& v : bias) v = g(rng);
      for (auto& v : resid) v = g(rng);
      for (bool sg : {true, false}) {
        const Variant var{nullptr, sg};
        const Result rb = run(*harness().rec, c, wbytes, x, Kernel::MATVEC_Q8, var, fast::Epilogue::BIAS, bias);
        EXPECT_LE(nmse_vs_q81(rb, deq, c, bias), 1e-10) << dtype_name(t) << " n " << n << " bias";
        const Result rr = run(*harness().rec, c, wbytes, x, Kernel::MATVEC_Q8, var, fast::Epilogue::RESIDUAL, resid);
        EXPECT_LE(nmse_vs_q81(rr, deq, c, resid), 1e-10) << dtype_name(t) << " n " << n << " residual";
      }
    }
}

// A 4 KiB binding limit: the weight in windows of a few rows, the same values as one window.
TEST(MatvecQ8, RowWindows) {
  Harness& h = harness();
  Recorder small(*h.dev, 4096);
  std::mt19937 rng(8);
  for (auto [t, k, nib] : {std::tuple{DType::Q8_0, 800u, false}, std::tuple{DType::Q4_K, 512u, true}}) {
    const Case c{t, nib, 203, k, 1};
    std::vector<float> deq;
    auto wbytes = random_weights(t, k, c.m, rng, deq);
    auto x = random_x(k, 1, rng);
    const Result a = run(*h.rec, c, wbytes, x, Kernel::MATVEC_Q8);
    const Result b = run(small, c, wbytes, x, Kernel::MATVEC_Q8);
    EXPECT_LE(nmse_vs_q81(b, deq, c), 1e-10) << dtype_name(t);
    EXPECT_EQ(0, std::memcmp(a.y.data(), b.y.data(), a.y.size() * 4)) << dtype_name(t);
  }
}

TEST(MatvecQ8, BadCallsAreErrors) {
  Harness& h = harness();
  std::mt19937 rng(9);
  std::vector<float> deq;
  auto wbytes = random_weights(DType::Q4_0, 64, 8, rng, deq);
  Buffer wb = h.mem->create("w", wbytes.size(), BufferKind::DEVICE);
  ops::Weight w{&wb, DType::Q4_0, 64, 8, row_bytes(DType::Q4_0, 64), "w"};
  Buffer rb = fast::upload_for_mmq(*h.mem, w, wbytes.data(), false);
  w.mmq_buf = &rb;
  Buffer qb = h.mem->create("qs", fast::q8_1_qs_bytes(64, 65), BufferKind::DEVICE);
  Buffer db = h.mem->create("ds", fast::q8_1_ds_bytes(64, 65), BufferKind::DEVICE);
  Buffer yb = h.mem->create("y", 8 * 65 * 4, BufferKind::DEVICE);
  const ops::Region qr{&qb, 0, qb.size()}, dr{&db, 0, db.size()}, yr{&yb, 0, yb.size()};
  h.rec->begin();
  EXPECT_THROW(fast::matvec_q8(*h.env, w, qr, dr, 0, yr, "zero columns"), Error);
  EXPECT_THROW(fast::matvec_q8(*h.env, w, qr, dr, 65, yr, "65 columns"), Error);
  EXPECT_THROW(fast::matvec_q8(*h.env, w, qr, dr, 4, {&yb, 0, 8 * 3 * 4}, "small y"), Error);
  EXPECT_THROW(fast::matvec_q8(*h.env, w, {&qb, 0, 64}, dr, 4, yr, "small q8_1"), Error);
  DeviceInfo no_dot = h.dev->info();
  no_dot.int8_dot = false;
  ops::Env env{*h.rec, *h.pipes, no_dot, {}, 128, false};
  EXPECT_THROW(fast::matvec_q8(env, w, qr, dr, 1, yr, "no int8 dot"), Error);
  ops::Weight bare = w;
  bare.mmq_buf = nullptr;
  EXPECT_THROW(fast::matvec_q8(*h.env, bare, qr, dr, 1, yr, "no repack"), Error);
  h.rec->submit_and_wait();
}

}  // namespace
}  // namespace rocky::vulkan
