// Reference quantizers: f32 -> f32/f16/bf16 copies and q8_0, q8_1, q5_0, q5_1, q4_K, q5_K, q6_K blocks.
//
// They follow ggml's reference algorithms (quantize_row_*_ref in ggml/src/ggml-quants.c, llama.cpp
// commit 0253fb21f; no importance matrix), including the exact order of binary32 operations, so
// they reproduce ggml's bytes (checked against reference/quant/*.json). This file is compiled with
// -ffp-contract=off. Summary of each algorithm is at its function.
//
// Non-finite inputs give unspecified (but memory-safe, UB-free) blocks.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "quant/blocks.hpp"
#include "quant/half.hpp"
#include "quant/quant.hpp"

namespace rocky::quant {
namespace {

using detail::float_to_half_bits;
using detail::half_bits_to_float;

// Round to nearest integer, ties to even, for |v| < 2^22: adding 1.5 * 2^23 puts the integer part
// in the low mantissa bits (the float addition does the rounding). Garbage but defined beyond that.
inline int nearest_int(float v) {
  const float t = v + 12582912.0f;
  uint32_t bits;
  std::memcpy(&bits, &t, sizeof bits);
  return static_cast<int>(bits & 0x007FFFFFu) - 0x00400000;
}

// Float -> int conversions that stay defined for out-of-range or NaN input (NaN -> lo).
inline int clamp_trunc(float v, int lo, int hi) {
  if (!(v >= static_cast<float>(lo))) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}
inline int8_t round_away_i8(float v) { return static_cast<int8_t>(clamp_trunc(std::round(v), -128, 127)); }

// q8_0: d = amax / 127, q = round_half_away(x / d) using the float reciprocal 1/d.
void quant_q8_0(const float* x, BlockQ8_0& b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = float_to_half_bits(d);
  for (int j = 0; j < 32; ++j) b.qs[j] = round_away_i8(x[j] * id);
}

// q8_1: as q8_0, plus s = half(sum(q) * d) with the unrounded float d.
void quant_q8_1(const float* x, BlockQ8_1& b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = float_to_half_bits(d);
  int sum = 0;
  for (int j = 0; j < 32; ++j) {
    b.qs[j] = round_away_i8(x[j] * id);
    sum += b.qs[j];
  }
  b.s = float_to_half_bits(static_cast<float>(sum) * d);
}

// q5_0: d = max / -16 where max is the signed value of largest magnitude (first one on ties);
// q = min(31, trunc(x / d + 16.5)), so max itself maps to q = 0 (value -16 * d = max).
void quant_q5_0(const float* x, BlockQ5_0& b) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = float_to_half_bits(d);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(31, clamp_trunc(x[j] * id + 16.5f, 0, 127));
    const int q1 = std::min(31, clamp_trunc(x[j + 16] * id + 16.5f, 0, 127));
    b.qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
    qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
  }
  std::memcpy(b.qh, &qh, sizeof qh);
}

// q5_1: d = (max - min) / 31, m = min, q = (uint8)((x - min) / d + 0.5) (truncation; x ≥ min).
void quant_q5_1(const float* x, BlockQ5_1& b) {
  float min = x[0], max = x[0];
  for (int j = 1; j < 32; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = float_to_half_bits(d);
  b.m = float_to_half_bits(min);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = clamp_trunc((x[j] - min) * id + 0.5f, 0, 255);
    const int q1 = clamp_trunc((x[j + 16] - min) * id + 0.5f, 0, 255);
    b.qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
    qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
  }
  std::memcpy(b.qh, &qh, sizeof qh);
}

