#include "synth/weights.hpp"

#include <algorithm>
#include <cmath>

#include "synth/rng.hpp"

namespace rocky::synth {

InitSpec init_spec(const Preset& p, uint32_t n_layer, Role role) {
  const double e = p.n_embd, f = p.n_ff, l = n_layer == 0 ? 1 : n_layer;
  const double sigma_e = 1.5 / std::sqrt(e);
  constexpr double k_rho_f = 0.5965;  // RMS of silu(g)·u for g, u ~ N(0, 1), see weights.hpp
  auto s = [](double v) { return InitSpec{0.0f, static_cast<float>(v), true}; };
  switch (role) {
    case Role::Embedding: return s(sigma_e);
    case Role::Output: return s(2.0 / std::sqrt(e));
    case Role::Norm: return InitSpec{1.0f, 0.05f, false};
    case Role::AttnQ:
    case Role::AttnK:
    case Role::AttnV:
    case Role::FfnGate:
    case Role::FfnUp: return s(1.0 / std::sqrt(e));
    case Role::BiasQ:
    case Role::BiasK:
    case Role::BiasV: return InitSpec{0.0f, 0.2f, false};
    case Role::AttnOut: return s(sigma_e * std::sqrt(4.0 / (l * e)));
    case Role::FfnDown: return s(sigma_e * std::sqrt(24.0 / l) / (k_rho_f * std::sqrt(f)));
    case Role::RopeFreqs:
      return InitSpec{1.0f, 0.0f, false};  // not used: rope_freq_factors
    // qwen35: A = −exp(A_log) ≈ −4 (never ≥ 0 in practice: 8σ), dt bias ≈ softplus⁻¹(0.02),
    // so exp(softplus(a + dt)·A) keeps per-head memories of tens of tokens; conv N(0, 0.5).
    case Role::AttnQkv:
    case Role::AttnGate:
    case Role::SsmAlpha: return s(1.0 / std::sqrt(e));
    case Role::SsmConv: return InitSpec{0.0f, 0.5f, false};
    case Role::SsmA: return InitSpec{-4.0f, 0.5f, false};
    case Role::SsmDtBias: return InitSpec{-4.0f, 1.0f, false};
    case Role::SsmOut: return s(sigma_e * std::sqrt(4.0 / (l * e)));
  }
  return s(0.0);
}

std::vector<float> rope_freq_factors(const Preset& p) {
  std::vector<float> out;
  if (!p.has_rope_freqs()) return out;
  constexpr double k_pi = 3.14159265358979323846;
  const double dim = p.head_dim(), orig = p.rope_orig_ctx;
  const double low_wavelen = orig / p.rope_low_freq, high_wavelen = orig / p.rope_high_freq;
  for (uint32_t i = 0; i < p.head_dim() / 2; ++i) {
    // The converter computes the frequencies in f32 (torch.float32) and the rest in Python floats.
    const float freq = static_cast<float>(1.0 / std::pow(static_cast<double>(p.rope_base), 2.0 * i / dim));
    const double wavelen = 2 * k_pi / static_cast<double>(freq);
    double v;
    if (wavelen < high_wavelen) {
      v = 1.0;
    } else if (wavelen > low_wavelen) {
      v = p.rope_factor;
    } else {
      const double smooth = (orig / wavelen - p.rope_low_freq) / (p.rope_high_freq - p.rope_low_freq);
      v = 1.0 / ((1.0 - smooth) / p.rope_factor + smooth);
    }
    out.push_back(static_cast<float>(v));
  }
  return out;
}

uint64_t name_hash(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

namespace {

constexpr double k_grid_s = 2.5;  // k = round(k_grid_s · z) before clipping to [−8, 7]

// Δ for grid values of std `std`: E[k²] = (29/32)(s² + 1/12) + (64 + 64 + 49)/32 (free values, then
// the three forced extremes per 32), rounded to 4 mantissa bits.
float grid_step(float std) {
  const double ek2 = 29.0 / 32.0 * (k_grid_s * k_grid_s + 1.0 / 12.0) + 177.0 / 32.0;
  const double d = std / std::sqrt(ek2);
  int e = 0;
  const double m = std::frexp(d, &e);  // d = m · 2^e, m in [0.5, 1)
  return static_cast<float>(std::ldexp(std::floor(m * 32.0 + 0.5) / 32.0, e));
}

}  // namespace

void fill_row(uint64_t seed, uint64_t name_h, uint64_t row, InitSpec spec, float* dst, uint64_t n) {
  SplitMix64 r(mix_seed(seed, name_h, row));
  if (!spec.grid || n % 32 != 0) {
    fill_normal(r, dst, n, spec.mean, spec.std);
    return;
  }
  fill_normal(r, dst, n, 0.0f, 1.0f);
  const float delta = grid_step(spec.std);
  float flip = 1.0f;
  for (uint64_t g = 0; g < n; g += 32) {
    if (g % 256 == 0) flip = (r.next() & 1) ? -1.0f : 1.0f;  // one orientation per 256 (q6_K super-block)
    float* x = dst + g;
    for (int i = 0; i < 32; ++i) {
      const double k = std::floor(k_grid_s * x[i] + 0.5);
      x[i] = static_cast<float>(std::clamp(k, -8.0, 7.0));
    }
    const uint64_t p1 = r.next() % 16, p2 = 16 + r.next() % 16;
    uint64_t p3 = r.next() % 30;  // the 30 positions other than p1, p2
    p3 += p3 >= std::min(p1, p2);
    p3 += p3 >= std::max(p1, p2);
    x[p1] = -8.0f;
    x[p2] = -8.0f;
    x[p3] = 7.0f;
    for (int i = 0; i < 32; ++i) x[i] = spec.mean + delta * flip * x[i];
  }
}

}  // namespace rocky::synth
