// Body of the int8-dot decode matvec, shared by matvec_q8.comp (MMV_SUBGROUP 1: subgroupAdd
// reductions) and matvec_q8_shared.comp (MMV_SUBGROUP 0: one shared-memory pass).
//
//   y[m0 + m, n] = Σ_k W[k, m] · x[k, n]  (+ bias[m0 + m] or + residual[n·ldy + m0 + m]: EPILOGUE)
//
// for the few columns of a decode step, a batched step of several sequences or a short ubatch
// (N ≤ Env::mmv_q8). x is in q8_1 (the layout of fast_abi.h, as mul_mmq reads it: per column n and
// 32-block b two uvec4 of int8 values at uvec4 (x_off + n·nb + b)·2 and the pair (d, d·Σq) at
// x_off + n·nb + b), W in rocky's mmq layout (ops/matmul_fast.hpp; q4_0, q5_0, q5_1, q8_0, q4_K,
// q5_K, q6_K; q4_K / q6_K as nibble pairs with NIB). The products are mul_mmq's: per block and
// 16-value half an exact integer dot (OpSDot, 4 values per instruction) scaled by s·dx, plus the
// affine types' min term s.y·(dx·Σq); f32 accumulation. Against matvec_mmq (f32 x, each weight
// value turned into a float and multiplied) a block costs 8 packed dots per column and, per row,
// the unpacking of its 4 (nibbles) or 8 words — shared by all NCOLS columns: the weight unpacking
// that made matvec_mmq ALU-bound is done once per weight unit, and x is read as 36 bytes per block
// instead of 128. The activations carry q8_1's rounding (the same as mul_mmq's prefill).
//
// Work split: a workgroup of WG invocations computes ROWS consecutive rows for NCOLS (≤ 16) columns
// (c0 = NCOLS · gl_WorkGroupID.z … ; columns ≥ N read column N − 1 and store nothing); invocation
// t takes blocks t, t + WG, … (UNROLL = 2: two per loop iteration, their loads issued together),
// loads each block's x once per column and its weight unit and scale pair once per row. Reduction:
// subgroupAdd plus one shared-memory pass over the subgroups, or (MMV_SUBGROUP 0) one pass over the
// invocations; the ROWS·NCOLS outputs are stored by invocations t, t + WG, …. Grid: (ceil(M / ROWS) laid out in (x, y) as grid_1d does, ceil(N / NCOLS)).
// Bindings: 0 W values (uvec4), 1 W scale groups (uint), 2 q8_1 values (uvec4), 3 q8_1 (d, d·Σq),
// 4 y f32 [ldy, N], 5 epilogue operand (f32; the host binds a dummy region without one).
// Push constants: MatmulMmqPC (n_off, eps unused). Needs shaderIntegerDotProduct (the host checks).
#extension GL_EXT_control_flow_attributes : require
#include "common/header.glsl"
#include "fast_abi.h"
#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4x8(uint a, uint b, spirv_literal int fmt);
int dot4(uint a, uint b) { return sdot4x8(a, b, 0); }

layout(constant_id = ROCKY_SC_WTYPE) const uint WTYPE = 12;
layout(constant_id = ROCKY_SC_BM) const uint ROWS = 1;
layout(constant_id = ROCKY_SC_MMQ_NIB) const bool NIB = false;
layout(constant_id = ROCKY_SC_MMQ_EPI) const uint EPILOGUE = ROCKY_MMQ_EPI_NONE;
layout(constant_id = ROCKY_SC_MMV_UNROLL) const uint UNROLL = 1;
layout(constant_id = ROCKY_SC_MMV_COLS) const uint NCOLS = 1;  // columns per workgroup, 1 … 16
layout(constant_id = ROCKY_SC_MMV_WOUTER) const bool WOUTER = false;
layout(push_constant) uniform PC { MatmulMmqPC pc; };
layout(binding = 0) readonly buffer Wq { uvec4 wq[]; };
layout(binding = 1) readonly buffer Ws { uint ws[]; };
layout(binding = 2) readonly buffer XQ { uvec4 xq[]; };
layout(binding = 3) readonly buffer XD { vec2 xd[]; };
layout(binding = 4) writeonly buffer Y { float y[]; };
layout(binding = 5) readonly buffer E { float ev[]; };

