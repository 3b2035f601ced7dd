// Body of mul_mmq.comp (packed int8 dot, OpSDot) and mul_mmq_nodot.comp (ROCKY_MMQ_NODOT: the same
// integer dot computed from unpacked bytes, for devices without shaderIntegerDotProduct).
//
// y[m0 + m, n] = Σ_k W[k, m] · x[k, n], W in ggml rows (WTYPE: q4_0, q8_0, q4_K, q6_K), x in q8_1
// (fast_abi.h). Per 32-value block the weights become 8 packed int8 words q_w, two scales
// (dw_lo for values 0..15, dw_hi for 16..31: they differ for q6_K only) and an offset term mw;
// the contribution of a block is  dw·dx·dot(q_w, q_x) + mw·sx  (sx = dx·Σq_x): exact integer dots,
// scales applied per block, f32 accumulators.
//
// Tile (named specialization constants, rocky::tune::MatmulTile): a workgroup computes BM rows ×
// BN tokens; it is (BM/WM)·(BN/WN) warps of (WM/TM)·(WN/TN) invocations; each invocation holds
// TM × TN accumulators (rows r + i·(WM/TM), tokens c + j·(WN/TN) of its warp tile). K advances
// BK values (BK/32 blocks) per shared-memory stage. BK_STEP is unused by this kernel (reserved).
// Grid: (ceil(M / BM), ceil(N / BN)).
// Bindings: 0 W window (bytes, uint words), 1 q8_1 words, 2 q8_1 (d, d·Σq), 3 y [ldy, N] f32.
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
layout(constant_id = ROCKY_SC_WTYPE) const uint WTYPE = 12;
layout(constant_id = ROCKY_SC_BM) const uint BM = 64;
layout(constant_id = ROCKY_SC_BN) const uint BN = 64;
layout(constant_id = ROCKY_SC_BK) const uint BK = 32;
layout(constant_id = ROCKY_SC_WM) const uint WM = 32;
layout(constant_id = ROCKY_SC_WN) const uint WN = 32;
layout(constant_id = ROCKY_SC_TM) const uint TM = 4;
layout(constant_id = ROCKY_SC_TN) const uint TN = 4;
layout(constant_id = ROCKY_SC_BK_STEP) const uint BK_STEP = 1;
layout(push_constant) uniform PC { MatmulFastPC pc; };
layout(binding = 0) readonly buffer Wt { uint wdata[]; };
layout(binding = 1) readonly buffer XQ { uint xq[]; };
layout(binding = 2) readonly buffer XD { vec2 xd[]; };
layout(binding = 3) writeonly buffer Y { float y[]; };

const uint BB = BK / 32u;        // blocks per stage
const uint HALVES = WTYPE == 14u ? 2u : 1u;
const uint WPH = 8u / HALVES;    // words per scale half

shared uint sw[BB * 8u * BM];    // [block·8 + word][m]
shared vec4 swd[BB * BM];        // [block][m] = (dw_lo, dw_hi, mw, 0)
shared uint sx[BB * 8u * BN];    // [block·8 + word][n]
shared vec2 sxd[BB * BN];        // [block][n] = (dx, sx)

uint rd_u8(uint b) { return (wdata[b >> 2] >> ((b & 3u) * 8u)) & 0xFFu; }
float rd_f16(uint b) { return unpackHalf2x16((wdata[b >> 2] >> ((b & 2u) * 8u)) & 0xFFFFu).x; }
// 4 bytes at any byte address.
uint rd_u32(uint b) {
  uint s = (b & 3u) * 8u, i = b >> 2;
  return s == 0u ? wdata[i] : (wdata[i] >> s) | (wdata[i + 1u] << (32u - s));
}
vec2 scale_min_k4(uint s, uint j) {
  uint sc, m;
  if (j < 4u) {
    sc = rd_u8(s + j) & 63u;
    m = rd_u8(s + j + 4u) & 63u;
  } else {
    sc = (rd_u8(s + j + 4u) & 0xFu) | ((rd_u8(s + j - 4u) >> 6) << 4);
    m = (rd_u8(s + j + 4u) >> 4) | ((rd_u8(s + j) >> 6) << 4);
  }
  return vec2(float(sc), float(m));
}

