// Body of the decode matvec (N = 1) over rocky's mmq repack, shared by matvec_mmq.comp
// (MMV_SUBGROUP 1: subgroupAdd reductions, needs GL_KHR_shader_subgroup_arithmetic) and
// matvec_mmq_shared.comp (MMV_SUBGROUP 0: one shared-memory pass, for devices without subgroup
// arithmetic in compute shaders).
//
//   y[m0 + m] = Σ_k W[k, m] · x[k]  (+ bias[m0 + m] or + residual[m0 + m]: EPILOGUE)
// With NCOLS = n > 1, n columns at once (a batched decode step, a short ubatch): x [K, n]
// (column c at element x_off + c·K), y and the residual [ldy, n] (column c at c·ldy): each weight
// unit is loaded once and used for the n columns, so a step of n tokens reads the weights once.
//
// W in the mmq layout (ops/matmul_fast.hpp; q4_0, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K), x f32 (no q8_1
// quantization: the error is f32 rounding only). A row of K values is nb = K/32 blocks; a STEP is
// one block (32 values) or, with SPLIT = 1 / 2, a half (16) / a quarter (8 values: the Mali
// variant, ≤ 32 work registers). A workgroup of WG invocations
// computes ROWS consecutive rows: invocation t takes steps t, t + WG, …, loads the step's x once
// (vec4 loads with XVEC4) and reuses it for each of its ROWS rows, reading per row the step's
// weight bytes as 16-byte (uvec4) units (8 or 4 bytes for the smaller steps) and the block's scale
// pair; with UNROLL = 2 two steps per loop iteration (twice the loads in flight for long rows).
// The ROWS partial sums are reduced with subgroupAdd plus one shared-memory pass over the
// subgroups, or (MMV_SUBGROUP 0) one shared-memory pass over the invocations: one barrier, no tree.
//
// Dequantization without int→float conversions (a quarter-rate instruction on NVIDIA): a value's
// B significant bits u go to the top of the mantissa of 1.0, f = uintBitsToFloat(0x3F800000 |
// u << (23 − B)) = 1 + u / 2^B, so with x prescaled (exactly) by 2^B, Σ q·x = Σ f·x' − c · Σ x':
//   signed values (q8_0 B = 8, q6_K B = 6, q5_0 B = 5, q4_0 B = 4): u = q + 2^(B−1) (the width's
//     sign bit flipped; q6_K nibbles store u itself), c = 1.5;  q4_K (0..15, unpacked or nibbles)
//     B = 4, q5_K / q5_1 (0..31) B = 5: u = q, c = 1.
// The cancellation Σ f·x' − c·Σ x' costs about log2((2^B · c) / mean |q|) ≈ 2–3 bits of f32.
// Per block the scale pair s (binding 1, common/mmq_scales.glsl) gives s.x · Σ_{i<16} q_i x_i + s.y · Σ_{i≥16} q_i x_i
// (q8_0, q4_0, q5_0: s.x = s.y; q6_K: one scale per half) or, for the affine types (q4_K, q5_K,
// q5_1), s.x · Σ q_i x_i + s.y · Σ x_i.
//
// Bindings: 0 W values (uvec4 units, row stride 2·nb, or nb with NIB, at uvec4 offset wq_off),
// 1 W scale groups (uint, row stride mmq_srow_words(nb), at word offset ws_off), 2 x [K] (f32 at element offset
// x_off; a multiple of 4 with XVEC4), 3 y (f32, element y_off + m0 + m), 4 epilogue operand
// (f32 at element e_off + m0 + m; any buffer when EPILOGUE = 0), 5 with NORM the folded RMSNorm's
// weight [K] (f32 at element n_off; any buffer without). Push constants: MatmulMmqPC (N and ldy
// unused; n_off, eps with NORM).
// NORM (a decode RMSNorm folded into each matvec that reads it, ops::matvec_mmq): x is the norm's
// input; every invocation multiplies its x values by the norm weight and adds their squares, the
// workgroup reduces Σx² with the row sums (its invocations load every x value exactly once), and
// y = rinv · Σ W·(x ∘ w_norm) with rinv = 1 / sqrt(Σx²/K + eps) — the norm's dispatch and its
// output's round trip through memory are gone. Grid: ceil(M / ROWS) workgroups laid out in (x, y), group = y · num_x + x;
// rows ≥ M load row M − 1 and store nothing (uniform control flow up to the barrier).
#include "common/header.glsl"
#include "fast_abi.h"
layout(constant_id = ROCKY_SC_WTYPE) const uint WTYPE = 12;
layout(constant_id = ROCKY_SC_BM) const uint ROWS = 1;
layout(constant_id = ROCKY_SC_MMQ_NIB) const bool NIB = false;
layout(constant_id = ROCKY_SC_MMV_HALF) const uint SPLIT = 0;  // steps per block: 1 << SPLIT
layout(constant_id = ROCKY_SC_MMV_XVEC4) const bool XVEC4 = false;
layout(constant_id = ROCKY_SC_MMQ_EPI) const uint EPILOGUE = ROCKY_MMQ_EPI_NONE;
layout(constant_id = ROCKY_SC_MMV_UNROLL) const uint UNROLL = 1;
layout(constant_id = ROCKY_SC_MMV_NORM) const bool NORM = false;
layout(constant_id = ROCKY_SC_MMV_COLS) const uint NCOLS = 1;  // columns (tokens), 1 … 8
layout(push_constant) uniform PC { MatmulMmqPC pc; };
layout(binding = 0) readonly buffer Wq { uvec4 wq[]; };
layout(binding = 0) readonly buffer Wq2 { uvec2 wq2[]; };
layout(binding = 0) readonly buffer Wq1 { uint wq1[]; };
layout(binding = 1) readonly buffer Ws { uint ws[]; };
layout(binding = 2) readonly buffer X { float x[]; };
layout(binding = 2) readonly buffer X4 { vec4 xv[]; };
layout(binding = 3) writeonly buffer Y { float y[]; };
layout(binding = 4) readonly buffer E { float ev[]; };
layout(binding = 5) readonly buffer Nw { float nw[]; };
layout(binding = 5) readonly buffer Nw4 { vec4 nwv[]; };

