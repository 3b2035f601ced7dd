#version 450
// roofline: memory bandwidth. dst[i] = src[i] over n_vec4 uvec4 elements, grid-stride; bytes
// counted = read + written = 32 · n_vec4.
#include "common/header.glsl"
#include "fast_abi.h"
layout(push_constant) uniform PC { RooflinePC pc; };
layout(binding = 0) readonly buffer S { uvec4 src[]; };
layout(binding = 1) writeonly buffer D { uvec4 dst[]; };
void main() {
  const uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  for (; i < pc.n_vec4; i += stride) dst[i] = src[i];
}
