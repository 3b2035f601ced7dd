// The hybrid linear-attention ops of qwen35 (graph.hpp SSM_CONV, GATED_DELTA, TAKE_ROWS,
// SIGMOID_MUL): shaders/ssm_conv.comp, gated_delta.comp (decode, serial), gated_delta_chunk.comp
// (prefill, chunked), take_rows.comp, sigmoid_mul.comp.
#include <algorithm>

#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/push_constants.hpp"
#include "core/error.hpp"

namespace rocky::vulkan::ops {

void take_rows(Env& e, Region x, uint32_t in_ne0, uint32_t first_row, uint32_t ne0, uint32_t n_cols, Region out,
               const std::string& label) {
  if (first_row + ne0 > in_ne0)
    fail("take_rows {}: rows [{}, {}) past the source's {}", label, first_row, first_row + ne0, in_ne0);
  const Pipeline& p = e.pipes.get("take_rows", {{ROCKY_SC_WG, e.wg}});
  Bound b[] = {bind(e, x, false), bind(e, out, true)};
  abi::TakeRowsPC pc{ne0, n_cols, first_row, in_ne0, f32_off(b[0]), f32_off(b[1])};
  e.rec.dispatch(p, b, &pc, sizeof pc, (ne0 + e.wg - 1) / e.wg, n_cols, 1, label);
}

void sigmoid_mul(Env& e, Region a, Region b, uint64_t n, Region out, const std::string& label) {
  binary_elementwise(e, "sigmoid_mul", a, b, 0, n, out, label);
}

void ssm_conv(Env& e, Region x, Region w, uint32_t k, uint32_t c, uint32_t n_tokens, Region state, Region out,
              const std::string& label) {
  if (k < 2 || state.bytes < uint64_t(k - 1) * c * 4 || w.bytes < uint64_t(k) * c * 4)
    fail("ssm_conv {}: weight / state smaller than the kernel {} × {} channels", label, k, c);
  const Pipeline& p = e.pipes.get("ssm_conv", {{ROCKY_SC_WG, e.wg}});
  Bound b[] = {bind(e, x, false), bind(e, w, false), bind(e, state, true), bind(e, out, true)};
  abi::SsmConvPC pc{c, n_tokens, k, 0, f32_off(b[0]), f32_off(b[1]), f32_off(b[2]), f32_off(b[3])};
  const uint32_t gx = (c + e.wg - 1) / e.wg;
  e.rec.dispatch(p, b, &pc, sizeof pc, gx, n_tokens, 1, label);
  pc.mode = 1;  // the state shift, after every output has read the old state (the recorder's barrier)
  e.rec.dispatch(p, b, &pc, sizeof pc, gx, 1, 1, label + " state");
}

uint64_t delta_chunk_shared_bytes(const DeltaTile& t, uint32_t d_k) {
  const uint64_t wg = uint64_t(t.cols) * (d_k / t.rows), parts = d_k / t.rows, ch = t.chunk;
  return 4 * (ch * ch + ch * t.cols + 2 * parts * wg + 4 * ch);
}

DeltaTile delta_tile(const Env& e, uint32_t d_k) {
  DeltaTile t = e.delta;
  t.cols = std::max(1u, t.cols);
  t.rows = std::clamp(t.rows, 1u, d_k);
  while (d_k % t.rows != 0) --t.rows;  // rows per invocation divide d_k
  t.chunk = std::min(t.chunk, 128u) & ~1u;
  while (t.chunk >= 2 && delta_chunk_shared_bytes(t, d_k) > e.info.shared_memory) t.chunk = (t.chunk / 2) & ~1u;
  if (t.chunk < 2) t.chunk = 0;
  return t;
}

void gated_delta(Env& e, Region qkv, Region a, Region b, Region A, const DeltaArgs& d, Region state, Region out,
                 const std::string& label) {
  if (d.n_k_heads == 0 || d.n_v_heads % d.n_k_heads != 0 || d.d_k == 0 || d.d_v == 0)
    fail("gated_delta {}: {} value heads over {} key heads", label, d.n_v_heads, d.n_k_heads);
  if (state.bytes < uint64_t(d.n_v_heads) * d.d_k * d.d_v * 4) fail("gated_delta {}: state too small", label);
  const DeltaTile t = delta_tile(e, d.d_k);
  const uint32_t wg = t.cols * (d.d_k / t.rows);
  if (wg > e.info.max_workgroup_invocations)
    fail("gated_delta {}: tile {} columns × {} parts = {} invocations exceeds the device's {}", label, t.cols,
         d.d_k / t.rows, wg, e.info.max_workgroup_invocations);
  const bool chunked = d.n_tokens > 1 && t.chunk > 0;
  const Pipeline& p =
      chunked ? e.pipes.get("gated_delta_chunk", {{ROCKY_SC_WG, wg},
                                                  {ROCKY_SC_DELTA_COLS, t.cols},
                                                  {ROCKY_SC_DELTA_ROWS, t.rows},
                                                  {ROCKY_SC_DELTA_CHUNK, t.chunk}})
              : e.pipes.get("gated_delta",
                            {{ROCKY_SC_WG, wg}, {ROCKY_SC_DELTA_COLS, t.cols}, {ROCKY_SC_DELTA_ROWS, t.rows}});
  Bound bs[] = {bind(e, qkv, false), bind(e, a, false),    bind(e, b, false),
                bind(e, A, false),   bind(e, state, true), bind(e, out, true)};
  abi::GatedDeltaPC pc{d.n_k_heads,    d.n_v_heads,    d.d_k,          d.d_v,          d.n_tokens,     f32_off(bs[0]),
                       f32_off(bs[1]), f32_off(bs[2]), f32_off(bs[3]), f32_off(bs[4]), f32_off(bs[5]), d.eps};
  e.rec.dispatch(p, bs, &pc, sizeof pc, (d.d_v + t.cols - 1) / t.cols, d.n_v_heads, 1, label);
}

}  // namespace rocky::vulkan::ops
