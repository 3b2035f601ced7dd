// CPU oracle ops (see ops.hpp).
#include "backend/cpu/ops.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/parallel.hpp"
#include "core/error.hpp"
#include "quant/quant.hpp"

namespace rocky::backend::cpu {

WeightView view_of(const gguf::TensorInfo& t) {
  return WeightView{t.type, t.data, static_cast<int64_t>(t.ne[0]), static_cast<int64_t>(t.rows())};
}

void dequant_rows(const WeightView& w, int64_t row0, int64_t n_rows, float* dst) {
  const uint64_t rb = row_bytes(w.type, static_cast<uint64_t>(w.k));
  const uint8_t* src = w.data + static_cast<uint64_t>(row0) * rb;
  if (w.type == DType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(n_rows * w.k) * sizeof(float));
    return;
  }
  if (!quant::can_dequantize(w.type)) fail("cpu backend: cannot dequantize weight type {}", dtype_name(w.type));
  parallel_for(n_rows, static_cast<double>(n_rows) * static_cast<double>(w.k) * 4, [&](int64_t r) {
    quant::dequantize_row(w.type, src + static_cast<uint64_t>(r) * rb, dst + r * w.k, w.k);
  });
}

void get_rows(const WeightView& w, std::span<const int32_t> ids, float* out) {
  for (size_t j = 0; j < ids.size(); ++j) {
    if (ids[j] < 0 || ids[j] >= w.rows) fail("token id {} out of range [0, {})", ids[j], w.rows);
    dequant_rows(w, ids[j], 1, out + static_cast<int64_t>(j) * w.k);
  }
}

void rms_norm(const float* x, const float* weight, float eps, int64_t ne0, int64_t ne1, float* out) {
  for (int64_t j = 0; j < ne1; ++j) {
    const float* xc = x + j * ne0;
    double ss = 0;
    for (int64_t i = 0; i < ne0; ++i) ss += static_cast<double>(xc[i]) * xc[i];
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(ne0) + static_cast<double>(eps));
    for (int64_t i = 0; i < ne0; ++i) out[j * ne0 + i] = static_cast<float>(xc[i] * scale) * weight[i];
  }
}

void matmul(const WeightView& w, const float* x, int64_t n, float* y) {
  const int64_t K = w.k, M = w.rows;
  if (M == 0 || n == 0) return;
  if (w.type == DType::F32) {
    cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, static_cast<int>(M), static_cast<int>(n), static_cast<int>(K),
                1.0f, reinterpret_cast<const float*>(w.data), static_cast<int>(K), x, static_cast<int>(K), 0.0f, y,
                static_cast<int>(M));
    return;
  }
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(M, k_matmul_chunk_floats / K));
  std::vector<float> buf(static_cast<size_t>(chunk * K));
  for (int64_t m0 = 0; m0 < M; m0 += chunk) {
    const int64_t mc = std::min(chunk, M - m0);
    dequant_rows(w, m0, mc, buf.data());
    cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, static_cast<int>(mc), static_cast<int>(n), static_cast<int>(K),
                1.0f, buf.data(), static_cast<int>(K), x, static_cast<int>(K), 0.0f, y + m0, static_cast<int>(M));
  }
}

void add_bias(const float* x, const float* b, int64_t ne0, int64_t ne1, float* out) {
  for (int64_t j = 0; j < ne1; ++j)
    for (int64_t i = 0; i < ne0; ++i) out[j * ne0 + i] = x[j * ne0 + i] + b[i];
}

void add(const float* a, const float* b, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void gelu_mul(const float* gate, const float* up, int64_t n, float* out) {
  constexpr double k_sqrt_2_over_pi = 0.79788456080286535587989211986876;
  for (int64_t i = 0; i < n; ++i) {
    const double x = gate[i];
    out[i] = static_cast<float>(0.5 * x * (1.0 + std::tanh(k_sqrt_2_over_pi * x * (1.0 + 0.044715 * x * x))) * up[i]);
  }
}

void scale(const float* x, float s, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * s;
}

void rope(const float* x, const graph::RopeParams& p, const float* freq_factors, int64_t pos0, int64_t n_tok,
          float* out) {
  const int64_t hd = p.head_dim, nh = p.n_head, half = p.n_rot / 2;
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[static_cast<size_t>(i)] =
        std::pow(static_cast<double>(p.freq_base), -2.0 * static_cast<double>(i) / static_cast<double>(p.n_rot));
    if (freq_factors != nullptr) inv_freq[static_cast<size_t>(i)] /= static_cast<double>(freq_factors[i]);
  }
  for (int64_t j = 0; j < n_tok; ++j) {
    const double pos = static_cast<double>(pos0 + j) * static_cast<double>(p.freq_scale);
    for (int64_t h = 0; h < nh; ++h) {
      const float* xs = x + (j * nh + h) * hd;
      float* o = out + (j * nh + h) * hd;
      for (int64_t i = p.n_rot; i < hd; ++i) o[i] = xs[i];
      for (int64_t i = 0; i < half; ++i) {
        const double th = pos * inv_freq[static_cast<size_t>(i)];
        const double c = std::cos(th), s = std::sin(th);
        const int64_t a = p.mode == graph::RopeMode::NORMAL ? 2 * i : i;
        const int64_t b = p.mode == graph::RopeMode::NORMAL ? 2 * i + 1 : i + half;
        const double x0 = xs[a], x1 = xs[b];
        o[a] = static_cast<float>(x0 * c - x1 * s);
        o[b] = static_cast<float>(x0 * s + x1 * c);
      }
    }
  }
}

