// Decode matvec over the mmq repack (shaders/matvec_mmq.comp, ops::matvec_mmq) on lavapipe with
// validation on, against an f64 product of the weights dequantized by rocky_quant (bit-exact with
// ggml's dequantize_row_*) and the same f32 activations:
//  - q4_0, q8_0 (K = 32 · odd), q4_K (both repack layouts) and q6_K (K = 256 · k), M = 1, 37, 1001:
//    NMSE ≤ 1e-10 (f32 accumulation only), every output written (poisoned with NaN first);
//  - ops::matmul with N = 1 takes this kernel for a weight carrying its repack (bit-identical);
//  - a small binding limit splits the weight into many row windows, same result.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
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

using test::random_weights;

enum class Via { DIRECT, MATMUL };

// y = W · x on the GPU (x at an odd element offset inside its buffer, y too).
std::vector<float> run_matvec(Recorder& rec, DType t, const std::vector<uint8_t>& wbytes, const std::vector<float>& x,
                              uint32_t m, uint32_t k, bool nibbles, Via via) {
  Harness& h = harness();
  ops::Env env{rec, *h.pipes, h.dev->info(), {}, 128, false};
  constexpr uint64_t xo = 3 * 4, yo = 5 * 4;  // odd f32 offsets
  Buffer wb = h.mem->create("w", wbytes.size(), BufferKind::DEVICE);
  Buffer xb = h.mem->create("x", xo + x.size() * 4, BufferKind::DEVICE);
  Buffer yb = h.mem->create("y", yo + size_t{m} * 4, BufferKind::DEVICE);
  h.mem->upload(wb, 0, wbytes.data(), wbytes.size());
  h.mem->upload(xb, xo, x.data(), x.size() * 4);
  std::vector<float> y(m, std::nanf(""));
  h.mem->upload(yb, yo, y.data(), y.size() * 4);
  ops::Weight w{&wb, t, k, m, row_bytes(t, k), "w"};
  Buffer rb = fast::upload_for_mmq(*h.mem, w, wbytes.data(), nibbles);
  w.mmq_buf = &rb;
  EXPECT_TRUE(ops::matvec_uses_mmq(env, w));
  rec.begin();
  if (via == Via::DIRECT)
    ops::matvec_mmq(env, w, {&xb, xo, size_t{k} * 4}, {&yb, yo, size_t{m} * 4}, "matvec_mmq");
  else
    ops::matmul(env, w, {&xb, xo, size_t{k} * 4}, 1, {&yb, yo, size_t{m} * 4}, "matmul");
  rec.submit_and_wait();
  h.mem->download(yb, yo, y.data(), y.size() * 4);
  return y;
}

double nmse(const std::vector<float>& y, const std::vector<float>& deq, const std::vector<float>& x, uint32_t m,
            uint32_t k) {
  double num = 0, den = 0;
  for (uint32_t r = 0; r < m; ++r) {
    double ref = 0;
    for (uint32_t i = 0; i < k; ++i) ref += static_cast<double>(deq[size_t{r} * k + i]) * x[i];
    const double got = y[r];
    if (!std::isfinite(got)) return INFINITY;  // unwritten (NaN poison) or broken
    num += (got - ref) * (got - ref);
    den += ref * ref;
  }
  return num / den;
}

void check(DType t, bool nibbles, std::vector<uint32_t> ks) {
  std::mt19937 rng(1234 + static_cast<unsigned>(t) * 7 + nibbles);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (uint32_t k : ks)
    for (uint32_t m : {1u, 37u, 1001u}) {
      std::vector<float> deq;
      auto wbytes = random_weights(t, k, m, rng, deq);
      std::vector<float> x(k);
      for (auto& v : x) v = g(rng);
      auto y = run_matvec(*harness().rec, t, wbytes, x, m, k, nibbles, Via::DIRECT);
      const double e = nmse(y, deq, x, m, k);
      std::printf("matvec_mmq %-5s nib %d M %5u K %5u  NMSE %.3g\n", std::string(dtype_name(t)).c_str(), nibbles, m, k, e);
      EXPECT_LE(e, 1e-10) << dtype_name(t) << " nib " << nibbles << " M " << m << " K " << k;
    }
}

TEST(MatvecMmq, Q4_0) { check(DType::Q4_0, false, {32, 96, 32 * 33}); }
TEST(MatvecMmq, Q8_0) { check(DType::Q8_0, false, {32, 96, 32 * 33}); }
TEST(MatvecMmq, Q4K) { check(DType::Q4_K, false, {256, 768}); }
TEST(MatvecMmq, Q4KNibbles) { check(DType::Q4_K, true, {256, 768}); }
TEST(MatvecMmq, Q6K) { check(DType::Q6_K, false, {256, 768}); }

// ops::matmul(N = 1) with a repacked weight runs matvec_mmq: bit-identical to the direct call
// (matvec.comp's summation order differs), and both within the f64 bound.
TEST(MatvecMmq, MatmulN1TakesIt) {
  std::mt19937 rng(99);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (DType t : {DType::Q4_0, DType::Q6_K}) {
    const uint32_t k = 512, m = 301;
    std::vector<float> deq;
    auto wbytes = random_weights(t, k, m, rng, deq);
    std::vector<float> x(k);
    for (auto& v : x) v = g(rng);
    auto a = run_matvec(*harness().rec, t, wbytes, x, m, k, false, Via::DIRECT);
    auto b = run_matvec(*harness().rec, t, wbytes, x, m, k, false, Via::MATMUL);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << dtype_name(t);
    EXPECT_LE(nmse(b, deq, x, m, k), 1e-10) << dtype_name(t);
  }
}

// A 4 KiB binding limit: the weight goes in windows of a few rows (q8_0 K = 800: 800-byte rows, 5
// per window; q4_K nibbles K = 512: 256-byte rows, 15 per window), same values as one window.
TEST(MatvecMmq, RowWindows) {
  Harness& h = harness();
  Recorder small(*h.dev, 4096);
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (auto [t, k, nib] : {std::tuple{DType::Q8_0, 800u, false}, std::tuple{DType::Q4_K, 512u, true}}) {
    const uint32_t m = 203;
    std::vector<float> deq;
    auto wbytes = random_weights(t, k, m, rng, deq);
    std::vector<float> x(k);
    for (auto& v : x) v = g(rng);
    auto a = run_matvec(*h.rec, t, wbytes, x, m, k, nib, Via::DIRECT);
    auto b = run_matvec(small, t, wbytes, x, m, k, nib, Via::DIRECT);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << dtype_name(t);
    EXPECT_LE(nmse(b, deq, x, m, k), 1e-10) << dtype_name(t);
  }
}

// Refusal: a weight without its repack (rocky::Error naming it), never a dispatch.
TEST(MatvecMmq, Refusals) {
  Harness& h = harness();
  Buffer wb = h.mem->create("w", row_bytes(DType::Q8_0, 64) * 2, BufferKind::DEVICE);
  Buffer xb = h.mem->create("x", 64 * 4, BufferKind::DEVICE);
  Buffer yb = h.mem->create("y", 2 * 4, BufferKind::DEVICE);
  ops::Weight w{&wb, DType::Q8_0, 64, 2, row_bytes(DType::Q8_0, 64), "w"};
  EXPECT_FALSE(ops::matvec_uses_mmq(*h.env, w));
  EXPECT_THROW(ops::matvec_mmq(*h.env, w, {&xb, 0, xb.size()}, {&yb, 0, yb.size()}, "mv"), Error);
}

}  // namespace
}  // namespace rocky::vulkan