const bool NIB_TYPE = WTYPE == 12u || WTYPE == 14u;  // q4_K, q6_K
const bool NIBBLES = NIB && NIB_TYPE;
const bool Q4K = WTYPE == 12u || WTYPE == 13u || WTYPE == 7u;  // the affine types: s.x·q + s.y
#include "common/mmq_scales.glsl"
const uint XN = 8u >> SPLIT;                        // vec4 of x per step
const uint NW = NIBBLES ? XN / 2u : XN;             // weight words per row and step
// Bits per value: the int8 values' significant low bits (q4_0: −8..7, unpacked q4_K: 0..15, q5_0:
// −16..15, q5_K / q5_1: 0..31, q6_K: −32..31, q8_0: −128..127), made unsigned by XOR-ing the sign
// bit of that width (the affine types: none).
const uint BITS = (WTYPE == 2u || WTYPE == 12u) ? 4u : ((WTYPE == 6u || WTYPE == 7u || WTYPE == 13u) ? 5u : (WTYPE == 14u ? 6u : 8u));
const uint XC = WTYPE == 2u ? 0x08080808u : (WTYPE == 6u ? 0x10101010u : (WTYPE == 14u ? 0x20202020u : (WTYPE == 8u ? 0x80808080u : 0u)));
const float XSCALE = BITS == 4u ? 16.0 : (BITS == 5u ? 32.0 : (BITS == 6u ? 64.0 : 256.0));  // x' = XSCALE · x
const float CSCALE = Q4K ? 1.0 : 1.5;               // Σ q·x = Σ f·x' − CSCALE · Σ x'
const uint MANT = ((1u << BITS) - 1u) << (23u - BITS);
const uint ONE = 0x3F800000u;
const int S0 = 23 - int(BITS);                      // shift of byte 0's low bits to the mantissa top

#if MMV_SUBGROUP
shared float red[(ROWS * NCOLS + 1u) * gl_WorkGroupSize.x];  // (ROWS·NCOLS + Σx²) × subgroups (≤ WG)
#else
shared float red[(ROWS * NCOLS + 1u) * gl_WorkGroupSize.x];  // (ROWS·NCOLS + Σx²) × invocations
#endif

float acc[ROWS * NCOLS];  // this invocation's partial sums (private), row r column c at r·NCOLS + c
float ssq = 0.0;  // NORM: Σ x² of this invocation's x values

vec4 load_x4(uint e) {  // x[e .. e + 3] (e a multiple of 4 when XVEC4)
  if (XVEC4) return xv[e >> 2];
  return vec4(x[e], x[e + 1u], x[e + 2u], x[e + 3u]);
}
vec4 load_nw4(uint e) {  // NORM: the norm weight's values e .. e + 3 (vec4 when XVEC4: host-checked)
  if (XVEC4) return nwv[e >> 2];
  return vec4(nw[e], nw[e + 1u], nw[e + 2u], nw[e + 3u]);
}