namespace {
// One (token, head) of causal GQA attention over cache columns c0 + [0, n_kv) (attention()'s body).
// ring > 0: position t is at column c0 + t mod ring (a sliding-window layer's ring, graph.hpp KvShape).
void attend(const float* qh, const float* k_cache, const float* v_cache, const graph::AttnParams& p, int64_t hk,
            int64_t c0, int64_t n_kv, int64_t ring, float* o) {
  const int64_t hd = p.head_dim, kv_stride = hd * p.n_head_kv;
  // sliding window: only the last `window` positions (q − window < p ≤ q).
  const int64_t t0 = p.window > 0 && n_kv > p.window ? n_kv - p.window : 0;
  std::vector<double> score(static_cast<size_t>(n_kv));
  std::vector<double> acc(static_cast<size_t>(hd), 0.0);
  k_cache += c0 * kv_stride;
  v_cache += c0 * kv_stride;
  double mx = -INFINITY;
  for (int64_t t = t0; t < n_kv; ++t) {
    const float* kt = k_cache + (ring > 0 ? t % ring : t) * kv_stride + hk * hd;
    double d = 0;
    for (int64_t i = 0; i < hd; ++i) d += static_cast<double>(qh[i]) * kt[i];
    d *= static_cast<double>(p.scale);
    score[static_cast<size_t>(t)] = d;
    mx = std::max(mx, d);
  }
  double sum = 0;
  for (int64_t t = t0; t < n_kv; ++t) {
    double e = std::exp(score[static_cast<size_t>(t)] - mx);
    score[static_cast<size_t>(t)] = e;
    sum += e;
  }
  for (int64_t t = t0; t < n_kv; ++t) {
    const float* vt = v_cache + (ring > 0 ? t % ring : t) * kv_stride + hk * hd;
    const double wgt = score[static_cast<size_t>(t)] / sum;
    for (int64_t i = 0; i < hd; ++i) acc[static_cast<size_t>(i)] += wgt * vt[i];
  }
  for (int64_t i = 0; i < hd; ++i) o[i] = static_cast<float>(acc[static_cast<size_t>(i)]);
}
}  // namespace

void attention(const float* q, const float* k_cache, const float* v_cache, const graph::AttnParams& p, int64_t n_past,
               int64_t n_tok, float* out, int64_t ring) {
  const int64_t hd = p.head_dim, nh = p.n_head, nkv = p.n_head_kv;
  const int64_t group = nh / nkv;
  const int64_t q_stride = hd * nh;
  // One task per (token, head); each writes its own output slice.
  const double work = static_cast<double>(n_tok) * static_cast<double>(nh) * static_cast<double>(n_past + n_tok) *
                      static_cast<double>(hd) * 2;
  parallel_for(n_tok * nh, work, [&](int64_t task) {
    const int64_t j = task / nh, h = task % nh;
    // causal: positions 0 .. n_past + j
    attend(q + j * q_stride + h * hd, k_cache, v_cache, p, h / group, 0, n_past + j + 1, ring,
           out + j * q_stride + h * hd);
  });
}

void attention_seqs(const float* q, const float* k_cache, const float* v_cache, const graph::AttnParams& p,
                    std::span<const int64_t> cell0, std::span<const int32_t> pos, float* out, int64_t ring) {
  const int64_t hd = p.head_dim, nh = p.n_head, nkv = p.n_head_kv;
  const int64_t group = nh / nkv, n_tok = static_cast<int64_t>(pos.size());
  const int64_t q_stride = hd * nh;
  double work = 0;
  for (int32_t x : pos) work += static_cast<double>(nh) * static_cast<double>(x + 1) * static_cast<double>(hd) * 2;
  parallel_for(n_tok * nh, work, [&](int64_t task) {
    const int64_t j = task / nh, h = task % nh;
    attend(q + j * q_stride + h * hd, k_cache, v_cache, p, h / group, cell0[static_cast<size_t>(j)],
           int64_t{pos[static_cast<size_t>(j)]} + 1, ring, out + j * q_stride + h * hd);
  });
}

