// Decode matvec over the mmq repack (shaders/common/matvec_mmq.glsl: matvec_mmq.comp with subgroup
// reductions, matvec_mmq_shared.comp without; ops::matvec_mmq) on lavapipe with validation on,
// against an f64 product of the weights dequantized by rocky_quant (bit-exact with ggml's
// dequantize_row_*) and the same f32 activations:
//  - q4_0, q8_0 (K = 32 · odd), q4_K (both repack layouts) and q6_K (K = 256 · k), M = 1, 37, 1001:
//    NMSE ≤ 1e-10 (f32 accumulation only), every output written (poisoned with NaN first), for
//    every shape variant (the device's default, whole-, half- and quarter-block steps, 1..8 rows,
//    4..64 invocations, 1 or 2 steps per iteration, subgroup and shared-memory reductions, x at a
//    vec4-aligned and an odd offset);
//  - the bias and residual epilogues (fast::matvec_mmq) equal W·x + operand, the residual also
//    when the operand IS y;
//  - ops::matmul with N = 1 takes this kernel for a weight carrying its repack (bit-identical);
//  - a small binding limit splits the weight into many row windows, same result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
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

enum class Via { DIRECT, MATMUL };

// A matvec_mmq variant: a fixed shape WG,ROWS[,SPLIT[,UNROLL]] (mmv_profile; nullptr: the device's
// default), the reduction, x's f32
// offset inside its buffer (odd: scalar loads; a multiple of 4: vec4 loads).
struct Variant {
  const char* shape = nullptr;
  bool subgroup = true;
  uint32_t x_elem_off = 3;
};

// y = W · x on the GPU (x at an offset inside its buffer, y at an odd one), + the epilogue.
std::vector<float> run_matvec(Recorder& rec, DType t, const std::vector<uint8_t>& wbytes, const std::vector<float>& x,
                              uint32_t m, uint32_t k, bool nibbles, Via via, const Variant& var = {},
                              fast::Epilogue epi = fast::Epilogue::NONE, const std::vector<float>& operand = {}) {
  Harness& h = harness();
  DeviceInfo info = h.dev->info();
  info.subgroup_arith = info.subgroup_arith && var.subgroup;
  ops::Env env{rec, *h.pipes, info, {}, 128, false};
  const tune::DeviceProfile prof = mmv_profile(info, var.shape);
  env.prof = &prof;
  const uint64_t xo = uint64_t{var.x_elem_off} * 4, yo = 5 * 4;
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
  // The epilogue operand: its own buffer (BIAS) or, for RESIDUAL, y itself holding the operand.
  Buffer eb = h.mem->create("e", 7 * 4 + size_t{m} * 4, BufferKind::DEVICE);
  fast::MmqEpilogue e{epi, {}};
  if (epi == fast::Epilogue::BIAS) {
    h.mem->upload(eb, 7 * 4, operand.data(), operand.size() * 4);
    e.operand = {&eb, 7 * 4, size_t{m} * 4};
  } else if (epi == fast::Epilogue::RESIDUAL) {
    h.mem->upload(yb, yo, operand.data(), operand.size() * 4);
    e.operand = {&yb, yo, size_t{m} * 4};
  }
  rec.begin();
  if (epi != fast::Epilogue::NONE)
    fast::matvec_mmq(env, w, {&xb, xo, size_t{k} * 4}, {&yb, yo, size_t{m} * 4}, "matvec_mmq+epi", e);
  else if (via == Via::DIRECT)
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

// Shapes: the device's default, GPU-like whole-block and half-block (Mali) steps, rows that do not
// divide M, a workgroup narrower than lavapipe's subgroup; each with both reductions; x aligned
// (vec4 loads) and not.
const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = [] {
    std::vector<Variant> r;
    for (const char* s : {static_cast<const char*>(nullptr), "64,8,0", "64,2,1", "32,3,0", "4,1,1", "16,5,1",
                          "32,4,0,2", "8,3,1,2", "64,1,2", "16,3,2,2"})
      for (bool sg : {true, false})
        for (uint32_t xo : {3u, 4u}) r.push_back({s, sg, xo});
    return r;
  }();
  return v;
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
      double worst = 0;
      for (const Variant& var : variants()) {
        auto y = run_matvec(*harness().rec, t, wbytes, x, m, k, nibbles, Via::DIRECT, var);
        const double e = nmse(y, deq, x, m, k);
        worst = std::max(worst, e);
        EXPECT_LE(e, 1e-10) << dtype_name(t) << " nib " << nibbles << " M " << m << " K " << k << " shape "
                            << (var.shape ? var.shape : "default") << " subgroup " << var.subgroup << " x_off "
                            << var.x_elem_off;
      }
      std::printf("matvec_mmq %-5s nib %d M %5u K %5u  worst NMSE over %zu variants %.3g\n",
                  std::string(dtype_name(t)).c_str(), nibbles, m, k, variants().size(), worst);
    }
}

