#version 450
// ssm_conv: the causal depthwise conv1d of qwen35's linear-attention layers, with its state,
// then SiLU (graph.hpp SSM_CONV). Mode 0, grid (ceil(C / WG), n_tokens): one output each; mode 1,
// grid (ceil(C / WG), 1): after mode 0 (the recorder's barrier between them), each channel's state
// becomes the last K−1 columns of x̃ = [state | x]. Bindings: 0 x, 1 w (f32 [K, C]), 2 state, 3 out.
#include "common/header.glsl"
layout(push_constant) uniform PC { SsmConvPC pc; };
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer Wt { float w[]; };
layout(binding = 2) buffer State { float st[]; };
layout(binding = 3) writeonly buffer Out { float outv[]; };

// x̃[c, t] for t ≥ −(K−1).
float xt(uint c, int t) {
  return t < 0 ? st[pc.s_off + uint(int(pc.K) - 1 + t) * pc.C + c] : x[pc.x_off + uint(t) * pc.C + c];
}

void main() {
  const uint c = gl_GlobalInvocationID.x;
  if (c >= pc.C) return;
  const int hist = int(pc.K) - 1;
  if (pc.mode == 0u) {
    const int t = int(gl_WorkGroupID.y);
    float acc = 0.0;
    for (uint i = 0u; i < pc.K; ++i) acc += w[pc.w_off + c * pc.K + i] * xt(c, t - hist + int(i));
    outv[pc.out_off + uint(t) * pc.C + c] = acc / (1.0 + exp(min(-acc, 80.0)));
    return;
  }
  // Ascending slots: slot s reads x̃ column n − hist + s, which is either x or a later state slot
  // (s + n > s) not yet overwritten.
  const int n = int(pc.n_tokens);
  for (int s = 0; s < hist; ++s) st[pc.s_off + uint(s) * pc.C + c] = xt(c, n - hist + s);
}
