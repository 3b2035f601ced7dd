// The body of attention.comp, attention_step.comp and attention_split.comp (included after
// common/header.glsl; ROCKY_ATTN_STEP / ROCKY_ATTN_SPLIT select the variant).
// attention (prefill and decode): causal GQA attention, flash-attention style. One workgroup per
// (query head h, token j): keys are visited in blocks of WG positions with an online softmax
// (running max m, running sum l, rescaled output o), so no n_ctx × n_ctx scratch exists.
// Query head h reads KV head h / (n_head / n_head_kv); token j sees positions p ≤ n_past + j (with
// a sliding window W = pc.window > 0 only p > n_past + j − W: the loop starts there).
// Each invocation owns output dims d = t + i·WG (i < DPT), or with PAIRS the dim pairs
// (2·(t + i·WG), +1) (i < DPT/2), so head_dim ≤ DPT·WG (host-checked; an odd head_dim's last pair
// has one dim). PAIRS reads two f16 V values per 32-bit load (H200 decode: tg128 339 → 371 t/s,
// tuning-log #32) but takes 64 work registers on the Mali-G610 (half occupancy), so it is off there.
// Grid: (n_head, n_tokens). Bindings: 0 q [head_dim·n_head, N], 1 K cache, 2 V cache (uint
// words: f32 bits, or packed f16 pairs when KV_F16 = 1), 3 out [head_dim·n_head, N];
// attention_step.comp (ROCKY_ATTN_STEP, decode replay): 4 step (n_past at [0]).
layout(constant_id = ROCKY_SC_KV_F16) const uint KV_F16 = 0;
layout(constant_id = ROCKY_SC_HD_MAX) const uint HD_MAX = 256;
layout(constant_id = ROCKY_SC_ATTN_PAIRS) const uint PAIRS = 0;
layout(constant_id = ROCKY_SC_KV_RING) const uint RING = 0;  // 1: pc.ring > 0 (kv_col; abi.h)
#ifdef ROCKY_ATTN_SPLIT
// attention_split.comp: one chunk of the key range per workgroup z (AttnSplitPC), its partial
// state to binding 3; n_past from the push constant, or binding 4 when POS_BUF = 1.
layout(push_constant) uniform PC { AttnSplitPC spc; };
#define pc spc.a
layout(binding = 3) writeonly buffer Scratch { float sc[]; };
layout(constant_id = ROCKY_SC_POS_BUF) const uint POS_BUF = 0;
layout(binding = 4) readonly buffer Step { uint step_pos[]; };
#define ROCKY_ATTN_N_PAST (POS_BUF != 0u ? step_pos[0] : pc.n_past)
#else
layout(push_constant) uniform PC { AttnPC pc; };
layout(binding = 3) writeonly buffer Out { float outv[]; };
#ifdef ROCKY_ATTN_STEP
layout(binding = 4) readonly buffer Step { uint step_pos[]; };  // [0] = n_past
// 2: a multi-sequence ubatch (abi.h's k_tok_table); 1 (the default): n_past at [0].
layout(constant_id = ROCKY_SC_POS_BUF) const uint POS_BUF = 1;
#define ROCKY_ATTN_N_PAST step_pos[0]
#else
#define ROCKY_ATTN_N_PAST pc.n_past
#endif
#endif
// Token j's key positions end at ROCKY_ATTN_POS(j) (inclusive) and start at cache column
// ROCKY_ATTN_CELL0(j): its sequence's first cell with POS_BUF = 2, else 0.
#if defined(ROCKY_ATTN_SPLIT) || defined(ROCKY_ATTN_STEP)
#define ROCKY_ATTN_POS(j) (POS_BUF == 2u ? step_pos[k_tok_table + 2u * (pc.tok0 + (j))] : ROCKY_ATTN_N_PAST + (j))
#define ROCKY_ATTN_CELL0(j) (POS_BUF == 2u ? step_pos[k_tok_table + 2u * (pc.tok0 + (j)) + 1u] : 0u)
#else
#define ROCKY_ATTN_POS(j) (ROCKY_ATTN_N_PAST + (j))
#define ROCKY_ATTN_CELL0(j) 0u
#endif
layout(binding = 0) readonly buffer Q { float q[]; };
layout(binding = 1) readonly buffer Kc { uint kc[]; };
layout(binding = 1) readonly buffer Kc4 { uvec4 kc4[]; };
// HD > 0: each key's q·k reads K as uvec4 (8 f16 or 4 f32 values) in a loop of constant length
// that the compiler unrolls, so a key's loads are all in flight at once (the element loop issues
// one dependent load per value: on the H200 a decode token's attention took 14 µs per layer at
// depth ≤ 16, tuning-log #24).
layout(constant_id = ROCKY_SC_ATTN_HD) const uint HD = 0;
layout(binding = 2) readonly buffer Vc { uint vc[]; };

