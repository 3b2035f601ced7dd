// get_rows (embedding lookup) — shaders/get_rows.comp. The weight is walked in windows of whole
// rows that fit one binding; each window's dispatch writes the tokens whose row lies inside it.
#include "backend/vulkan/ops/matmul_fast.hpp"
#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/push_constants.hpp"
#include "backend/vulkan/shaders/fast_abi.h"
#include "core/error.hpp"

namespace rocky::vulkan::ops {

bool gpu_supports(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return true;
    default: return false;
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

// get_rows_mmq.comp: the rows of the weight's mmq repack (its only device copy), windows of
// whole rows as fast::for_each_mmq_window binds them.
static void get_rows_mmq(Env& e, const Weight& w, Region tokens, uint32_t n_tokens, Region out,
                         const std::string& label) {
  const Pipeline& p = e.pipes.get("get_rows_mmq", {{ROCKY_SC_WG, e.wg},
                                                   {ROCKY_SC_WTYPE, static_cast<uint32_t>(w.type)},
                                                   {ROCKY_SC_MMQ_NIB, w.mmq_nibbles ? 1u : 0u}});
  Bound bt = bind(e, tokens, false), bo = bind(e, out, true);
  fast::for_each_mmq_window(e, w, [&](abi::MatmulMmqPC& m, const Bound& bw, const Bound& bs) {
    abi::GetRowsMmqPC pc{};
    pc.ne0 = static_cast<uint32_t>(w.ne0);
    pc.n_tokens = n_tokens;
    pc.q_row_bytes = static_cast<uint32_t>(w.mmq_q_row_bytes);
    pc.wq_off = m.wq_off * 16;
    pc.ws_off = m.ws_off;
    pc.row_begin = m.m0;
    pc.row_end = m.m0 + m.M;
    pc.tok_off = f32_off(bt);
    pc.out_off = f32_off(bo);
    Bound b[] = {bw, bs, bt, bo};
    e.rec.dispatch(p, b, &pc, sizeof pc, static_cast<uint32_t>((w.ne0 + e.wg - 1) / e.wg), n_tokens, 1, label);
  });
}

void get_rows(Env& e, const Weight& w, Region tokens, uint32_t n_tokens, Region out, const std::string& label) {
  if (w.buf == nullptr && w.mmq_buf != nullptr) {
    get_rows_mmq(e, w, tokens, n_tokens, out, label);
    return;
  }
  if (w.buf == nullptr) fail("{}: weight {} has no device copy", label, w.name);
  if (!gpu_supports(w.type))
    fail("{}: weight type {} is not supported by the Vulkan kernels", w.name, dtype_name(w.type));
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
