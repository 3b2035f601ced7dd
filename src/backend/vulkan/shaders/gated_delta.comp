#version 450
// gated_delta: the gated delta rule of qwen35's linear-attention layers (graph.hpp
// GATED_DELTA), token by token over the ubatch with the state in registers. One workgroup per
// (block of DELTA_COLS value columns, value head j); invocation (col, part) holds the DELTA_ROWS
// state rows part·ROWS … of column col, so d_k = P · ROWS with P = WG / COLS parts. Per token:
// q, k of key head j mod H_k into shared memory with their squared norms (tree sum), then
// S ← exp(g)·S, u = β·(v − Sᵀk̂) (a sum over the P parts), S ← S + k̂·uᵀ, o = Sᵀq̂ / √d_k (again
// over the parts). The state is read once and written once per dispatch, so a decode step (N = 1)
// and a prefill ubatch run the same kernel. Bindings: 0 qkv (conv output), 1 a, 2 b, 3 A (ssm_a),
// 4 state, 5 out.
#include "common/header.glsl"
layout(push_constant) uniform PC { GatedDeltaPC pc; };
layout(constant_id = ROCKY_SC_DELTA_COLS) const uint COLS = 32;
layout(constant_id = ROCKY_SC_DELTA_ROWS) const uint ROWS = 32;
layout(binding = 0) readonly buffer Qkv { float qkv[]; };
layout(binding = 1) readonly buffer Av { float av[]; };
layout(binding = 2) readonly buffer Bv { float bv[]; };
layout(binding = 3) readonly buffer Aw { float Aw_[]; };
layout(binding = 4) buffer State { float st[]; };
layout(binding = 5) writeonly buffer Out { float outv[]; };

const uint WG = gl_WorkGroupSize.x;
const uint DK = (gl_WorkGroupSize.x / COLS) * ROWS;
shared float qs[DK];
shared float ks[DK];
shared float rq[WG];
shared float rk[WG];
shared float red_u[WG];
shared float red_o[WG];

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint P = WG / COLS;
  const uint col = lid % COLS, part = lid / COLS;
  const uint j = gl_WorkGroupID.y;
  const uint c = gl_WorkGroupID.x * COLS + col;
  const bool valid = c < pc.d_v;
  const uint kh = j % pc.n_k_heads;
  const uint C = 2u * pc.n_k_heads * pc.d_k + pc.n_v_heads * pc.d_v;
  const uint row0 = part * ROWS;
  const uint sbase = pc.s_off + (j * pc.d_k + row0) * pc.d_v + c;
  float s[ROWS];
  for (uint r = 0u; r < ROWS; ++r) s[r] = valid ? st[sbase + r * pc.d_v] : 0.0;
  const float A = Aw_[pc.A_off + j];
  const float qscale = inversesqrt(float(pc.d_k));
  for (uint t = 0u; t < pc.n_tokens; ++t) {
    const uint base = pc.qkv_off + t * C;
    float pq = 0.0, pk = 0.0;
    for (uint i = lid; i < pc.d_k; i += WG) {
      const float qv = qkv[base + kh * pc.d_k + i];
      const float kv = qkv[base + pc.n_k_heads * pc.d_k + kh * pc.d_k + i];
      qs[i] = qv;
      ks[i] = kv;
      pq += qv * qv;
      pk += kv * kv;
    }
    rq[lid] = pq;
    rk[lid] = pk;
    barrier();
    for (uint h = 1u; h < WG; h <<= 1) {
      if ((lid & (2u * h - 1u)) == 0u && lid + h < WG) {
        rq[lid] += rq[lid + h];
        rk[lid] += rk[lid + h];
      }
      barrier();
    }
    const float iq = qscale / max(sqrt(rq[0]), pc.eps);
    const float ik = 1.0 / max(sqrt(rk[0]), pc.eps);
    const float a = av[pc.a_off + t * pc.n_v_heads + j];
    const float sp = a > 20.0 ? a : log(1.0 + exp(a));
    const float decay = exp(sp * A);
    const float beta = 1.0 / (1.0 + exp(min(-bv[pc.b_off + t * pc.n_v_heads + j], 80.0)));
    float pu = 0.0;
    for (uint r = 0u; r < ROWS; ++r) {
      s[r] *= decay;
      pu += s[r] * ks[row0 + r];
    }
    red_u[lid] = pu * ik;
    barrier();
    float skc = 0.0;
    for (uint p = 0u; p < P; ++p) skc += red_u[p * COLS + col];
    const float v = valid ? qkv[base + 2u * pc.n_k_heads * pc.d_k + j * pc.d_v + c] : 0.0;
    const float u = beta * (v - skc);
    float po = 0.0;
    for (uint r = 0u; r < ROWS; ++r) {
      s[r] += ks[row0 + r] * ik * u;
      po += s[r] * qs[row0 + r];
    }
    red_o[lid] = po * iq;
    barrier();
    if (part == 0u && valid) {
      float o = 0.0;
      for (uint p = 0u; p < P; ++p) o += red_o[p * COLS + col];
      outv[pc.out_off + t * pc.n_v_heads * pc.d_v + j * pc.d_v + c] = o;
    }
  }
  if (valid)
    for (uint r = 0u; r < ROWS; ++r) st[sbase + r * pc.d_v] = s[r];
}