const uint DPT = 8;  // max output dims per invocation
const float k_neg = -1e30;
shared float qs[HD_MAX];
shared float ps[gl_WorkGroupSize.x];
shared uint cols[gl_WorkGroupSize.x];  // the block's keys' cache columns (kv_col), for the V loop
shared float red[gl_WorkGroupSize.x];

float k_at(uint e) {
  if (KV_F16 == 0u) return uintBitsToFloat(kc[e]);
  vec2 h = unpackHalf2x16(kc[e >> 1]);
  return (e & 1u) == 0u ? h.x : h.y;
}
// q·k of the key whose K starts at element kb (a multiple of 8 with f16, of 4 with f32), HD values.
float qk_vec(uint kb) {
  float s0 = 0.0, s1 = 0.0;
  if (KV_F16 != 0u) {
    for (uint d = 0u; d < HD; d += 8u) {
      const uvec4 w = kc4[(kb + d) >> 3];
      s0 += dot(vec4(qs[d], qs[d + 1u], qs[d + 2u], qs[d + 3u]), vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)));
      s1 += dot(vec4(qs[d + 4u], qs[d + 5u], qs[d + 6u], qs[d + 7u]), vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w)));
    }
  } else {
    for (uint d = 0u; d < HD; d += 8u) {
      s0 += dot(vec4(qs[d], qs[d + 1u], qs[d + 2u], qs[d + 3u]), uintBitsToFloat(kc4[(kb + d) >> 2]));
      if (d + 4u < HD) s1 += dot(vec4(qs[d + 4u], qs[d + 5u], qs[d + 6u], qs[d + 7u]), uintBitsToFloat(kc4[(kb + d + 4u) >> 2]));
    }
  }
  return s0 + s1;
}
float v_at(uint e) {
  if (KV_F16 == 0u) return uintBitsToFloat(vc[e]);
  vec2 h = unpackHalf2x16(vc[e >> 1]);
  return (e & 1u) == 0u ? h.x : h.y;
}