TEST(MatvecMmq, Q4_0) { check(DType::Q4_0, false, {32, 96, 32 * 33}); }
TEST(MatvecMmq, Q8_0) { check(DType::Q8_0, false, {32, 96, 32 * 33}); }
TEST(MatvecMmq, Q4K) { check(DType::Q4_K, false, {256, 768}); }
TEST(MatvecMmq, Q4KNibbles) { check(DType::Q4_K, true, {256, 768}); }
TEST(MatvecMmq, Q6K) { check(DType::Q6_K, false, {256, 768}); }
TEST(MatvecMmq, Q5_0) { check(DType::Q5_0, false, {32, 896}); }
TEST(MatvecMmq, Q5_1) { check(DType::Q5_1, false, {32, 32 * 33}); }
TEST(MatvecMmq, Q5K) { check(DType::Q5_K, false, {256, 768}); }

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

// The multi-column matvec (fast::matvec_mmq with n columns; ops::matmul with Env::mmv_cols):
// x [K, n] at an odd offset, y [M, n]; every column within the f64 bound of its own product, for
// n = 2 … 8, M not a multiple of the rows, both reductions, the residual epilogue per column, and
// ops::matmul taking it (bit-identical to the direct call). col_split: the profile's mmv.col_split ("" = the rule).
// quick: q4_K and q6_K (nibbles), M = 37, n = 3 and 8, with subgroups, no residual.
void multi_column(const std::string& col_split, bool quick = false) {
  SCOPED_TRACE("mmv.col_split '" + col_split + "'");
  tune::DeviceProfile prof = mmv_profile(harness().dev->info(), nullptr);
  if (!col_split.empty()) prof.mmv.col_split = static_cast<uint32_t>(std::stoul(col_split));
  Harness& h = harness();
  std::mt19937 rng(4242);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (auto [t, k, nib] : {std::tuple{DType::Q4_0, 96u, false}, std::tuple{DType::Q8_0, 32u * 33u, false},
                           std::tuple{DType::Q4_K, 512u, true}, std::tuple{DType::Q4_K, 256u, false},
                           std::tuple{DType::Q6_K, 768u, true}, std::tuple{DType::Q5_K, 256u, false}}) {
    if (quick && !(nib && (t == DType::Q4_K || t == DType::Q6_K))) continue;
    for (uint32_t m : {37u, 1001u}) {
      if (quick && m != 37u) continue;
      std::vector<float> deq;
      auto wbytes = random_weights(t, k, m, rng, deq);
      for (uint32_t n : {2u, 3u, 5u, 8u})
        for (bool sg : {true, false})
          for (bool residual : {false, true}) {
            if (quick && (n == 2u || n == 5u || !sg || residual)) continue;
            DeviceInfo info = h.dev->info();
            info.subgroup_arith = info.subgroup_arith && sg;
            ops::Env env{*h.rec, *h.pipes, info, {}, 128, false};
            env.mmv_cols = 8;
            env.prof = &prof;
            std::vector<float> x(size_t{k} * n), r(size_t{m} * n);
            for (auto& v : x) v = g(rng);
            for (auto& v : r) v = g(rng);
            const uint64_t xo = 3 * 4, yo = 5 * 4;
            Buffer wb = h.mem->create("w", wbytes.size(), BufferKind::DEVICE);
            Buffer xb = h.mem->create("x", xo + x.size() * 4, BufferKind::DEVICE);
            Buffer yb = h.mem->create("y", yo + size_t{m} * n * 4, BufferKind::DEVICE);
            Buffer yb2 = h.mem->create("y2", yo + size_t{m} * n * 4, BufferKind::DEVICE);
            Buffer eb = h.mem->create("e", size_t{m} * n * 4, BufferKind::DEVICE);
            h.mem->upload(wb, 0, wbytes.data(), wbytes.size());
            h.mem->upload(xb, xo, x.data(), x.size() * 4);
            h.mem->upload(eb, 0, r.data(), r.size() * 4);
            std::vector<float> poison(size_t{m} * n, std::nanf(""));
            h.mem->upload(yb, yo, poison.data(), poison.size() * 4);
            h.mem->upload(yb2, yo, poison.data(), poison.size() * 4);
            ops::Weight w{&wb, t, k, m, row_bytes(t, k), "w"};
            Buffer rb = fast::upload_for_mmq(*h.mem, w, wbytes.data(), nib);
            w.mmq_buf = &rb;
            const ops::Region xr{&xb, xo, x.size() * 4}, yr{&yb, yo, size_t{m} * n * 4},
                yr2{&yb2, yo, size_t{m} * n * 4};
            fast::MmqEpilogue e{residual ? fast::Epilogue::RESIDUAL : fast::Epilogue::NONE, {}};
            if (residual) e.operand = {&eb, 0, size_t{m} * n * 4};
            h.rec->begin();
            fast::matvec_mmq(env, w, xr, yr, "matvec_mmq cols", e, nullptr, n);
            if (!residual) ops::matmul(env, w, xr, n, yr2, "matmul cols");
            h.rec->submit_and_wait();
            std::vector<float> y(size_t{m} * n), y2(size_t{m} * n);
            h.mem->download(yb, yo, y.data(), y.size() * 4);
            h.mem->download(yb2, yo, y2.data(), y2.size() * 4);
            for (uint32_t c = 0; c < n; ++c) {
              std::vector<float> yc(y.begin() + size_t{c} * m, y.begin() + size_t{c + 1} * m);
              if (residual)
                for (uint32_t i = 0; i < m; ++i) yc[i] -= r[size_t{c} * m + i];
              const std::vector<float> xc(x.begin() + size_t{c} * k, x.begin() + size_t{c + 1} * k);
              EXPECT_LE(nmse(yc, deq, xc, m, k), 1e-10)
                  << dtype_name(t) << " nib " << nib << " M " << m << " n " << n << " column " << c << " subgroup "
                  << sg << " residual " << residual;
            }
            if (!residual) {
              EXPECT_EQ(0, std::memcmp(y.data(), y2.data(), y.size() * 4)) << "ops::matmul, n " << n;
            }
          }
    }
  }
}

