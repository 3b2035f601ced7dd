// Seeded synthetic weights, scaled so that a random model behaves like a trained one at the output:
// last-position logits with std in [1, 5] and max |logit| ≤ 30, and a residual stream whose RMS
// grows a few times (≤ 10×) from the first block to the last, for every preset and layer count.
//
// Derivation (E = n_embd, F = n_ff, L = n_layer; all norm weights ≈ 1, so each block sees an input
// of RMS 1 whatever the residual's scale — only ratios matter):
//   q, k, v, gate, up ~ N(0, 1/E)          → their outputs have unit variance (+ q/k/v bias N(0, 0.2²));
//                                             q·k/√d is then ~N(0, 1): a soft, non-degenerate softmax.
//   FFN: silu(g)·u with g, u ~ N(0, 1) has E[(silu(g)·u)²] = E[g²·sigmoid(g)²] = 0.3558 (numerical
//        integral), RMS ρ_f = 0.5965; ffn_down ~ N(0, (σ_e·√(24/L) / (ρ_f·√F))²) adds variance 24·σ_e²/L
//        per block, 24·σ_e² over the model.
//   attention: its output (a convex mix of unit-variance v rows) has RMS ≤ 1; attn_output ~
//        N(0, 4·σ_e²/(L·E)) adds at most 4·σ_e² over the model.
//   token_embd ~ N(0, σ_e²) with σ_e = 1.5/√E: the residual starts at RMS σ_e and ends near
//        σ_e·√(1 + 24 + ≤4) ≈ 5·σ_e (≤ 10× whether counted from the embedding or from block 0).
//   LM head on the final-normed h (|h| = √E): untied output ~ N(0, 4/E) → logit std 2; tied (the
//        head is token_embd) → std 1.5, and the last token's own row gives at most
//        E·σ_e² / (5·σ_e) = 0.3·√E ≈ 14 (E = 2048) — below the 30 bound.
//   norms: N(1, 0.05²) (not exactly 1, so a backend that ignores them is caught).
// Values are drawn per row from SplitMix64 seeded by (seed, tensor name, row): the same seed gives
// the same bytes for any thread count, and a tensor's weights do not depend on --layers.
#pragma once

#include <cstdint>
#include <string_view>

#include "synth/plan.hpp"
#include "synth/presets.hpp"

namespace rocky::synth {

struct InitSpec {
  float mean = 0;
  float std = 0;
};

// The distribution of a tensor with role `role` in preset `p` built with `n_layer` blocks.
InitSpec init_spec(const Preset& p, uint32_t n_layer, Role role);

// FNV-1a of a tensor name (the per-tensor part of the row seed).
uint64_t name_hash(std::string_view name);

// Row `row` (ne0 = n floats) of the tensor named by `name_h` under `seed`.
void fill_row(uint64_t seed, uint64_t name_h, uint64_t row, InitSpec spec, float* dst, uint64_t n);

}  // namespace rocky::synth
