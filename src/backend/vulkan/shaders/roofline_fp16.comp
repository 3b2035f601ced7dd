#version 450
// roofline: FP16 FMA peak with f16vec4 (needs shaderFloat16). 2 · 4 · CHAINS · iters FLOP per
// invocation.
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "common/header.glsl"
#include "fast_abi.h"
layout(constant_id = ROCKY_SC_CHAINS) const uint CHAINS = 8;
layout(push_constant) uniform PC { RooflinePC pc; };
layout(binding = 0) writeonly buffer O { vec4 o[]; };
void main() {
  f16vec4 a[CHAINS];
  const f16vec4 b = f16vec4(float16_t(pc.seed), float16_t(pc.seed * 0.5), float16_t(pc.seed * 0.25), float16_t(pc.seed));
  const f16vec4 c = f16vec4(float16_t(1e-3));
  [[unroll]] for (uint i = 0u; i < CHAINS; ++i) a[i] = f16vec4(float16_t(float((gl_GlobalInvocationID.x + i) & 7u)));
  for (uint it = 0u; it < pc.iters; ++it) {
    [[unroll]] for (uint i = 0u; i < CHAINS; ++i) a[i] = fma(a[i], b, c);
  }
  f16vec4 s = f16vec4(float16_t(0));
  [[unroll]] for (uint i = 0u; i < CHAINS; ++i) s += a[i];
  o[gl_GlobalInvocationID.x] = vec4(s);
}
