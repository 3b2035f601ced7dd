// ABI of the fast matmul and roofline shaders (host: src/backend/vulkan/ops/matmul_fast.cpp,
// src/backend/vulkan/roofline.cpp). Same rules as abi.h: 32-bit scalars only.
//
// Specialization ids 2..6 (BM, BN, BK, TM, TN) are abi.h's; the fast kernels add WM, WN (the
// rows × tokens one subgroup-sized warp covers) and BK_STEP (k values per shared-memory stage the
// inner loop consumes at once). Named constants, set from rocky::tune::MatmulTile.
#ifndef ROCKY_VULKAN_FAST_ABI_H
#define ROCKY_VULKAN_FAST_ABI_H
#include "abi.h"
#ifdef __cplusplus
namespace rocky::vulkan::abi {
#endif

#define ROCKY_SC_WM 20
#define ROCKY_SC_WN 21
#define ROCKY_SC_BK_STEP 22
// roofline: independent chains per invocation
#define ROCKY_SC_CHAINS 23
// mul_mmq: 1 = fetch stage k+1 into registers before the dot products of stage k (latency hiding,
// more registers), 0 = fetch right before storing to shared memory.
#define ROCKY_SC_PREFETCH 24
// mul_mmq: 1 = q4_K values repacked as nibble pairs (16 bytes per 32-block) rather than int8
// (32 bytes); the repack layout must match (fast::MmqLayout::nibbles).
#define ROCKY_SC_MMQ_NIB 25
// mul_mmq: 1 = read shared-memory operands as uvec4 (fewer load instructions, more live
// registers), 0 = one 32-bit word at a time (MatmulTile::vec4).
#define ROCKY_SC_MMQ_VEC4 26
// mul_mmq epilogue (binding 5, e_off): 0 none, 1 bias (y[n, m] += e[m]), 2 residual
// (y[n, m] += e[n, m], same [ldy, N] layout as y). fast::MmqEpilogue on the host.
#define ROCKY_SC_MMQ_EPI 27
#define ROCKY_MMQ_EPI_NONE 0
#define ROCKY_MMQ_EPI_BIAS 1
#define ROCKY_MMQ_EPI_RESIDUAL 2
// matvec_mmq (decode): values per step and invocation = 32 >> SPLIT (0: a whole 32-block,
// 1: half, 2: a quarter — fewer live registers, the Mali variant).
#define ROCKY_SC_MMV_HALF 28
// matvec_mmq: 1 = x read as vec4 (the host sets it when x's element offset is a multiple of 4).
#define ROCKY_SC_MMV_XVEC4 29
// matvec_mmq: steps per loop iteration (1 or 2).
#define ROCKY_SC_MMV_UNROLL 31
// rms_norm_vec: vec4 of x each invocation holds (1..8).
#define ROCKY_SC_RMS_PER 30
// matvec_mmq: 1 = x is the raw input of an RMSNorm folded into this matvec (binding 5: the
// norm's weight [K] at float offset n_off; eps in MatmulMmqPC): y = (W·(x ∘ w_norm)) / rms(x).
#define ROCKY_SC_MMV_NORM 32
// matvec_mmq: columns (tokens) per dispatch, 1 … 8: each weight unit is loaded once for all of
// them (x [K, n], y / residual [ldy, n]).
#define ROCKY_SC_MMV_COLS 33
// matvec_q8: groups of more than 8 columns stream the activations past the rows' weight units.
#define ROCKY_SC_MMV_WOUTER 57
// rms_norm_q8_1: 1 = Σx² reduced in two shared-memory passes (two barriers, as rms_norm_vec)
// instead of the barrier tree; the host sets it for the few columns of a decode step.
#define ROCKY_SC_RMS_FLAT 53

// roofline_{fp32,fp16,dot}: every invocation runs `iters` iterations of CHAINS independent chains;
// `seed` keeps the compiler from folding. roofline_copy: dst[i] = src[i], i < n_vec4 (uvec4).
struct RooflinePC {
  uint iters;
  uint n_vec4;
  float seed;
  uint pad;
};

// quantize_q8_1: x [K, N] f32 (element offset x_off) → q8_1 blocks. Layout of the activations
// (rocky's q8_1 "column" layout): for token n and block b = k / 32 the 32 int8 values are 8
// uints at qs[(n * nb + b) * 8 ...] and the pair (d, d·Σq) is vec2 ds[n * nb + b] (f32), where
// nb = K / 32.  d = max|x| / 127, q = round(x / d).
struct Q81PC {
  uint K;
  uint N;
  uint x_off;
  uint pad;
};

// Producers that write q8_1 directly (no separate quantize dispatch in prefill):
// rms_norm_q8_1: out = x / sqrt(mean(x²) + eps) · w per column (ne0 a multiple of 32), written as
// q8_1 (layout as quantize_q8_1) — one workgroup per column. silu_mul_q8_1: out = silu(gate) · up
// over [ne0, n_cols] as q8_1 — 8 invocations per 32-block (common/q8_1_store.glsl).
struct ProducerQ81PC {
  uint ne0;
  uint n_cols;
  uint a_off;  // x (rms_norm) or gate (silu_mul), f32 element offset
  uint b_off;  // weight (rms_norm) or up (silu_mul), f32 element offset
  float eps;
  uint pad0;
  uint pad1;
  uint pad2;
};

// mul_mm: y[m0 + m, n] = Σ_k W[k, m] · x[k, n]. Weights in ggml rows at byte w_off
// (row stride row_bytes); f32 activations [K, N] at x_off.
struct MatmulFastPC {
  uint M;
  uint K;
  uint N;
  uint row_bytes;
  uint w_off;
  uint x_off;  // f32 element offset of x
  uint y_off;
  uint ldy;
  uint m0;
};

// mul_mmq: y[m0 + m, n] = Σ_k W[k, m] · x[k, n] with W in the mmq repack layout
// (ops/matmul_fast.hpp): values at uvec4 offset wq_off (binding 0, row stride K/16 uvec4, or K/32
// with nibbles), scale groups at word offset ws_off (binding 1, row stride mmq_srow_words); q8_1 activations
// at block offset x_off (uvec4 index 2·block, vec2 index block); the epilogue operand (ROCKY_SC_MMQ_EPI)
// at float offset e_off of binding 5.
struct MatmulMmqPC {
  uint M;
  uint K;
  uint N;
  uint wq_off;
  uint ws_off;
  uint x_off;
  uint y_off;
  uint ldy;
  uint m0;
  uint e_off;  // epilogue operand (binding 5) offset in floats; 0 without epilogue
  uint n_off;  // matvec_mmq with ROCKY_SC_MMV_NORM: the norm weight's float offset (binding 5)
  float eps;   // … and the norm's epsilon
};

// get_rows_mmq: rows of the mmq repack (bindings 0 values, 1 scale groups; ops/get_rows.cpp).
struct GetRowsMmqPC {
  uint ne0;  // row length K (a multiple of 32)
  uint n_tokens;
  uint q_row_bytes;  // value bytes per row
  uint wq_off;       // byte offset of row `row_begin` in binding 0
  uint ws_off;       // word offset of row `row_begin`'s scale groups in binding 1
  uint row_begin;
  uint row_end;
  uint tok_off;  // element offset of the token ids (int32)
  uint out_off;  // element offset of the output [ne0, n_tokens]
};

#ifdef __cplusplus
}  // namespace rocky::vulkan::abi
#endif
#endif