// Weighted asymmetric fit of n values to levels 0..nmax: x ≈ scale * L + min (min <= 0).
// Start from the full range [min(x, 0), max(x)]; then try nstep + 1 candidate inverse scales
// (nmax + rmin + rdelta * i) / range, each followed by a weighted least-squares solve for
// (scale, min) given the rounded levels; keep the candidate with the lowest weighted squared error.
// Returns the scale and stores -min in *neg_min. (ggml: make_qkx2_quants, use_mad = false.)
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, uint8_t* Laux,
                    float rmin, float rdelta, int nstep) {
  float lo = x[0], hi = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    std::fill(L, L + n, uint8_t{0});
    *neg_min = -lo;
    return 0.0f;
  }
  // `min` is the current best offset; the candidates below are taken relative to it, so a better
  // fit found at one step moves the range of the following steps (as in ggml).
  float min = lo;
  float iscale = static_cast<float>(nmax) / (hi - min);
  float scale = 1.0f / iscale;
  float best_err = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
    L[i] = static_cast<uint8_t>(l);
    const float diff = scale * static_cast<float>(l) + min - x[i];
    best_err += w[i] * (diff * diff);
  }
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (hi - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float s = (sum_w * sum_xl - sum_x * sum_l) / det;
      float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (m > 0) {
        m = 0;
        s = sum_xl / sum_l2;
      }
      float err = 0.0f;
      for (int i = 0; i < n; ++i) {
        const float diff = s * static_cast<float>(Laux[i]) + m - x[i];
        err += w[i] * (diff * diff);
      }
      if (err < best_err) {
        std::copy(Laux, Laux + n, L);
        best_err = err;
        scale = s;
        min = m;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

// Unpacks the 6-bit scale and min of sub-block k of a q4_K block (layout in blocks.hpp).
inline void scale_min_k4(int k, const uint8_t* s, int& sc, int& m) {
  if (k < 4) {
    sc = s[k] & 63;
    m = s[k + 4] & 63;
  } else {
    sc = (s[k + 4] & 0xF) | ((s[k - 4] >> 6) << 4);
    m = (s[k + 4] >> 4) | ((s[k] >> 6) << 4);
  }
}

// q4_K / q5_K (ggml's make_qkx2 fits): per 32-element sub-block, weights w = sqrt(mean(x²)) + |x|
// and fit_scale_min(nmax, rmin, rdelta, nstep); the 8 scales and 8 mins are then quantized to 6
// bits against their maxima (d = max_scale / 63, dmin = max_min / 63) into scales12, and the
// levels L[256] recomputed from the stored (rounded) scales: clamp(round((x + dmin·m) / (d·sc)), 0, nmax).
void quant_k_scales(const float* x, int nmax, float rmin, float rdelta, int nstep, uint8_t* L, uint8_t* scales12,
                    uint16_t& d_bits, uint16_t& dmin_bits) {
  uint8_t Laux[32];
  float w[32];
  float scales[8], mins[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int k = 0; k < 8; ++k) {
    const float* xs = x + 32 * k;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);
    scales[k] = fit_scale_min(32, nmax, xs, w, L + 32 * k, &mins[k], Laux, rmin, rdelta, nstep);
    if (scales[k] > max_scale) max_scale = scales[k];
    if (mins[k] > max_min) max_min = mins[k];
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  std::memset(scales12, 0, k_k_scale_size);
  for (int k = 0; k < 8; ++k) {
    const int ls = std::min(63, nearest_int(inv_scale * scales[k]) & 0xFF);
    const int lm = std::min(63, nearest_int(inv_min * mins[k]) & 0xFF);
    if (k < 4) {
      scales12[k] = static_cast<uint8_t>(ls);
      scales12[k + 4] = static_cast<uint8_t>(lm);
    } else {
      scales12[k + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      scales12[k - 4] = static_cast<uint8_t>(scales12[k - 4] | ((ls >> 4) << 6));
      scales12[k] = static_cast<uint8_t>(scales12[k] | ((lm >> 4) << 6));
    }
  }
  d_bits = float_to_half_bits(max_scale / 63.0f);
  dmin_bits = float_to_half_bits(max_min / 63.0f);
  const float d_all = half_bits_to_float(d_bits);
  const float dmin_all = half_bits_to_float(dmin_bits);
  for (int k = 0; k < 8; ++k) {
    int sc, m;
    scale_min_k4(k, scales12, sc, m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;  // keep the levels from the fit
    const float dm = dmin_all * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      L[32 * k + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * k + l] + dm) / d), 0, nmax));
    }
  }
}

// q4_K: quant_k_scales with levels 0..15 and the fit's candidates rmin -1, rdelta 0.1, 20 steps;
// two sub-blocks' levels share a byte (low nibble: the even one).
void quant_q4_K(const float* x, BlockQ4_K& b) {
  uint8_t L[256];
  quant_k_scales(x, 15, -1.0f, 0.1f, 20, L, b.scales, b.d, b.dmin);
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      b.qs[32 * p + l] = static_cast<uint8_t>(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
    }
  }
}

// q5_K: quant_k_scales with levels 0..31 and the fit's candidates rmin -0.5, rdelta 0.1, 15 steps;
// the fifth bit of element 32k + l is bit k of qh[l].
void quant_q5_K(const float* x, BlockQ5_K& b) {
  uint8_t L[256];
  quant_k_scales(x, 31, -0.5f, 0.1f, 15, L, b.scales, b.d, b.dmin);
  std::memset(b.qh, 0, sizeof b.qh);
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      int l1 = L[64 * p + l], l2 = L[64 * p + 32 + l];
      if (l1 > 15) {
        l1 -= 16;
        b.qh[l] = static_cast<uint8_t>(b.qh[l] | (1u << (2 * p)));
      }
      if (l2 > 15) {
        l2 -= 16;
        b.qh[l] = static_cast<uint8_t>(b.qh[l] | (2u << (2 * p)));
      }
      b.qs[32 * p + l] = static_cast<uint8_t>(l1 | (l2 << 4));
    }
  }
}

