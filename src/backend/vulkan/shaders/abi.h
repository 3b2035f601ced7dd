// rocky Vulkan ABI: push-constant structs and specialization-constant ids shared by C++ (host
// ops under ../ops/) and GLSL (every *.comp includes this file). Keep to 32-bit scalars (uint,
// int, float) so the GLSL std430 push-constant layout equals the C++ layout; the host checks each
// size with static_assert (push_constants.hpp). Push constants are ≤ 128 bytes (Vulkan minimum).
//
// Offsets named *_off are element offsets (f32 elements for activations, bytes for weights,
// elements for the KV cache) from the start of the bound descriptor range: the host binds ranges
// aligned down to minStorageBufferOffsetAlignment and passes the remainder here, so byte offsets
// of tensors can be 64-bit while every index inside one binding fits 32 bits.
#ifndef ROCKY_VULKAN_ABI_H
#define ROCKY_VULKAN_ABI_H

#ifdef __cplusplus
#include <cstdint>
namespace rocky::vulkan::abi {
using uint = uint32_t;
#define ROCKY_ABI_CONST(name, value) inline constexpr uint32_t name = value;
#else
#define ROCKY_ABI_CONST(name, value) const uint name = value;
#endif

// ---- Specialization-constant ids (named; the host sets them by these ids) ----
// Every shader: workgroup size x (local_size_x_id).
#define ROCKY_SC_WG 0
// Weight element type (ggml type id, rocky::DType) for get_rows / matmul / matvec.
#define ROCKY_SC_WTYPE 1
// Matmul tile: output rows per workgroup (BM), tokens per workgroup (BN), inner step (BK),
// rows per thread (TM), tokens per thread (TN). Constraint: WG = (BM/TM)·(BN/TN).
#define ROCKY_SC_BM 2
#define ROCKY_SC_BN 3
#define ROCKY_SC_BK 4
#define ROCKY_SC_TM 5
#define ROCKY_SC_TN 6
// KV cache element type: 0 = f32, 1 = f16 (packed pairs in 32-bit words).
#define ROCKY_SC_KV_F16 7
// Attention: keys per block (BC) of the online-softmax loop; max head_dim (HD_MAX).
#define ROCKY_SC_BC 8
#define ROCKY_SC_HD_MAX 9
// 1: the cache position n_past is read from the step buffer (uint [0], written by the host
// before each submit) instead of the push constant, so a recorded decode command buffer can be
// replayed for every token (rope, kv_store, attention, attention_flash, rope_kv).
#define ROCKY_SC_POS_BUF 10
// POS_BUF = 2: a multi-sequence ubatch (graph::Graph::seq / pos): the step buffer holds, per
// token j, its position at word k_tok_table + 2j and its sequence's first cache column (seq ·
// n_ctx) at word k_tok_table + 2j + 1; token j's cache column is their sum (rope, kv_store,
// rope_kv, attention_step, attention_split).

// ---- Constants ----
ROCKY_ABI_CONST(k_rope_normal, 0u)
ROCKY_ABI_CONST(k_rope_neox, 1u)
ROCKY_ABI_CONST(k_tok_table, 1u)

// ---- Push constants, one struct per shader family ----

// get_rows: out[:, j] = dequant(W row tok[j]) for tokens whose row lies in [row_begin, row_end),
// the rows present in the bound weight window (w_off = byte offset of row row_begin).
struct GetRowsPC {
  uint ne0;  // row length (elements)
  uint n_tokens;
  uint row_bytes;  // bytes per weight row
  uint w_off;      // byte offset of row `row_begin` in the weight binding
  uint row_begin;
  uint row_end;
  uint tok_off;  // element offset of the token ids (int32)
  uint out_off;  // element offset of the output [ne0, n_tokens]
};

// rms_norm: out[:, j] = x[:, j] / sqrt(mean(x[:, j]²) + eps) · w
struct RmsNormPC {
  uint ne0;
  uint n_cols;
  uint x_off;
  uint w_off;  // f32 weight, element offset
  uint out_off;
  float eps;
};

// matmul / matvec: y[m0 + m, n] = Σ_k W[k, m] · x[k, n] for m < M (this window's rows).
struct MatmulPC {
  uint M;          // rows in this window
  uint K;          // inner dimension
  uint N;          // tokens
  uint row_bytes;  // bytes per weight row (K elements)
  uint w_off;      // byte offset of window row 0 in the weight binding
  uint x_off;      // element offset of x [K, N]
  uint y_off;      // element offset of y [ldy, N]
  uint ldy;        // y column stride (the full output rows)
  uint m0;         // first output row of this window
};

// add: out = a + b (same shape, n elements). bias_add: out[i] = a[i] + b[i % ne0].
// silu_mul: out = silu(a) · b.
struct BinaryPC {
  uint n;
  uint ne0;
  uint a_off;
  uint b_off;
  uint out_off;
};

// rope over x viewed as [head_dim, n_head, n_tokens]; position of token j = n_past + j.
struct RopePC {
  uint head_dim;
  uint n_head;
  uint n_rot;
  uint n_tokens;
  uint n_past;
  uint mode;  // k_rope_normal | k_rope_neox
  uint x_off;
  uint out_off;
  float freq_base;
  float freq_scale;
  uint ff_off;  // element offset of the n_rot/2 frequency divisors (binding 2)
  uint has_ff;  // 0: no divisors (binding 2 is a dummy and is not read)
};

// kv_store: cache[:, n_past + j] = x[:, j] (cache column stride n_embd).
struct KvStorePC {
  uint n_embd;
  uint n_tokens;
  uint n_past;
  uint x_off;
  uint cache_off;  // element offset of cache column 0
  uint ring;       // as AttnPC's
  uint seq_cells;
};

// attention: out[:, j] for head h = Σ_p softmax_p(scale · q·k_p) v_p over p ≤ n_past + j.
struct AttnPC {
  uint head_dim;
  uint n_head;
  uint n_head_kv;
  uint n_tokens;
  uint n_past;
  uint n_embd_kv;  // K/V cache column stride (elements)
  uint q_off;
  uint out_off;
  uint k_off;
  uint v_off;
  float scale;
  uint window;     // sliding window: position q sees keys p with q − window < p ≤ q; 0 = all p ≤ q
  uint tok0;       // POS_BUF = 2: token j of this dispatch is token tok0 + j of the step's table
  uint ring;       // > 0: the layer's cache is a ring of `ring` columns per sequence (header.glsl kv_col)
  uint seq_cells;  // columns per sequence of a full layer (n_ctx; k_tok_table's first columns are s · seq_cells)
};

// rope_kv: rope of Q [head_dim·n_head, N] → qo, rope of K and V [head_dim·n_head_kv, N] →
// the K / V cache columns n_past + j (shaders/rope_kv.comp).
struct RopeKvPC {
  uint head_dim;
  uint n_head;
  uint n_head_kv;
  uint n_rot;
  uint n_tokens;
  uint n_past;  // unused when POS_BUF = 1 (the step buffer's)
  uint mode;    // k_rope_normal | k_rope_neox
  uint q_off;
  uint k_off;
  uint v_off;
  uint qo_off;
  uint kc_off;  // element offsets of cache column 0 (even)
  uint vc_off;
  uint ff_off;
  uint has_ff;
  float freq_base;
  float freq_scale;
  uint ring;  // as AttnPC's
  uint seq_cells;
};

// take_cols: out[:, j] = x[:, first_col + j], j < n_cols.
struct TakeColsPC {
  uint ne0;
  uint n_cols;
  uint first_col;
  uint x_off;
  uint out_off;
};

// attention_split.comp / attention_merge.comp (decode at depth, flash-decoding): the key range
// [0, n_past + j] of each (head, token) is cut into n_split chunks of `chunk` positions (a multiple
// of the workgroup size); split s writes its partial softmax state — running max m, sum l and the
// unnormalised output o[head_dim] — to scratch row ((j · n_head + h) · n_split + s) of
// head_dim + 2 floats (m, l, o…); the merge rescales the rows to the largest m and normalises.
struct AttnSplitPC {
  AttnPC a;
  uint chunk;    // key positions per split (ops/attention.cpp split_plan / flash_split_plan)
  uint n_split;  // splits per (head, token)
  uint s_off;    // element offset of the scratch rows (attention_split binding 3, merge binding 0)
};

// ---- attention_flash.comp (tiled prefill attention; push constants: AttnSplitPC) ----
// Query rows per workgroup (BR), rows per invocation (TR), keys per invocation (TC; keys per
// block BC = TC · WG / (BR / TR)), exact head_dim (HD, a multiple of 4).
#define ROCKY_SC_FA_BR 40
#define ROCKY_SC_FA_TR 41
#define ROCKY_SC_FA_TC 42
#define ROCKY_SC_FA_HD 43
// 1: K/V blocks are fetched into registers one phase ahead (global loads overlap compute).
#define ROCKY_SC_FA_PREFETCH 44
// /1: the workgroup walks one chunk of the key range (grid z = split) and stores a partial
// state for attention_merge.comp (AttnSplitPC's layout) instead of the output.
#define ROCKY_SC_FA_SPLIT 46
// 1 (with ROCKY_SC_KV_F16 = 1): K/V blocks staged in shared memory as packed f16 (the cache's
// bits; half the bytes of f32), converted where the products read them.
#define ROCKY_SC_FA_KVH 56
// attention.comp / attention_step.comp / attention_split.comp: the exact head_dim when each key's
// dot product may read K in 16-byte units (head_dim a multiple of 8 with f16 K, of 4 with f32, and
// K's element offset aligned alike); 0 = one element at a time (any head_dim).
#define ROCKY_SC_ATTN_HD 45
// attention / attention_step / attention_split: 1 = each invocation owns dim pairs (one 32-bit
// load per two f16 V values); 0 (the Mali-G610's register budget) = single dims.
#define ROCKY_SC_ATTN_PAIRS 54
// attention.comp / attention_step / attention_split: 1 when the layer's cache is a sliding-window
// ring (AttnPC::ring > 0), so that a full cache's kernel keeps its plain column arithmetic (the
// ring's column lookup takes twice the work registers on Mali).
#define ROCKY_SC_KV_RING 57
// attention_decode.comp: query heads per KV head (n_head / n_head_kv, ≤ 8) that one
// workgroup serves from each K/V read.
#define ROCKY_SC_ATTN_GQA 55

// ---- Hybrid linear attention (qwen35; graph.hpp SSM_CONV / GATED_DELTA / TAKE_ROWS) ----
// take_rows: out[i, j] = x[first_row + i, j], i < ne0 (out rows), x columns of in_ne0 rows.
struct TakeRowsPC {
  uint ne0;
  uint n_cols;
  uint first_row;
  uint in_ne0;
  uint x_off;
  uint out_off;
};

// ssm_conv: out[c, t] = silu(Σ_{i<K} w[i + c·K] · x̃[c, t − (K−1) + i]) with x̃ at t < 0 the state
// [(K−1) slots][C]; mode 0 writes out, mode 1 (a second dispatch after it) shifts the state to the
// last K−1 columns of x̃.
struct SsmConvPC {
  uint C;
  uint n_tokens;
  uint K;
  uint mode;
  uint x_off;
  uint w_off;
  uint s_off;
  uint out_off;
};

// gated_delta: the recurrence of GATED_DELTA over n_tokens; one workgroup per (value head, block of
// DELTA_COLS value columns), DELTA_ROWS state rows per invocation (d_k = DELTA_ROWS · WG / COLS).
struct GatedDeltaPC {
  uint n_k_heads;
  uint n_v_heads;
  uint d_k;
  uint d_v;
  uint n_tokens;
  uint qkv_off;  // conv output [2·H_k·d_k + H_v·d_v, N]
  uint a_off;    // [H_v, N]
  uint b_off;    // [H_v, N]
  uint A_off;    // ssm_a [H_v]
  uint s_off;    // state [H_v][d_k][d_v]
  uint out_off;  // [H_v·d_v, N]
  float eps;
};
// Value columns per workgroup, state rows per invocation (the tile of gated_delta.comp).
#define ROCKY_SC_DELTA_COLS 50
#define ROCKY_SC_DELTA_ROWS 51
// gated_delta_chunk.comp: tokens per chunk of the chunkwise-parallel delta rule (even).
#define ROCKY_SC_DELTA_CHUNK 52

#ifdef __cplusplus
}  // namespace rocky::vulkan::abi
#endif
#endif  // ROCKY_VULKAN_ABI_H
