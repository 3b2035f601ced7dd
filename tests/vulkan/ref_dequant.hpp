// Naive reference dequantization for the Vulkan tests, written block-by-block after ggml's
// dequantize_row_* loops (ggml/src/ggml-quants.c, llama.cpp 0253fb21f) — deliberately a different
// formulation from the shaders' per-element indexing and from rocky_quant's dequantize_row, which
// the tests' reference values come from (vk_test_util.hpp). Kept as the independent check of both:
// test_vulkan_device compares it with dequantize_row (RefDequantAgreesWithRockyQuant) and with
// ggml's own values in ../shared/reference/ref/dequant/*.json (DequantMatchesGgml).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "core/dtype.hpp"

namespace rocky::test {

inline double ref_f16(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 0)
    v = std::ldexp(m, -24);
  else if (e == 31)
    v = m ? NAN : INFINITY;
  else
    v = std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}
inline uint16_t ref_to_f16(float f) {  // round-to-nearest for |f| in the normal range used here
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t s = (x >> 16) & 0x8000u;
  int e = int((x >> 23) & 0xFF) - 127 + 15;
  uint32_t m = x & 0x7FFFFFu;
  if (e <= 0) return static_cast<uint16_t>(s);  // flush tiny values (never produced by the tests)
  uint32_t h = s | (uint32_t(e) << 10) | (m >> 13);
  if ((m & 0x1FFFu) > 0x1000u || ((m & 0x1FFFu) == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(h);
}

inline uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

inline void ref_get_scale_min_k4(int j, const uint8_t* q, int& d, int& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

// n elements of type t at src → y (doubles).
inline void ref_dequant_row(DType t, const uint8_t* x, double* y, int64_t n) {
  switch (t) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, x + 4 * i, 4);
        y[i] = f;
      }
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) y[i] = ref_f16(rd16(x + 2 * i));
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint32_t u = uint32_t(rd16(x + 2 * i)) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        y[i] = f;
      }
      return;
    case DType::Q4_0:
      for (int64_t b = 0; b < n / 32; ++b, x += 18, y += 32) {
        double d = ref_f16(rd16(x));
        for (int j = 0; j < 16; ++j) {
          y[j] = ((x[2 + j] & 0xF) - 8) * d;
          y[j + 16] = ((x[2 + j] >> 4) - 8) * d;
        }
      }
      return;
    case DType::Q4_1:
      for (int64_t b = 0; b < n / 32; ++b, x += 20, y += 32) {
        double d = ref_f16(rd16(x)), m = ref_f16(rd16(x + 2));
        for (int j = 0; j < 16; ++j) {
          y[j] = (x[4 + j] & 0xF) * d + m;
          y[j + 16] = (x[4 + j] >> 4) * d + m;
        }
      }
      return;
    case DType::Q5_0:
    case DType::Q5_1: {
      const bool one = t == DType::Q5_1;
      const int bs = one ? 24 : 22, qh_at = one ? 4 : 2;
      for (int64_t b = 0; b < n / 32; ++b, x += bs, y += 32) {
        double d = ref_f16(rd16(x)), m = one ? ref_f16(rd16(x + 2)) : 0;
        uint32_t qh;
        std::memcpy(&qh, x + qh_at, 4);
        const uint8_t* qs = x + qh_at + 4;
        for (int j = 0; j < 16; ++j) {
          int x0 = (qs[j] & 0xF) | int(((qh >> j) << 4) & 0x10);
          int x1 = (qs[j] >> 4) | int((qh >> (j + 12)) & 0x10);
          y[j] = one ? x0 * d + m : (x0 - 16) * d;
          y[j + 16] = one ? x1 * d + m : (x1 - 16) * d;
        }
      }
      return;
    }
    case DType::Q8_0:
      for (int64_t b = 0; b < n / 32; ++b, x += 34, y += 32) {
        double d = ref_f16(rd16(x));
        for (int j = 0; j < 32; ++j) y[j] = static_cast<int8_t>(x[2 + j]) * d;
      }
      return;
    case DType::Q2_K:
      for (int64_t b = 0; b < n / 256; ++b, x += 84) {
        const uint8_t* sc = x;
        const uint8_t* q = x + 16;
        double d = ref_f16(rd16(x + 80)), dmin = ref_f16(rd16(x + 82));
        int is = 0;
        for (int h = 0; h < 256; h += 128) {
          int shift = 0;
          for (int j = 0; j < 4; ++j) {
            int s = sc[is++];
            double dl = d * (s & 0xF), ml = dmin * (s >> 4);
            for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l] >> shift) & 3) - ml;
            s = sc[is++];
            dl = d * (s & 0xF);
            ml = dmin * (s >> 4);
            for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16] >> shift) & 3) - ml;
            shift += 2;
          }
          q += 32;
        }
      }
      return;
    case DType::Q3_K:
      for (int64_t b = 0; b < n / 256; ++b, x += 110) {
        const uint8_t* hm = x;
        const uint8_t* q = x + 32;
        uint32_t aux[4];
        std::memcpy(aux, x + 96, 12);
        const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
        uint32_t tmp = aux[2];
        aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
        aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
        aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
        aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
        int8_t scales[16];
        std::memcpy(scales, aux, 16);
        double d_all = ref_f16(rd16(x + 108));
        int is = 0;
        uint8_t m = 1;
        for (int h = 0; h < 256; h += 128) {
          int shift = 0;
          for (int j = 0; j < 4; ++j) {
            double dl = d_all * (scales[is++] - 32);
            for (int l = 0; l < 16; ++l) *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
            dl = d_all * (scales[is++] - 32);
            for (int l = 0; l < 16; ++l) *y++ = dl * (((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
            shift += 2;
            m = static_cast<uint8_t>(m << 1);
          }
          q += 32;
        }
      }
      return;
    case DType::Q4_K:
    case DType::Q5_K: {
      const bool five = t == DType::Q5_K;
      for (int64_t b = 0; b < n / 256; ++b, x += five ? 176 : 144) {
        double d = ref_f16(rd16(x)), dmin = ref_f16(rd16(x + 2));
        const uint8_t* sc = x + 4;
        const uint8_t* qh = x + 16;
        const uint8_t* q = x + (five ? 48 : 16);
        int is = 0;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < 256; j += 64) {
          int s, m;
          ref_get_scale_min_k4(is + 0, sc, s, m);
          double d1 = d * s, m1 = dmin * m;
          ref_get_scale_min_k4(is + 1, sc, s, m);
          double d2 = d * s, m2 = dmin * m;
          for (int l = 0; l < 32; ++l) *y++ = d1 * ((q[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0)) - m1;
          for (int l = 0; l < 32; ++l) *y++ = d2 * ((q[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - m2;
          q += 32;
          is += 2;
          u1 = static_cast<uint8_t>(u1 << 2);
          u2 = static_cast<uint8_t>(u2 << 2);
        }
      }
      return;
    }
    case DType::Q6_K:
      for (int64_t b = 0; b < n / 256; ++b, x += 210) {
        const uint8_t* ql = x;
        const uint8_t* qh = x + 128;
        const int8_t* sc = reinterpret_cast<const int8_t*>(x + 192);
        double d = ref_f16(rd16(x + 208));
        for (int h = 0; h < 256; h += 128) {
          for (int l = 0; l < 32; ++l) {
            int is = l / 16;
            int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * sc[is + 0] * q1;
            y[l + 32] = d * sc[is + 2] * q2;
            y[l + 64] = d * sc[is + 4] * q3;
            y[l + 96] = d * sc[is + 6] * q4;
          }
          y += 128;
          ql += 64;
          qh += 32;
          sc += 8;
        }
      }
      return;
    default: throw std::runtime_error("ref_dequant_row: unsupported type");
  }
}

// Byte offsets of the f16 scale fields inside one block (set to sane values by the generators).
inline std::vector<int> f16_fields(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0: return {0};
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: return {0, 2};
    case DType::Q2_K: return {80, 82};
    case DType::Q3_K: return {108};
    case DType::Q6_K: return {208};
    default: return {};
  }
}

}  // namespace rocky::test
