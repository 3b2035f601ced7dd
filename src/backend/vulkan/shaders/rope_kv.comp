#version 450
// rope_kv (decode): one layer's rope of Q, rope of K and the K and V cache stores in one
// dispatch (was four: rope Q, rope K, kv_store K, kv_store V). Same rotation as rope.comp (token j
// at position n_past + j; n_past from the step buffer when POS_BUF = 1): theta_i = pos ·
// freq_scale · freq_base^(-2i / n_rot) / ff[i]; NORMAL rotates (x[2i], x[2i+1]), NEOX (x[i],
// x[i + n_rot/2]); dims ≥ n_rot pass through. Stores as kv_store.comp (f16: saturated pairs).
// One invocation per output pair (2p, 2p+1) of one head: each element is computed on its own (in
// NEOX mode the pair's two elements may rotate with different partners), so an f16 pair is
// written whole by one invocation. Grid: (ceil(head_dim/2 / WG), n_head + 2·n_head_kv, n_tokens);
// workgroup row y: < n_head a Q head (→ qo), then the K heads (→ K cache column), then the V heads
// (copied to the V cache column). Bindings: 0 q, 1 k, 2 v (f32 [head_dim·heads, N]), 3 ff
// (f32 [n_rot/2], a dummy when has_ff = 0), 4 qo, 5 K cache, 6 V cache (uint words), 7 step.
#include "common/header.glsl"
layout(constant_id = ROCKY_SC_KV_F16) const uint KV_F16 = 0;
layout(constant_id = ROCKY_SC_POS_BUF) const uint POS_BUF = 0;
layout(push_constant) uniform PC { RopeKvPC pc; };
layout(binding = 0) readonly buffer Qb { float q[]; };
layout(binding = 1) readonly buffer Kb { float k[]; };
layout(binding = 2) readonly buffer Vb { float v[]; };
layout(binding = 3) readonly buffer FF { float ff[]; };
layout(binding = 4) writeonly buffer QO { float qo[]; };
layout(binding = 5) writeonly buffer Kc { uint kc[]; };
layout(binding = 6) writeonly buffer Vc { uint vc[]; };
layout(binding = 7) readonly buffer Step { uint step_pos[]; };

const float k_f16_max = 65504.0;
vec2 saturate_f16(vec2 x) {
  vec2 c = clamp(x, vec2(-k_f16_max), vec2(k_f16_max));
  return mix(c, x, isnan(x));
}

// Rotated element e (< n_rot): out = second ? x[ia]·s + x[ib]·c : x[ia]·c − x[ib]·s at angle it.
void pair_of(uint e, out uint ia, out uint ib, out uint it, out bool second) {
  if (pc.mode == k_rope_neox) {
    const uint hf = pc.n_rot / 2u;
    second = e >= hf;
    it = second ? e - hf : e;
    ia = it;
    ib = it + hf;
  } else {
    it = e / 2u;
    second = (e & 1u) != 0u;
    ia = 2u * it;
    ib = ia + 1u;
  }
}
float angle(uint it, float pos) {
  float theta = pos * pc.freq_scale * pow(pc.freq_base, -2.0 * float(it) / float(pc.n_rot));
  if (pc.has_ff != 0u) theta /= ff[pc.ff_off + it];
  return theta;
}
// RES = element E of the rotated head starting at X[BASE].
#define ROPE_ELEM(X, BASE, E, POS, RES)                          \
  {                                                              \
    const uint e_ = (E);                                         \
    if (e_ >= pc.n_rot) {                                        \
      RES = X[(BASE) + e_];                                      \
    } else {                                                     \
      uint ia_, ib_, it_;                                        \
      bool sc_;                                                  \
      pair_of(e_, ia_, ib_, it_, sc_);                           \
      const float th_ = angle(it_, POS);                         \
      const float c_ = cos(th_), s_ = sin(th_);                  \
      const float a_ = X[(BASE) + ia_], b_ = X[(BASE) + ib_];    \
      RES = sc_ ? a_ * s_ + b_ * c_ : a_ * c_ - b_ * s_;         \
    }                                                            \
  }

void store_pair(uint kv, uint idx, vec2 r) {  // idx: element index of r.x in the cache (even)
  if (KV_F16 == 0u) {
    if (kv == 0u) {
      kc[idx] = floatBitsToUint(r.x);
      kc[idx + 1u] = floatBitsToUint(r.y);
    } else {
      vc[idx] = floatBitsToUint(r.x);
      vc[idx + 1u] = floatBitsToUint(r.y);
    }
  } else {
    const uint w = packHalf2x16(saturate_f16(r));
    if (kv == 0u) {
      kc[idx / 2u] = w;
    } else {
      vc[idx / 2u] = w;
    }
  }
}

void main() {
  const uint p = gl_GlobalInvocationID.x, y = gl_WorkGroupID.y, j = gl_WorkGroupID.z;
  if (p >= pc.head_dim / 2u) return;
  const uint n_past = POS_BUF == 1u ? step_pos[0] : pc.n_past;
  const uint e = 2u * p;
  const uint n_embd_kv = pc.head_dim * pc.n_head_kv;
  // POS_BUF = 2: token j's own position and cache column (abi.h's k_tok_table).
  const uint tpos = POS_BUF == 2u ? step_pos[k_tok_table + 2u * j] : n_past + j;
  const uint col = kv_col(POS_BUF == 2u ? step_pos[k_tok_table + 2u * j + 1u] : 0u, tpos, pc.ring, pc.seq_cells);
  vec2 r;
  if (y < pc.n_head) {
    const float pos = float(tpos);
    const uint base = pc.q_off + (j * pc.n_head + y) * pc.head_dim;
    ROPE_ELEM(q, base, e, pos, r.x)
    ROPE_ELEM(q, base, e + 1u, pos, r.y)
    const uint o = pc.qo_off + (j * pc.n_head + y) * pc.head_dim + e;
    qo[o] = r.x;
    qo[o + 1u] = r.y;
  } else if (y < pc.n_head + pc.n_head_kv) {
    const float pos = float(tpos);
    const uint hk = y - pc.n_head;
    const uint base = pc.k_off + j * n_embd_kv + hk * pc.head_dim;
    ROPE_ELEM(k, base, e, pos, r.x)
    ROPE_ELEM(k, base, e + 1u, pos, r.y)
    store_pair(0u, pc.kc_off + col * n_embd_kv + hk * pc.head_dim + e, r);
  } else {
    const uint hv = y - pc.n_head - pc.n_head_kv;
    const uint src = pc.v_off + j * n_embd_kv + hv * pc.head_dim + e;
    store_pair(1u, pc.vc_off + col * n_embd_kv + hv * pc.head_dim + e, vec2(v[src], v[src + 1u]));
  }
}
