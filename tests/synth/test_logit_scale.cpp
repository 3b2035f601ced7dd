// The weight scales of weights.hpp, checked by running the synthetic models: a naive f64 forward
// pass (RMSNorm, q/k/v (+bias), RoPE, causal GQA attention, SwiGLU FFN, tied or untied LM head)
// over weights regenerated row by row exactly as rocky synth writes them (fill_row + init_spec, in
// f32), so no file and no other module is involved. For every preset (real widths, vocab cut to
// 2048 to bound time; the logit distribution does not depend on the vocab size) and for depths up
// to 36 at the test width: last-position logits have std in [1, 5] and max |logit| ≤ 30, and the
// residual RMS grows ≤ 10× from the embedding (and from block 0's output) to the last block.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "synth/plan.hpp"
#include "synth/presets.hpp"
#include "synth/rng.hpp"
#include "synth/weights.hpp"

using namespace rocky::synth;

namespace {

using Vec = std::vector<double>;

struct Model {
  Preset p;
  uint32_t n_layer;
  uint64_t seed;
  std::vector<PlannedTensor> plan;

  const PlannedTensor& t(const std::string& name) const {
    for (const auto& x : plan)
      if (x.name == name) return x;
    throw std::runtime_error("no tensor " + name);
  }
  // Row r of a tensor as rocky synth generates it (f32).
  std::vector<float> row(const PlannedTensor& x, uint64_t r) const {
    std::vector<float> v(x.ne[0]);
    fill_row(seed, name_hash(x.name), r, init_spec(p, n_layer, x.role), v.data(), x.ne[0]);
    return v;
  }
  Vec vec1d(const std::string& name) const {
    const auto v = row(t(name), 0);
    return Vec(v.begin(), v.end());
  }
  // ys[i] = W · xs[i] (+ bias): W has ne1 rows of length ne0; rows are generated once.
  std::vector<Vec> matmul(const std::string& name, const std::vector<Vec>& xs, const Vec* bias = nullptr) const {
    const auto& w = t(name);
    std::vector<Vec> ys(xs.size(), Vec(w.ne[1], 0.0));
    for (uint64_t r = 0; r < w.ne[1]; ++r) {
      const auto wr = row(w, r);
      for (size_t i = 0; i < xs.size(); ++i) {
        double s = 0;
        for (uint64_t k = 0; k < w.ne[0]; ++k) s += static_cast<double>(wr[k]) * xs[i][k];
        ys[i][r] = s + (bias ? (*bias)[r] : 0.0);
      }
    }
    return ys;
  }
};

Vec rms_norm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

double rms_all(const std::vector<Vec>& xs) {
  double ss = 0;
  size_t n = 0;
  for (const auto& x : xs) {
    for (double v : x) ss += v * v;
    n += x.size();
  }
  return std::sqrt(ss / static_cast<double>(n));
}

// RoPE on one head vector: neox pairs (i, i + d/2) for qwen2, adjacent pairs (2i, 2i+1) for llama.
void rope(double* h, uint32_t d, uint32_t pos, double base, bool neox) {
  for (uint32_t i = 0; i < d / 2; ++i) {
    const double th = pos * std::pow(base, -2.0 * i / d);
    const uint32_t a = neox ? i : 2 * i, b = neox ? i + d / 2 : 2 * i + 1;
    const double x0 = h[a], x1 = h[b];
    h[a] = x0 * std::cos(th) - x1 * std::sin(th);
    h[b] = x0 * std::sin(th) + x1 * std::cos(th);
  }
}

struct Result {
  double rms_embd = 0, rms_block0 = 0, rms_last = 0;
  double logit_std = 0, logit_max = 0;
};

Result forward(const Model& m, const std::vector<uint32_t>& tokens) {
  const Preset& p = m.p;
  const uint32_t T = static_cast<uint32_t>(tokens.size()), E = p.n_embd, d = p.head_dim();
  const uint32_t group = p.n_head / p.n_head_kv;
  const bool neox = p.arch == Arch::Qwen2;
  std::vector<Vec> x;
  const auto& emb = m.t("token_embd.weight");
  for (uint32_t tok : tokens) {
    const auto r = m.row(emb, tok);
    x.emplace_back(r.begin(), r.end());
  }
  Result res;
  res.rms_embd = rms_all(x);
  for (uint32_t l = 0; l < m.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const Vec an = m.vec1d(b + "attn_norm.weight");
    std::vector<Vec> h;
    for (const auto& xi : x) h.push_back(rms_norm(xi, an, p.rms_eps));
    Vec bq, bk, bv;
    if (p.has_qkv_bias()) {
      bq = m.vec1d(b + "attn_q.bias");
      bk = m.vec1d(b + "attn_k.bias");
      bv = m.vec1d(b + "attn_v.bias");
    }
    auto q = m.matmul(b + "attn_q.weight", h, p.has_qkv_bias() ? &bq : nullptr);
    auto k = m.matmul(b + "attn_k.weight", h, p.has_qkv_bias() ? &bk : nullptr);
    auto v = m.matmul(b + "attn_v.weight", h, p.has_qkv_bias() ? &bv : nullptr);
    for (uint32_t t = 0; t < T; ++t) {
      for (uint32_t hd = 0; hd < p.n_head; ++hd) rope(&q[t][hd * d], d, t, p.rope_base, neox);
      for (uint32_t hd = 0; hd < p.n_head_kv; ++hd) rope(&k[t][hd * d], d, t, p.rope_base, neox);
    }
    std::vector<Vec> att(T, Vec(E, 0.0));
    for (uint32_t t = 0; t < T; ++t) {
      for (uint32_t hd = 0; hd < p.n_head; ++hd) {
        const uint32_t kv = hd / group;
        Vec s(t + 1);
        double mx = -1e300;
        for (uint32_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (uint32_t c = 0; c < d; ++c) dot += q[t][hd * d + c] * k[j][kv * d + c];
          s[j] = dot / std::sqrt(static_cast<double>(d));
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (auto& e : s) z += (e = std::exp(e - mx));
        for (uint32_t j = 0; j <= t; ++j)
          for (uint32_t c = 0; c < d; ++c) att[t][hd * d + c] += s[j] / z * v[j][kv * d + c];
      }
    }
    const auto o = m.matmul(b + "attn_output.weight", att);
    for (uint32_t t = 0; t < T; ++t)
      for (uint32_t c = 0; c < E; ++c) x[t][c] += o[t][c];
    const Vec fn = m.vec1d(b + "ffn_norm.weight");
    h.clear();
    for (const auto& xi : x) h.push_back(rms_norm(xi, fn, p.rms_eps));
    const auto g = m.matmul(b + "ffn_gate.weight", h);
    auto u = m.matmul(b + "ffn_up.weight", h);
    for (uint32_t t = 0; t < T; ++t)
      for (size_t c = 0; c < u[t].size(); ++c) u[t][c] *= g[t][c] / (1.0 + std::exp(-g[t][c]));
    const auto dn = m.matmul(b + "ffn_down.weight", u);
    for (uint32_t t = 0; t < T; ++t)
      for (uint32_t c = 0; c < E; ++c) x[t][c] += dn[t][c];
    if (l == 0) res.rms_block0 = rms_all(x);
  }
  res.rms_last = rms_all(x);
  const Vec hn = rms_norm(x.back(), m.vec1d("output_norm.weight"), p.rms_eps);
  const auto logits = m.matmul(p.tied ? "token_embd.weight" : "output.weight", {hn})[0];
  double mean = 0, ss = 0;
  for (double z : logits) {
    mean += z;
    res.logit_max = std::max(res.logit_max, std::fabs(z));
  }
  mean /= static_cast<double>(logits.size());
  for (double z : logits) ss += (z - mean) * (z - mean);
  res.logit_std = std::sqrt(ss / static_cast<double>(logits.size()));
  return res;
}

void check(const std::string& preset, uint32_t n_layer, uint32_t vocab, uint32_t n_tokens) {
  SCOPED_TRACE(preset + " n_layer " + std::to_string(n_layer));
  Model m{find_preset(preset), n_layer, 1234, {}};
  m.p.n_vocab = vocab;
  m.plan = tensor_plan(m.p, n_layer, FileType::F32);
  SplitMix64 r(99);
  std::vector<uint32_t> tokens;
  for (uint32_t i = 0; i < n_tokens; ++i) tokens.push_back(static_cast<uint32_t>(r.next() % vocab));
  tokens.back() = tokens.front();  // a repeated token: the tied head's self-logit case, attended too
  const Result res = forward(m, tokens);
  std::printf("%-16s L=%-2u logits std %.3f max %.2f | residual rms embd %.4f block0 %.4f last %.4f (x%.2f, x%.2f)\n",
              preset.c_str(), n_layer, res.logit_std, res.logit_max, res.rms_embd, res.rms_block0, res.rms_last,
              res.rms_last / res.rms_embd, res.rms_last / res.rms_block0);
  EXPECT_GE(res.logit_std, 1.0);
  EXPECT_LE(res.logit_std, 5.0);
  EXPECT_LE(res.logit_max, 30.0);
  EXPECT_LE(res.rms_last / res.rms_embd, 10.0);
  EXPECT_LE(res.rms_last / res.rms_block0, 10.0);
  EXPECT_GE(res.rms_last / res.rms_embd, 1.5);  // the blocks do contribute
}

}  // namespace

TEST(SynthScale, RealWidthsOneBlock) {
  for (const char* p : {"qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "tinyllama-1.1b"}) check(p, 1, 2048, 6);
}

TEST(SynthScale, DepthsAtTestWidth) {
  for (const char* p : {"qwen2-test", "llama-test"})
    for (uint32_t n : {1u, 2u, 8u, 28u, 36u}) check(p, n, 1000, 24);
}
