#version 450
// matvec_mmq (decode, N = 1): y[m0 + m] = Σ_k W[k, m] · x[k] with W in rocky's mmq repack layout
// (ops/matmul_fast.hpp; the copy fast::upload_for_mmq makes at load for q4_0, q8_0, q4_K, q6_K)
// and f32 activations x (no q8_1 quantization: the only error is f32 rounding).
//
// A row is read as 16-byte units (uvec4): without nibbles unit u holds the int8 values
// 16u .. 16u + 15 (half u & 1 of block u / 2); with NIB (q4_K only) unit u is block u as nibble
// pairs, byte i = q[i] | q[i + 16] << 4. Per block the scale pair s (binding 1) gives
//   q8_0, q4_0, q6_K:  s.x · Σ_{i<16} q_i x_i + s.y · Σ_{i≥16} q_i x_i   (q8_0 / q4_0: s.x = s.y)
//   q4_K:              s.x · Σ q_i x_i + s.y · Σ x_i                      (s.y = −dmin · m)
// which is Σ dequantize_row(W)_i · x_i (repack_for_mmq is bit-exact with ggml's dequantization).
//
// A workgroup of WG invocations computes ROWS consecutive rows; for each row its invocations
// stride over the row's units (invocation t reads units t, t + WG, …: consecutive invocations read
// consecutive 16-byte chunks), accumulate in f32, then the ROWS partial sums are reduced in
// shared memory (a tree; WG a power of two, WG ≥ ROWS; no subgroup operations). Grid: ceil(M /
// ROWS) workgroups laid out in (x, y) (group = y · num_x + x), so M may exceed 65535 · ROWS; rows
// ≥ M are skipped (uniformly, no early return before the barriers).
// Bindings: 0 W values (uvec4, row stride K/16, or K/32 with NIB, at uvec4 offset wq_off), 1 W
// scale pairs (vec2, row stride K/32, at vec2 offset ws_off), 2 x [K] (f32 at element offset
// x_off), 3 y (f32, element y_off + m0 + m). Push constants: MatmulMmqPC (N and ldy unused).
// Specialization: ROCKY_SC_WG (WG), ROCKY_SC_WTYPE, ROCKY_SC_BM (ROWS), ROCKY_SC_MMQ_NIB.
#include "common/header.glsl"
#include "fast_abi.h"
layout(constant_id = ROCKY_SC_WTYPE) const uint WTYPE = 12;
layout(constant_id = ROCKY_SC_BM) const uint ROWS = 1;
layout(constant_id = ROCKY_SC_MMQ_NIB) const bool NIB = false;
layout(push_constant) uniform PC { MatmulMmqPC pc; };
layout(binding = 0) readonly buffer Wq { uvec4 wq[]; };
layout(binding = 1) readonly buffer Ws { vec2 ws[]; };
layout(binding = 2) readonly buffer X { float x[]; };
layout(binding = 3) writeonly buffer Y { float y[]; };

const bool NIBBLES = NIB && WTYPE == 12u;
shared float red[ROWS * gl_WorkGroupSize.x];

vec4 x4(uint b) { return vec4(x[b], x[b + 1u], x[b + 2u], x[b + 3u]); }
vec4 i8x4(uint w) { return vec4(int(w << 24) >> 24, int(w << 16) >> 24, int(w << 8) >> 24, int(w) >> 24); }
vec4 lo4(uint w) { return vec4(w & 15u, (w >> 8) & 15u, (w >> 16) & 15u, (w >> 24) & 15u); }
vec4 hi4(uint w) { return vec4((w >> 4) & 15u, (w >> 12) & 15u, (w >> 20) & 15u, w >> 28); }

// (Σ_i int8(byte i of q) · x[xb + i], Σ_i x[xb + i]) over the 16 bytes of q.
vec2 dot16(uvec4 q, uint xb) {
  vec2 s = vec2(0.0);
  for (uint j = 0u; j < 4u; ++j) {
    const vec4 xv = x4(xb + 4u * j);
    s += vec2(dot(i8x4(q[j]), xv), dot(xv, vec4(1.0)));
  }
  return s;
}

// Nibble pairs: (Σ lo_i · x[xb + i] + hi_i · x[xb + 16 + i], Σ of the 32 x) over the 16 bytes.
vec2 dot16_nib(uvec4 q, uint xb) {
  vec2 s = vec2(0.0);
  for (uint j = 0u; j < 4u; ++j) {
    const vec4 xl = x4(xb + 4u * j), xh = x4(xb + 16u + 4u * j);
    s += vec2(dot(lo4(q[j]), xl) + dot(hi4(q[j]), xh), dot(xl + xh, vec4(1.0)));
  }
  return s;
}

void main() {
  const uint WG = gl_WorkGroupSize.x;
  const uint t = gl_LocalInvocationID.x;
  const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint nb = pc.K / 32u;                  // blocks (scale pairs) per row
  const uint U = NIBBLES ? nb : 2u * nb;       // 16-byte units per row
  for (uint r = 0u; r < ROWS; ++r) {
    const uint m = g * ROWS + r;
    float acc = 0.0;
    if (m < pc.M) {
      const uint qrow = pc.wq_off + m * U, srow = pc.ws_off + m * nb;
      for (uint u = t; u < U; u += WG) {
        const uvec4 q = wq[qrow + u];
        if (NIBBLES) {
          const vec2 d = dot16_nib(q, pc.x_off + 32u * u);
          acc += dot(ws[srow + u], d);
        } else {
          const vec2 s = ws[srow + (u >> 1)];
          const vec2 d = dot16(q, pc.x_off + 16u * u);
          if (WTYPE == 12u) {
            acc += dot(s, d);
          } else {
            acc += ((u & 1u) == 0u ? s.x : s.y) * d.x;
          }
        }
      }
    }
    red[r * WG + t] = acc;
  }
  barrier();
  for (uint h = WG / 2u; h > 0u; h >>= 1) {
    if (t < h) {
      for (uint r = 0u; r < ROWS; ++r) red[r * WG + t] += red[r * WG + t + h];
    }
    barrier();
  }
  if (t < ROWS && g * ROWS + t < pc.M) y[pc.y_off + pc.m0 + g * ROWS + t] = red[t * WG];
}
