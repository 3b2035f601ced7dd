// get_rows (embedding lookup) — shaders/get_rows.comp. The weight is walked in windows of whole
// rows that fit one binding; each window's dispatch writes the tokens whose row lies inside it.
#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/push_constants.hpp"
#include "core/error.hpp"

namespace rocky::vulkan::ops {

bool gpu_supports(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q4_0: case DType::Q4_1:
    case DType::Q5_0: case DType::Q5_1: case DType::Q8_0: case DType::Q2_K: case DType::Q3_K:
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
      return true;
    default:
      return false;
  }
}

// Rows per window so that a window (plus alignment slack) fits one binding.
uint64_t rows_per_window(Env& e, const Weight& w) {
  const uint64_t slack = std::max<uint64_t>(4, e.info.min_storage_offset_alignment) + 4;
  const uint64_t max = e.rec.max_binding();
  if (w.row_bytes + slack > max) {
    fail("weight {}: one row ({} bytes) exceeds the storage binding limit ({} bytes)", w.name, w.row_bytes, max);
  }
  return (max - slack) / w.row_bytes;
}

void get_rows(Env& e, const Weight& w, Region tokens, uint32_t n_tokens, Region out, const std::string& label) {
  if (!gpu_supports(w.type)) fail("{}: weight type {} is not supported by the Vulkan kernels", w.name, dtype_name(w.type));
  const Pipeline& p = e.pipes.get("get_rows", {{ROCKY_SC_WG, e.wg}, {ROCKY_SC_WTYPE, static_cast<uint32_t>(w.type)}});
  Bound bt = bind(e, tokens, false), bo = bind(e, out, true);
  const uint64_t per = rows_per_window(e, w);
  for (uint64_t r0 = 0; r0 < w.rows; r0 += per) {
    uint64_t r1 = std::min(w.rows, r0 + per);
    Bound bw = e.rec.bind(*w.buf, r0 * w.row_bytes, (r1 - r0) * w.row_bytes, false);
    abi::GetRowsPC pc{};
    pc.ne0 = static_cast<uint32_t>(w.ne0);
    pc.n_tokens = n_tokens;
    pc.row_bytes = static_cast<uint32_t>(w.row_bytes);
    pc.w_off = bw.delta;
    pc.row_begin = static_cast<uint32_t>(r0);
    pc.row_end = static_cast<uint32_t>(r1);
    pc.tok_off = f32_off(bt);
    pc.out_off = f32_off(bo);
    Bound b[] = {bw, bt, bo};
    e.rec.dispatch(p, b, &pc, sizeof pc, static_cast<uint32_t>((w.ne0 + e.wg - 1) / e.wg), n_tokens, 1, label);
  }
}

}  // namespace rocky::vulkan::ops
