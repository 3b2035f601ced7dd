#version 450
// kv_store: cache[:, n_past + j] = x[:, j]. f32 cache: one element per invocation; f16 cache
// (KV_F16 = 1): one packed pair per invocation (n_embd is even). Grid: (ceil(items / WG), n_tokens).
// Bindings: 0 x, 1 cache (uint words: f32 bits or two halves), 2 step (POS_BUF: n_past; else a dummy;
// POS_BUF = 2: token j's own column, abi.h's k_tok_table).
// f16: values past ±65504 are stored saturated (as f16 storage with f32 accumulation should), not
// as inf — an inf K makes q·k inf and the softmax NaN. NaN stays NaN.
#include "common/header.glsl"
layout(constant_id = ROCKY_SC_KV_F16) const uint KV_F16 = 0;
const float k_f16_max = 65504.0;
vec2 saturate_f16(vec2 v) {
  vec2 c = clamp(v, vec2(-k_f16_max), vec2(k_f16_max));
  return mix(c, v, isnan(v));
}
layout(push_constant) uniform PC { KvStorePC pc; };
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) writeonly buffer Cache { uint cache[]; };
layout(constant_id = ROCKY_SC_POS_BUF) const uint POS_BUF = 0;
layout(binding = 2) readonly buffer Step { uint step_pos[]; };  // POS_BUF = 1: [0] = n_past
void main() {
  uint i = gl_GlobalInvocationID.x, j = gl_WorkGroupID.y;
  uint col = POS_BUF == 2u ? kv_col(step_pos[k_tok_table + 2u * j + 1u], step_pos[k_tok_table + 2u * j], pc.ring,
                                   pc.seq_cells)
                           : kv_col(0u, (POS_BUF != 0u ? step_pos[0] : pc.n_past) + j, pc.ring, pc.seq_cells);
  uint src = pc.x_off + j * pc.n_embd;
  if (KV_F16 == 0u) {
    if (i >= pc.n_embd) return;
    cache[pc.cache_off + col * pc.n_embd + i] = floatBitsToUint(x[src + i]);
  } else {
    if (2u * i >= pc.n_embd) return;
    cache[(pc.cache_off + col * pc.n_embd) / 2u + i] = packHalf2x16(saturate_f16(vec2(x[src + 2u * i], x[src + 2u * i + 1u])));
  }
}
