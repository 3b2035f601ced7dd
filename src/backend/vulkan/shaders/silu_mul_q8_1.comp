#version 450
// silu_mul_q8_1: silu(gate) · up written as q8_1 for the next mul_mmq (fast_abi.h, ProducerQ81PC).
// gate / up [ne0, n_cols] are contiguous, so block k of the output covers f32 elements
// 32k..32k+31 of both. 8 invocations per 32-block (common/q8_1_store.glsl), each reading 4
// consecutive values of gate and of up (one vec4 each when the offsets are 16-byte aligned).
// Grid (x, y) of ceil(ne0/32 · n_cols · 8 / WG) workgroups; WG a multiple of 8.
// Bindings: 0 gate, 1 up, 2 qs, 3 ds.
#extension GL_EXT_control_flow_attributes : require
#include "common/header.glsl"
#include "fast_abi.h"
layout(push_constant) uniform PC { ProducerQ81PC pc; };
layout(binding = 0) readonly buffer G { float gate[]; };
layout(binding = 0) readonly buffer G4 { vec4 gate4[]; };
layout(binding = 1) readonly buffer U { float up[]; };
layout(binding = 1) readonly buffer U4 { vec4 up4[]; };
layout(binding = 2) writeonly buffer Q { uint qs[]; };
layout(binding = 3) writeonly buffer D { vec2 ds[]; };
#include "common/q8_1_store.glsl"

void main() {
  const uint nblk = pc.ne0 / 32u * pc.n_cols;
  const uint gi = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  const uint blk = gi >> 3u;
  const bool live = blk < nblk;
  vec4 g = vec4(0.0), u = vec4(0.0);
  if (live) {
    if (((pc.a_off | pc.b_off) & 3u) == 0u) {
      g = gate4[pc.a_off / 4u + gi];
      u = up4[pc.b_off / 4u + gi];
    } else {
      const uint i = 4u * gi;
      g = vec4(gate[pc.a_off + i], gate[pc.a_off + i + 1u], gate[pc.a_off + i + 2u], gate[pc.a_off + i + 3u]);
      u = vec4(up[pc.b_off + i], up[pc.b_off + i + 1u], up[pc.b_off + i + 2u], up[pc.b_off + i + 3u]);
    }
  }
  store_q8_1_x8(g / (1.0 + exp(-g)) * u, blk, live);
}
