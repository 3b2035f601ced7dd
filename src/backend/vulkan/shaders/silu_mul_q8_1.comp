#version 450
// silu_mul_q8_1: silu(gate) · up written as q8_1 for the next mul_mmq (fast_abi.h, ProducerQ81PC).
// One invocation per 32-block; grid (x, y) of ceil(ne0/32 · n_cols / WG) workgroups.
// Bindings: 0 gate, 1 up, 2 qs, 3 ds.
#extension GL_EXT_control_flow_attributes : require
#include "common/header.glsl"
#include "fast_abi.h"
layout(push_constant) uniform PC { ProducerQ81PC pc; };
layout(binding = 0) readonly buffer G { float gate[]; };
layout(binding = 1) readonly buffer U { float up[]; };
layout(binding = 2) writeonly buffer Q { uint qs[]; };
layout(binding = 3) writeonly buffer D { vec2 ds[]; };
#include "common/q8_1_store.glsl"

void main() {
  const uint nb = pc.ne0 / 32u;
  const uint id = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (id >= nb * pc.n_cols) return;
  float v[32];
  [[unroll]] for (uint i = 0u; i < 32u; ++i) {
    float g = gate[pc.a_off + id * 32u + i];
    v[i] = g / (1.0 + exp(-g)) * up[pc.b_off + id * 32u + i];
  }
  store_q8_1(v, id);
}
