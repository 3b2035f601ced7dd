#version 450
// rope: rotary embedding of x viewed as [head_dim, n_head, n_tokens]; token j at position
// n_past + j; theta_i = pos · freq_scale · freq_base^(-2i / n_rot) / ff[i] (ff: the optional
// rope_freqs divisors of Llama 3.1 scaling; 1 when has_ff = 0). NORMAL rotates (x[2i],
// x[2i+1]); NEOX rotates (x[i], x[i + n_rot/2]); dims ≥ n_rot pass through.
// One invocation per pair slot p < head_dim/2 of one (head, token). Grid: (ceil(head_dim/2 / WG),
// n_head, n_tokens). Bindings: 0 x, 1 out, 2 ff (f32 [n_rot/2]), 3 step (POS_BUF; else a dummy;
// POS_BUF = 2: token j at its own position, abi.h's k_tok_table).
#include "common/header.glsl"
layout(push_constant) uniform PC { RopePC pc; };
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) writeonly buffer Out { float outv[]; };
layout(binding = 2) readonly buffer FF { float ff[]; };
layout(constant_id = ROCKY_SC_POS_BUF) const uint POS_BUF = 0;
layout(binding = 3) readonly buffer Step { uint step_pos[]; };  // POS_BUF = 1: [0] = n_past
void main() {
  uint p = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y, j = gl_WorkGroupID.z;
  if (p >= pc.head_dim / 2u) return;
  uint base = (j * pc.n_head + h) * pc.head_dim;
  uint i0, i1;
  if (pc.mode == k_rope_neox) {
    i0 = p;
    i1 = p + pc.n_rot / 2u;
  } else {
    i0 = 2u * p;
    i1 = 2u * p + 1u;
  }
  if (2u * p >= pc.n_rot) {  // pass-through dims: copy this slot's two elements
    outv[pc.out_off + base + 2u * p] = x[pc.x_off + base + 2u * p];
    outv[pc.out_off + base + 2u * p + 1u] = x[pc.x_off + base + 2u * p + 1u];
    return;
  }
  float pos = float(POS_BUF == 2u ? step_pos[k_tok_table + 2u * j] : (POS_BUF != 0u ? step_pos[0] : pc.n_past) + j);
  float theta = pos * pc.freq_scale * pow(pc.freq_base, -2.0 * float(p) / float(pc.n_rot));
  if (pc.has_ff != 0u) theta /= ff[pc.ff_off + p];
  float c = cos(theta), s = sin(theta);
  float a = x[pc.x_off + base + i0], b = x[pc.x_off + base + i1];
  outv[pc.out_off + base + i0] = a * c - b * s;
  outv[pc.out_off + base + i1] = a * s + b * c;
}
