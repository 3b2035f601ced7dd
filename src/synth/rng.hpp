// Seeded pseudo-random numbers for synthetic models: SplitMix64 (Steele, Lea & Flood, "Fast
// splittable pseudorandom number generators", OOPSLA 2014; constants as in Vigna's public-domain
// splitmix64.c) and Box–Muller normals. The integer stream is identical everywhere; normals use
// std::log / std::sqrt / std::cos / std::sin of doubles rounded to float, so they are identical
// wherever the C library's results are (glibc on x86-64 and aarch64 in practice; a libm differing in
// the last ulp could in rare cases move a grid weight by one step). Whatever includes this header
// must be compiled with -ffp-contract=off (rocky_synth is): `mean + std * x` fused into an FMA
// rounds once instead of twice and moves a weight by an ulp.
#pragma once

#include <cmath>
#include <cstdint>

namespace rocky::synth {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1]: 53 random bits, never 0 (safe for log).
  double uniform_pos() { return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

// A stream seed from a base seed and two indices (tensor, row): a SplitMix64 step over a mix of the
// three, so rows can be generated in any order and by any number of threads with the same result.
inline uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b) {
  SplitMix64 r(seed ^ (a * 0xd1b54a32d192ed03ull) ^ (b * 0x8cb92ba72f3d8dd7ull));
  r.next();
  return r.next();
}

// Fills x[0..n) with N(mean, std²) samples (Box–Muller, two per pair of uniforms).
inline void fill_normal(SplitMix64& r, float* x, uint64_t n, float mean, float std) {
  constexpr double k_two_pi = 6.283185307179586476925;
  uint64_t i = 0;
  for (; i + 1 < n; i += 2) {
    const double rad = std::sqrt(-2.0 * std::log(r.uniform_pos()));
    const double ang = k_two_pi * r.uniform_pos();
    x[i] = mean + std * static_cast<float>(rad * std::cos(ang));
    x[i + 1] = mean + std * static_cast<float>(rad * std::sin(ang));
  }
  if (i < n) {
    const double rad = std::sqrt(-2.0 * std::log(r.uniform_pos()));
    x[i] = mean + std * static_cast<float>(rad * std::cos(k_two_pi * r.uniform_pos()));
  }
}

}  // namespace rocky::synth
