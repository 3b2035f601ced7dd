#version 450
// matvec (decode, N = 1): y[m0 + m] = Σ_k W[k, m] · x[k]. One workgroup per output row; the
// invocations stride over k and reduce in shared memory. Grid: M workgroups laid out in (x, y)
// (row = y · num_x + x; rows ≥ M exit), so M may exceed the per-dimension count limit (65535).
// Bindings as matmul.
#include "common/header.glsl"
layout(constant_id = ROCKY_SC_WTYPE) const uint WTYPE = 0;
layout(push_constant) uniform PC { MatmulPC pc; };
layout(binding = 0) readonly buffer Wt { uint wdata[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };
#include "common/dequant.glsl"
shared float partial[gl_WorkGroupSize.x];

void main() {
  const uint t = gl_LocalInvocationID.x, m = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (m >= pc.M) return;  // whole workgroup: uniform, before any barrier
  const uint row = pc.w_off + m * pc.row_bytes;
  float s = 0.0;
  for (uint k = t; k < pc.K; k += gl_WorkGroupSize.x) s += dequant_elem(row, k) * x[pc.x_off + k];
  partial[t] = s;
  barrier();
  for (uint h = gl_WorkGroupSize.x / 2u; h > 0u; h >>= 1) {
    if (t < h) partial[t] += partial[t + h];
    barrier();
  }
  if (t == 0u) y[pc.y_off + pc.m0 + m] = partial[0];
}
