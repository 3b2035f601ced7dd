#version 450
// attention_split (decode at depth; flash-decoding): attention.comp's online softmax over one
// chunk of the key range, so that a decode token's n_head workgroups become n_head · n_split and
// the GPU is filled at any depth. Workgroup (h, j, s) visits positions [s · chunk, min((s + 1) ·
// chunk, n_past + j + 1)) of query head h, token j, and writes its partial state (m, l, o[head_dim],
// o not normalised) to scratch row (j · n_head + h) · n_split + s; attention_merge.comp combines
// the rows. A chunk past the token's last position writes m = -1e30, l = 0 (merged as nothing).
// Each invocation owns output dims d = t + i·WG (i < DPT), head_dim ≤ DPT·WG (host-checked).
// Grid: (n_head, n_tokens, n_split). Bindings: 0 q, 1 K cache, 2 V cache (uint words: f32 bits,
// or packed f16 pairs when KV_F16 = 1), 3 scratch (f32; the merge writes the output), 4 the step
// buffer (POS_BUF = 1) or a dummy.
#include "common/header.glsl"
layout(constant_id = ROCKY_SC_KV_F16) const uint KV_F16 = 0;
layout(constant_id = ROCKY_SC_HD_MAX) const uint HD_MAX = 256;
layout(push_constant) uniform PC { AttnSplitPC pc; };
layout(binding = 0) readonly buffer Q { float q[]; };
layout(binding = 1) readonly buffer Kc { uint kc[]; };
layout(binding = 2) readonly buffer Vc { uint vc[]; };
layout(binding = 3) writeonly buffer Scratch { float sc[]; };
// [N4] replayed decode: n_past from the step buffer ([0]), the grid sized for the whole cache
// (splits past the token's range write the empty state).
layout(constant_id = ROCKY_SC_POS_BUF) const uint POS_BUF = 0;
layout(binding = 4) readonly buffer Step { uint step_pos[]; };

const uint DPT = 8;  // max output dims per invocation
const float k_neg = -1e30;
shared float qs[HD_MAX];
shared float ps[gl_WorkGroupSize.x];
shared float red[gl_WorkGroupSize.x];

float k_at(uint e) {
  if (KV_F16 == 0u) return uintBitsToFloat(kc[e]);
  vec2 h = unpackHalf2x16(kc[e >> 1]);
  return (e & 1u) == 0u ? h.x : h.y;
}
float v_at(uint e) {
  if (KV_F16 == 0u) return uintBitsToFloat(vc[e]);
  vec2 h = unpackHalf2x16(vc[e >> 1]);
  return (e & 1u) == 0u ? h.x : h.y;
}

void main() {
  const uint WG = gl_WorkGroupSize.x;
  const uint t = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, j = gl_WorkGroupID.y, sp = gl_WorkGroupID.z;
  const uint D = pc.a.head_dim;
  const uint kvh = h / (pc.a.n_head / pc.a.n_head_kv);
  const uint qbase = pc.a.q_off + (j * pc.a.n_head + h) * D;
  for (uint d = t; d < D; d += WG) qs[d] = q[qbase + d] * pc.a.scale;
  const uint n_kv = (POS_BUF != 0u ? step_pos[0] : pc.a.n_past) + j + 1u;
  // Sliding window W > 0: the token sees only p > n_past + j − W; chunks count from there.
  const uint k_first = pc.a.window > 0u && n_kv > pc.a.window ? n_kv - pc.a.window : 0u;
  const uint k_begin = k_first + sp * pc.chunk;
  const uint k_end = min(n_kv, k_begin + pc.chunk);
  float m = k_neg, l = 0.0;
  float o[DPT];
  for (uint i = 0u; i < DPT; ++i) o[i] = 0.0;
  barrier();

  for (uint k0 = k_begin; k0 < k_end; k0 += WG) {
    uint p = k0 + t;
    float s = k_neg;
    if (p < k_end) {
      uint kb = pc.a.k_off + p * pc.a.n_embd_kv + kvh * D;
      s = 0.0;
      for (uint d = 0u; d < D; ++d) s += qs[d] * k_at(kb + d);
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
    for (uint i = 0u; i < DPT; ++i) {
      uint d = t + i * WG;
      if (d >= D) break;
      float acc = o[i] * alpha;
      uint vb = pc.a.v_off + k0 * pc.a.n_embd_kv + kvh * D + d;
      for (uint c = 0u; c < n_blk; ++c) acc += ps[c] * v_at(vb + c * pc.a.n_embd_kv);
      o[i] = acc;
    }
    m = m_new;
    barrier();
  }
  const uint row = pc.s_off + ((j * pc.a.n_head + h) * pc.n_split + sp) * (D + 2u);
  if (t == 0u) {
    sc[row] = m;
    sc[row + 1u] = l;
  }
  for (uint i = 0u; i < DPT; ++i) {
    uint d = t + i * WG;
    if (d >= D) break;
    sc[row + 2u + d] = o[i];
  }
}
