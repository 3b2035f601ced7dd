#version 450
// attention_decode (decode and batched decode over a long KV cache): causal GQA
// attention for ubatches of few tokens, one workgroup per (KV head, token, key chunk) serving all
// GQA = n_head / n_head_kv query heads of that KV head, so each K and V value is read from memory
// once per token instead of once per query head (the per-(head, token) kernels of
// common/attention_simple.glsl read it GQA times). Same math, same online softmax (FlashAttention,
// Dao et al. 2022; the split over keys is flash-decoding, Dao et al. 2023), same scratch format
// as attention_split.comp, so attention_merge.comp combines the chunks.
//
// Workgroup (kvh, j, s): query heads h = kvh·GQA + g (g < GQA) of token j, key positions
// [f + s·chunk, min(f + (s+1)·chunk, pos_j + 1)) (f: a sliding window's first position, else 0;
// n_split = 1: the whole range). Keys are visited in blocks of BK = 32 positions, all loads of a
// phase issued before its arithmetic (the few workgroups of a decode step hide no latency):
//  1. the WG / BK = 4 invocations of key c each take every 4th 8-value unit of K[c] (16-byte
//     loads) and sum its products with the GQA query heads (from shared memory, the same address
//     across a subgroup); the 4 partial scores meet in shared memory;
//  2. per head: the block's max (subgroupMax, then one shared pass over the subgroups), the
//     probabilities p = exp(s − m_new) to shared memory and their sum (subgroupAdd, same pass);
//  3. invocation t owns the dim pair dp = t mod (D/2) of every head for the keys c ≡ t div (D/2)
//     (mod WG div (D/2)): one 32-bit load gives both f16 V values (a 64-bit load with f32), each
//     multiplied by GQA probabilities; the key groups' sums are added in shared memory at the end.
// Three barriers per block. Output: n_split = 1 → out[(j·n_head + h)·D + d] = o / l; else the
// partial state (m, l, o not normalised) to scratch row (j·n_head + h)·n_split + s (rows of D + 2
// floats, attention_split.comp's layout); a chunk past the token's last position writes
// m = −1e30, l = 0.
// Needs (host-checked in ops/attention.cpp): subgroup arithmetic, D = HD a multiple of 8 and
// ≤ 2·WG, K's element offset a multiple of 8 (f16) or 4 (f32), V's even, GQA ≤ 8.
// Grid: (n_head_kv, n_tokens, n_split). Bindings: 0 q [D·n_head, N] f32, 1 K cache, 2 V cache
// (uint words: f32 bits, or packed f16 pairs when KV_F16 = 1), 3 out or scratch (f32), 4 the step
// buffer (POS_BUF = 1: n_past at [0]; 2: abi.h's per-token table) or a dummy (POS_BUF = 0: n_past
// from the push constant). Push constants: AttnSplitPC.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common/header.glsl"

layout(constant_id = ROCKY_SC_KV_F16) const uint KV_F16 = 0;
layout(constant_id = ROCKY_SC_ATTN_HD) const uint HD = 128;
layout(constant_id = ROCKY_SC_ATTN_GQA) const uint GQA = 1;
layout(constant_id = ROCKY_SC_POS_BUF) const uint POS_BUF = 0;
layout(push_constant) uniform PC { AttnSplitPC spc; };
#define pc spc.a

layout(binding = 0) readonly buffer Q { float q[]; };
layout(binding = 1) readonly buffer Kc4 { uvec4 kc4[]; };
layout(binding = 2) readonly buffer Vc { uint vc[]; };
layout(binding = 2) readonly buffer Vc2 { uvec2 vc2[]; };
layout(binding = 3) writeonly buffer Dst { float dst[]; };
layout(binding = 4) readonly buffer Step { uint step_pos[]; };

const uint G_MAX = 8;
const uint BK = 32;  // keys per block; WG / BK invocations share a key in the score phase
const float k_neg = -1e30;
shared vec4 qs4[GQA * HD / 4];                     // the GQA query heads, scaled
shared float sp[GQA * gl_WorkGroupSize.x];         // [g][part][c] partial scores of the score phase
shared float ps[GQA * BK];                         // [g][c] the block's probabilities
shared float red_m[GQA * gl_WorkGroupSize.x];      // [subgroup][g] block maxima
shared float red_l[GQA * gl_WorkGroupSize.x];      // [subgroup][g] block sums
shared float osum[2u * GQA * gl_WorkGroupSize.x];  // [key group][g][d] the output at the end
shared float ml[2u * GQA];                         // [g] (m, l) at the end

