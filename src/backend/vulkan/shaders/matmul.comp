#version 450
// matmul: y[m0 + m, n] = Σ_k W[k, m] · x[k, n] — a simple shared-memory tiled kernel.
// Workgroup (BM/TM)·(BN/TN) invocations computes a BM × BN tile of y; each invocation a TM × TN
// block of accumulators (rows tr + a·(BM/TM), tokens tc + b·(BN/TN)). W (any WTYPE) is
// dequantized once per tile element into shared memory, x staged likewise; every bound is checked
// so M, K, N need not be multiples of any tile. Grid: (ceil(M / BM), ceil(N / BN)).
// Bindings: 0 W window (bytes), 1 x [K, N] f32, 2 y [ldy, N] f32.
#include "common/header.glsl"
layout(constant_id = ROCKY_SC_WTYPE) const uint WTYPE = 0;
layout(constant_id = ROCKY_SC_BM) const uint BM = 32;
layout(constant_id = ROCKY_SC_BN) const uint BN = 32;
layout(constant_id = ROCKY_SC_BK) const uint BK = 16;
layout(constant_id = ROCKY_SC_TM) const uint TM = 2;
layout(constant_id = ROCKY_SC_TN) const uint TN = 2;
layout(push_constant) uniform PC { MatmulPC pc; };
layout(binding = 0) readonly buffer Wt { uint wdata[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };
#include "common/dequant.glsl"

shared float ws[BK * BM];  // [k][m]
shared float xs[BK * BN];  // [k][n]

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint RT = BM / TM;  // invocations along rows
  const uint tr = tid % RT, tc = tid / RT;
  const uint mb = gl_WorkGroupID.x * BM, nb = gl_WorkGroupID.y * BN;
  float acc[TM * TN];
  for (uint a = 0u; a < TM * TN; ++a) acc[a] = 0.0;

  for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
    for (uint idx = tid; idx < BM * BK; idx += gl_WorkGroupSize.x) {
      uint m = idx / BK, k = idx % BK;
      float v = 0.0;
      if (mb + m < pc.M && k0 + k < pc.K) v = dequant_elem(pc.w_off + (mb + m) * pc.row_bytes, k0 + k);
      ws[k * BM + m] = v;
    }
    for (uint idx = tid; idx < BN * BK; idx += gl_WorkGroupSize.x) {
      uint n = idx / BK, k = idx % BK;
      float v = 0.0;
      if (nb + n < pc.N && k0 + k < pc.K) v = x[pc.x_off + (nb + n) * pc.K + k0 + k];
      xs[k * BN + n] = v;
    }
    barrier();
    for (uint k = 0u; k < BK; ++k) {
      for (uint a = 0u; a < TM; ++a) {
        float wv = ws[k * BM + tr + a * RT];
        for (uint b = 0u; b < TN; ++b) acc[a * TN + b] += wv * xs[k * BN + tc + b * (BN / TN)];
      }
    }
    barrier();
  }
  for (uint a = 0u; a < TM; ++a) {
    uint m = mb + tr + a * RT;
    if (m >= pc.M) continue;
    for (uint b = 0u; b < TN; ++b) {
      uint n = nb + tc + b * (BN / TN);
      if (n < pc.N) y[pc.y_off + n * pc.ldy + pc.m0 + m] = acc[a * TN + b];
    }
  }
}
