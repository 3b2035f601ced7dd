#version 450
// rms_norm_vec: out[:, j] = x[:, j] / sqrt(mean(x[:, j]²) + eps) · w, like rms_norm.comp (up to
// the order of the Σx² summation) for columns whose ne0 is a multiple of 4 with x, w and out at
// element offsets that are multiples of 4 — the decode token's norm in one short dispatch. One
// workgroup per column; invocation t holds the PER vec4 t, t + WG, … of x in registers (one load
// round; no second read of x for the output), Σx² is reduced in shared memory in two passes (the
// first 32 invocations sum WG/32 partials each, then every invocation sums those 32): two
// barriers, no tree. WG a power of two ≥ 32.
// Bindings: 0 x, 1 weight (f32), 2 out (all read as vec4). Push constants: RmsNormPC.
#include "common/header.glsl"
#include "fast_abi.h"
layout(constant_id = ROCKY_SC_RMS_PER) const uint PER = 1;
layout(push_constant) uniform PC { RmsNormPC pc; };
layout(binding = 0) readonly buffer X { vec4 x[]; };
layout(binding = 1) readonly buffer Wt { vec4 w[]; };
layout(binding = 2) writeonly buffer Out { vec4 outv[]; };
shared float part[gl_WorkGroupSize.x];
shared float part2[32];

void main() {
  const uint WG = gl_WorkGroupSize.x, t = gl_LocalInvocationID.x, j = gl_WorkGroupID.x;
  const uint n4 = pc.ne0 / 4u;
  const uint xb = pc.x_off / 4u + j * n4, ob = pc.out_off / 4u + j * n4, wb = pc.w_off / 4u;
  vec4 v[8];  // PER used (≤ 8, the host checks)
  float s = 0.0;
  for (uint i = 0u; i < PER; ++i) {
    const uint e = t + i * WG;
    v[i] = e < n4 ? x[xb + e] : vec4(0.0);
    s += dot(v[i], v[i]);
  }
  part[t] = s;
  barrier();
  if (t < 32u) {
    float p = 0.0;
    for (uint i = t; i < WG; i += 32u) p += part[i];
    part2[t] = p;
  }
  barrier();
  vec4 q = vec4(0.0);
  for (uint i = 0u; i < 32u; i += 4u) q += vec4(part2[i], part2[i + 1u], part2[i + 2u], part2[i + 3u]);
  const float inv = inversesqrt(((q.x + q.y) + (q.z + q.w)) / float(pc.ne0) + pc.eps);
  for (uint i = 0u; i < PER; ++i) {
    const uint e = t + i * WG;
    if (e < n4) outv[ob + e] = v[i] * inv * w[wb + e];
  }
}
