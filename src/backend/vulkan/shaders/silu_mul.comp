#version 450
// silu_mul: out = silu(a) · b = a / (1 + exp(-a)) · b. Bindings: 0 a (gate), 1 b (up), 2 out.
#include "common/header.glsl"
layout(push_constant) uniform PC { BinaryPC pc; };
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 2) writeonly buffer Out { float outv[]; };
void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (i >= pc.n) return;
  float g = a[pc.a_off + i];
  outv[pc.out_off + i] = g / (1.0 + exp(-g)) * b[pc.b_off + i];
}
