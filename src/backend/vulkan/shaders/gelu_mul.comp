#version 450
// gelu_mul (Gemma's GeGLU): out = gelu_tanh(a) · b with ggml's tanh approximation
// gelu(x) = 0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²))), in f32 (ggml-cpu reads GELU from an f16
// table; exact f32 is what ../shared/reference/README.md measures as the ideal). The tanh argument
// is clamped to ±10 (tanh(10) = 1 in f32) so that no driver's exp-based tanh overflows to NaN.
// Bindings: 0 a (gate), 1 b (up), 2 out.
#include "common/header.glsl"
layout(push_constant) uniform PC { BinaryPC pc; };
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 2) writeonly buffer Out { float outv[]; };
void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (i >= pc.n) return;
  const float x = a[pc.a_off + i];
  const float t = clamp(0.7978845608028654 * x * (1.0 + 0.044715 * x * x), -10.0, 10.0);
  outv[pc.out_off + i] = 0.5 * x * (1.0 + tanh(t)) * b[pc.b_off + i];
}
