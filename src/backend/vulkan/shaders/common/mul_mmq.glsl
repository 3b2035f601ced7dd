// Body of mul_mmq.comp (packed int8 dot, OpSDot) and mul_mmq_nodot.comp (ROCKY_MMQ_NODOT: the same
// integer dot computed from unpacked bytes, for devices without shaderIntegerDotProduct).
//
// y[m0 + m, n] = Σ_k W[k, m] · x[k, n], x in q8_1 (fast_abi.h), W in rocky's mmq layout: the ggml
// rows (WTYPE: q4_0, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K) repacked at load by fast::repack_for_mmq
// (ops/matmul_fast.hpp documents the layout): per row and 32-block the values as packed int8 words
// (binding 0; q4_K / q6_K with NIB: 16 bytes of nibble pairs, byte i = u[i] | u[i + 16] << 4, the
// q6_K high bits in the scale group) and a scale pair from the GGUF scale fields (binding 1,
// common/mmq_scales.glsl): q4_K / q5_K (d·sc, −dmin·m), q5_1 (d, m), q6_K (scale of values 0..15,
// of 16..31), q8_0 / q4_0 / q5_0 (d, d). The contribution of a block is  s·dx·dot(q_w, q_x)  (q6_K:
// per 16-value half) plus, for the affine types (q4_K, q5_K, q5_1), the min term  s.y·(dx·Σq_x):
// exact integer dots, scales applied per block, f32 accumulators. Aligned 16-byte loads of the
// values; the scales are decoded at the fetch.
//
// Tile (named specialization constants, rocky::tune::MatmulTile): a workgroup computes BM rows ×
// BN tokens; it is (BM/WM)·(BN/WN) warps of (WM/TM)·(WN/TN) invocations; each invocation holds
// TM × TN accumulators (rows r + i·(WM/TM), tokens c + j·(WN/TN) of its warp tile). K advances
// BK values (BK/32 blocks) per shared-memory stage. BK_STEP is unused by this kernel (reserved).
// Shared memory holds each row's (token's) stage as uvec4s with a row stride of 2·BB + 1 uvec4s:
// odd, so the 16-byte reads of 8 consecutive rows hit 8 distinct 4-bank groups (no conflicts).
// VEC4 (MatmulTile::vec4) reads them as whole uvec4s; 0 reads one word at a time (Mali-G610:
// the uvec4 form spilled 53:222, 836 B tls; the word form 0 spills).
// Grid: (ceil(M / BM), ceil(N / BN)).
// Bindings: 0 W values (uvec4), 1 W scale groups (uint), 2 q8_1 values (uvec4), 3 q8_1 (d, d·Σq),
// 4 y [ldy, N] f32, 5 epilogue operand f32 (read only when EPILOGUE != 0; the host binds a dummy
// region otherwise). Push constants: MatmulMmqPC.
// Epilogue (EPILOGUE, fast_abi.h): 0 y = W·x; 1 (bias) y[n, m] = W·x + e[e_off + m0 + m];
// 2 (residual) y[n, m] = W·x + e[e_off + n·ldy + m0 + m]. Each output is read (operand) and written
// (y) by the same invocation, so y may even be the residual operand itself. Same f32 sum as the
// separate bias_add / add dispatch: acc + e, one rounding.
#extension GL_EXT_control_flow_attributes : require
#include "common/header.glsl"
#include "fast_abi.h"
#ifndef ROCKY_MMQ_NODOT
#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4x8(uint a, uint b, spirv_literal int fmt);
int dot4(uint a, uint b) { return sdot4x8(a, b, 0); }
#else
int dot4(uint a, uint b) {
  ivec4 va = ivec4(int(a << 24) >> 24, int(a << 16) >> 24, int(a << 8) >> 24, int(a) >> 24);
  ivec4 vb = ivec4(int(b << 24) >> 24, int(b << 16) >> 24, int(b << 8) >> 24, int(b) >> 24);
  return va.x * vb.x + va.y * vb.y + va.z * vb.z + va.w * vb.w;
}
#endif
#include "common/matmul_tile.glsl"
layout(constant_id = ROCKY_SC_BK_STEP) const uint BK_STEP = 1;
layout(constant_id = ROCKY_SC_PREFETCH) const bool PREFETCH = true;
layout(constant_id = ROCKY_SC_MMQ_NIB) const bool NIB = false;
layout(constant_id = ROCKY_SC_MMQ_VEC4) const bool VEC4 = true;
layout(constant_id = ROCKY_SC_MMQ_EPI) const uint EPILOGUE = ROCKY_MMQ_EPI_NONE;
layout(push_constant) uniform PC { MatmulMmqPC pc; };
layout(binding = 0) readonly buffer Wq { uvec4 wq[]; };
layout(binding = 1) readonly buffer Ws { uint ws[]; };
layout(binding = 2) readonly buffer XQ { uvec4 xq[]; };
layout(binding = 3) readonly buffer XD { vec2 xd[]; };
layout(binding = 4) writeonly buffer Y { float y[]; };
layout(binding = 5) readonly buffer E { float ev[]; };

