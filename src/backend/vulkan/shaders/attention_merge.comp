#version 450
// attention_merge: combines attention_split.comp's (or attention_decode.comp's, or the split
// attention_flash.comp's) n_split partial states of each (head h, token j): M = max_s m_s,
// L = Σ_s l_s · exp(m_s − M), out[d] = Σ_s o_s[d] · exp(m_s − M) / L (the split-softmax identity of
// FlashAttention / flash-decoding). Empty chunks (l = 0, m = -1e30) add nothing; split 0 always
// holds the token's first visible position, so L > 0.
// The splits are spread over the invocations (max and weights w_s = exp(m_s − M) through shared
// memory), and each output dim sums its splits with four independent accumulators, so the loads
// of a long split list are in flight together (one dependent load per split cost ≈ 10 µs per layer
// at 128 splits on the H200: tuning-log #33).
// Grid: (n_head, n_tokens). Bindings: 0 scratch (f32, rows of head_dim + 2), 1 out
// [head_dim · n_head, N]. Invocations own dims d = t, t + WG, …; n_split ≤ 4 · WG (host: ≤ 128).
#include "common/header.glsl"
layout(push_constant) uniform PC { AttnSplitPC pc; };
layout(binding = 0) readonly buffer Scratch { float sc[]; };
layout(binding = 1) writeonly buffer Out { float outv[]; };

const uint S_MAX = 4u * gl_WorkGroupSize.x;
shared float w[S_MAX];                   // per split: exp(m_s − M), then unchanged
shared float red[gl_WorkGroupSize.x];    // reductions over the invocations

void main() {
  const uint WG = gl_WorkGroupSize.x;
  const uint t = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, j = gl_WorkGroupID.y;
  const uint D = pc.a.head_dim, R = D + 2u, S = min(pc.n_split, S_MAX);
  const uint base = pc.s_off + (j * pc.a.n_head + h) * pc.n_split * R;
  float mx = -1e30;
  for (uint s = t; s < S; s += WG) {
    w[s] = sc[base + s * R];
    mx = max(mx, w[s]);
  }
  red[t] = mx;
  barrier();
  for (uint r = WG / 2u; r > 0u; r >>= 1) {
    if (t < r) red[t] = max(red[t], red[t + r]);
    barrier();
  }
  const float M = red[0];
  barrier();
  float lsum = 0.0;
  for (uint s = t; s < S; s += WG) {
    const float e = exp(w[s] - M);
    w[s] = e;
    lsum += sc[base + s * R + 1u] * e;
  }
  red[t] = lsum;
  barrier();
  for (uint r = WG / 2u; r > 0u; r >>= 1) {
    if (t < r) red[t] += red[t + r];
    barrier();
  }
  const float inv = 1.0 / red[0];
  for (uint d = t; d < D; d += WG) {
    float a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    uint s = 0u;
    for (; s + 4u <= S; s += 4u) {
      const uint r = base + s * R + 2u + d;
      a0 += sc[r] * w[s];
      a1 += sc[r + R] * w[s + 1u];
      a2 += sc[r + 2u * R] * w[s + 2u];
      a3 += sc[r + 3u * R] * w[s + 3u];
    }
    for (; s < S; ++s) a0 += sc[base + s * R + 2u + d] * w[s];
    outv[pc.a.out_off + (j * pc.a.n_head + h) * D + d] = ((a0 + a1) + (a2 + a3)) * inv;
  }
}
