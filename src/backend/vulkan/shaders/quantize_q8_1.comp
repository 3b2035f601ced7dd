#version 450
// quantize_q8_1: x [K, N] f32 → rocky's q8_1 activation layout (fast_abi.h, Q81PC): per token n and
// 32-value block b: 8 packed int8 words qs[(n·nb + b)·8 + w] and ds[n·nb + b] = (d, d·Σq), with
// d = max|x| / 127 and q = round(x / d) (ggml's block_q8_1 values, ggml-quants.c
// quantize_row_q8_1_ref). One invocation per block. Grid: ceil(N·nb / WG) workgroups (x, y).
#include "common/header.glsl"
#include "fast_abi.h"
layout(push_constant) uniform PC { Q81PC pc; };
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) writeonly buffer Q { uint qs[]; };
layout(binding = 2) writeonly buffer D { vec2 ds[]; };
void main() {
  const uint nb = pc.K / 32u;
  const uint id = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (id >= nb * pc.N) return;
  const uint n = id / nb, b = id % nb;
  const uint base = pc.x_off + n * pc.K + b * 32u;
  float amax = 0.0;
  for (uint i = 0u; i < 32u; ++i) amax = max(amax, abs(x[base + i]));
  const float d = amax / 127.0;
  const float id_ = d != 0.0 ? 1.0 / d : 0.0;
  int sum = 0;
  for (uint w = 0u; w < 8u; ++w) {
    uint word = 0u;
    for (uint j = 0u; j < 4u; ++j) {
      float v = x[base + 4u * w + j] * id_;
      int q = int(sign(v) * floor(abs(v) + 0.5));  // roundf: half away from zero, as ggml
      sum += q;
      word |= (uint(q) & 0xFFu) << (8u * j);
    }
    qs[id * 8u + w] = word;
  }
  ds[id] = vec2(d, d * float(sum));
}
