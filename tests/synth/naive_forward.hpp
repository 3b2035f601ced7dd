// A naive f64 forward pass of the qwen2 / llama graphs for tests of synthetic models: RMSNorm,
// q/k/v (+bias), RoPE (neox pairs for qwen2, adjacent pairs for llama), causal GQA attention with
// 1/sqrt(head_dim) scaling, SwiGLU FFN, tied or untied LM head. Weights come from a WeightSource
// (rows as f32: regenerated synth weights, or a GGUF file's dequantized rows), so the pass depends
// on no other rocky module. Slow by design (clarity first): use small shapes or few tokens.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/gguf.hpp"
#include "quant/quant.hpp"
#include "synth/plan.hpp"
#include "synth/presets.hpp"
#include "synth/weights.hpp"

namespace rocky::synth::test {

using Vec = std::vector<double>;

// Shapes and f32 rows of named weights.
struct WeightSource {
  std::function<std::array<uint64_t, 2>(const std::string& name)> shape;         // {ne0, ne1}
  std::function<std::vector<float>(const std::string& name, uint64_t row)> row;  // ne0 floats
};

// The weights rocky synth writes for (p, n_layer, seed), regenerated in f32 without a file.
inline WeightSource synth_weights(const Preset& p, uint32_t n_layer, uint64_t seed) {
  auto plan = std::make_shared<std::vector<PlannedTensor>>(tensor_plan(p, n_layer, FileType::F32));
  auto find = [plan](const std::string& name) -> const PlannedTensor& {
    for (const auto& x : *plan)
      if (x.name == name) return x;
    throw std::runtime_error("no tensor " + name);
  };
  WeightSource w;
  w.shape = [find](const std::string& name) {
    const auto& t = find(name);
    return std::array<uint64_t, 2>{t.ne[0], t.ne[1]};
  };
  w.row = [find, p, n_layer, seed](const std::string& name, uint64_t r) {
    const auto& t = find(name);
    std::vector<float> v(t.ne[0]);
    fill_row(seed, name_hash(t.name), r, init_spec(p, n_layer, t.role), v.data(), t.ne[0]);
    return v;
  };
  return w;
}

// The dequantized weights of a GGUF file; `f` must outlive the source.
inline WeightSource file_weights(const gguf::GgufFile& f) {
  auto find = [&f](const std::string& name) -> const gguf::TensorInfo& {
    const auto* t = f.find_tensor(name);
    if (!t) throw std::runtime_error(f.path() + ": no tensor " + name);
    return *t;
  };
  WeightSource w;
  w.shape = [find](const std::string& name) {
    const auto& t = find(name);
    return std::array<uint64_t, 2>{t.ne[0], t.ne[1]};
  };
  w.row = [find](const std::string& name, uint64_t r) {
    const auto& t = find(name);
    std::vector<float> v(t.ne[0]);
    quant::dequantize_row(t.type, t.data + r * row_bytes(t.type, t.ne[0]), v.data(), static_cast<int64_t>(t.ne[0]));
    return v;
  };
  return w;
}

inline Vec rms_norm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

inline double rms_all(const std::vector<Vec>& xs) {
  double ss = 0;
  size_t n = 0;
  for (const auto& x : xs) {
    for (double v : x) ss += v * v;
    n += x.size();
  }
  return std::sqrt(ss / static_cast<double>(n));
}

// RoPE on one head vector: neox pairs (i, i + d/2) for qwen2, adjacent pairs (2i, 2i+1) for llama.
inline void rope(double* h, uint32_t d, uint32_t pos, double base, bool neox) {
  for (uint32_t i = 0; i < d / 2; ++i) {
    const double th = pos * std::pow(base, -2.0 * i / d);
    const uint32_t a = neox ? i : 2 * i, b = neox ? i + d / 2 : 2 * i + 1;
    const double x0 = h[a], x1 = h[b];
    h[a] = x0 * std::cos(th) - x1 * std::sin(th);
    h[b] = x0 * std::sin(th) + x1 * std::cos(th);
  }
}

struct ForwardResult {
  double rms_embd = 0, rms_block0 = 0, rms_last = 0;  // residual RMS over all positions
  std::vector<Vec> logits;                            // [position][n_vocab]: every position, or the last
};

// ys[i] = W · xs[i] (+ bias); W has ne1 rows of ne0, each fetched once.
inline std::vector<Vec> matmul(const WeightSource& w, const std::string& name, const std::vector<Vec>& xs,
                               const Vec* bias = nullptr) {
  const auto [ne0, ne1] = w.shape(name);
  std::vector<Vec> ys(xs.size(), Vec(ne1, 0.0));
  for (uint64_t r = 0; r < ne1; ++r) {
    const auto wr = w.row(name, r);
    for (size_t i = 0; i < xs.size(); ++i) {
      double s = 0;
      for (uint64_t k = 0; k < ne0; ++k) s += static_cast<double>(wr[k]) * xs[i][k];
      ys[i][r] = s + (bias ? (*bias)[r] : 0.0);
    }
  }
  return ys;
}

inline Vec vec1d(const WeightSource& w, const std::string& name) {
  const auto v = w.row(name, 0);
  return Vec(v.begin(), v.end());
}

// Runs `tokens` through model `p` with `n_layer` blocks; logits of every position when `all_logits`.
inline ForwardResult forward(const Preset& p, uint32_t n_layer, const WeightSource& w,
                             const std::vector<uint32_t>& tokens, bool all_logits = false) {
  const uint32_t T = static_cast<uint32_t>(tokens.size()), E = p.n_embd, d = p.head_dim();
  const uint32_t group = p.n_head / p.n_head_kv;
  const bool neox = p.arch == Arch::QWEN2;
  std::vector<Vec> x;
  for (uint32_t tok : tokens) {
    const auto r = w.row("token_embd.weight", tok);
    x.emplace_back(r.begin(), r.end());
  }
  ForwardResult res;
  res.rms_embd = rms_all(x);
  for (uint32_t l = 0; l < n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const Vec an = vec1d(w, b + "attn_norm.weight");
    std::vector<Vec> h;
    for (const auto& xi : x) h.push_back(rms_norm(xi, an, p.rms_eps));
    Vec bq, bk, bv;
    if (p.has_qkv_bias()) {
      bq = vec1d(w, b + "attn_q.bias");
      bk = vec1d(w, b + "attn_k.bias");
      bv = vec1d(w, b + "attn_v.bias");
    }
    auto q = matmul(w, b + "attn_q.weight", h, p.has_qkv_bias() ? &bq : nullptr);
    auto k = matmul(w, b + "attn_k.weight", h, p.has_qkv_bias() ? &bk : nullptr);
    auto v = matmul(w, b + "attn_v.weight", h, p.has_qkv_bias() ? &bv : nullptr);
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
    const auto o = matmul(w, b + "attn_output.weight", att);
    for (uint32_t t = 0; t < T; ++t)
      for (uint32_t c = 0; c < E; ++c) x[t][c] += o[t][c];
    const Vec fn = vec1d(w, b + "ffn_norm.weight");
    h.clear();
    for (const auto& xi : x) h.push_back(rms_norm(xi, fn, p.rms_eps));
    const auto g = matmul(w, b + "ffn_gate.weight", h);
    auto u = matmul(w, b + "ffn_up.weight", h);
    for (uint32_t t = 0; t < T; ++t)
      for (size_t c = 0; c < u[t].size(); ++c) u[t][c] *= g[t][c] / (1.0 + std::exp(-g[t][c]));
    const auto dn = matmul(w, b + "ffn_down.weight", u);
    for (uint32_t t = 0; t < T; ++t)
      for (uint32_t c = 0; c < E; ++c) x[t][c] += dn[t][c];
    if (l == 0) res.rms_block0 = rms_all(x);
  }
  res.rms_last = rms_all(x);
  const Vec on = vec1d(w, "output_norm.weight");
  std::vector<Vec> hn;
  for (uint32_t t = all_logits ? 0 : T - 1; t < T; ++t) hn.push_back(rms_norm(x[t], on, p.rms_eps));
  res.logits = matmul(w, p.tied ? "token_embd.weight" : "output.weight", hn);
  return res;
}

}  // namespace rocky::synth::test
