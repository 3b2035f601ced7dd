// f16 / bf16 conversions against independent naive implementations (double arithmetic and a
// sorted table of every half value), on every half, every rounding midpoint and its neighbours,
// special values, and random float bit patterns.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "quant/quant.hpp"

namespace rocky::quant {
namespace {

// Naive binary16 decode in double: sign * 2^(e-15) * (1 + m/1024), or m * 2^-24 when e == 0.
double naive_half_value(uint16_t h) {
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0x1F) return m ? std::numeric_limits<double>::quiet_NaN() : s * std::numeric_limits<double>::infinity();
  if (e == 0) return s * std::ldexp(static_cast<double>(m), -24);
  return s * std::ldexp(static_cast<double>(1024 + m), e - 25);
}

// Every finite non-negative half value, ascending (bits 0x0000..0x7BFF are monotonic).
const std::vector<double>& half_table() {
  static const std::vector<double> t = [] {
    std::vector<double> v;
    for (uint32_t h = 0; h < 0x7C00; ++h) v.push_back(naive_half_value(static_cast<uint16_t>(h)));
    return v;
  }();
  return t;
}

// Naive f32 -> f16: nearest entry of the table, ties to the even bit pattern; >= 65520 -> inf.
uint16_t naive_to_half(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return sign | 0x7E00;  // ggml's canonical NaN
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7C00;
  const auto& t = half_table();
  const auto it = std::lower_bound(t.begin(), t.end(), a);
  const size_t hi = static_cast<size_t>(it - t.begin());  // t[hi] >= a
  if (hi == t.size()) return sign | 0x7BFF;
  if (t[hi] == a || hi == 0) return static_cast<uint16_t>(sign | hi);
  const size_t lo = hi - 1;
  const double dl = a - t[lo], dh = t[hi] - a;
  const size_t pick = dl < dh ? lo : dh < dl ? hi : ((lo & 1) == 0 ? lo : hi);
  return static_cast<uint16_t>(sign | pick);
}

// Naive f32 -> bf16: choose between truncation and the next bf16 up by distance, ties to even.
uint16_t naive_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40);
  const uint32_t lo_bits = x & 0xFFFF0000u;
  if (lo_bits == x) return static_cast<uint16_t>(x >> 16);
  const double a = std::fabs(static_cast<double>(f));
  const double lo = std::fabs(static_cast<double>(std::bit_cast<float>(lo_bits)));
  // next bf16 up in magnitude; past the largest finite it is 2^128 (rounds to inf)
  const uint32_t hi_bits = lo_bits + 0x10000u;
  const double hi = ((hi_bits & 0x7FFFFFFFu) == 0x7F800000u)
                        ? std::ldexp(1.0, 128)
                        : std::fabs(static_cast<double>(std::bit_cast<float>(hi_bits)));
  const double dl = a - lo, dh = hi - a;
  const bool up = dh < dl || (dh == dl && ((lo_bits >> 16) & 1));
  return static_cast<uint16_t>((up ? hi_bits : lo_bits) >> 16);
}

TEST(Half, EveryHalfDecodesExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    const double want = naive_half_value(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      const uint32_t b = std::bit_cast<uint32_t>(got);
      EXPECT_EQ(b >> 31, h >> 15) << std::hex << h;                // sign kept
      EXPECT_EQ((b >> 13) & 0x1FFu, h & 0x1FFu) << std::hex << h;  // payload kept
      EXPECT_NE(b & 0x00400000u, 0u) << std::hex << h;             // quiet
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << h;
      ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;  // -0.0 kept
    }
  }
}

TEST(Half, EveryFiniteHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue;  // NaN
    ASSERT_EQ(f32_to_f16(f16_to_f32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Half, MidpointsAndNeighboursRoundToNearestEven) {
  const auto& t = half_table();
  int64_t checked = 0;
  for (size_t i = 0; i + 1 < t.size(); ++i) {
    const double mid = 0.5 * (t[i] + t[i + 1]);  // exact in double, representable in float
    const float fm = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(fm), mid);
    for (float f : {fm, std::nextafter(fm, 0.0f), std::nextafter(fm, 1e9f)}) {
      for (float s : {f, -f}) {
        ASSERT_EQ(f32_to_f16(s), naive_to_half(s)) << s;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 180000);
}

TEST(Half, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(inf), 0x7C00);
  EXPECT_EQ(f32_to_f16(-inf), 0xFC00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::quiet_NaN()), 0x7E00);
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::quiet_NaN()), 0xFE00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65519.996f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);               // tie with the odd 0x7BFF goes to inf
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (zero)
  EXPECT_EQ(f32_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -24)), 0x0002);     // tie 1.5 -> 2
  EXPECT_EQ(f32_to_f16(std::ldexp(2.5f, -24)), 0x0002);     // tie 2.5 -> 2
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.5f, -24)), 0x0400);  // subnormal rounds up to the smallest normal
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
}

TEST(Half, RandomFloatsMatchNaive) {
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 2'000'000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    // Half the draws are concentrated in the half's exponent range, where rounding happens.
    const uint32_t b = (i & 1) ? bits : ((bits & 0x807FFFFFu) | ((100u + (bits >> 23) % 45u) << 23));
    const float f = std::bit_cast<float>(b);
    ASSERT_EQ(f32_to_f16(f), naive_to_half(f)) << std::hex << b;
  }
}

TEST(BFloat16, DecodeIsTheUpperHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    ASSERT_EQ(std::bit_cast<uint32_t>(bf16_to_f32(static_cast<uint16_t>(h))), h << 16);
  }
}

TEST(BFloat16, RoundToNearestEvenAndSpecials) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16(inf), 0x7F80);
  EXPECT_EQ(f32_to_bf16(-inf), 0xFF80);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7F800001u)), 0x7FC0);  // signalling NaN -> quiet
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0xFFC12345u)), 0xFFC1);  // payload kept
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie -> even (down)
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F808001u)), 0x3F81);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7F7FFFFFu)), 0x7F80);  // max float rounds to inf
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x00018000u)), 0x0002);  // subnormals are not flushed
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x80007FFFu)), 0x8000);
  std::mt19937_64 rng(777);
  for (int i = 0; i < 2'000'000; ++i) {
    const uint32_t b = static_cast<uint32_t>(rng());
    const float f = std::bit_cast<float>(b);
    ASSERT_EQ(f32_to_bf16(f), naive_to_bf16(f)) << std::hex << b;
  }
}

}  // namespace
}  // namespace rocky::quant
