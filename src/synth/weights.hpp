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
// Grid ("QAT-like") values for every 2-D weight: a Gaussian with the std above, rounded to a grid
// w = Δ·k, k ∈ [−8, 7] integer (k = round(2.5·z), z ~ N(0, 1), clipped), where every 16-element group
// holds one k = −8 and every 32-element group one k = +7 (3 of 32 values; Δ is set so the std stays
// the one above, and rounded to 4 mantissa bits so Δ·k is exact in f16 and bf16). Each 256-element
// block is negated with probability 1/2: the forced extremes are not zero-mean (−9Δ/32 per group),
// and a mean shared by all rows would add a coherent rank-1 component that grows through the
// layers; one sign per 256 keeps q6_K's super-block scales exact (one sign per super-block). Why: a random
// network amplifies weight noise ~5× into its logits (measured: Gaussian weights give Q4_K_M logits
// up to 2.1 away from f32 at n_embd 256), so only weights that the formats represent exactly can
// meet the check "quantized logits within 0.5 of f32". With this grid, ggml's reference q4_K
// (scale Δ, min −8Δ per 32), q6_K (scale Δ/4 per 16, max |q| = 32), q5_0 (d = Δ/2) and f16 / bf16
// reproduce the values up to the fp16 rounding of the block scales (≈ 0.05 %; q4_K ≈ 0.2 %, as
// its d·sc·q − dmin·m subtracts two rounded terms); q8_0 rounds at
// ≈ 0.5 % (its d = 8Δ/127). Quantizer bugs still show: only the exact algorithms are lossless here.
// Values are drawn per row from SplitMix64 seeded by (seed, tensor name, row): the same seed gives
// the same bytes for any thread count, and a tensor's weights do not depend on --layers.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "synth/plan.hpp"
#include "synth/presets.hpp"

namespace rocky::synth {

struct InitSpec {
  float mean = 0;
  float std = 0;
  bool grid = false;  // 2-D weights: grid values (see above); 1-D norms and biases: plain Gaussian
};

// The distribution of a tensor with role `role` in preset `p` built with `n_layer` blocks.
InitSpec init_spec(const Preset& p, uint32_t n_layer, Role role);

// FNV-1a of a tensor name (the per-tensor part of the row seed).
uint64_t name_hash(std::string_view name);

// Llama 3.1 rope scaling as llama.cpp's converter writes rope_freqs.weight (convert_hf_to_gguf.py,
// LlamaModel): for each of the head_dim/2 frequencies f_i = base^(-2i/head_dim), wavelength
// λ = 2π/f_i: 1 when λ < orig_ctx/high_freq, factor when λ > orig_ctx/low_freq, else
// 1 / ((1 − s)/factor + s) with s = (orig_ctx/λ − low_freq) / (high_freq − low_freq). Empty when
// the preset has no rope scaling.
std::vector<float> rope_freq_factors(const Preset& p);

// Row `row` (ne0 = n floats) of the tensor named by `name_h` under `seed`. Grid rows need n % 32 == 0
// (all preset shapes); other lengths get plain Gaussian values.
void fill_row(uint64_t seed, uint64_t name_h, uint64_t row, InitSpec spec, float* dst, uint64_t n);

}  // namespace rocky::synth
