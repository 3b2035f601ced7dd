#version 450
// rms_norm: one workgroup per column. Bindings: 0 x, 1 weight (f32), 2 out.
#include "common/header.glsl"
layout(push_constant) uniform PC { RmsNormPC pc; };
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer Wt { float w[]; };
layout(binding = 2) writeonly buffer Out { float outv[]; };
shared float partial[gl_WorkGroupSize.x];

void main() {
  uint j = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  uint base = pc.x_off + j * pc.ne0;
  float s = 0.0;
  for (uint i = t; i < pc.ne0; i += gl_WorkGroupSize.x) s += x[base + i] * x[base + i];
  partial[t] = s;
  barrier();
  for (uint h = gl_WorkGroupSize.x / 2u; h > 0u; h >>= 1) {
    if (t < h) partial[t] += partial[t + h];
    barrier();
  }
  float inv = inversesqrt(partial[0] / float(pc.ne0) + pc.eps);
  for (uint i = t; i < pc.ne0; i += gl_WorkGroupSize.x)
    outv[pc.out_off + j * pc.ne0 + i] = x[base + i] * inv * w[pc.w_off + i];
}