uint place(uint v, int s) { return s >= 0 ? v << uint(s) : v >> uint(-s); }
// The low BITS bits of byte k of w at bits (23 − BITS) .. 22 of 1.0: f = 1 + u / 2^BITS. Byte k of
// w (bits 8k + o ..) goes up by S0 − 8k − o.
vec4 fbytes(uint w, int o) {
  return uintBitsToFloat(uvec4((place(w, S0 - o) & MANT) | ONE, (place(w, S0 - 8 - o) & MANT) | ONE,
                               (place(w, S0 - 16 - o) & MANT) | ONE, (place(w, S0 - 24 - o) & MANT) | ONE));
}
// int8 values (u = q XOR sign bit of the width); nibbles: low (o = 0) and high (o = 4) halves.
vec4 f8(uint w) { return fbytes(w ^ XC, 0); }
vec4 f4lo(uint w) { return fbytes(w, 0); }
vec4 f4hi(uint w) { return fbytes(w, 4); }

// One step (a block, or a half / quarter of it with SPLIT 1 / 2) of this invocation's ROWS rows,
// its contribution scaled by k (1, or 0 for the clamped duplicate of the unrolled loop's tail).
void step(uint st, uint g, uint nb, uint U, float k) {
  const uint b = st >> SPLIT, sub = st & ((1u << SPLIT) - 1u);
  // x of the step per column, prescaled; xs[c][0 .. XN/2) and xs[c][XN/2 .. XN) are the two halves
  // that one scale each multiplies (int8) or the low / high nibbles of the same bytes (NIBBLES).
  vec4 xs[NCOLS][8];  // XN used
  float sx0[NCOLS], sx1[NCOLS];  // Σ x of the two halves (unscaled)
  for (uint c = 0u; c < NCOLS; ++c) {
    sx0[c] = 0.0;
    sx1[c] = 0.0;
    for (uint j = 0u; j < XN; ++j) {
      uint e;
      if (NIBBLES) {  // low nibbles: values (16 >> SPLIT)·sub + 4j; high: 16 more
        e = 32u * b + (16u >> SPLIT) * sub + (j < XN / 2u ? 4u * j : 16u + 4u * (j - XN / 2u));
      } else {
        e = 32u * b + (32u >> SPLIT) * sub + 4u * j;
      }
      vec4 v = load_x4(pc.x_off + c * pc.K + e);
      if (NORM) {  // NCOLS = 1 (host-checked)
        ssq += k * dot(v, v);
        v *= load_nw4(pc.n_off + e);
      }
      if (j < XN / 2u) {
        sx0[c] += (v.x + v.y) + (v.z + v.w);
      } else {
        sx1[c] += (v.x + v.y) + (v.z + v.w);
      }
      xs[c][j] = v * XSCALE;
    }
  }
  for (uint r = 0u; r < ROWS; ++r) {
    const uint m = min(g * ROWS + r, pc.M - 1u);
    const uint qrow = pc.wq_off + m * U, srow = pc.ws_off + m * mmq_srow_words(nb);
    // The step's weight words: NW consecutive words at word offset 4·qrow + NW·(step within row).
    uint w[8];  // NW used
    const uint wo = (NIBBLES ? 4u * b : 8u * b) + NW * sub;  // word offset within the row
    if (NW == 1u) {
      w[0] = wq1[4u * qrow + wo];
    } else if (NW == 2u) {
      const uvec2 q = wq2[(4u * qrow + wo) >> 1];
      w[0] = q.x;
      w[1] = q.y;
    } else {
      const uvec4 q0 = wq[qrow + (wo >> 2)];
      for (uint j = 0u; j < 4u; ++j) w[j] = q0[j];
      if (NW == 8u) {
        const uvec4 q1 = wq[qrow + (wo >> 2) + 1u];
        for (uint j = 0u; j < 4u; ++j) w[4u + j] = q1[j];
      }
    }
    const vec2 s = mmq_scale(srow, b);
    // The weight values as floats 1 + u/2^BITS, once for every column.
    vec4 f0[8], f1[8];  // the two halves' words (NW used; int8 types: NW / 2 each)
    if (Q6NIB) {  // nibble pairs + the 2 high bits from the scale group
      const uvec2 hw = mmq_q6_hi(srow, b);
      for (uint j = 0u; j < NW; ++j) {
        const uint h = mmq_q6_h16(hw, NW * sub + j);
        f0[j] = fbytes(mmq_q6lo(w[j], h), 0);
        f1[j] = fbytes(mmq_q6hi(w[j], h), 0);
      }
    } else if (NIBBLES) {
      for (uint j = 0u; j < NW; ++j) {
        f0[j] = f4lo(w[j]);
        f1[j] = f4hi(w[j]);
      }
    } else {
      for (uint j = 0u; j < NW / 2u; ++j) {
        f0[j] = f8(w[j]);
        f1[j] = f8(w[NW / 2u + j]);
      }
    }
    for (uint c = 0u; c < NCOLS; ++c) {
      const float c0 = CSCALE * XSCALE * sx0[c], c1 = CSCALE * XSCALE * sx1[c];
      float d0 = 0.0, d1 = 0.0;  // Σ f·x' over the two halves
      if (NIBBLES) {
        for (uint j = 0u; j < NW; ++j) {
          d0 += dot(f0[j], xs[c][j]);
          d1 += dot(f1[j], xs[c][NW + j]);
        }
      } else {
        for (uint j = 0u; j < NW / 2u; ++j) {
          d0 += dot(f0[j], xs[c][j]);
          d1 += dot(f1[j], xs[c][NW / 2u + j]);
        }
      }
      float add;
      if (Q4K) {  // s.x · Σ q·x + s.y · Σ x
        add = s.x * ((d0 - c0) + (d1 - c1)) + s.y * (sx0[c] + sx1[c]);
      } else if (SPLIT > 0u && !NIBBLES) {  // part of one half of the block: that half's scale
        add = ((sub >> (SPLIT - 1u)) == 0u ? s.x : s.y) * ((d0 - c0) + (d1 - c1));
      } else {
        add = s.x * (d0 - c0) + s.y * (d1 - c1);
      }
      acc[r * NCOLS + c] += k * add;
    }
  }
}

