#version 450
// bias_add: out[i] = a[i] + bias[i % ne0]. Bindings: 0 a, 1 bias (f32 weight), 2 out.
#include "common/header.glsl"
layout(push_constant) uniform PC { BinaryPC pc; };
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 2) writeonly buffer Out { float outv[]; };
void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (i >= pc.n) return;
  outv[pc.out_off + i] = a[pc.a_off + i] + b[pc.b_off + i % pc.ne0];
}