void main() {
  const uint WG = gl_WorkGroupSize.x;
  const uint t = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, j = gl_WorkGroupID.y;
  const uint D = pc.head_dim;
  const uint kvh = h / (pc.n_head / pc.n_head_kv);
  const uint qbase = pc.q_off + (j * pc.n_head + h) * D;
  for (uint d = t; d < D; d += WG) qs[d] = q[qbase + d] * pc.scale;
  const uint n_kv = ROCKY_ATTN_POS(j) + 1u;
  const uint c0 = ROCKY_ATTN_CELL0(j);
  float m = k_neg, l = 0.0;
  float o[DPT];
  for (uint i = 0u; i < DPT; ++i) o[i] = 0.0;
  barrier();

  const uint k_first = pc.window > 0u && n_kv > pc.window ? n_kv - pc.window : 0u;
#ifdef ROCKY_ATTN_SPLIT
  const uint k_begin = k_first + gl_WorkGroupID.z * spc.chunk;  // this workgroup's chunk
  const uint k_end = min(n_kv, k_begin + spc.chunk);
#else
  const uint k_begin = k_first, k_end = n_kv;
#endif
  for (uint k0 = k_begin; k0 < k_end; k0 += WG) {
    uint p = k0 + t;
    float s = k_neg;
    const uint col = RING != 0u ? kv_col(c0, p, pc.ring, pc.seq_cells) : c0 + p;
    if (RING != 0u) cols[t] = col;
    if (p < k_end) {
      uint kb = pc.k_off + col * pc.n_embd_kv + kvh * D;
      if (HD > 0u) {
        s = qk_vec(kb);
      } else {
        s = 0.0;
        for (uint d = 0u; d < D; ++d) s += qs[d] * k_at(kb + d);
      }
    }
    red[t] = s;
    barrier();
    for (uint r = WG / 2u; r > 0u; r >>= 1) {
      if (t < r) red[t] = max(red[t], red[t + r]);
      barrier();
    }
    float m_new = max(m, red[0]);
    barrier();
    float e = p < k_end ? exp(s - m_new) : 0.0;
    ps[t] = e;
    red[t] = e;
    barrier();
    for (uint r = WG / 2u; r > 0u; r >>= 1) {
      if (t < r) red[t] += red[t + r];
      barrier();
    }
    float alpha = exp(m - m_new);
    l = l * alpha + red[0];
    uint n_blk = min(WG, k_end - k0);
    if (PAIRS != 0u) {
      // Invocation t owns the dim pairs (2·(t + i·WG), +1): one 32-bit load gives both values of
      // an f16 V (when v_off, D and n_embd_kv are even), half the loads of one dim per load.
      for (uint i = 0u; i < DPT / 2u; ++i) {
        uint d = 2u * (t + i * WG);
        if (d >= D) break;
        float a0 = o[2u * i] * alpha, a1 = o[2u * i + 1u] * alpha;
        // Key k0 + c at vb + (its column, or c past column c0 + k0) · n_embd_kv.
        const uint vb = pc.v_off + (RING != 0u ? 0u : (c0 + k0) * pc.n_embd_kv) + kvh * D + d;
        const bool two = d + 1u < D;  // an odd head_dim's last pair has one dim
        if (KV_F16 != 0u && ((pc.v_off | D | pc.n_embd_kv) & 1u) == 0u) {
          for (uint c = 0u; c < n_blk; ++c) {
            const vec2 v = unpackHalf2x16(vc[(vb + (RING != 0u ? cols[c] : c) * pc.n_embd_kv) >> 1]);
            a0 += ps[c] * v.x;
            a1 += ps[c] * v.y;
          }
        } else {
          for (uint c = 0u; c < n_blk; ++c) {
            const uint e = vb + (RING != 0u ? cols[c] : c) * pc.n_embd_kv;
            a0 += ps[c] * v_at(e);
            if (two) a1 += ps[c] * v_at(e + 1u);
          }
        }
        o[2u * i] = a0;
        o[2u * i + 1u] = a1;
      }
    } else {
      for (uint i = 0u; i < DPT; ++i) {
        uint d = t + i * WG;
        if (d >= D) break;
        float acc = o[i] * alpha;
        const uint vb = pc.v_off + (RING != 0u ? 0u : (c0 + k0) * pc.n_embd_kv) + kvh * D + d;
        for (uint c = 0u; c < n_blk; ++c) acc += ps[c] * v_at(vb + (RING != 0u ? cols[c] : c) * pc.n_embd_kv);
        o[i] = acc;
      }
    }
    m = m_new;
    barrier();
  }
#ifdef ROCKY_ATTN_SPLIT
  // Partial state (m, l, o not normalised); a chunk past the token's range: m = -1e30, l = 0.
  const uint row = spc.s_off + ((j * pc.n_head + h) * spc.n_split + gl_WorkGroupID.z) * (D + 2u);
  if (t == 0u) {
    sc[row] = m;
    sc[row + 1u] = l;
  }
  if (PAIRS != 0u) {
    for (uint i = 0u; i < DPT / 2u; ++i) {
      uint d = 2u * (t + i * WG);
      if (d >= D) break;
      sc[row + 2u + d] = o[2u * i];
      if (d + 1u < D) sc[row + 3u + d] = o[2u * i + 1u];
    }
  } else {
    for (uint i = 0u; i < DPT; ++i) {
      uint d = t + i * WG;
      if (d >= D) break;
      sc[row + 2u + d] = o[i];
    }
  }
#else
  if (PAIRS != 0u) {
    for (uint i = 0u; i < DPT / 2u; ++i) {
      uint d = 2u * (t + i * WG);
      if (d >= D) break;
      outv[pc.out_off + (j * pc.n_head + h) * D + d] = o[2u * i] / l;
      if (d + 1u < D) outv[pc.out_off + (j * pc.n_head + h) * D + d + 1u] = o[2u * i + 1u] / l;
    }
  } else {
    for (uint i = 0u; i < DPT; ++i) {
      uint d = t + i * WG;
      if (d >= D) break;
      outv[pc.out_off + (j * pc.n_head + h) * D + d] = o[i] / l;
    }
  }
#endif
}
