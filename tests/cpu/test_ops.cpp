// Each CPU op vs an independent naive f64 implementation on random data of awkward shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "backend/cpu/ops.hpp"
#include "backend/cpu/parallel.hpp"
#include "core/error.hpp"

namespace rocky::backend::cpu {
namespace {

std::vector<float> rnd(size_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

// max|a - b| / max(max|b|, tiny)
double rel(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double md = 0, mb = 1e-30;
  for (size_t i = 0; i < b.size(); ++i) {
    md = std::max(md, std::fabs(a[i] - b[i]));
    mb = std::max(mb, std::fabs(b[i]));
  }
  return md / mb;
}

WeightView f32_view(const std::vector<float>& w, int64_t k, int64_t rows) {
  return WeightView{DType::F32, reinterpret_cast<const uint8_t*>(w.data()), k, rows};
}

TEST(CpuOps, GetRows) {
  const int64_t k = 37, rows = 53;
  auto w = rnd(static_cast<size_t>(k * rows), 1);
  std::vector<int32_t> ids = {52, 0, 17, 17, 3, 41, 9};
  std::vector<float> out(static_cast<size_t>(k) * ids.size());
  get_rows(f32_view(w, k, rows), ids, out.data());
  std::vector<double> ref(out.size());
  for (size_t j = 0; j < ids.size(); ++j)
    for (int64_t i = 0; i < k; ++i) ref[j * k + i] = w[static_cast<size_t>(ids[j] * k + i)];
  EXPECT_EQ(rel(out, ref), 0.0);
  std::vector<int32_t> bad = {3, 53};
  EXPECT_THROW(get_rows(f32_view(w, k, rows), bad, out.data()), Error);
  bad = {-1};
  EXPECT_THROW(get_rows(f32_view(w, k, rows), bad, out.data()), Error);
}

TEST(CpuOps, RmsNorm) {
  const int64_t ne0 = 67, ne1 = 5;
  auto x = rnd(static_cast<size_t>(ne0 * ne1), 2);
  auto w = rnd(static_cast<size_t>(ne0), 3);
  const float eps = 1e-5f;
  std::vector<float> out(x.size());
  rms_norm(x.data(), w.data(), eps, ne0, ne1, out.data());
  std::vector<double> ref(x.size());
  for (int64_t j = 0; j < ne1; ++j) {
    double ss = 0;
    for (int64_t i = 0; i < ne0; ++i) ss += static_cast<double>(x[j * ne0 + i]) * x[j * ne0 + i];
    double r = std::sqrt(ss / ne0 + eps);
    for (int64_t i = 0; i < ne0; ++i) ref[j * ne0 + i] = x[j * ne0 + i] / r * w[i];
  }
  EXPECT_LE(rel(out, ref), 1e-6);
}

TEST(CpuOps, MatmulF32) {
  for (auto [K, M, N] : {std::tuple<int64_t, int64_t, int64_t>{71, 37, 13}, {5, 3, 1}, {172, 64, 29}}) {
    auto w = rnd(static_cast<size_t>(K * M), 4);
    auto x = rnd(static_cast<size_t>(K * N), 5);
    std::vector<float> y(static_cast<size_t>(M * N));
    matmul(f32_view(w, K, M), x.data(), N, y.data());
    std::vector<double> ref(y.size());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t m = 0; m < M; ++m) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += static_cast<double>(w[m * K + k]) * x[n * K + k];
        ref[n * M + m] = s;
      }
    EXPECT_LE(rel(y, ref), 1e-5) << K << "x" << M << "x" << N;
  }
}

TEST(CpuOps, AddBiasAddSiluMul) {
  const int64_t ne0 = 45, ne1 = 7, n = ne0 * ne1;
  auto a = rnd(static_cast<size_t>(n), 6, -8, 8), b = rnd(static_cast<size_t>(n), 7),
       bias = rnd(static_cast<size_t>(ne0), 8);
  std::vector<float> out(static_cast<size_t>(n));
  std::vector<double> ref(static_cast<size_t>(n));
  add_bias(a.data(), bias.data(), ne0, ne1, out.data());
  for (int64_t j = 0; j < ne1; ++j)
    for (int64_t i = 0; i < ne0; ++i) ref[j * ne0 + i] = static_cast<double>(a[j * ne0 + i]) + bias[i];
  EXPECT_LE(rel(out, ref), 1e-7);
  add(a.data(), b.data(), n, out.data());
  for (int64_t i = 0; i < n; ++i) ref[i] = static_cast<double>(a[i]) + b[i];
  EXPECT_LE(rel(out, ref), 1e-7);
  silu_mul(a.data(), b.data(), n, out.data());
  for (int64_t i = 0; i < n; ++i) {
    double g = a[i];
    ref[i] = g * (1.0 / (1.0 + std::exp(-g))) * b[i];
  }
  EXPECT_LE(rel(out, ref), 1e-6);
}

// Rope via complex multiplication: pair (a, b) as a + ib times e^{iθ}.
void rope_ref(const std::vector<float>& x, const graph::RopeParams& p, int64_t pos0, int64_t n_tok,
              std::vector<double>& out) {
  const int64_t hd = p.head_dim, half = p.n_rot / 2;
  out.assign(x.begin(), x.end());
  for (int64_t j = 0; j < n_tok; ++j)
    for (int64_t h = 0; h < p.n_head; ++h) {
      const int64_t base = (j * p.n_head + h) * hd;
      for (int64_t i = 0; i < half; ++i) {
        const double theta = static_cast<double>(pos0 + j) * p.freq_scale *
                             std::exp(-std::log(static_cast<double>(p.freq_base)) * (2.0 * i) / p.n_rot);
        int64_t ia = p.mode == graph::RopeMode::NORMAL ? 2 * i : i;
        int64_t ib = p.mode == graph::RopeMode::NORMAL ? 2 * i + 1 : i + half;
        std::complex<double> z(x[base + ia], x[base + ib]);
        z *= std::polar(1.0, theta);
        out[base + ia] = z.real();
        out[base + ib] = z.imag();
      }
    }
}

TEST(CpuOps, Rope) {
  for (auto mode : {graph::RopeMode::NORMAL, graph::RopeMode::NEOX}) {
    for (int n_rot : {12, 8}) {
      graph::RopeParams p{mode, 12, 3, n_rot, 10000.0f, 1.0f};
      if (n_rot == 8) {
        p.freq_base = 1e6f;
        p.freq_scale = 0.5f;
      }
      const int64_t n_tok = 5, pos0 = 37;
      auto x = rnd(static_cast<size_t>(12 * 3 * n_tok), 9);
      std::vector<float> out(x.size());
      rope(x.data(), p, pos0, n_tok, out.data());
      std::vector<double> ref;
      rope_ref(x, p, pos0, n_tok, ref);
      EXPECT_LE(rel(out, ref), 1e-6) << static_cast<int>(mode) << " n_rot " << n_rot;
    }
  }
}

// Naive causal GQA attention: full score matrix, -inf above the causal diagonal, then softmax.
std::vector<double> attention_ref(const std::vector<float>& q, const std::vector<float>& kc,
                                  const std::vector<float>& vc, int64_t hd, int64_t nh, int64_t nkv, int64_t n_past,
                                  int64_t n_tok) {
  const int64_t n_ctx = n_past + n_tok, kvd = hd * nkv, qd = hd * nh;
  std::vector<double> ref(static_cast<size_t>(qd * n_tok));
  for (int64_t j = 0; j < n_tok; ++j)
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t hk = h / (nh / nkv);
      std::vector<double> s(static_cast<size_t>(n_ctx));
      for (int64_t t = 0; t < n_ctx; ++t) {
        if (t > n_past + j) {
          s[t] = -INFINITY;
          continue;
        }
        double d = 0;
        for (int64_t i = 0; i < hd; ++i) d += static_cast<double>(q[j * qd + h * hd + i]) * kc[t * kvd + hk * hd + i];
        s[t] = d / std::sqrt(static_cast<double>(hd));
      }
      double z = 0;
      for (double v : s) z += std::exp(v);
      for (int64_t i = 0; i < hd; ++i) {
        double acc = 0;
        for (int64_t t = 0; t < n_ctx; ++t) acc += std::exp(s[t]) / z * vc[t * kvd + hk * hd + i];
        ref[j * qd + h * hd + i] = acc;
      }
    }
  return ref;
}

