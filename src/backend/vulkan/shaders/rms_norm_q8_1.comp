#version 450
// rms_norm_q8_1: rms_norm whose output is written as q8_1 for the next mul_mmq (fast_abi.h,
// ProducerQ81PC). One workgroup per column (WG a multiple of 32). Σx² is summed in the same order as
// rms_norm.comp at the same WG (invocation t: x[t], x[t+WG], ... sequentially, then the tree), with
// four loads in flight per step; FLAT (a decode step's few columns, where the dispatch's
// latency is its cost): the tree's log2(WG) barriers become two shared-memory passes. The q8_1 pass: 8 invocations per 32-block
// (common/q8_1_store.glsl), each reading 4 consecutive values of x and w (vec4 when the offsets are
// 16-byte aligned); WG/8 blocks per round, the next round's loads issued before this round's
// reductions. Bindings: 0 x, 1 weight (f32), 2 qs, 3 ds.
#extension GL_EXT_control_flow_attributes : require
#include "common/header.glsl"
#include "fast_abi.h"
layout(push_constant) uniform PC { ProducerQ81PC pc; };
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(binding = 1) readonly buffer Wt { float w[]; };
layout(binding = 1) readonly buffer Wt4 { vec4 w4[]; };
layout(binding = 2) writeonly buffer Q { uint qs[]; };
layout(binding = 3) writeonly buffer D { vec2 ds[]; };
#include "common/q8_1_store.glsl"
layout(constant_id = ROCKY_SC_RMS_FLAT) const bool FLAT = false;
shared float partial[gl_WorkGroupSize.x];
shared float partial2[32];

// x · w values 4q..4q+3 of the column (x at element `base`); 0 past the end.
void load4(uint base, uint q, bool vec, out vec4 xv, out vec4 wv) {
  xv = vec4(0.0);
  wv = vec4(0.0);
  if (4u * q >= pc.ne0) return;
  if (vec) {
    xv = x4[base / 4u + q];
    wv = w4[pc.b_off / 4u + q];
  } else {
    const uint i = base + 4u * q, k = pc.b_off + 4u * q;
    xv = vec4(x[i], x[i + 1u], x[i + 2u], x[i + 3u]);
    wv = vec4(w[k], w[k + 1u], w[k + 2u], w[k + 3u]);
  }
}

void main() {
  const uint WG = gl_WorkGroupSize.x;
  const uint j = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  const uint base = pc.a_off + j * pc.ne0;
  float s = 0.0;
  uint i = t;
  for (; i + 3u * WG < pc.ne0; i += 4u * WG) {
    const float a = x[base + i], b = x[base + i + WG], c = x[base + i + 2u * WG], e = x[base + i + 3u * WG];
    s += a * a;
    s += b * b;
    s += c * c;
    s += e * e;
  }
  for (; i < pc.ne0; i += WG) s += x[base + i] * x[base + i];
  partial[t] = s;
  barrier();
  float ss;
  if (FLAT) {  // the first 32 invocations sum WG/32 partials each, then every invocation the 32
    if (t < 32u) {
      float p = 0.0;
      for (uint i = t; i < WG; i += 32u) p += partial[i];
      partial2[t] = p;
    }
    barrier();
    vec4 q = vec4(0.0);
    for (uint i = 0u; i < 32u; i += 4u) q += vec4(partial2[i], partial2[i + 1u], partial2[i + 2u], partial2[i + 3u]);
    ss = (q.x + q.y) + (q.z + q.w);
  } else {
    for (uint h = WG / 2u; h > 0u; h >>= 1) {
      if (t < h) partial[t] += partial[t + h];
      barrier();
    }
    ss = partial[0];
  }
  const float inv = inversesqrt(ss / float(pc.ne0) + pc.eps);
  const uint nb = pc.ne0 / 32u;
  const bool vec = ((base | pc.b_off) & 3u) == 0u;
  // Round r covers blocks r·WG/8 .. (r+1)·WG/8 - 1; invocation t holds values 4q..4q+3, q = r·WG + t.
  vec4 xv, wv;
  load4(base, t, vec, xv, wv);
  for (uint q0 = 0u; q0 < pc.ne0 / 4u; q0 += WG) {
    const vec4 cx = xv, cw = wv;
    load4(base, q0 + WG + t, vec, xv, wv);
    const uint b = (q0 + t) >> 3u;
    store_q8_1_x8(cx * inv * cw, j * nb + b, b < nb);
  }
}
