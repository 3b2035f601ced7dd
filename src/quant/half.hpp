// Inline IEEE binary16 and bfloat16 conversions (the definitions behind quant.hpp's f16_to_f32,
// f32_to_f16, bf16_to_f32, f32_to_bf16), bit-exact with ggml's reference conversions
// (ggml/src/ggml-impl.h, llama.cpp commit 0253fb21f):
//   f16 -> f32: exact (subnormals included); NaN keeps sign and payload and comes back quiet.
//   f32 -> f16: round to nearest, ties to even; |x| >= 65520 -> inf; subnormal halves produced
//               exactly; NaN -> sign | 0x7E00.
//   bf16 -> f32: exact (upper 16 bits).
//   f32 -> bf16: round to nearest, ties to even (subnormals not flushed); NaN -> upper 16 bits
//                with the quiet bit (0x0040) forced on.
#pragma once

#include <bit>
#include <cstdint>

namespace rocky::quant::detail {

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    // inf, or NaN made quiet (as an x86/ARM float operation would)
    bits = sign | 0x7F800000u | (man << 13) | (man != 0 ? 0x00400000u : 0u);
  } else if (exp != 0) {
    bits = sign | ((exp + (127 - 15)) << 23) | (man << 13);  // rebias the exponent
  } else {
    // zero or subnormal: man * 2^-24, exact in binary32
    const float mag = static_cast<float>(man) * 0x1p-24f;
    bits = sign | std::bit_cast<uint32_t>(mag);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t float_to_half_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);   // NaN
  if (ax >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520 (or inf) -> inf
  if (ax >= 0x38800000u) {
    // normal half (|x| >= 2^-14): rebias the exponent by 112, drop 13 mantissa bits, RNE
    const uint32_t r = ax - 0x38000000u;
    uint32_t h = r >> 13;
    const uint32_t rem = r & 0x1FFFu;
    h += (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ? 1u : 0u;  // a carry bumps the exponent
    return static_cast<uint16_t>(sign | h);
  }
  if (ax < 0x33000000u) return sign;  // below 2^-25: rounds to (signed) zero
  // subnormal half: value in units of 2^-24 is m * 2^(e - 126) with e <= 112; round that to an
  // integer (RNE). A result of 0x400 is the smallest normal half, which is correct.
  const uint32_t e = ax >> 23;
  const uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  uint32_t h = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  h += (rem > halfway || (rem == halfway && (h & 1u))) ? 1u : 0u;
  return static_cast<uint16_t>(sign | h);
}

inline float bf16_bits_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  // RNE on the low 16 bits: add 0x7FFF plus the lowest kept bit, then truncate. Overflow of the
  // largest finite values carries correctly into inf.
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace rocky::quant::detail