uint n_past_of() { return POS_BUF == 1u ? step_pos[0] : pc.n_past; }
uint pos_of(uint j) { return POS_BUF == 2u ? step_pos[k_tok_table + 2u * (pc.tok0 + j)] : n_past_of() + j; }
uint cell0_of(uint j) { return POS_BUF == 2u ? step_pos[k_tok_table + 2u * (pc.tok0 + j) + 1u] : 0u; }

void main() {
  const uint WG = gl_WorkGroupSize.x;
  const uint t = gl_LocalInvocationID.x, kvh = gl_WorkGroupID.x, j = gl_WorkGroupID.y;
  const uint D = HD, NP = HD / 2u, KG = WG / NP;  // dim pairs, key groups of the V phase
  const uint TPK = WG / BK, NU = HD / 8u;          // invocations per key, 8-value units of a K row
  const uint KPG = (BK + KG - 1u) / KG;           // keys per key group and block in the V phase
  const uint dp = t % NP, kg = t / NP;
  const uint kc = t / TPK, part = t % TPK;  // the score phase's key and unit phase
  const uint head0 = kvh * GQA;
  const uint qbase = pc.q_off + (j * pc.n_head + head0) * D;  // GQA heads of token j, contiguous
  for (uint u = t; u < GQA * D / 4u; u += WG) {
    const uint e = qbase + 4u * u;
    qs4[u] = vec4(q[e], q[e + 1u], q[e + 2u], q[e + 3u]) * pc.scale;
  }
  const uint n_kv = pos_of(j) + 1u;
  const uint c0 = cell0_of(j);
  const uint k_first = pc.window > 0u && n_kv > pc.window ? n_kv - pc.window : 0u;
  const uint k_begin = spc.n_split > 1u ? k_first + gl_WorkGroupID.z * spc.chunk : k_first;
  const uint k_end = spc.n_split > 1u ? min(n_kv, k_begin + spc.chunk) : n_kv;
  float m[G_MAX], l[G_MAX], o0[G_MAX], o1[G_MAX];
  for (uint g = 0u; g < GQA; ++g) {
    m[g] = k_neg;
    l[g] = 0.0;
    o0[g] = 0.0;
    o1[g] = 0.0;
  }
  const uint nsg = gl_NumSubgroups, sg = gl_SubgroupID;
  barrier();

  for (uint k0 = k_begin; k0 < k_end; k0 += BK) {
    const uint n_blk = min(BK, k_end - k0);
    // 1. Partial scores: invocation t takes the 8-value units u ≡ part (mod TPK) of key k0 + kc,
    //    all loads of a key issued before the dot products.
    {
      float s[G_MAX];
      for (uint g = 0u; g < GQA; ++g) s[g] = 0.0;
      if (kc < n_blk) {
        const uint kb = pc.k_off + kv_col(c0, k0 + kc, pc.ring, pc.seq_cells) * pc.n_embd_kv + kvh * D;  // K[p]
        const uint NUT = (NU + TPK - 1u) / TPK;
        vec4 lo[(256u / 8u + 3u) / 4u], hi[(256u / 8u + 3u) / 4u];  // ≤ 8 units per invocation (HD ≤ 256)
        for (uint i = 0u; i < NUT; ++i) {
          const uint u = part + i * TPK;
          if (u < NU) {
            if (KV_F16 != 0u) {
              const uvec4 w = kc4[(kb + 8u * u) >> 3];
              lo[i] = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
              hi[i] = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
            } else {
              lo[i] = uintBitsToFloat(kc4[(kb + 8u * u) >> 2]);
              hi[i] = uintBitsToFloat(kc4[(kb + 8u * u + 4u) >> 2]);
            }
          }
        }
        for (uint i = 0u; i < NUT; ++i) {
          const uint u = part + i * TPK;
          if (u < NU) {
            for (uint g = 0u; g < GQA; ++g) {
              const uint qi = (g * D + 8u * u) >> 2;
              s[g] += dot(qs4[qi], lo[i]) + dot(qs4[qi + 1u], hi[i]);
            }
          }
        }
      }
      for (uint g = 0u; g < GQA; ++g) sp[g * WG + part * BK + kc] = s[g];
    }
    barrier();
    // 2. Scores of key k0 + t (t < BK), block maxima, probabilities and sums per head.
    const bool live = t < n_blk;
    float s[G_MAX];
    for (uint g = 0u; g < GQA; ++g) {
      float v = k_neg;
      if (live) {
        v = 0.0;
        for (uint i = 0u; i < TPK; ++i) v += sp[g * WG + i * BK + t];
      }
      s[g] = v;
      const float mx = subgroupMax(v);
      if (subgroupElect()) red_m[sg * GQA + g] = mx;
    }
    barrier();
    float alpha[G_MAX];
    for (uint g = 0u; g < GQA; ++g) {
      float mb = k_neg;
      for (uint i = 0u; i < nsg; ++i) mb = max(mb, red_m[i * GQA + g]);
      const float m_new = max(m[g], mb);
      alpha[g] = exp(m[g] - m_new);
      m[g] = m_new;
      const float e = live ? exp(s[g] - m_new) : 0.0;
      if (t < BK) ps[g * BK + t] = e;
      const float v = subgroupAdd(e);
      if (subgroupElect()) red_l[sg * GQA + g] = v;
    }
    barrier();
    for (uint g = 0u; g < GQA; ++g) {
      float lb = 0.0;
      for (uint i = 0u; i < nsg; ++i) lb += red_l[i * GQA + g];
      l[g] = l[g] * alpha[g] + lb;
      o0[g] *= alpha[g];
      o1[g] *= alpha[g];
    }
    // 3. V: this invocation's dim pair of every head over its key group's keys of the block, all
    //    loads issued before the products.
    if (kg < KG) {
      const uint vb = pc.v_off + kvh * D + 2u * dp;  // + key k0 + c's column · n_embd_kv: V[k0 + c][2dp]
      vec2 vv[BK];
      for (uint i = 0u; i < KPG; ++i) {
        const uint c = kg + i * KG;
        const uint e = vb + kv_col(c0, k0 + c, pc.ring, pc.seq_cells) * pc.n_embd_kv;
        vv[i] = c < n_blk ? (KV_F16 != 0u ? unpackHalf2x16(vc[e >> 1]) : uintBitsToFloat(vc2[e >> 1])) : vec2(0.0);
      }
      for (uint i = 0u; i < KPG; ++i) {
        const uint c = kg + i * KG;
        if (c < n_blk) {
          for (uint g = 0u; g < GQA; ++g) {
            const float pr = ps[g * BK + c];
            o0[g] += pr * vv[i].x;
            o1[g] += pr * vv[i].y;
          }
        }
      }
    }
  }
  // The key groups' partial outputs, added in shared memory.
  barrier();
  if (kg < KG) {
    for (uint g = 0u; g < GQA; ++g) {
      osum[(kg * GQA + g) * D + 2u * dp] = o0[g];
      osum[(kg * GQA + g) * D + 2u * dp + 1u] = o1[g];
    }
  }
  if (t == 0u) {
    for (uint g = 0u; g < GQA; ++g) {
      ml[2u * g] = m[g];
      ml[2u * g + 1u] = l[g];
    }
  }
  barrier();
  for (uint u = t; u < GQA * D; u += WG) {
    const uint g = u / D, d = u % D;
    float acc = 0.0;
    for (uint i = 0u; i < KG; ++i) acc += osum[(i * GQA + g) * D + d];
    const uint h = head0 + g;
    if (spc.n_split > 1u) {
      const uint row = spc.s_off + ((j * pc.n_head + h) * spc.n_split + gl_WorkGroupID.z) * (D + 2u);
      if (d == 0u) {
        dst[row] = ml[2u * g];
        dst[row + 1u] = ml[2u * g + 1u];
      }
      dst[row + 2u + d] = acc;
    } else {
      dst[pc.out_off + (j * pc.n_head + h) * D + d] = acc / ml[2u * g + 1u];
    }
  }
}
