#version 450
// scale: out[i] = a[i] · s, s = uintBitsToFloat(pc.ne0) (Gemma's embedding × √n_embd).
// Bindings: 0 a, 1 out. Push constants: BinaryPC (b_off unused).
#include "common/header.glsl"
layout(push_constant) uniform PC { BinaryPC pc; };
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 1) writeonly buffer Out { float outv[]; };
void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (i >= pc.n) return;
  outv[pc.out_off + i] = a[pc.a_off + i] * uintBitsToFloat(pc.ne0);
}
