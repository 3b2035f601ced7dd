#version 450
// roofline: FP32 FMA peak. CHAINS independent vec4 fma chains per invocation (4·CHAINS scalar
// chains), `iters` iterations: 2 · 4 · CHAINS · iters FLOP per invocation.
#extension GL_EXT_control_flow_attributes : require
#include "common/header.glsl"
#include "fast_abi.h"
layout(constant_id = ROCKY_SC_CHAINS) const uint CHAINS = 8;
layout(push_constant) uniform PC { RooflinePC pc; };
layout(binding = 0) writeonly buffer O { vec4 o[]; };
void main() {
  vec4 a[CHAINS];
  const vec4 b = vec4(pc.seed, pc.seed * 0.5, pc.seed * 0.25, pc.seed * 0.125);
  const vec4 c = vec4(1e-7);
  [[unroll]] for (uint i = 0u; i < CHAINS; ++i) a[i] = vec4(float(gl_GlobalInvocationID.x + i));
  for (uint it = 0u; it < pc.iters; ++it) {
    [[unroll]] for (uint i = 0u; i < CHAINS; ++i) a[i] = fma(a[i], b, c);
  }
  vec4 s = vec4(0);
  [[unroll]] for (uint i = 0u; i < CHAINS; ++i) s += a[i];
  o[gl_GlobalInvocationID.x] = s;
}
