#include "synth/weights.hpp"

#include <cmath>

#include "synth/rng.hpp"

namespace rocky::synth {

InitSpec init_spec(const Preset& p, uint32_t n_layer, Role role) {
  const double e = p.n_embd, f = p.n_ff, l = n_layer == 0 ? 1 : n_layer;
  const double sigma_e = 1.5 / std::sqrt(e);
  constexpr double k_rho_f = 0.5965;  // RMS of silu(g)·u for g, u ~ N(0, 1), see weights.hpp
  auto s = [](double v) { return InitSpec{0.0f, static_cast<float>(v)}; };
  switch (role) {
    case Role::Embedding: return s(sigma_e);
    case Role::Output: return s(2.0 / std::sqrt(e));
    case Role::Norm: return InitSpec{1.0f, 0.05f};
    case Role::AttnQ:
    case Role::AttnK:
    case Role::AttnV:
    case Role::FfnGate:
    case Role::FfnUp: return s(1.0 / std::sqrt(e));
    case Role::BiasQ:
    case Role::BiasK:
    case Role::BiasV: return s(0.2);
    case Role::AttnOut: return s(sigma_e * std::sqrt(4.0 / (l * e)));
    case Role::FfnDown: return s(sigma_e * std::sqrt(24.0 / l) / (k_rho_f * std::sqrt(f)));
  }
  return s(0.0);
}

uint64_t name_hash(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

void fill_row(uint64_t seed, uint64_t name_h, uint64_t row, InitSpec spec, float* dst, uint64_t n) {
  SplitMix64 r(mix_seed(seed, name_h, row));
  fill_normal(r, dst, n, spec.mean, spec.std);
}

}  // namespace rocky::synth
