#version 450
// sigmoid_mul (qwen35's attention output gate): out = a · sigmoid(b), in f32. The exponent is
// clamped so that exp never overflows (sigmoid(−80) = 0 in f32 anyway). Bindings: 0 a, 1 b, 2 out.
#include "common/header.glsl"
layout(push_constant) uniform PC { BinaryPC pc; };
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 2) writeonly buffer Out { float outv[]; };
void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (i >= pc.n) return;
  outv[pc.out_off + i] = a[pc.a_off + i] / (1.0 + exp(min(-b[pc.b_off + i], 80.0)));
}
