#version 450
// take_rows: out[i, j] = x[first_row + i, j] (a row range of every column of x [in_ne0, n]).
// Grid: (ceil(ne0 / WG), n_cols). Bindings: 0 x, 1 out.
#include "common/header.glsl"
layout(push_constant) uniform PC { TakeRowsPC pc; };
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) writeonly buffer Out { float outv[]; };
void main() {
  uint i = gl_GlobalInvocationID.x, j = gl_WorkGroupID.y;
  if (i >= pc.ne0) return;
  outv[pc.out_off + j * pc.ne0 + i] = x[pc.x_off + j * pc.in_ne0 + pc.first_row + i];
}
