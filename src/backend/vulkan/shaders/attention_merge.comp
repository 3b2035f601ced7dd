#version 450
// attention_merge: combines attention_split.comp's n_split partial states of each (head h,
// token j): M = max_s m_s, L = Σ_s l_s · exp(m_s − M), out[d] = Σ_s o_s[d] · exp(m_s − M) / L
// (the split-softmax identity of FlashAttention / flash-decoding). Empty chunks (l = 0, m = -1e30)
// add nothing; split 0 always holds the token's first visible position, so L > 0.
// Grid: (n_head, n_tokens). Bindings: 0 scratch (f32, rows of head_dim + 2), 1 out
// [head_dim · n_head, N]. Invocations own dims d = t, t + WG, …
#include "common/header.glsl"
layout(push_constant) uniform PC { AttnSplitPC pc; };
layout(binding = 0) readonly buffer Scratch { float sc[]; };
layout(binding = 1) writeonly buffer Out { float outv[]; };

void main() {
  const uint WG = gl_WorkGroupSize.x;
  const uint t = gl_LocalInvocationID.x, h = gl_WorkGroupID.x, j = gl_WorkGroupID.y;
  const uint D = pc.a.head_dim;
  const uint base = pc.s_off + (j * pc.a.n_head + h) * pc.n_split * (D + 2u);
  float mx = -1e30;
  for (uint s = 0u; s < pc.n_split; ++s) mx = max(mx, sc[base + s * (D + 2u)]);
  float L = 0.0;
  for (uint s = 0u; s < pc.n_split; ++s) {
    const uint r = base + s * (D + 2u);
    L += sc[r + 1u] * exp(sc[r] - mx);
  }
  const float inv = 1.0 / L;
  for (uint d = t; d < D; d += WG) {
    float acc = 0.0;
    for (uint s = 0u; s < pc.n_split; ++s) {
      const uint r = base + s * (D + 2u);
      acc += sc[r + 2u + d] * exp(sc[r] - mx);
    }
    outv[pc.a.out_off + (j * pc.a.n_head + h) * D + d] = acc * inv;
  }
}
