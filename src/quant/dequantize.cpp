// Dequantization of every supported block type to f32, bit-exact with ggml's dequantize_row_*.
//
// Each element is computed with exactly the float operations (and their order) of ggml's
// reference, e.g. q4_K: (d * sc) * q - (dmin * m) in binary32; this file is compiled with
// -ffp-contract=off so no multiply-add is fused. Layouts are documented in blocks.hpp.
#include <cstring>

#include "core/error.hpp"
#include "quant/blocks.hpp"
#include "quant/half.hpp"
#include "quant/quant.hpp"

namespace rocky::quant {
namespace {

using detail::half_bits_to_float;

void deq_q4_0(const BlockQ4_0& b, float* y) {
  const float d = half_bits_to_float(b.d);
  for (int j = 0; j < 16; ++j) {
    const int lo = (b.qs[j] & 0x0F) - 8;
    const int hi = (b.qs[j] >> 4) - 8;
    y[j] = static_cast<float>(lo) * d;
    y[j + 16] = static_cast<float>(hi) * d;
  }
}

void deq_q4_1(const BlockQ4_1& b, float* y) {
  const float d = half_bits_to_float(b.d);
  const float m = half_bits_to_float(b.m);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(b.qs[j] & 0x0F) * d + m;
    y[j + 16] = static_cast<float>(b.qs[j] >> 4) * d + m;
  }
}

void deq_q5_0(const BlockQ5_0& b, float* y) {
  const float d = half_bits_to_float(b.d);
  uint32_t qh;
  std::memcpy(&qh, b.qh, sizeof qh);
  for (int j = 0; j < 16; ++j) {
    const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
    const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
    const int v0 = ((b.qs[j] & 0x0F) | h0) - 16;
    const int v1 = ((b.qs[j] >> 4) | h1) - 16;
    y[j] = static_cast<float>(v0) * d;
    y[j + 16] = static_cast<float>(v1) * d;
  }
}

void deq_q5_1(const BlockQ5_1& b, float* y) {
  const float d = half_bits_to_float(b.d);
  const float m = half_bits_to_float(b.m);
  uint32_t qh;
  std::memcpy(&qh, b.qh, sizeof qh);
  for (int j = 0; j < 16; ++j) {
    const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
    const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
    y[j] = static_cast<float>((b.qs[j] & 0x0F) | h0) * d + m;
    y[j + 16] = static_cast<float>((b.qs[j] >> 4) | h1) * d + m;
  }
}

void deq_q8_0(const BlockQ8_0& b, float* y) {
  const float d = half_bits_to_float(b.d);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

void deq_q8_1(const BlockQ8_1& b, float* y) {
  const float d = half_bits_to_float(b.d);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

void deq_q2_K(const BlockQ2_K& b, float* y) {
  const float d = half_bits_to_float(b.d);
  const float dmin = half_bits_to_float(b.dmin);
  for (int n = 0; n < 2; ++n) {  // halves of 128
    const uint8_t* q = b.qs + 32 * n;
    for (int j = 0; j < 4; ++j) {  // bit planes
      const int shift = 2 * j;
      for (int s = 0; s < 2; ++s) {  // two 16-element sub-blocks per plane
        const uint8_t sc = b.scales[8 * n + 2 * j + s];
        const float dl = d * static_cast<float>(sc & 0xF);
        const float ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) {
          const int v = (q[16 * s + l] >> shift) & 3;
          *y++ = dl * static_cast<float>(v) - ml;
        }
      }
    }
  }
}

void deq_q3_K(const BlockQ3_K& b, float* y) {
  const float d = half_bits_to_float(b.d);
  int sc[16];
  for (int k = 0; k < 16; ++k) {
    const int lo4 = k < 8 ? (b.scales[k] & 0xF) : (b.scales[k - 8] >> 4);
    const int hi2 = (b.scales[8 + k % 4] >> (2 * (k / 4))) & 3;
    sc[k] = (lo4 | (hi2 << 4)) - 32;
  }
  for (int n = 0; n < 2; ++n) {
    const uint8_t* q = b.qs + 32 * n;
    for (int j = 0; j < 4; ++j) {
      const int shift = 2 * j;
      const int hbit = 4 * n + j;
      for (int s = 0; s < 2; ++s) {
        const float dl = d * static_cast<float>(sc[8 * n + 2 * j + s]);
        for (int l = 16 * s; l < 16 * s + 16; ++l) {
          const int v = ((q[l] >> shift) & 3) - (((b.hmask[l] >> hbit) & 1) ? 0 : 4);
          *y++ = dl * static_cast<float>(v);
        }
      }
    }
  }
}

// 6-bit scale and min of sub-block k (0..7) of q4_K / q5_K.
inline void scale_min_k4(int k, const uint8_t* s, int& sc, int& m) {
  if (k < 4) {
    sc = s[k] & 63;
    m = s[k + 4] & 63;
  } else {
    sc = (s[k + 4] & 0xF) | ((s[k - 4] >> 6) << 4);
    m = (s[k + 4] >> 4) | ((s[k] >> 6) << 4);
  }
}

void deq_q4_K(const BlockQ4_K& b, float* y) {
  const float d = half_bits_to_float(b.d);
  const float dmin = half_bits_to_float(b.dmin);
  for (int p = 0; p < 4; ++p) {
    const uint8_t* q = b.qs + 32 * p;
    int sc0, m0, sc1, m1;
    scale_min_k4(2 * p, b.scales, sc0, m0);
    scale_min_k4(2 * p + 1, b.scales, sc1, m1);
    const float d0 = d * static_cast<float>(sc0), o0 = dmin * static_cast<float>(m0);
    const float d1 = d * static_cast<float>(sc1), o1 = dmin * static_cast<float>(m1);
    for (int l = 0; l < 32; ++l) y[l] = d0 * static_cast<float>(q[l] & 0xF) - o0;
    for (int l = 0; l < 32; ++l) y[32 + l] = d1 * static_cast<float>(q[l] >> 4) - o1;
    y += 64;
  }
}

void deq_q5_K(const BlockQ5_K& b, float* y) {
  const float d = half_bits_to_float(b.d);
  const float dmin = half_bits_to_float(b.dmin);
  for (int p = 0; p < 4; ++p) {
    const uint8_t* q = b.qs + 32 * p;
    int sc0, m0, sc1, m1;
    scale_min_k4(2 * p, b.scales, sc0, m0);
    scale_min_k4(2 * p + 1, b.scales, sc1, m1);
    const float d0 = d * static_cast<float>(sc0), o0 = dmin * static_cast<float>(m0);
    const float d1 = d * static_cast<float>(sc1), o1 = dmin * static_cast<float>(m1);
    const int b0 = 2 * p, b1 = 2 * p + 1;
    for (int l = 0; l < 32; ++l) {
      const int v = (q[l] & 0xF) | (((b.qh[l] >> b0) & 1) << 4);
      y[l] = d0 * static_cast<float>(v) - o0;
    }
    for (int l = 0; l < 32; ++l) {
      const int v = (q[l] >> 4) | (((b.qh[l] >> b1) & 1) << 4);
      y[32 + l] = d1 * static_cast<float>(v) - o1;
    }
    y += 64;
  }
}

void deq_q6_K(const BlockQ6_K& b, float* y) {
  const float d = half_bits_to_float(b.d);
  for (int n = 0; n < 2; ++n) {
    const uint8_t* ql = b.ql + 64 * n;
    const uint8_t* qh = b.qh + 32 * n;
    const int8_t* sc = b.scales + 8 * n;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int v0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int v1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int v2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int v3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(v0);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(v1);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(v2);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(v3);
    }
    y += 128;
  }
}

void deq_q8_K(const BlockQ8_K& b, float* y) {
  for (int j = 0; j < 256; ++j) y[j] = b.d * static_cast<float>(b.qs[j]);
}

// Block loop: one memcpy per block (the source may be unaligned), then the per-type decoder.
template <typename B, int QK, void (*Decode)(const B&, float*)>
void run_blocks(const void* src, float* dst, int64_t n) {
  const int64_t nb = n / QK;
  for (int64_t i = 0; i < nb; ++i) Decode(load_block<B>(src, i), dst + i * QK);
}

void check_n(DType t, int64_t n, const char* what) {
  const DTypeInfo& info = dtype_info(t);
  if (n < 0 || n % info.block_elems != 0) {
    fail("{}: {} elements is not a multiple of the {} block size {}", what, n, info.name, info.block_elems);
  }
}

}  // namespace

