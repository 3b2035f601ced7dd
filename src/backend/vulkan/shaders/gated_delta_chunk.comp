#version 450
// gated_delta_chunk: the gated delta rule of qwen35's linear-attention layers (graph.hpp
// GATED_DELTA) for prefill, in the chunkwise-parallel form of Yang, Kautz & Hatamizadeh 2024,
// "Gated Delta Networks: Improving Mamba2 with Delta Rule" (§3.3, the WY / UT-transform
// representation of the delta rule, with the gate decay folded in). Same bindings, push constants
// (GatedDeltaPC), state layout and result as gated_delta.comp (the serial kernel, which stays the
// decode kernel and the A/B baseline: VulkanOptions::delta_chunk = 0).
//
// Per value head j (key/query head j mod H_k) and chunk of L ≤ CH tokens starting at t0, with
// q̂_r = q_r / max(‖q_r‖, eps) / √d_k, k̂_r = k_r / max(‖k_r‖, eps), β_r = sigmoid(b_r),
// g_r = softplus(a_r)·A ≤ 0 and γ_r = Σ_{s≤r} g_s (the chunk-local cumulative log-gate, f32), the
// serial recurrence S_r = e^{g_r}·S_{r−1} + k̂_r·δ_rᵀ, δ_r = β_r·(v_r − e^{g_r}·S_{r−1}ᵀk̂_r),
// unrolls from the chunk's initial state S_0 to
//   S_r = e^{γ_r}·S_0 + Σ_{s≤r} e^{γ_r−γ_s}·k̂_s·δ_sᵀ,
// so the δ_r solve the unit lower-triangular system (the UT transform, (I + A)·Δ = R)
//   δ_r + Σ_{s<r} A_rs·δ_s = R_r,   A_rs = β_r·e^{γ_r−γ_s}·(k̂_r·k̂_s),   R_r = β_r·(v_r − e^{γ_r}·S_0ᵀk̂_r),
// and then
//   o_r = e^{γ_r}·S_0ᵀq̂_r + Σ_{s≤r} e^{γ_r−γ_s}·(q̂_r·k̂_s)·δ_s,
//   S_L = e^{γ_{L−1}}·S_0 + Σ_{s<L} e^{γ_{L−1}−γ_s}·k̂_s·δ_sᵀ.
// Every exponent is ≤ 0 (g ≤ 0, s ≤ r): nothing overflows, and a strong decay only flushes terms
// that are negligible anyway. The chunk's L × L matrices (A strictly below the diagonal, the
// decayed q̂·k̂ scores on and above it, transposed) are matmul-shaped work in 2 × 2 register
// tiles; S_0ᵀk̂ / S_0ᵀq̂ (L × d_v) and the state update (d_k × d_v) run over the state in
// registers; the triangular solve runs per value column (one invocation each, L²/2 FMAs).
//
// Workgroup: one per (block of COLS value columns, value head j), WG = COLS · P invocations;
// invocation (col = lid % COLS, part = lid / COLS) holds the ROWS state rows part·ROWS … of
// column col in registers (d_k = P · ROWS, as gated_delta.comp), read once, written once. The
// state is carried across chunks in registers and across ubatches in the state buffer; the last
// chunk may be shorter than CH. Shared memory: (CH² + CH·COLS + 2·P·WG + 4·CH) floats
// (ops::delta_chunk_shared_bytes). Bindings: 0 qkv (conv output [2·H_k·d_k + H_v·d_v, N]),
// 1 a [H_v, N], 2 b [H_v, N], 3 A (ssm_a [H_v]), 4 state [H_v][d_k][d_v], 5 out [H_v·d_v, N].
#include "common/header.glsl"
layout(push_constant) uniform PC { GatedDeltaPC pc; };
layout(constant_id = ROCKY_SC_DELTA_COLS) const uint COLS = 16;
layout(constant_id = ROCKY_SC_DELTA_ROWS) const uint ROWS = 16;
layout(constant_id = ROCKY_SC_DELTA_CHUNK) const uint CH = 32;  // tokens per chunk (even)
layout(binding = 0) readonly buffer Qkv { float qkv[]; };
layout(binding = 1) readonly buffer Av { float av[]; };
layout(binding = 2) readonly buffer Bv { float bv[]; };
layout(binding = 3) readonly buffer Aw { float Aw_[]; };
layout(binding = 4) buffer State { float st[]; };
layout(binding = 5) buffer Out { float outv[]; };  // read back by the invocation that wrote it

