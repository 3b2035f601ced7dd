#version 450
// rms_norm_q8_1: rms_norm whose output is written as q8_1 for the next mul_mmq (fast_abi.h,
// ProducerQ81PC). One workgroup per column. Bindings: 0 x, 1 weight (f32), 2 qs, 3 ds.
#extension GL_EXT_control_flow_attributes : require
#include "common/header.glsl"
#include "fast_abi.h"
layout(push_constant) uniform PC { ProducerQ81PC pc; };
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer Wt { float w[]; };
layout(binding = 2) writeonly buffer Q { uint qs[]; };
layout(binding = 3) writeonly buffer D { vec2 ds[]; };
#include "common/q8_1_store.glsl"
shared float partial[gl_WorkGroupSize.x];

void main() {
  const uint j = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  const uint base = pc.a_off + j * pc.ne0;
  float s = 0.0;
  for (uint i = t; i < pc.ne0; i += gl_WorkGroupSize.x) s += x[base + i] * x[base + i];
  partial[t] = s;
  barrier();
  for (uint h = gl_WorkGroupSize.x / 2u; h > 0u; h >>= 1) {
    if (t < h) partial[t] += partial[t + h];
    barrier();
  }
  const float inv = inversesqrt(partial[0] / float(pc.ne0) + pc.eps);
  const uint nb = pc.ne0 / 32u;
  for (uint b = t; b < nb; b += gl_WorkGroupSize.x) {
    float v[32];
    [[unroll]] for (uint i = 0u; i < 32u; ++i) v[i] = x[base + b * 32u + i] * inv * w[pc.b_off + b * 32u + i];
    store_q8_1(v, j * nb + b);
  }
}