const uint BB = BK / 32u;           // blocks per stage
const uint SS = 2u * BB + 1u;       // shared row stride (uvec4)
const bool NIB_TYPE = WTYPE == 12u || WTYPE == 14u;  // q4_K, q6_K
const bool NIBBLES = NIB && NIB_TYPE;
#include "common/mmq_scales.glsl"
const uint WV = NIBBLES ? 1u : 2u;  // global uvec4 per (row, block)
const bool AFFINE = WTYPE == 12u || WTYPE == 13u || WTYPE == 7u;  // q4_K, q5_K, q5_1: s.x·q + s.y

shared uvec4 sw[BM * SS];  // [m][block·2 + half]: values 0..15, 16..31 of the block as int8
shared vec2 swd[BB * BM];  // [block][m] scale pair
shared uvec4 sx[BN * SS];  // [n][block·2 + half]
shared vec2 sxd[BB * BN];  // [block][n] = (dx, dx·Σq)

const uint WG_ = gl_WorkGroupSize.x;
const uint NWT = (BM * BB * WV + WG_ - 1u) / WG_;  // weight uvec4 per invocation and stage
const uint NST = (BM * BB + WG_ - 1u) / WG_;       // weight scale pairs
const uint NXT = (BN * BB * 2u + WG_ - 1u) / WG_;  // activation uvec4
const uint NDT = (BN * BB + WG_ - 1u) / WG_;       // activation scale pairs

// iacc[i·TN + j] += dot of half h (values 16h .. 16h+15) of block bi, rows r0 + i·WARP_R, tokens
// c0 + j·WARP_C.
#define ROCKY_MMQ_DOT_HALF(h)                                                                      \
  if (VEC4) { /* 16-byte shared reads: TM + TN loads per half-block */                             \
    uvec4 wv[TM];                                                                                  \
    [[unroll]] for (uint i = 0u; i < TM; ++i) wv[i] = sw[(r0 + i * WARP_R) * SS + bi * 2u + (h)];  \
    [[unroll]] for (uint j = 0u; j < TN; ++j) {                                                    \
      const uvec4 xv = sx[(c0 + j * WARP_C) * SS + bi * 2u + (h)];                                 \
      [[unroll]] for (uint i = 0u; i < TM; ++i) {                                                  \
        int s = iacc[i * TN + j];                                                                  \
        s += dot4(wv[i].x, xv.x);                                                                  \
        s += dot4(wv[i].y, xv.y);                                                                  \
        s += dot4(wv[i].z, xv.z);                                                                  \
        s += dot4(wv[i].w, xv.w);                                                                  \
        iacc[i * TN + j] = s;                                                                      \
      }                                                                                            \
    }                                                                                              \
  } else { /* one word at a time: fewer live registers */                                          \
    [[unroll]] for (uint c = 0u; c < 4u; ++c) {                                                    \
      uint wv[TM];                                                                                 \
      [[unroll]] for (uint i = 0u; i < TM; ++i) wv[i] = sw[(r0 + i * WARP_R) * SS + bi * 2u + (h)][c]; \
      [[unroll]] for (uint j = 0u; j < TN; ++j) {                                                  \
        const uint xv = sx[(c0 + j * WARP_C) * SS + bi * 2u + (h)][c];                             \
        [[unroll]] for (uint i = 0u; i < TM; ++i) iacc[i * TN + j] += dot4(wv[i], xv);             \
      }                                                                                            \
    }                                                                                              \
  }