const bool NIB_TYPE = WTYPE == 12u || WTYPE == 14u;  // q4_K, q6_K
const bool NIBBLES = NIB && NIB_TYPE;
#include "common/mmq_scales.glsl"
const bool AFFINE = WTYPE == 12u || WTYPE == 13u || WTYPE == 7u;  // q4_K, q5_K, q5_1: s.x·q + s.y
const int IBIAS = 0x4B400000;  // bits of 1.5·2^23: intBitsToFloat(IBIAS + d) − 1.5·2^23 = d for |d| < 2^22

shared float red[ROWS * NCOLS * gl_WorkGroupSize.x];  // (row, column) × subgroups (or invocations)

float acc[ROWS * NCOLS];  // row r column c at r·NCOLS + c

// One weight half pair (lo, hi) with its scales s times one column's q8_1 block (xa, xb, xs; sa, sb:
// the q6_K nibble sums): mul_mmq's product of the block.
float product(uvec4 lo, uvec4 hi, vec2 s, uvec4 xa, uvec4 xb, vec2 xs, int sa, int sb) {
  int da = IBIAS, db = IBIAS;
  da += dot4(lo.x, xa.x);
  da += dot4(lo.y, xa.y);
  da += dot4(lo.z, xa.z);
  da += dot4(lo.w, xa.w);
  db += dot4(hi.x, xb.x);
  db += dot4(hi.y, xb.y);
  db += dot4(hi.z, xb.z);
  db += dot4(hi.w, xb.w);
  if (Q6NIB) {
    da -= 32 * sa;
    db -= 32 * sb;
  }
  const float fa = intBitsToFloat(da) - 12582912.0, fb = intBitsToFloat(db) - 12582912.0;
  if (WTYPE == 14u) return fa * (s.x * xs.x) + fb * (s.y * xs.x);  // q6_K: one scale per half
  float add = (fa + fb) * (s.x * xs.x);
  if (AFFINE) add += s.y * xs.y;  // q4_K / q5_K / q5_1 min term
  return add;
}

// Column c's q8_1 block b (values 0..15 in xa, 16..31 in xb, (d, d·Σq) in xs; q6_K nibbles: the
// Σq of each half in sa, sb, as u = q + 32 needs 32·Σq back).
void load_x(uint c0, uint c, uint nb, uint b, out uvec4 xa, out uvec4 xb, out vec2 xs, out int sa, out int sb) {
  const uint col = min(c0 + c, pc.N - 1u), xi = pc.x_off + col * nb + b;
  xa = xq[2u * xi];
  xb = xq[2u * xi + 1u];
  xs = xd[xi];
  sa = 0;
  sb = 0;
  if (Q6NIB) {
    const uint ones = 0x01010101u;
    sa = dot4(xa.x, ones) + dot4(xa.y, ones) + dot4(xa.z, ones) + dot4(xa.w, ones);
    sb = dot4(xb.x, ones) + dot4(xb.y, ones) + dot4(xb.z, ones) + dot4(xb.w, ones);
  }
}

// Row m's weight block b as int8 (or u = q + 32 for q6_K nibbles) words of its two halves, and its
// scale pair.
void load_w(uint m, uint nb, uint b, out uvec4 lo, out uvec4 hi, out vec2 s) {
  const uint srow = pc.ws_off + m * mmq_srow_words(nb);
  if (NIBBLES) {
    const uvec4 w = wq[pc.wq_off + m * nb + b];
    if (Q6NIB) {
      const uvec2 hw = mmq_q6_hi(srow, b);
      [[unroll]] for (uint j = 0u; j < 4u; ++j) {
        const uint h = mmq_q6_h16(hw, j);
        lo[j] = mmq_q6lo(w[j], h);
        hi[j] = mmq_q6hi(w[j], h);
      }
    } else {
      lo = w & 0x0F0F0F0Fu;
      hi = (w >> 4u) & 0x0F0F0F0Fu;
    }
  } else {
    lo = wq[pc.wq_off + m * 2u * nb + 2u * b];
    hi = wq[pc.wq_off + m * 2u * nb + 2u * b + 1u];
  }
  s = mmq_scale(srow, b);
}