void ssm_conv(const float* x, const float* w, int64_t k, int64_t c, int64_t n_tok, float* state, float* out) {
  const int64_t hist = k - 1;
  // x̃ column t (t ≥ −hist): state slot hist + t for t < 0, else x column t.
  auto col = [&](int64_t t) { return t < 0 ? state + (hist + t) * c : x + t * c; };
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t ch = 0; ch < c; ++ch) {
      double acc = 0;
      for (int64_t i = 0; i < k; ++i) acc += static_cast<double>(w[i + ch * k]) * col(t - hist + i)[ch];
      out[t * c + ch] = static_cast<float>(acc / (1.0 + std::exp(-acc)));
    }
  }
  // New state: x̃ columns n_tok − hist .. n_tok − 1 (some may still come from the old state).
  std::vector<float> next(static_cast<size_t>(hist * c));
  for (int64_t s = 0; s < hist; ++s)
    std::memcpy(next.data() + s * c, col(n_tok - hist + s), static_cast<size_t>(c) * sizeof(float));
  std::memcpy(state, next.data(), next.size() * sizeof(float));
}

void gated_delta(const float* qkv, const float* a, const float* b, const float* A, const graph::SsmParams& p,
                 int64_t n_tok, float* state, float* out) {
  const int64_t hk = p.n_k_heads, hv = p.n_v_heads, dk = p.d_k, dv = p.d_v;
  const int64_t C = 2 * hk * dk + hv * dv;
  const double qscale = 1.0 / std::sqrt(static_cast<double>(dk));
  const double work = static_cast<double>(n_tok) * static_cast<double>(hv) * static_cast<double>(dk * dv) * 6;
  parallel_for(hv, work, [&](int64_t j) {
    const int64_t kh = j % hk;  // tiled: value head j reads key/query head j mod H_k
    std::vector<double> S(static_cast<size_t>(dk * dv));
    float* st = state + j * dk * dv;
    for (size_t e = 0; e < S.size(); ++e) S[e] = st[e];
    std::vector<double> q(static_cast<size_t>(dk)), kk(static_cast<size_t>(dk)), u(static_cast<size_t>(dv));
    for (int64_t t = 0; t < n_tok; ++t) {
      const float* col = qkv + t * C;
      const float* qs = col + kh * dk;
      const float* ks = col + hk * dk + kh * dk;
      const float* vs = col + 2 * hk * dk + j * dv;
      double nq = 0, nk = 0;
      for (int64_t i = 0; i < dk; ++i) {
        nq += static_cast<double>(qs[i]) * qs[i];
        nk += static_cast<double>(ks[i]) * ks[i];
      }
      const double iq = 1.0 / std::max(std::sqrt(nq), static_cast<double>(p.eps));
      const double ik = 1.0 / std::max(std::sqrt(nk), static_cast<double>(p.eps));
      for (int64_t i = 0; i < dk; ++i) {
        q[static_cast<size_t>(i)] = qs[i] * iq * qscale;
        kk[static_cast<size_t>(i)] = ks[i] * ik;
      }
      const double av = a[t * hv + j];
      const double sp = av > 20 ? av : std::log1p(std::exp(av));  // softplus (ggml's threshold 20)
      const double decay = std::exp(sp * static_cast<double>(A[j]));
      const double beta = 1.0 / (1.0 + std::exp(-static_cast<double>(b[t * hv + j])));
      // S ← decay·S; u = β·(v − Sᵀk̂)
      for (double& e : S) e *= decay;
      for (int64_t c = 0; c < dv; ++c) {
        double skc = 0;
        for (int64_t i = 0; i < dk; ++i) skc += S[static_cast<size_t>(i * dv + c)] * kk[static_cast<size_t>(i)];
        u[static_cast<size_t>(c)] = beta * (vs[c] - skc);
      }
      // S ← S + k̂·uᵀ; o = Sᵀq̂ (q̂ already carries 1/√d_k)
      float* o = out + t * hv * dv + j * dv;
      std::vector<double> acc(static_cast<size_t>(dv), 0.0);
      for (int64_t i = 0; i < dk; ++i) {
        double* row = S.data() + i * dv;
        const double ki = kk[static_cast<size_t>(i)], qi = q[static_cast<size_t>(i)];
        for (int64_t c = 0; c < dv; ++c) {
          row[c] += ki * u[static_cast<size_t>(c)];
          acc[static_cast<size_t>(c)] += row[c] * qi;
        }
      }
      for (int64_t c = 0; c < dv; ++c) o[c] = static_cast<float>(acc[static_cast<size_t>(c)]);
    }
    for (size_t e = 0; e < S.size(); ++e) st[e] = static_cast<float>(S[e]);
  });
}

void take_rows(const float* x, int64_t n_in, int64_t first, int64_t n_out, int64_t n_tok, float* out) {
  for (int64_t j = 0; j < n_tok; ++j)
    std::memcpy(out + j * n_out, x + first + j * n_in, static_cast<size_t>(n_out) * sizeof(float));
}

void sigmoid_mul(const float* x, const float* gate, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i] / (1.0 + std::exp(-static_cast<double>(gate[i]))));
}

}  // namespace rocky::backend::cpu