// Unpack 32-value block `blk` (index along K / 32) of the row at byte `row` into sw/swd slot
// (bi, ml).
void load_weight_block(uint row, uint blk, uint bi, uint ml) {
  vec4 sc = vec4(0.0);
  if (WTYPE == 12u) {  // q4_K: 144-byte super-blocks of 8 × 32
    uint b = row + (blk >> 3) * 144u, j = blk & 7u;
    vec2 sm = scale_min_k4(b + 4u, j);
    float d = rd_f16(b), dmin = rd_f16(b + 2u);
    uint q0 = b + 16u + (j >> 1) * 32u, sh = (j & 1u) * 4u;
    [[unroll]] for (uint w = 0u; w < 8u; ++w) sw[(bi * 8u + w) * BM + ml] = (wdata[(q0 >> 2) + w] >> sh) & 0x0F0F0F0Fu;
    sc = vec4(d * sm.x, d * sm.x, -dmin * sm.y, 0.0);
  } else if (WTYPE == 14u) {  // q6_K: 210-byte super-blocks; 32-block j = 4·half + quarter
    uint b = row + (blk >> 3) * 210u, j = blk & 7u, h = j >> 2, qt = j & 3u;
    uint ql = b + h * 64u + (qt & 1u) * 32u, qh = b + 128u + h * 32u, shl = (qt >> 1) * 4u, shh = 2u * qt;
    [[unroll]] for (uint w = 0u; w < 8u; ++w) {
      uint q = ((rd_u32(ql + 4u * w) >> shl) & 0x0F0F0F0Fu) | (((rd_u32(qh + 4u * w) >> shh) & 0x03030303u) << 4);
      sw[(bi * 8u + w) * BM + ml] = ((q | 0x80808080u) - 0x20202020u) ^ 0x80808080u;  // bytewise q - 32
    }
    float d = rd_f16(b + 208u);
    int s0 = int(rd_u8(b + 192u + h * 8u + 2u * qt) << 24) >> 24;
    int s1 = int(rd_u8(b + 193u + h * 8u + 2u * qt) << 24) >> 24;
    sc = vec4(d * float(s0), d * float(s1), 0.0, 0.0);
  } else if (WTYPE == 8u) {  // q8_0: 34 bytes: f16 d, i8 qs[32]
    uint b = row + blk * 34u;
    [[unroll]] for (uint w = 0u; w < 8u; ++w) sw[(bi * 8u + w) * BM + ml] = rd_u32(b + 2u + 4u * w);
    float d = rd_f16(b);
    sc = vec4(d, d, 0.0, 0.0);
  } else if (WTYPE == 2u) {  // q4_0: 18 bytes: f16 d, u8 qs[16]; value = d·(q − 8)
    uint b = row + blk * 18u;
    [[unroll]] for (uint w = 0u; w < 4u; ++w) {
      uint q = rd_u32(b + 2u + 4u * w);
      sw[(bi * 8u + w) * BM + ml] = q & 0x0F0F0F0Fu;
      sw[(bi * 8u + w + 4u) * BM + ml] = (q >> 4) & 0x0F0F0F0Fu;
    }
    float d = rd_f16(b);
    sc = vec4(d, d, -8.0 * d, 0.0);
  }
  swd[bi * BM + ml] = sc;
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

  for (uint k0 = 0u; k0 < nblk; k0 += BB) {
    for (uint t = tid; t < BM * BB; t += gl_WorkGroupSize.x) {
      uint ml = t % BM, bi = t / BM;
      if (mb + ml < pc.M && k0 + bi < nblk) {
        load_weight_block(pc.w_off + (mb + ml) * pc.row_bytes, k0 + bi, bi, ml);
      } else {
        [[unroll]] for (uint w = 0u; w < 8u; ++w) sw[(bi * 8u + w) * BM + ml] = 0u;
        swd[bi * BM + ml] = vec4(0.0);
      }
    }
    for (uint t = tid; t < BN * BB * 8u; t += gl_WorkGroupSize.x) {
      uint w = t % 8u, bi = (t / 8u) % BB, nl = t / (8u * BB);
      uint n = nb_ + nl, blk = k0 + bi;
      bool ok = n < pc.N && blk < nblk;
      sx[(bi * 8u + w) * BN + nl] = ok ? xq[(pc.x_off + n * nblk + blk) * 8u + w] : 0u;
      if (w == 0u) sxd[bi * BN + nl] = ok ? xd[pc.x_off + n * nblk + blk] : vec2(0.0);
    }
    barrier();
    [[unroll]] for (uint bi = 0u; bi < BB; ++bi) {
      vec4 wd[TM];
      vec2 xdv[TN];
      [[unroll]] for (uint i = 0u; i < TM; ++i) wd[i] = swd[bi * BM + r0 + i * WARP_R];
      [[unroll]] for (uint j = 0u; j < TN; ++j) xdv[j] = sxd[bi * BN + c0 + j * WARP_C];
      [[unroll]] for (uint h = 0u; h < HALVES; ++h) {
        // Integer partial dots start at the bits of 1.5·2^23 so that intBitsToFloat(iacc) − 1.5·2^23
        // is the exact dot (|dot| < 2^22): no int→float conversion instruction (quarter rate on
        // some GPUs) per block and output.
        int iacc[TM * TN];
        [[unroll]] for (uint a = 0u; a < TM * TN; ++a) iacc[a] = 0x4B400000;
        [[unroll]] for (uint w = h * WPH; w < (h + 1u) * WPH; ++w) {
          uint wv[TM], xv[TN];
          [[unroll]] for (uint i = 0u; i < TM; ++i) wv[i] = sw[(bi * 8u + w) * BM + r0 + i * WARP_R];
          [[unroll]] for (uint j = 0u; j < TN; ++j) xv[j] = sx[(bi * 8u + w) * BN + c0 + j * WARP_C];
          [[unroll]] for (uint i = 0u; i < TM; ++i)
            [[unroll]] for (uint j = 0u; j < TN; ++j) iacc[i * TN + j] += dot4(wv[i], xv[j]);
        }
        [[unroll]] for (uint i = 0u; i < TM; ++i) {
          float dw = h == 0u ? wd[i].x : wd[i].y;
          [[unroll]] for (uint j = 0u; j < TN; ++j)
            acc[i * TN + j] += (intBitsToFloat(iacc[i * TN + j]) - 12582912.0) * (dw * xdv[j].x);
        }
      }
      if (WTYPE == 12u || WTYPE == 2u) {
        [[unroll]] for (uint i = 0u; i < TM; ++i)
          [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i * TN + j] += wd[i].z * xdv[j].y;
      }
    }
    barrier();
  }
  [[unroll]] for (uint i = 0u; i < TM; ++i) {
    uint m = mb + r0 + i * WARP_R;
    if (m >= pc.M) continue;
    [[unroll]] for (uint j = 0u; j < TN; ++j) {
      uint n = nb_ + c0 + j * WARP_C;
      if (n < pc.N) y[pc.y_off + n * pc.ldy + pc.m0 + m] = acc[i * TN + j];
    }
  }
}