TEST(MatvecMmq, MultiColumn) { multi_column(""); }
// mmv.col_split: whole, half and quarter blocks per step for every n (the rule takes 0 / 1 / 2 by
// n), same bound; a bad value is an error naming the field.
TEST(MatvecMmq, MultiColumnForcedSplit) {
  for (const char* v : {"0", "1", "2"}) multi_column(v, true);
  for (const char* bad : {"4", "-1", "\"1\""}) {
    try {
      (void)tune::apply_profile_json(nlohmann::json::parse(std::string(R"({"mmv": {"col_split": )") + bad + "}}"),
                                     tune::builtin_profile("generic"), "ROCKY_TUNE");
      ADD_FAILURE() << "col_split " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ROCKY_TUNE: mmv.col_split"), std::string::npos) << e.what();
    }
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

// The epilogues: W·x + bias (own buffer) and W·x + residual (the operand is y itself), equal to
// the plain product plus the operand in f32 (bit-exact: the same sum, one more f32 add), for the
// default shape and a shared-memory half-block one.
TEST(MatvecMmq, Epilogues) {
  std::mt19937 rng(2024);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (auto [t, nib] : {std::pair{DType::Q4_K, true}, std::pair{DType::Q6_K, false}, std::pair{DType::Q8_0, false}}) {
    const uint32_t k = 512, m = 77;
    std::vector<float> deq;
    auto wbytes = random_weights(t, k, m, rng, deq);
    std::vector<float> x(k), op(m);
    for (auto& v : x) v = g(rng);
    for (auto& v : op) v = 10.0f * g(rng);
    for (const Variant& var : {Variant{nullptr, true, 4}, Variant{"16,3,1", false, 3}}) {
      auto plain = run_matvec(*harness().rec, t, wbytes, x, m, k, nib, Via::DIRECT, var);
      for (fast::Epilogue epi : {fast::Epilogue::BIAS, fast::Epilogue::RESIDUAL}) {
        auto y = run_matvec(*harness().rec, t, wbytes, x, m, k, nib, Via::DIRECT, var, epi, op);
        for (uint32_t r = 0; r < m; ++r)
          ASSERT_EQ(y[r], plain[r] + op[r]) << dtype_name(t) << " epilogue " << static_cast<int>(epi) << " row " << r;
      }
    }
  }
}

// Shape choice: rows per workgroup shrink for small M on a GPU class (enough workgroups), never
// below 1; a fixed shape (ROCKY_TUNE's mmv fields) is taken as it is, and validated.
TEST(MatvecMmq, ShapeChoice) {
  DeviceInfo nv = harness().dev->info();
  nv.type = VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  nv.vendor_id = 0x10DE;
  nv.driver_name = "NVIDIA";
  nv.max_workgroup_invocations = 1024;
  nv.shared_memory = 49152;
  const tune::DeviceProfile& nv_prof = tune::select_profile(nv.vendor_id, nv.driver_name, false);
  EXPECT_EQ(fast::matvec_shape(nv_prof, nv, 11008, 2048).rows, 4u);
  EXPECT_EQ(fast::matvec_shape(nv_prof, nv, 2048, 11008).rows, 4u);
  EXPECT_EQ(fast::matvec_shape(nv_prof, nv, 512, 2048).rows, 2u);
  EXPECT_EQ(fast::matvec_shape(nv_prof, nv, 256, 2048).rows, 1u);
  EXPECT_EQ(fast::matvec_shape(nv_prof, nv, 151936, 2048).wg, 32u);  // ≤ 64 blocks per row
  EXPECT_EQ(fast::matvec_shape(nv_prof, nv, 151936, 2048).unroll, 1u);
  EXPECT_EQ(fast::matvec_shape(nv_prof, nv, 3584, 3584).wg, 64u);
  EXPECT_EQ(fast::matvec_shape(nv_prof, nv, 2048, 11008).wg, 128u);  // ≥ 256 blocks: 128 × 2 steps
  EXPECT_EQ(fast::matvec_shape(nv_prof, nv, 2048, 11008).unroll, 2u);
  DeviceInfo mali = nv;
  mali.vendor_id = 0x13B5;
  mali.driver_name = "panvk";
  mali.type = VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  const tune::DeviceProfile& mali_prof = tune::select_profile(mali.vendor_id, mali.driver_name, false);
  EXPECT_EQ(fast::matvec_shape(mali_prof, mali, 2048, 2048).split, 2u);
  EXPECT_EQ(fast::matvec_shape(mali_prof, mali, 2048, 2048).rows, 1u);
  {
    const tune::DeviceProfile p = mmv_profile(nv, "128,4,1,2");
    const fast::MatvecShape o = fast::matvec_shape(p, nv, 256, 2048);
    EXPECT_EQ(o.wg, 128u);
    EXPECT_EQ(o.rows, 4u);
    EXPECT_EQ(o.split, 1u);
    EXPECT_EQ(o.unroll, 2u);
  }
  for (const char* bad : {"3,1", "64,0", "64,2,3", "64,65", "64,2,0,3", "64,2,0,0"})
    EXPECT_THROW(mmv_profile(nv, bad), Error) << bad;
}

// rms_norm of one column (the decode token: shaders/rms_norm_vec.comp when ne0 and the
// offsets are multiples of 4, else rms_norm.comp) against f64: 1 to 2 vec4 per invocation, ne0
// not a power of two, an unaligned x (the scalar kernel), and ne0 % 4 ≠ 0.
TEST(DecodeRmsNorm, OneColumn) {
  Harness& h = harness();
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 3.0f);
  for (auto [ne0, xo] : {std::pair{4u, 0u}, std::pair{64u, 4u}, std::pair{2048u, 0u}, std::pair{3584u, 8u},
                         std::pair{8192u, 0u}, std::pair{4100u, 0u}, std::pair{2048u, 3u}, std::pair{2050u, 0u}}) {
    std::vector<float> x(ne0), w(ne0);
    for (auto& v : x) v = g(rng);
    for (auto& v : w) v = g(rng);
    Buffer xb = h.mem->create("x", (xo + ne0) * 4, BufferKind::DEVICE);
    Buffer wb = h.mem->create("w", ne0 * 4, BufferKind::DEVICE);
    Buffer ob = h.mem->create("o", (xo + ne0) * 4, BufferKind::DEVICE);
    h.mem->upload(xb, xo * 4, x.data(), ne0 * 4);
    h.mem->upload(wb, 0, w.data(), ne0 * 4);
    std::vector<float> out(ne0, std::nanf(""));
    h.mem->upload(ob, xo * 4, out.data(), ne0 * 4);
    h.rec->begin();
    ops::rms_norm(*h.env, {&xb, xo * 4, ne0 * 4}, {&wb, 0, ne0 * 4}, ne0, 1, 1e-6f, {&ob, xo * 4, ne0 * 4}, "norm");
    h.rec->submit_and_wait();
    h.mem->download(ob, xo * 4, out.data(), ne0 * 4);
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double inv = 1.0 / std::sqrt(ss / ne0 + 1e-6);
    for (uint32_t i = 0; i < ne0; ++i) {
      const double ref = x[i] * inv * w[i];
      ASSERT_NEAR(out[i], ref, 1e-5 * std::abs(ref) + 1e-6) << "ne0 " << ne0 << " x_off " << xo << " i " << i;
    }
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