// Block b of this invocation's ROWS rows for the workgroup's columns, its contribution scaled by k
// (1, or 0 for the clamped duplicate of the unrolled loop's tail). Every column's x stays in
// registers while the rows' weights stream past, or (WOUTER, more than 8 columns) the ROWS rows'
// weight units stay and the columns' x (shared by all rows, from cache) stream past.
void block(uint b, uint g, uint c0, uint nb, float k) {
  if (!WOUTER || NCOLS <= 8u) {
    uvec4 xa[NCOLS], xb[NCOLS];
    vec2 xs[NCOLS];
    int sa[NCOLS], sb[NCOLS];
    [[unroll]] for (uint c = 0u; c < NCOLS; ++c) load_x(c0, c, nb, b, xa[c], xb[c], xs[c], sa[c], sb[c]);
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) {
      uvec4 lo, hi;
      vec2 s;
      load_w(min(g * ROWS + r, pc.M - 1u), nb, b, lo, hi, s);
      [[unroll]] for (uint c = 0u; c < NCOLS; ++c)
        acc[r * NCOLS + c] += k * product(lo, hi, s, xa[c], xb[c], xs[c], sa[c], sb[c]);
    }
  } else {
    uvec4 lo[ROWS], hi[ROWS];
    vec2 s[ROWS];
    [[unroll]] for (uint r = 0u; r < ROWS; ++r) load_w(min(g * ROWS + r, pc.M - 1u), nb, b, lo[r], hi[r], s[r]);
    [[unroll]] for (uint c = 0u; c < NCOLS; ++c) {
      uvec4 xa, xb;
      vec2 xs;
      int sa, sb;
      load_x(c0, c, nb, b, xa, xb, xs, sa, sb);
      [[unroll]] for (uint r = 0u; r < ROWS; ++r) acc[r * NCOLS + c] += k * product(lo[r], hi[r], s[r], xa, xb, xs, sa, sb);
    }
  }
}

void main() {
  const uint WG = gl_WorkGroupSize.x;
  const uint t = gl_LocalInvocationID.x;
  const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint c0 = gl_WorkGroupID.z * NCOLS;
  const uint nb = pc.K / 32u;
  [[unroll]] for (uint a = 0u; a < ROWS * NCOLS; ++a) acc[a] = 0.0;
  for (uint b = t; b < nb; b += UNROLL * WG) {
    block(b, g, c0, nb, 1.0);
    if (UNROLL == 2u) {
      const uint b1 = b + WG;
      block(min(b1, nb - 1u), g, c0, nb, b1 < nb ? 1.0 : 0.0);
    }
  }
#if MMV_SUBGROUP
  const uint nsg = gl_NumSubgroups;
  [[unroll]] for (uint a = 0u; a < ROWS * NCOLS; ++a) {
    const float v = subgroupAdd(acc[a]);
    if (subgroupElect()) red[a * nsg + gl_SubgroupID] = v;
  }
#else
  [[unroll]] for (uint a = 0u; a < ROWS * NCOLS; ++a) red[a * WG + t] = acc[a];
#endif
  barrier();
  // Invocation t stores outputs a = t, t + WG, … < ROWS·NCOLS: row a / NCOLS of column a % NCOLS.
  for (uint a = t; a < ROWS * NCOLS; a += WG) {
    const uint tr = a / NCOLS, tc = a % NCOLS;
    if (g * ROWS + tr >= pc.M || c0 + tc >= pc.N) continue;
#if MMV_SUBGROUP
    float v = 0.0;
    for (uint i = 0u; i < nsg; ++i) v += red[a * nsg + i];
#else
    vec4 p = vec4(0.0);
    for (uint i = 0u; i < WG; i += 4u)  // WG a multiple of 4 (the host checks)
      p += vec4(red[a * WG + i], red[a * WG + i + 1u], red[a * WG + i + 2u], red[a * WG + i + 3u]);
    float v = (p.x + p.y) + (p.z + p.w);
#endif
    const uint m = pc.m0 + g * ROWS + tr, n = c0 + tc;
    if (EPILOGUE == ROCKY_MMQ_EPI_BIAS) v += ev[pc.e_off + m];
    if (EPILOGUE == ROCKY_MMQ_EPI_RESIDUAL) v += ev[pc.e_off + n * pc.ldy + m];
    y[pc.y_off + n * pc.ldy + m] = v;
  }
}