TEST(CpuOps, AttentionCausalGqa) {
  // Small (runs inline) and large enough to be split over threads.
  struct Shape {
    int64_t hd, nh, nkv, n_past, n_tok;
  };
  for (Shape sh : {Shape{10, 6, 2, 9, 5}, Shape{36, 9, 3, 71, 57}}) {
    graph::AttnParams p{static_cast<int32_t>(sh.hd), static_cast<int32_t>(sh.nh), static_cast<int32_t>(sh.nkv), 0};
    p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(sh.hd)));
    const int64_t n_ctx = sh.n_past + sh.n_tok;
    auto q = rnd(static_cast<size_t>(sh.hd * sh.nh * sh.n_tok), 10, -3, 3);
    auto kc = rnd(static_cast<size_t>(sh.hd * sh.nkv * n_ctx), 11, -3, 3);
    auto vc = rnd(static_cast<size_t>(sh.hd * sh.nkv * n_ctx), 12);
    std::vector<float> out(q.size());
    attention(q.data(), kc.data(), vc.data(), p, sh.n_past, sh.n_tok, out.data());
    EXPECT_LE(rel(out, attention_ref(q, kc, vc, sh.hd, sh.nh, sh.nkv, sh.n_past, sh.n_tok)), 1e-6) << sh.hd;
  }
}

TEST(CpuOps, ParallelForVisitsEachIndexOnceAndRethrows) {
  std::vector<int> hits(1001, 0);
  parallel_for(1001, 1e9, [&](int64_t i) { ++hits[static_cast<size_t>(i)]; });
  for (int h : hits) EXPECT_EQ(h, 1);
  EXPECT_THROW(parallel_for(100, 1e9,
                            [](int64_t i) {
                              if (i == 77) fail("boom {}", i);
                            }),
               Error);
}

TEST(CpuOps, AttentionSoftmaxIsSafeForLargeScores) {
  // Scores near 1e4 overflow a naive exp; the max-subtracted softmax must stay finite.
  graph::AttnParams p{4, 1, 1, 1.0f};
  std::vector<float> q = {100, 100, 100, 100};
  std::vector<float> k = {25, 25, 25, 25, 24, 24, 24, 24};
  std::vector<float> v = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> out(4);
  attention(q.data(), k.data(), v.data(), p, 1, 1, out.data());
  // Weight of position 1 is exp(-400) ≈ 2e-174: the output is the first value row.
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(out[i], static_cast<float>(i + 1));
}

}  // namespace
}  // namespace rocky::backend::cpu