// Symmetric weighted fit of n values to levels -nmax..nmax-1 with weights x² (ggml's
// make_qx_quants, rmse_type 1, no importance): start from iscale = -nmax / max (max = signed value
// of largest magnitude), solve the least-squares scale for the rounded levels, then try iscale =
// -(nmax + 0.1 * i) / max for i = ±1..±9 and keep the one maximising (Σwxl)² / Σwl². Levels are
// stored as l + nmax in L; returns the scale.
float fit_scale_symmetric(int n, int nmax, const float* x, int8_t* L) {
  constexpr float k_group_max_eps = 1e-15f;
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < k_group_max_eps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  auto level = [nmax](float v) { return std::clamp(nearest_int(v), -nmax, nmax - 1); };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale * x[i]);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    sumlx = suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale * x[i]);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(level(iscale * x[i]) + nmax);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// q6_K: per 16-element sub-block fit_scale_symmetric(nmax 32); the 16 scales are quantized to
// int8 against the one of largest magnitude (iscale = -128 / max_scale, d = 1 / iscale), and the
// quants recomputed from the stored scales: q = clamp(round(x / (d*sc)), -32, 31) + 32.
void quant_q6_K(const float* x, BlockQ6_K& b) {
  constexpr float k_group_max_eps = 1e-15f;
  int8_t L[256];
  float scales[16];
  float max_scale = 0.0f, max_abs_scale = 0.0f;
  for (int k = 0; k < 16; ++k) {
    scales[k] = fit_scale_symmetric(16, 32, x + 16 * k, L + 16 * k);
    const float a = std::fabs(scales[k]);
    if (a > max_abs_scale) {
      max_abs_scale = a;
      max_scale = scales[k];
    }
  }
  std::memset(&b, 0, sizeof b);
  if (max_abs_scale < k_group_max_eps) return;  // all (near) zero: an all-zero block, d = +0
  const float iscale = -128.0f / max_scale;
  b.d = float_to_half_bits(1.0f / iscale);
  for (int k = 0; k < 16; ++k) {
    b.scales[k] = static_cast<int8_t>(std::clamp(nearest_int(iscale * scales[k]), -128, 127));
  }
  const float d_all = half_bits_to_float(b.d);
  for (int k = 0; k < 16; ++k) {
    const float d = d_all * static_cast<float>(b.scales[k]);
    if (d == 0.0f) continue;
    for (int l = 0; l < 16; ++l) {
      L[16 * k + l] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * k + l] / d), -32, 31) + 32);
    }
  }
  for (int n = 0; n < 2; ++n) {
    const int8_t* Ln = L + 128 * n;
    uint8_t* ql = b.ql + 64 * n;
    uint8_t* qh = b.qh + 32 * n;
    for (int l = 0; l < 32; ++l) {
      const int q0 = Ln[l], q1 = Ln[l + 32], q2 = Ln[l + 64], q3 = Ln[l + 96];
      ql[l] = static_cast<uint8_t>((q0 & 0xF) | ((q2 & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
    }
  }
}

template <typename B, int QK, void (*Encode)(const float*, B&)>
void run_blocks(const float* src, void* dst, int64_t n) {
  const int64_t nb = n / QK;
  for (int64_t i = 0; i < nb; ++i) {
    B b{};
    Encode(src + i * QK, b);
    store_block(dst, i, b);
  }
}

}  // namespace

bool can_quantize(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q8_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return true;
    default: return false;
  }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  if (!can_quantize(t)) fail("quantize_row: no quantizer for type {}", dtype_name(t));
  const DTypeInfo& info = dtype_info(t);
  if (n < 0 || n % info.block_elems != 0) {
    fail("quantize_row: {} elements is not a multiple of the {} block size {}", n, info.name, info.block_elems);
  }
  auto* out = static_cast<unsigned char*>(dst);
  switch (t) {
    case DType::F32:
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = float_to_half_bits(src[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = detail::float_to_bf16_bits(src[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::Q8_0: return run_blocks<BlockQ8_0, k_qk8_0, quant_q8_0>(src, dst, n);
    case DType::Q8_1: return run_blocks<BlockQ8_1, k_qk8_1, quant_q8_1>(src, dst, n);
    case DType::Q5_0: return run_blocks<BlockQ5_0, k_qk5_0, quant_q5_0>(src, dst, n);
    case DType::Q5_1: return run_blocks<BlockQ5_1, k_qk5_1, quant_q5_1>(src, dst, n);
    case DType::Q4_K: return run_blocks<BlockQ4_K, k_qk_k, quant_q4_K>(src, dst, n);
    case DType::Q5_K: return run_blocks<BlockQ5_K, k_qk_k, quant_q5_K>(src, dst, n);
    case DType::Q6_K: return run_blocks<BlockQ6_K, k_qk_k, quant_q6_K>(src, dst, n);
    default: fail("quantize_row: no quantizer for type {}", dtype_name(t));
  }
}

}  // namespace rocky::quant
