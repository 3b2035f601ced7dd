#version 450
// quantize_q8_1: x [K, N] f32 → rocky's q8_1 activation layout (fast_abi.h, Q81PC): per token n and
// 32-value block b: 8 packed int8 words qs[(n·nb + b)·8 + w] and ds[n·nb + b] = (d, d·Σq), with
// d = max|x| / 127 and q = round(x / d) (ggml's block_q8_1 values, ggml-quants.c
// quantize_row_q8_1_ref). x is contiguous, so block k = n·nb + b covers elements 32k..32k+31.
// 8 invocations per block (common/q8_1_store.glsl), each reading 4 consecutive values (one vec4
// when x_off is 16-byte aligned). Grid: ceil(N·nb·8 / WG) workgroups (x, y); WG a multiple of 8.
#extension GL_EXT_control_flow_attributes : require
#include "common/header.glsl"
#include "fast_abi.h"
layout(push_constant) uniform PC { Q81PC pc; };
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(binding = 1) writeonly buffer Q { uint qs[]; };
layout(binding = 2) writeonly buffer D { vec2 ds[]; };
#include "common/q8_1_store.glsl"

void main() {
  const uint nblk = pc.K / 32u * pc.N;
  const uint gi = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  const uint blk = gi >> 3u;
  const bool live = blk < nblk;
  vec4 v = vec4(0.0);
  if (live) {
    if ((pc.x_off & 3u) == 0u) {
      v = x4[pc.x_off / 4u + gi];
    } else {
      const uint i = pc.x_off + 4u * gi;
      v = vec4(x[i], x[i + 1u], x[i + 2u], x[i + 3u]);
    }
  }
  store_q8_1_x8(v, blk, live);
}