float f16_to_f32(uint16_t h) { return detail::half_bits_to_float(h); }
uint16_t f32_to_f16(float f) { return detail::float_to_half_bits(f); }
float bf16_to_f32(uint16_t h) { return detail::bf16_bits_to_float(h); }
uint16_t f32_to_bf16(float f) { return detail::float_to_bf16_bits(f); }

bool can_dequantize(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q8_1:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q8_K: return true;
    default: return false;
  }
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  if (!can_dequantize(t)) fail("dequantize_row: type {} is not supported", dtype_name(t));
  check_n(t, n, "dequantize_row");
  switch (t) {
    case DType::F32:
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16: {
      const auto* p = static_cast<const unsigned char*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = detail::half_bits_to_float(h);
      }
      return;
    }
    case DType::BF16: {
      const auto* p = static_cast<const unsigned char*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = detail::bf16_bits_to_float(h);
      }
      return;
    }
    case DType::Q4_0: return run_blocks<BlockQ4_0, k_qk4_0, deq_q4_0>(src, dst, n);
    case DType::Q4_1: return run_blocks<BlockQ4_1, k_qk4_1, deq_q4_1>(src, dst, n);
    case DType::Q5_0: return run_blocks<BlockQ5_0, k_qk5_0, deq_q5_0>(src, dst, n);
    case DType::Q5_1: return run_blocks<BlockQ5_1, k_qk5_1, deq_q5_1>(src, dst, n);
    case DType::Q8_0: return run_blocks<BlockQ8_0, k_qk8_0, deq_q8_0>(src, dst, n);
    case DType::Q8_1: return run_blocks<BlockQ8_1, k_qk8_1, deq_q8_1>(src, dst, n);
    case DType::Q2_K: return run_blocks<BlockQ2_K, k_qk_k, deq_q2_K>(src, dst, n);
    case DType::Q3_K: return run_blocks<BlockQ3_K, k_qk_k, deq_q3_K>(src, dst, n);
    case DType::Q4_K: return run_blocks<BlockQ4_K, k_qk_k, deq_q4_K>(src, dst, n);
    case DType::Q5_K: return run_blocks<BlockQ5_K, k_qk_k, deq_q5_K>(src, dst, n);
    case DType::Q6_K: return run_blocks<BlockQ6_K, k_qk_k, deq_q6_K>(src, dst, n);
    case DType::Q8_K: return run_blocks<BlockQ8_K, k_qk_k, deq_q8_K>(src, dst, n);
    default: fail("dequantize_row: type {} is not supported", dtype_name(t));
  }
}

}  // namespace rocky::quant
