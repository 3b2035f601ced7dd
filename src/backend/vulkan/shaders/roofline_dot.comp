#version 450
// roofline: packed int8 dot peak (OpSDot on 4×8-bit packed operands + an add; 8 ops per dot, the
// convention of ../shared/anchors.md). Each chain feeds its accumulator back as the next packed
// operand so the dot cannot be hoisted out of the loop. 8 · CHAINS · iters ops per invocation.
#extension GL_EXT_spirv_intrinsics : require
#extension GL_EXT_control_flow_attributes : require
#include "common/header.glsl"
#include "fast_abi.h"
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4x8(uint a, uint b, spirv_literal int fmt);
layout(constant_id = ROCKY_SC_CHAINS) const uint CHAINS = 8;
layout(push_constant) uniform PC { RooflinePC pc; };
layout(binding = 0) writeonly buffer O { int o[]; };
void main() {
  int a[CHAINS];
  const uint b = uint(pc.seed * 1000.0) * 0x01010101u;
  [[unroll]] for (uint i = 0u; i < CHAINS; ++i) a[i] = int(gl_GlobalInvocationID.x * 7u + i);
  for (uint it = 0u; it < pc.iters; ++it) {
    [[unroll]] for (uint i = 0u; i < CHAINS; ++i) a[i] += sdot4x8(uint(a[i]), b, 0);
  }
  int s = 0;
  [[unroll]] for (uint i = 0u; i < CHAINS; ++i) s ^= a[i];
  o[gl_GlobalInvocationID.x] = s;
}