const uint WG = gl_WorkGroupSize.x;
const uint P = gl_WorkGroupSize.x / COLS;
// M[r·CH + s], s < r: A_rs;  M[s·CH + r], s ≤ r: e^{γ_r−γ_s}·(q̂_r·k̂_s).
shared float M[CH * CH];
shared float dl[CH * COLS];   // R, then δ (token-major, the block's columns)
shared float red_k[P * WG];  // partial S_0ᵀk̂ / S_0ᵀq̂ of P tokens: [part][token][col]
shared float red_q[P * WG];
shared float iq_s[CH];  // 1 / max(‖q‖, eps) / √d_k
shared float ik_s[CH];  // 1 / max(‖k‖, eps)
shared float gam[CH];   // γ_r
shared float bet[CH];   // β_r

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint col = lid % COLS, part = lid / COLS;
  const uint j = gl_WorkGroupID.y;
  const uint c = gl_WorkGroupID.x * COLS + col;
  const bool valid = c < pc.d_v;
  const uint kh = j % pc.n_k_heads;
  const uint C = 2u * pc.n_k_heads * pc.d_k + pc.n_v_heads * pc.d_v;
  const uint qo = kh * pc.d_k;
  const uint ko = pc.n_k_heads * pc.d_k + kh * pc.d_k;
  const uint vo = 2u * pc.n_k_heads * pc.d_k + j * pc.d_v + c;
  const uint ostride = pc.n_v_heads * pc.d_v;
  const uint row0 = part * ROWS;
  const uint sbase = pc.s_off + (j * pc.d_k + row0) * pc.d_v + c;
  float s[ROWS];
  for (uint r = 0u; r < ROWS; ++r) s[r] = valid ? st[sbase + r * pc.d_v] : 0.0;
  const float A = Aw_[pc.A_off + j];
  const float qscale = inversesqrt(float(pc.d_k));

  for (uint t0 = 0u; t0 < pc.n_tokens; t0 += CH) {
    const uint L = min(CH, pc.n_tokens - t0);
    // 1. Norms of q and k, the log-gates and β of the chunk's tokens.
    for (uint x = lid; x < 2u * L; x += WG) {
      const bool isq = x < L;
      const uint r = isq ? x : x - L;
      const uint base = pc.qkv_off + (t0 + r) * C + (isq ? qo : ko);
      float ss = 0.0;
      for (uint i = 0u; i < pc.d_k; ++i) {
        const float v = qkv[base + i];
        ss += v * v;
      }
      const float inv = 1.0 / max(sqrt(ss), pc.eps);
      if (isq)
        iq_s[r] = inv * qscale;
      else
        ik_s[r] = inv;
    }
    for (uint r = lid; r < L; r += WG) {
      const float a = av[pc.a_off + (t0 + r) * pc.n_v_heads + j];
      const float sp = a > 20.0 ? a : log(1.0 + exp(a));
      gam[r] = sp * A;
      bet[r] = 1.0 / (1.0 + exp(min(-bv[pc.b_off + (t0 + r) * pc.n_v_heads + j], 80.0)));
    }
    barrier();
    if (lid == 0u) {  // γ: the inclusive prefix sum of the log-gates (L ≤ CH adds)
      float acc = 0.0;
      for (uint r = 0u; r < L; ++r) {
        acc += gam[r];
        gam[r] = acc;
      }
    }
    barrier();
    // 2. The L × L matrices, 2 × 2 tiles (r0, r0 + 1) × (s0, s0 + 1) with s0 ≤ r0.
    const uint T2 = CH / 2u;
    for (uint x = lid; x < T2 * T2; x += WG) {
      const uint r0 = 2u * (x / T2), s0 = 2u * (x % T2);
      if (s0 > r0 || r0 >= L) continue;
      const uint r1 = min(r0 + 1u, L - 1u), s1 = min(s0 + 1u, L - 1u);
      const uint br0 = pc.qkv_off + (t0 + r0) * C, br1 = pc.qkv_off + (t0 + r1) * C;
      const uint bs0 = pc.qkv_off + (t0 + s0) * C + ko, bs1 = pc.qkv_off + (t0 + s1) * C + ko;
      vec4 kk = vec4(0.0), qk = vec4(0.0);  // (r0 s0, r0 s1, r1 s0, r1 s1)
      for (uint i = 0u; i < pc.d_k; ++i) {
        const vec2 kr = vec2(qkv[br0 + ko + i], qkv[br1 + ko + i]);
        const vec2 qr = vec2(qkv[br0 + qo + i], qkv[br1 + qo + i]);
        const vec4 ks = vec4(qkv[bs0 + i], qkv[bs1 + i], qkv[bs0 + i], qkv[bs1 + i]);
        kk += kr.xxyy * ks;
        qk += qr.xxyy * ks;
      }
      for (uint e = 0u; e < 4u; ++e) {
        const uint r = r0 + e / 2u, sx = s0 + e % 2u;
        if (r >= L || sx >= L || sx > r) continue;
        const float d = exp(gam[r] - gam[sx]);
        if (sx < r) M[r * CH + sx] = bet[r] * d * ik_s[r] * ik_s[sx] * kk[e];
        M[sx * CH + r] = d * iq_s[r] * ik_s[sx] * qk[e];
      }
    }
    // 3. S_0ᵀk̂ and S_0ᵀq̂ of P tokens at a time (partial sums over each part's rows, then a sum
    //    over the parts by invocation (col, part = token)): R into dl, e^{γ}·S_0ᵀq̂ into out.
    for (uint b0 = 0u; b0 < L; b0 += P) {
      for (uint rb = 0u; rb < P; ++rb) {
        const uint r = b0 + rb;
        float pk = 0.0, pq = 0.0;
        if (r < L) {
          const uint base = pc.qkv_off + (t0 + r) * C + row0;
          for (uint i = 0u; i < ROWS; ++i) {
            pk += qkv[base + ko + i] * s[i];
            pq += qkv[base + qo + i] * s[i];
          }
        }
        red_k[(part * P + rb) * COLS + col] = pk;
        red_q[(part * P + rb) * COLS + col] = pq;
      }
      barrier();
      const uint r = b0 + part;
      if (r < L && valid) {
        float sk = 0.0, sq = 0.0;
        for (uint p = 0u; p < P; ++p) {
          sk += red_k[(p * P + part) * COLS + col];
          sq += red_q[(p * P + part) * COLS + col];
        }
        const float e = exp(gam[r]);
        const float v = qkv[pc.qkv_off + (t0 + r) * C + vo];
        dl[r * COLS + col] = bet[r] * (v - e * ik_s[r] * sk);
        outv[pc.out_off + (t0 + r) * ostride + j * pc.d_v + c] = e * iq_s[r] * sq;
      }
      barrier();
    }
    // 4. The UT transform: forward substitution (I + A)·Δ = R, one invocation per column.
    if (part == 0u && valid) {
      for (uint r = 1u; r < L; ++r) {
        float x = dl[r * COLS + col];
        for (uint sx = 0u; sx < r; ++sx) x -= M[r * CH + sx] * dl[sx * COLS + col];
        dl[r * COLS + col] = x;
      }
    }
    barrier();
    // 5. o_r += Σ_{s≤r} e^{γ_r−γ_s}·(q̂_r·k̂_s)·δ_s (rows r ≡ part mod P: the invocation that wrote them in 3).
    if (valid) {
      for (uint r = part; r < L; r += P) {
        const uint oi = pc.out_off + (t0 + r) * ostride + j * pc.d_v + c;
        float o = outv[oi];
        for (uint sx = 0u; sx <= r; ++sx) o += M[sx * CH + r] * dl[sx * COLS + col];
        outv[oi] = o;
      }
    }
    // 6. S ← e^{γ_{L−1}}·S + Σ_s e^{γ_{L−1}−γ_s}·k̂_s·δ_sᵀ.
    const float gl = gam[L - 1u];
    const float eL = exp(gl);
    for (uint i = 0u; i < ROWS; ++i) s[i] *= eL;
    for (uint sx = 0u; sx < L; ++sx) {
      const float w = valid ? exp(gl - gam[sx]) * ik_s[sx] * dl[sx * COLS + col] : 0.0;
      const uint base = pc.qkv_off + (t0 + sx) * C + ko + row0;
      for (uint i = 0u; i < ROWS; ++i) s[i] += qkv[base + i] * w;
    }
    barrier();  // the next chunk overwrites the shared arrays
  }
  if (valid)
    for (uint r = 0u; r < ROWS; ++r) st[sbase + r * pc.d_v] = s[r];
}
