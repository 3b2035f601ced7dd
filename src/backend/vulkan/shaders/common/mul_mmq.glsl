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
layout(constant_id = ROCKY_SC_PREFETCH) const bool PREFETCH = true;
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

// ---- Global → register fetch (raw words) and register → shared conversion, split so the loads
// of stage k+1 are issued before the dot products of stage k and consumed after them (register
// double buffering). Weight words: task t → word w = t % 8 of (row, block): consecutive
// invocations read consecutive words of one row.

// Byte i of the 16 bytes in r, with selects rather than a dynamically indexed vector (which a
// compiler may place in local memory: the H200 reported 224 B of local memory before this).
uint byte_of(uvec4 r, uint i) {
  uint w = i < 8u ? (i < 4u ? r.x : r.y) : (i < 12u ? r.z : r.w);
  return (w >> ((i & 3u) * 8u)) & 0xFFu;
}
// 4 bytes at byte address b from the two words fetched at b >> 2 (lo) and (b >> 2) + 1 (hi).
uint funnel(uint lo, uint hi, uint b) {
  uint s = (b & 3u) * 8u;
  return s == 0u ? lo : (lo >> s) | (hi << (32u - s));
}
uvec2 fetch2(uint b) {  // the words holding bytes b .. b+3 (the second only when b is unaligned)
  uint i = b >> 2;
  return uvec2(wdata[i], (b & 3u) != 0u ? wdata[i + 1u] : 0u);
}

// Raw words for weight word w of 32-block blk of the row at byte `row`.
uvec4 fetch_w(uint row, uint blk, uint w) {
  if (WTYPE == 12u) {  // q4_K: 144-byte super-blocks; sub-block j: bytes 16 + (j/2)·32, nibble j&1
    uint j = blk & 7u;
    return uvec4(wdata[((row + (blk >> 3) * 144u + 16u + (j >> 1) * 32u) >> 2) + w], 0u, 0u, 0u);
  } else if (WTYPE == 14u) {  // q6_K: 210-byte super-blocks; 32-block j = 4·half + quarter
    uint b = row + (blk >> 3) * 210u, j = blk & 7u, h = j >> 2, qt = j & 3u;
    return uvec4(fetch2(b + h * 64u + (qt & 1u) * 32u + 4u * w), fetch2(b + 128u + h * 32u + 4u * w));
  } else if (WTYPE == 8u) {  // q8_0: 34 bytes: f16 d, i8 qs[32]
    return uvec4(fetch2(row + blk * 34u + 2u + 4u * w), 0u, 0u);
  } else {  // q4_0: 18 bytes: f16 d, u8 qs[16]; words 0-3 low nibbles, 4-7 high nibbles
    return uvec4(fetch2(row + blk * 18u + 2u + 4u * (w & 3u)), 0u, 0u);
  }
}
uint finish_w(uvec4 r, uint row, uint blk, uint w) {
  if (WTYPE == 12u) {
    return (r.x >> ((blk & 1u) * 4u)) & 0x0F0F0F0Fu;
  } else if (WTYPE == 14u) {
    uint b = row + (blk >> 3) * 210u, j = blk & 7u, h = j >> 2, qt = j & 3u;
    uint ql = funnel(r.x, r.y, b + h * 64u + (qt & 1u) * 32u + 4u * w);
    uint qh = funnel(r.z, r.w, b + 128u + h * 32u + 4u * w);
    uint q = ((ql >> ((qt >> 1) * 4u)) & 0x0F0F0F0Fu) | (((qh >> (2u * qt)) & 0x03030303u) << 4);
    return ((q | 0x80808080u) - 0x20202020u) ^ 0x80808080u;  // bytewise q − 32
  } else if (WTYPE == 8u) {
    return funnel(r.x, r.y, row + blk * 34u + 2u + 4u * w);
  } else {
    uint q = funnel(r.x, r.y, row + blk * 18u + 2u + 4u * (w & 3u));
    return (q >> ((w >> 2) * 4u)) & 0x0F0F0F0Fu;
  }
}
// Raw words for the scales of 32-block blk.
uvec4 fetch_s(uint row, uint blk) {
  if (WTYPE == 12u) {  // d, dmin, scales[12]: the first 16 bytes of the (aligned) super-block
    uint i = (row + (blk >> 3) * 144u) >> 2;
    return uvec4(wdata[i], wdata[i + 1u], wdata[i + 2u], wdata[i + 3u]);
  } else if (WTYPE == 14u) {  // d at 208, the two int8 scales at 192 + h·8 + 2·qt (same word)
    uint b = row + (blk >> 3) * 210u, j = blk & 7u;
    return uvec4(wdata[(b + 208u) >> 2], wdata[(b + 192u + (j >> 2) * 8u + 2u * (j & 3u)) >> 2], 0u, 0u);
  } else if (WTYPE == 8u) {
    return uvec4(wdata[(row + blk * 34u) >> 2], 0u, 0u, 0u);
  } else {
    return uvec4(wdata[(row + blk * 18u) >> 2], 0u, 0u, 0u);
  }
}
float half_at(uint word, uint b) { return unpackHalf2x16(word >> ((b & 2u) * 8u)).x; }
// (dw_lo, dw_hi, mw, 0) of the block.
vec4 finish_s(uvec4 r, uint row, uint blk) {
  if (WTYPE == 12u) {
    uint j = blk & 7u;
    float d = unpackHalf2x16(r.x).x, dmin = unpackHalf2x16(r.x >> 16).x;
    uint sc, m;  // 6-bit scale/min pair j of the 12 scale bytes (bytes 4..15 = r.y, r.z, r.w)
    if (j < 4u) {
      sc = byte_of(r, 4u + j) & 63u;
      m = byte_of(r, 8u + j) & 63u;
    } else {
      sc = (byte_of(r, 8u + j) & 0xFu) | ((byte_of(r, j) >> 6) << 4);
      m = (byte_of(r, 8u + j) >> 4) | ((byte_of(r, 4u + j) >> 6) << 4);
    }
    return vec4(d * float(sc), d * float(sc), -dmin * float(m), 0.0);
  } else if (WTYPE == 14u) {
    uint b = row + (blk >> 3) * 210u, j = blk & 7u;
    uint o = b + 192u + (j >> 2) * 8u + 2u * (j & 3u);
    float d = half_at(r.x, b + 208u);
    uint pair = r.y >> ((o & 2u) * 8u);
    float s0 = float(int(pair << 24) >> 24), s1 = float(int(pair << 16) >> 24);
    return vec4(d * s0, d * s1, 0.0, 0.0);
  } else if (WTYPE == 8u) {
    float d = half_at(r.x, row + blk * 34u);
    return vec4(d, d, 0.0, 0.0);
  } else {
    float d = half_at(r.x, row + blk * 18u);
    return vec4(d, d, -8.0 * d, 0.0);
  }
}