void main() {
  const uint WARP_R = WM / TM, WARP_C = WN / TN;  // invocations per warp along rows / tokens
  const uint WARPS_M = BM / WM;
  const uint tid = gl_LocalInvocationID.x;
  const uint warp = tid / (WARP_R * WARP_C), lane = tid % (WARP_R * WARP_C);
  const uint r0 = (warp % WARPS_M) * WM + lane % WARP_R;  // first row of this invocation in the tile
  const uint c0 = (warp / WARPS_M) * WN + lane / WARP_R;  // first token
  const uint mb = gl_WorkGroupID.x * BM, nb_ = gl_WorkGroupID.y * BN;
  const uint nblk = pc.K / 32u;

  float acc[TM * TN];
  [[unroll]] for (uint a = 0u; a < TM * TN; ++a) acc[a] = 0.0;

  uvec4 wraw[NWT], xraw[NXT];
  uvec2 sraw[NST];  // raw scale words (mmq_scale_raw), decoded at the shared-memory store
  vec2 draw[NDT];
  // Fetch stage k0 into registers (out-of-range rows / blocks / tokens read nothing and become 0).
  // Consecutive invocations read consecutive 16-byte words of one row (token).
#define ROCKY_MMQ_FETCH(k0)                                                                        \
  {                                                                                                \
    [[unroll]] for (uint i = 0u; i < NWT; ++i) {                                                   \
      uint t = tid + i * WG_, v = t % WV, bi = (t / WV) % BB, ml = t / (WV * BB);                  \
      wraw[i] = uvec4(0u);                                                                         \
      if (t < BM * BB * WV && mb + ml < pc.M && (k0) + bi < nblk)                                  \
        wraw[i] = wq[pc.wq_off + (mb + ml) * (nblk * WV) + ((k0) + bi) * WV + v];                  \
    }                                                                                              \
    [[unroll]] for (uint i = 0u; i < NST; ++i) {                                                   \
      uint t = tid + i * WG_, bi = t % BB, ml = t / BB;                                            \
      sraw[i] = uvec2(0u);                                                                         \
      if (t < BM * BB && mb + ml < pc.M && (k0) + bi < nblk)                                       \
        sraw[i] = mmq_scale_raw(pc.ws_off + (mb + ml) * mmq_srow_words(pc.K / 32u), (k0) + bi);   \
    }                                                                                              \
    [[unroll]] for (uint i = 0u; i < NXT; ++i) {                                                   \
      uint t = tid + i * WG_, v = t % 2u, bi = (t / 2u) % BB, nl = t / (2u * BB);                  \
      xraw[i] = uvec4(0u);                                                                         \
      if (t < BN * BB * 2u && nb_ + nl < pc.N && (k0) + bi < nblk)                                 \
        xraw[i] = xq[(pc.x_off + (nb_ + nl) * nblk + (k0) + bi) * 2u + v];                         \
    }                                                                                              \
    [[unroll]] for (uint i = 0u; i < NDT; ++i) {                                                   \
      uint t = tid + i * WG_, bi = t % BB, nl = t / BB;                                            \
      draw[i] = vec2(0.0);                                                                         \
      if (t < BN * BB && nb_ + nl < pc.N && (k0) + bi < nblk)                                      \
        draw[i] = xd[pc.x_off + (nb_ + nl) * nblk + (k0) + bi];                                    \
    }                                                                                              \
  }
  if (PREFETCH) ROCKY_MMQ_FETCH(0u)
  for (uint k0 = 0u; k0 < nblk; k0 += BB) {
    if (!PREFETCH) ROCKY_MMQ_FETCH(k0)
    // Registers → shared memory (nibble pairs expanded to two int8 halves).
    [[unroll]] for (uint i = 0u; i < NWT; ++i) {
      uint t = tid + i * WG_, v = t % WV, bi = (t / WV) % BB, ml = t / (WV * BB);
      if (t < BM * BB * WV) {
        if (Q6NIB) {  // 6-bit u = q + 32 from nibble + high bits, then int8 q; one half at a time.
          // The high bits are loaded here, not with the stage's fetch (no registers held across
          // the dot loop: the Mali-G610 variant spilled with them in the prefetch set).
          const uint kb = k0 + bi;  // the stage being stored is k0's (prefetched or not)
          uvec2 hw = uvec2(0u);
          if (mb + ml < pc.M && kb < nblk) hw = mmq_q6_hi(pc.ws_off + (mb + ml) * mmq_srow_words(pc.K / 32u), kb);
          sw[ml * SS + bi * 2u] = uvec4(mmq_s8_from_u6(mmq_q6lo(wraw[i].x, hw.x & 0xFFFFu)),
                                        mmq_s8_from_u6(mmq_q6lo(wraw[i].y, hw.x >> 16)),
                                        mmq_s8_from_u6(mmq_q6lo(wraw[i].z, hw.y & 0xFFFFu)),
                                        mmq_s8_from_u6(mmq_q6lo(wraw[i].w, hw.y >> 16)));
          sw[ml * SS + bi * 2u + 1u] = uvec4(mmq_s8_from_u6(mmq_q6hi(wraw[i].x, hw.x & 0xFFFFu)),
                                             mmq_s8_from_u6(mmq_q6hi(wraw[i].y, hw.x >> 16)),
                                             mmq_s8_from_u6(mmq_q6hi(wraw[i].z, hw.y & 0xFFFFu)),
                                             mmq_s8_from_u6(mmq_q6hi(wraw[i].w, hw.y >> 16)));
        } else if (NIBBLES) {
          sw[ml * SS + bi * 2u] = wraw[i] & 0x0F0F0F0Fu;
          sw[ml * SS + bi * 2u + 1u] = (wraw[i] >> 4u) & 0x0F0F0F0Fu;
        } else {
          sw[ml * SS + bi * 2u + v] = wraw[i];
        }
      }
    }
    [[unroll]] for (uint i = 0u; i < NST; ++i) {
      uint t = tid + i * WG_, bi = t % BB, ml = t / BB;
      if (t < BM * BB) swd[bi * BM + ml] = mmq_scale_decode(sraw[i]);
    }
    [[unroll]] for (uint i = 0u; i < NXT; ++i) {
      uint t = tid + i * WG_, v = t % 2u, bi = (t / 2u) % BB, nl = t / (2u * BB);
      if (t < BN * BB * 2u) sx[nl * SS + bi * 2u + v] = xraw[i];
    }
    [[unroll]] for (uint i = 0u; i < NDT; ++i) {
      uint t = tid + i * WG_, bi = t % BB, nl = t / BB;
      if (t < BN * BB) sxd[bi * BN + nl] = draw[i];
    }
    barrier();
    if (PREFETCH && k0 + BB < nblk) ROCKY_MMQ_FETCH(k0 + BB)
    [[unroll]] for (uint bi = 0u; bi < BB; ++bi) {
      // Integer partial dots start at the bits of 1.5·2^23 so that intBitsToFloat(iacc) − 1.5·2^23
      // is the exact dot (|dot| < 2^22): no int→float conversion instruction per block and output.
      int iacc[TM * TN];
      [[unroll]] for (uint a = 0u; a < TM * TN; ++a) iacc[a] = 0x4B400000;
      // The two 16-value halves are written out (no loop over them): q6_K applies one scale per
      // half (FP work between the halves); a loop around that was 1.75× slower on the H200.
      ROCKY_MMQ_DOT_HALF(0u)
      if (WTYPE == 14u) {
        [[unroll]] for (uint i = 0u; i < TM; ++i) {
          const float dw = swd[bi * BM + r0 + i * WARP_R].x;
          [[unroll]] for (uint j = 0u; j < TN; ++j) {
            acc[i * TN + j] += (intBitsToFloat(iacc[i * TN + j]) - 12582912.0) * (dw * sxd[bi * BN + c0 + j * WARP_C].x);
            iacc[i * TN + j] = 0x4B400000;
          }
        }
      }
      ROCKY_MMQ_DOT_HALF(1u)
      [[unroll]] for (uint i = 0u; i < TM; ++i) {
        const vec2 wd = swd[bi * BM + r0 + i * WARP_R];
        const float dw = WTYPE == 14u ? wd.y : wd.x;
        [[unroll]] for (uint j = 0u; j < TN; ++j) {
          const vec2 xdv = sxd[bi * BN + c0 + j * WARP_C];
          acc[i * TN + j] += (intBitsToFloat(iacc[i * TN + j]) - 12582912.0) * (dw * xdv.x);
          if (AFFINE) acc[i * TN + j] += wd.y * xdv.y;  // q4_K / q5_K / q5_1 min term
        }
      }
    }
    barrier();
  }
  // (No `continue` in these loops: a loop the driver does not unroll indexes acc dynamically,
  // which places it in local memory.)
  [[unroll]] for (uint i = 0u; i < TM; ++i) {
    const uint m = mb + r0 + i * WARP_R;
    [[unroll]] for (uint j = 0u; j < TN; ++j) {
      const uint n = nb_ + c0 + j * WARP_C;
      if (m < pc.M && n < pc.N) {
        float v = acc[i * TN + j];
        if (EPILOGUE == ROCKY_MMQ_EPI_BIAS) v += ev[pc.e_off + pc.m0 + m];
        if (EPILOGUE == ROCKY_MMQ_EPI_RESIDUAL) v += ev[pc.e_off + n * pc.ldy + pc.m0 + m];
        y[pc.y_off + n * pc.ldy + pc.m0 + m] = v;
      }
    }
  }
}
