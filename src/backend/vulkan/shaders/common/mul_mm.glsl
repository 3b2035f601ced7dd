// Body of mul_mm.comp (f32 shared-memory tiles) and mul_mm_f16.comp (ROCKY_MM_F16: f16 tiles, half
// the shared memory; needs shaderFloat16). y[m0 + m, n] = Σ_k W[k, m] · x[k, n]: weights of any
// type dequant.glsl reads (WTYPE) are dequantized into the shared tile, activations f32 [K, N];
// FMA with f32 accumulators. Same tile mapping as mul_mmq (fast_abi.h; rocky::tune::MatmulTile):
// (BM/WM)·(BN/WN) warps of (WM/TM)·(WN/TN) invocations, TM × TN accumulators each, BK k per stage.
// Grid: (ceil(M / BM), ceil(N / BN)). Bindings: 0 W window (bytes), 1 x f32, 2 y f32.
#extension GL_EXT_control_flow_attributes : require
#include "common/header.glsl"
#include "fast_abi.h"
#ifdef ROCKY_MM_F16
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define TILE_T float16_t
#else
#define TILE_T float
#endif
#include "common/matmul_tile.glsl"
layout(push_constant) uniform PC { MatmulFastPC pc; };
layout(binding = 0) readonly buffer Wt { uint wdata[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };
#include "common/dequant.glsl"

shared TILE_T ws[BK * BM];  // [k][m]
shared TILE_T xs[BK * BN];  // [k][n]

void main() {
  const uint WARP_R = WM / TM, WARP_C = WN / TN, WARPS_M = BM / WM;
  const uint tid = gl_LocalInvocationID.x;
  const uint warp = tid / (WARP_R * WARP_C), lane = tid % (WARP_R * WARP_C);
  const uint r0 = (warp % WARPS_M) * WM + lane % WARP_R;
  const uint c0 = (warp / WARPS_M) * WN + lane / WARP_R;
  const uint mb = gl_WorkGroupID.x * BM, nb = gl_WorkGroupID.y * BN;
  float acc[TM * TN];
  [[unroll]] for (uint a = 0u; a < TM * TN; ++a) acc[a] = 0.0;
  for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
    for (uint t = tid; t < BM * BK; t += gl_WorkGroupSize.x) {
      uint k = t % BK, m = t / BK;  // consecutive invocations: consecutive k of one row
      float v = 0.0;
      if (mb + m < pc.M && k0 + k < pc.K) v = dequant_elem(pc.w_off + (mb + m) * pc.row_bytes, k0 + k);
      ws[k * BM + m] = TILE_T(v);
    }
    for (uint t = tid; t < BN * BK; t += gl_WorkGroupSize.x) {
      uint k = t % BK, n = t / BK;
      float v = 0.0;
      if (nb + n < pc.N && k0 + k < pc.K) v = x[pc.x_off + (nb + n) * pc.K + k0 + k];
      xs[k * BN + n] = TILE_T(v);
    }
    barrier();
    for (uint k = 0u; k < BK; ++k) {
      float wv[TM], xv[TN];
      [[unroll]] for (uint i = 0u; i < TM; ++i) wv[i] = float(ws[k * BM + r0 + i * WARP_R]);
      [[unroll]] for (uint j = 0u; j < TN; ++j) xv[j] = float(xs[k * BN + c0 + j * WARP_C]);
      [[unroll]] for (uint i = 0u; i < TM; ++i)
        [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i * TN + j] = fma(wv[i], xv[j], acc[i * TN + j]);
    }
    barrier();
  }
  [[unroll]] for (uint i = 0u; i < TM; ++i) {
    uint m = mb + r0 + i * WARP_R;
    if (m >= pc.M) continue;
    [[unroll]] for (uint j = 0u; j < TN; ++j) {
      uint n = nb + c0 + j * WARP_C;
      if (n < pc.N) y[pc.y_off + n * pc.ldy + pc.m0 + m] = acc[i * TN + j];
    }
  }
}
