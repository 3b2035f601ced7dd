#version 450
// take_cols: out[:, j] = x[:, first_col + j]. Grid: (ceil(ne0 / WG), n_cols). Bindings: 0 x, 1 out.
#include "common/header.glsl"
layout(push_constant) uniform PC { TakeColsPC pc; };
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) writeonly buffer Out { float outv[]; };
void main() {
  uint i = gl_GlobalInvocationID.x, j = gl_WorkGroupID.y;
  if (i >= pc.ne0) return;
  outv[pc.out_off + j * pc.ne0 + i] = x[pc.x_off + (pc.first_col + j) * pc.ne0 + i];
}