const uint NWT = (BM * BB * 8u + gl_WorkGroupSize.x - 1u) / gl_WorkGroupSize.x;  // weight words / invocation
const uint NST = (BM * BB + gl_WorkGroupSize.x - 1u) / gl_WorkGroupSize.x;       // weight scales
const uint NXT = (BN * BB * 8u + gl_WorkGroupSize.x - 1u) / gl_WorkGroupSize.x;  // activation words
const uint NDT = (BN * BB + gl_WorkGroupSize.x - 1u) / gl_WorkGroupSize.x;       // activation scales

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

  uvec4 wraw[NWT], sraw[NST];
  uint xraw[NXT];
  vec2 draw[NDT];
  const uint WG_ = gl_WorkGroupSize.x;
  // Fetch stage k0 into registers (out-of-range rows / blocks / tokens read nothing).
#define ROCKY_MMQ_FETCH(k0)                                                                        \
  {                                                                                                \
    [[unroll]] for (uint i = 0u; i < NWT; ++i) {                                                   \
      uint t = tid + i * WG_, w = t % 8u, ml = (t / 8u) % BM, bi = t / (8u * BM);                   \
      wraw[i] = uvec4(0u);                                                                         \
      if (t < BM * BB * 8u && mb + ml < pc.M && (k0) + bi < nblk)                                  \
        wraw[i] = fetch_w(pc.w_off + (mb + ml) * pc.row_bytes, (k0) + bi, w);                      \
    }                                                                                              \
    [[unroll]] for (uint i = 0u; i < NST; ++i) {                                                   \
      uint t = tid + i * WG_, ml = t % BM, bi = t / BM;                                            \
      sraw[i] = uvec4(0u);                                                                         \
      if (t < BM * BB && mb + ml < pc.M && (k0) + bi < nblk)                                       \
        sraw[i] = fetch_s(pc.w_off + (mb + ml) * pc.row_bytes, (k0) + bi);                         \
    }                                                                                              \
    [[unroll]] for (uint i = 0u; i < NXT; ++i) {                                                   \
      uint t = tid + i * WG_, w = t % 8u, bi = (t / 8u) % BB, nl = t / (8u * BB);                  \
      xraw[i] = 0u;                                                                                \
      if (t < BN * BB * 8u && nb_ + nl < pc.N && (k0) + bi < nblk)                                 \
        xraw[i] = xq[(pc.x_off + (nb_ + nl) * nblk + (k0) + bi) * 8u + w];                         \
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
    // Registers → shared memory (converted to packed int8 words and f32 scales).
    [[unroll]] for (uint i = 0u; i < NWT; ++i) {
      uint t = tid + i * WG_, w = t % 8u, ml = (t / 8u) % BM, bi = t / (8u * BM);
      if (t < BM * BB * 8u) {
        bool ok = mb + ml < pc.M && k0 + bi < nblk;
        sw[(bi * 8u + w) * BM + ml] = ok ? finish_w(wraw[i], pc.w_off + (mb + ml) * pc.row_bytes, k0 + bi, w) : 0u;
      }
    }
    [[unroll]] for (uint i = 0u; i < NST; ++i) {
      uint t = tid + i * WG_, ml = t % BM, bi = t / BM;
      if (t < BM * BB) {
        bool ok = mb + ml < pc.M && k0 + bi < nblk;
        swd[bi * BM + ml] = ok ? finish_s(sraw[i], pc.w_off + (mb + ml) * pc.row_bytes, k0 + bi) : vec4(0.0);
      }
    }
    [[unroll]] for (uint i = 0u; i < NXT; ++i) {
      uint t = tid + i * WG_, w = t % 8u, bi = (t / 8u) % BB, nl = t / (8u * BB);
      if (t < BN * BB * 8u) sx[(bi * 8u + w) * BN + nl] = xraw[i];
    }
    [[unroll]] for (uint i = 0u; i < NDT; ++i) {
      uint t = tid + i * WG_, bi = t % BB, nl = t / BB;
      if (t < BN * BB) sxd[bi * BN + nl] = draw[i];
    }
    barrier();
    if (PREFETCH && k0 + BB < nblk) ROCKY_MMQ_FETCH(k0 + BB)
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