void main() {
  const uint WG = gl_WorkGroupSize.x;
  const uint t = gl_LocalInvocationID.x;
  const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint nb = pc.K / 32u;                    // blocks (scale pairs) per row
  const uint U = NIBBLES ? nb : 2u * nb;         // uvec4 units per row
  const uint NS = nb << SPLIT;                   // steps per row
  for (uint r = 0u; r < ROWS * NCOLS; ++r) acc[r] = 0.0;
  for (uint st = t; st < NS; st += UNROLL * WG) {
    step(st, g, nb, U, 1.0);
    if (UNROLL == 2u) {  // a second step in the same basic block: its loads issue with the first's
      const uint s1 = st + WG;
      step(min(s1, NS - 1u), g, nb, U, s1 < NS ? 1.0 : 0.0);
    }
  }
  // Reduction and store.
#if MMV_SUBGROUP
  const uint nsg = gl_NumSubgroups;
  for (uint r = 0u; r < ROWS * NCOLS; ++r) {
    const float v = subgroupAdd(acc[r]);
    if (subgroupElect()) red[r * nsg + gl_SubgroupID] = v;
  }
  if (NORM) {
    const float v = subgroupAdd(ssq);
    if (subgroupElect()) red[ROWS * NCOLS * nsg + gl_SubgroupID] = v;
  }
  barrier();
  // Invocation t < ROWS·NCOLS stores row t / NCOLS of column t % NCOLS.
  const uint tr = t / NCOLS, tc = t % NCOLS;
  if (t < ROWS * NCOLS && g * ROWS + tr < pc.M) {
    float v = 0.0;
    for (uint i = 0u; i < nsg; ++i) v += red[t * nsg + i];
    if (NORM) {
      float q = 0.0;
      for (uint i = 0u; i < nsg; ++i) q += red[ROWS * NCOLS * nsg + i];
      v *= inversesqrt(q / float(pc.K) + pc.eps);
    }
#else
  for (uint r = 0u; r < ROWS * NCOLS; ++r) red[r * WG + t] = acc[r];
  if (NORM) red[ROWS * NCOLS * WG + t] = ssq;
  barrier();
  const uint tr = t / NCOLS, tc = t % NCOLS;
  if (t < ROWS * NCOLS && g * ROWS + tr < pc.M) {
    vec4 p = vec4(0.0);
    for (uint i = 0u; i < WG; i += 4u)  // WG a multiple of 4 (the host checks)
      p += vec4(red[t * WG + i], red[t * WG + i + 1u], red[t * WG + i + 2u], red[t * WG + i + 3u]);
    float v = (p.x + p.y) + (p.z + p.w);
    if (NORM) {
      vec4 q = vec4(0.0);
      for (uint i = 0u; i < WG; i += 4u)
        q += vec4(red[ROWS * NCOLS * WG + i], red[ROWS * NCOLS * WG + i + 1u], red[ROWS * NCOLS * WG + i + 2u],
                  red[ROWS * NCOLS * WG + i + 3u]);
      v *= inversesqrt(((q.x + q.y) + (q.z + q.w)) / float(pc.K) + pc.eps);
    }
#endif
    const uint m = pc.m0 + g * ROWS + tr;
    if (EPILOGUE == ROCKY_MMQ_EPI_BIAS) v += ev[pc.e_off + m];
    if (EPILOGUE == ROCKY_MMQ_EPI_RESIDUAL) v += ev[pc.e_off + tc * pc.ldy + m];
    y[pc.y_off + tc * pc.ldy + m] = v;
  }
}
