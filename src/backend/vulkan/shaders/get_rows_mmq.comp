#version 450
// get_rows over rocky's mmq repack (ops/matmul_fast.hpp; the weight's only device copy when
// the int8 path is on): out[:, j] = dequant(W[:, tok[j]]) for tokens whose row is in this weight
// window, value i of a row = s0 · q_i (q6_K: the scale of its half), q4_K / q5_K / q5_1 s0 · q_i + s1
// (common/mmq_scales.glsl): the same f32 values as ggml's dequantize_row_* (bit-exact; `precise`
// keeps the affine types' multiply and add apart).
// Grid: (ceil(ne0 / WG), n_tokens). Bindings: 0 values (bytes as uint, row stride q_row_bytes, row
// row_begin at byte wq_off), 1 scale groups (uint, row row_begin at word ws_off), 2 token ids,
// 3 out.
#include "common/header.glsl"
#include "fast_abi.h"
layout(constant_id = ROCKY_SC_WTYPE) const uint WTYPE = 12;
layout(constant_id = ROCKY_SC_MMQ_NIB) const bool NIB = false;
layout(push_constant) uniform PC { GetRowsMmqPC pc; };
layout(binding = 0) readonly buffer Wq { uint wq[]; };
layout(binding = 1) readonly buffer Ws { uint ws[]; };
layout(binding = 2) readonly buffer Tok { int tok[]; };
layout(binding = 3) writeonly buffer Out { float outv[]; };
const bool NIB_TYPE = WTYPE == 12u || WTYPE == 14u;  // q4_K, q6_K
const bool NIBBLES = NIB && NIB_TYPE;
#include "common/mmq_scales.glsl"

uint rd_u8(uint b) { return (wq[b >> 2] >> ((b & 3u) * 8u)) & 0xFFu; }

void main() {
  const uint i = gl_GlobalInvocationID.x, j = gl_WorkGroupID.y;
  if (i >= pc.ne0) return;
  const uint r = uint(tok[pc.tok_off + j]);
  if (r < pc.row_begin || r >= pc.row_end) return;
  const uint rl = r - pc.row_begin, b = i >> 5, l = i & 31u;
  const uint srow = pc.ws_off + rl * mmq_srow_words(pc.ne0 / 32u);
  const uint qrow = pc.wq_off + rl * pc.q_row_bytes;
  const vec2 s = mmq_scale(srow, b);
  int q;
  if (NIBBLES) {
    const uint byte = rd_u8(qrow + b * 16u + (l & 15u));
    uint u = l < 16u ? byte & 0xFu : byte >> 4;
    if (Q6NIB) {
      const uint h = mmq_q6_h16(mmq_q6_hi(srow, b), (l & 15u) >> 2);
      u |= ((h >> ((l < 16u ? 0u : 8u) + 2u * (l & 3u))) & 3u) << 4;
      q = int(u) - 32;
    } else {
      q = int(u);
    }
  } else {
    q = int(rd_u8(qrow + b * 32u + l) << 24) >> 24;
  }
  precise float v;
  if (WTYPE == 12u || WTYPE == 13u || WTYPE == 7u) {  // the affine types: q4_K, q5_K, q5_1
    precise float a = s.x * float(q);
    v = a + s.y;
  } else {
    v = (WTYPE == 14u && l >= 16u ? s.y : s.x) * float(q);
  }
  outv[pc.out_off + j * pc.ne0 + i] = v;
}
