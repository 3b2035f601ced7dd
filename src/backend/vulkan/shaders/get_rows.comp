#version 450
// get_rows: out[:, j] = dequant(W[:, tok[j]]) for tokens whose row is in this weight window.
// Grid: (ceil(ne0 / WG), n_tokens). Bindings: 0 weight (bytes), 1 token ids, 2 out.
#include "common/header.glsl"
layout(constant_id = ROCKY_SC_WTYPE) const uint WTYPE = 0;
layout(push_constant) uniform PC { GetRowsPC pc; };
layout(binding = 0) readonly buffer Wt { uint wdata[]; };
layout(binding = 1) readonly buffer Tok { int tok[]; };
layout(binding = 2) writeonly buffer Out { float outv[]; };
#include "common/dequant.glsl"

void main() {
  uint i = gl_GlobalInvocationID.x, j = gl_WorkGroupID.y;
  if (i >= pc.ne0) return;
  uint r = uint(tok[pc.tok_off + j]);
  if (r < pc.row_begin || r >= pc.row_end) return;
  outv[pc.out_off + j * pc.ne0 + i] = dequant_elem(pc.w_off + (r - pc.row_begin) * pc.row_bytes, i);
}
