// The CPU oracle's ops: plain, exact-first reference implementations on f32 activations.
//
// Layout: an activation is a dense column-major f32 matrix [ne0 = features, ne1 = tokens]
// (element (i, j) at x[i + j·ne0]), as in graph.hpp. Weights are GGUF rows: a 2-D weight of type t
// with row length K (ne0) and M rows (ne1); row m starts at data + m·row_bytes(t, K).
// Precision: sums of squares and softmax denominators are accumulated in f64; attention dot
// products too; the big products use OpenBLAS cblas_sgemm (f32) on weight rows dequantized to f32
// in chunks of at most k_matmul_chunk_floats values (never the whole tensor).
// Errors: rocky::Error for bad input (token id out of range, type that cannot be dequantized).
#pragma once

#include <cstdint>
#include <span>

#include "core/dtype.hpp"
#include "graph/graph.hpp"

namespace rocky::backend::cpu {

// A weight matrix view: `rows` rows of `k` elements of type `type`, contiguous.
struct WeightView {
  DType type = DType::F32;
  const uint8_t* data = nullptr;
  int64_t k = 0;     // row length (ne0), a multiple of the type's block size
  int64_t rows = 0;  // ne1
};
WeightView view_of(const gguf::TensorInfo& t);

inline constexpr int64_t k_matmul_chunk_floats = int64_t{1} << 20;  // 4 MiB of dequantized rows

// dst[r·k + i] = dequant(w row (row0 + r))[i] for r < n_rows.
void dequant_rows(const WeightView& w, int64_t row0, int64_t n_rows, float* dst);

// out[:, j] = dequant(w row ids[j]); out is [w.k, ids.size()].
void get_rows(const WeightView& w, std::span<const int32_t> ids, float* out);
// out[:, j] = x[:, j] / sqrt(mean_i x[i, j]² + eps) · weight[i]   (sum in f64)
void rms_norm(const float* x, const float* weight, float eps, int64_t ne0, int64_t ne1, float* out);
// y[M, N] = W[K, M]ᵀ-rows · x[K, N]: y[m, n] = Σ_k W[k + m·K] · x[k + n·K]   (M = w.rows, K = w.k)
void matmul(const WeightView& w, const float* x, int64_t n, float* y);
// out[:, j] = x[:, j] + b
void add_bias(const float* x, const float* b, int64_t ne0, int64_t ne1, float* out);
// out = a + b (elementwise, n values)
void add(const float* a, const float* b, int64_t n, float* out);
// out = silu(gate) · up = gate / (1 + exp(-gate)) · up
void silu_mul(const float* gate, const float* up, int64_t n, float* out);
// out = gelu_tanh(gate) · up, gelu(x) = 0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²))) (ggml's
// GELU, computed exactly in f64 rather than through ggml-cpu's f16 table)
void gelu_mul(const float* gate, const float* up, int64_t n, float* out);
// out = x · s (n values)
void scale(const float* x, float s, int64_t n, float* out);
// Rotary embedding of x viewed as [head_dim, n_head, n_tok]; token j has position pos0 + j.
// NORMAL rotates (x[2i], x[2i+1]), NEOX rotates (x[i], x[i + n_rot/2]), i < n_rot/2, by
// θ = pos · freq_scale · freq_base^(-2i/n_rot) / freq_factors[i] (freq_factors: nullptr = all 1;
// Llama 3.1's rope_freqs); dims ≥ n_rot pass through. (RoFormer, Su et al. 2021; ggml_rope_ext
// with ext_factor 0, attn_factor 1.)
void rope(const float* x, const graph::RopeParams& p, const float* freq_factors, int64_t pos0, int64_t n_tok,
          float* out);
inline void rope(const float* x, const graph::RopeParams& p, int64_t pos0, int64_t n_tok, float* out) {
  rope(x, p, nullptr, pos0, n_tok, out);
}
// Causal GQA attention. q: [head_dim·n_head, n_tok]; k_cache/v_cache: [head_dim·n_head_kv, ≥ n_past
// + n_tok] (column = position). Token j attends to positions 0..n_past + j (with p.window > 0 only
// the last p.window of them: q − window < pos ≤ q, llama.cpp's LLAMA_SWA_TYPE_STANDARD). Query head h reads KV
// head h / (n_head / n_head_kv). out: [head_dim·n_head, n_tok]. Softmax subtracts the max; sums f64.
// ring > 0: the cache is a ring of `ring` columns, position t at column t mod ring (graph.hpp KvShape).
void attention(const float* q, const float* k_cache, const float* v_cache, const graph::AttnParams& p, int64_t n_past,
               int64_t n_tok, float* out, int64_t ring = 0);
// Several sequences in one ubatch: token j attends to cache columns cell0[j] + [0, pos[j]]
// (its sequence's cells; window and ring as above: position t at cell0[j] + t mod ring),
// everything else as attention().
void attention_seqs(const float* q, const float* k_cache, const float* v_cache, const graph::AttnParams& p,
                    std::span<const int64_t> cell0, std::span<const int32_t> pos, float* out, int64_t ring = 0);

// SSM_CONV (graph.hpp): x [c, n_tok], w f32 [k, c], state [(k−1)·c] (oldest slot first; read,
// then updated to the last k−1 inputs); out [c, n_tok] = silu(causal depthwise conv). Sums in f64.
void ssm_conv(const float* x, const float* w, int64_t k, int64_t c, int64_t n_tok, float* state, float* out);
// GATED_DELTA (graph.hpp): qkv [C, n_tok], a and b [H_v, n_tok], A [H_v]; state [H_v·d_k·d_v]
// (read and updated; held as f32 between ubatches, f64 within); out [H_v·d_v, n_tok]. The
// recurrence runs token by token in f64.
void gated_delta(const float* qkv, const float* a, const float* b, const float* A, const graph::SsmParams& p,
                 int64_t n_tok, float* state, float* out);
// out[i + j·n_out] = x[first + i + j·n_in] for i < n_out, j < n_tok.
void take_rows(const float* x, int64_t n_in, int64_t first, int64_t n_out, int64_t n_tok, float* out);
// out = x · sigmoid(gate) (n values)
void sigmoid_mul(const float* x, const float* gate, int64_t n, float* out);

}  // namespace rocky::backend::cpu
