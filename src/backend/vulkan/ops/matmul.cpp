// matmul / matvec — shaders/matmul.comp (tiled, N > 1) and shaders/matvec.comp (N = 1). Weights
// larger than one binding are multiplied in windows of whole rows (one dispatch per window), and
// activations larger than one binding in chunks of whole token columns.
#include <algorithm>

#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/push_constants.hpp"
#include "core/error.hpp"
#include "backend/vulkan/ops/matmul_fast.hpp"  // [M5]

namespace rocky::vulkan::ops {

uint64_t rows_per_window(Env& e, const Weight& w);  // get_rows.cpp

void matmul(Env& e, const Weight& w, Region x, uint32_t n, Region y, const std::string& label) {
  if (!gpu_supports(w.type)) fail("{}: weight type {} is not supported by the Vulkan kernels", w.name, dtype_name(w.type));
  // [M5] int8 path: q8_1 activations + mul_mmq (packed int8 dot where the device has it).
  if (e.mmq && e.q81_qs && n > 1 && fast::mmq_supports(w.type) && w.ne0 % 32 == 0 &&
      fast::q8_1_qs_bytes(w.ne0, n) <= e.q81_qs->size() && fast::q8_1_ds_bytes(w.ne0, n) <= e.q81_ds->size()) {
    Region qs{e.q81_qs, 0, fast::q8_1_qs_bytes(w.ne0, n)}, ds{e.q81_ds, 0, fast::q8_1_ds_bytes(w.ne0, n)};
    fast::quantize_q8_1(e, x, static_cast<uint32_t>(w.ne0), n, qs, ds, label + " q8_1");
    fast::mul_mmq(e, *e.mmq, w, qs, ds, n, y, e.info.int8_dot, label);
    return;
  }
  const MatmulTile& t = e.tile;
  const bool vec = n == 1;
  std::vector<SpecConst> spec{{ROCKY_SC_WTYPE, static_cast<uint32_t>(w.type)}};
  if (vec) {
    spec.push_back({ROCKY_SC_WG, 64});
  } else {
    if (t.tm == 0 || t.tn == 0 || t.bk == 0 || t.bm % t.tm || t.bn % t.tn || t.invocations() > e.info.max_workgroup_invocations ||
        t.shared_bytes() > e.info.shared_memory) {
      fail("matmul tile {}x{}x{} / {}x{} does not fit the device ({} invocations, {} bytes shared)", t.bm, t.bn, t.bk,
           t.tm, t.tn, e.info.max_workgroup_invocations, e.info.shared_memory);
    }
    spec.insert(spec.end(), {{ROCKY_SC_WG, t.invocations()}, {ROCKY_SC_BM, t.bm}, {ROCKY_SC_BN, t.bn},
                             {ROCKY_SC_BK, t.bk}, {ROCKY_SC_TM, t.tm}, {ROCKY_SC_TN, t.tn}});
  }
  const Pipeline& p = e.pipes.get(vec ? "matvec" : "matmul", spec);
  // Token chunks so that x [K, chunk] and y [M, chunk] each fit one binding (e.g. all-token
  // logits [n_vocab, N] larger than maxStorageBufferRange).
  const uint64_t slack = std::max<uint64_t>(4, e.info.min_storage_offset_alignment) + 4;
  const uint64_t col_bytes = std::max<uint64_t>(w.ne0, w.rows) * 4;
  if (e.rec.max_binding() < slack + col_bytes) {
    fail("{}: one activation column ({} bytes) exceeds the storage binding limit ({} bytes)", label, col_bytes,
         e.rec.max_binding());
  }
  const uint32_t chunk = static_cast<uint32_t>(std::min<uint64_t>(n, (e.rec.max_binding() - slack) / col_bytes));
  const uint64_t per = rows_per_window(e, w);
  for (uint32_t n0 = 0; n0 < n; n0 += chunk) {
    const uint32_t nc = std::min(chunk, n - n0);
    Region xc{x.buf, x.offset + uint64_t{n0} * w.ne0 * 4, uint64_t{nc} * w.ne0 * 4};
    Region yc{y.buf, y.offset + uint64_t{n0} * w.rows * 4, uint64_t{nc} * w.rows * 4};
    Bound bx = bind(e, xc, false), by = bind(e, yc, true);
    for (uint64_t r0 = 0; r0 < w.rows; r0 += per) {
      uint64_t r1 = std::min(w.rows, r0 + per);
      Bound bw = e.rec.bind(*w.buf, r0 * w.row_bytes, (r1 - r0) * w.row_bytes, false);
      abi::MatmulPC pc{};
      pc.M = static_cast<uint32_t>(r1 - r0);
      pc.K = static_cast<uint32_t>(w.ne0);
      pc.N = nc;
      pc.row_bytes = static_cast<uint32_t>(w.row_bytes);
      pc.w_off = bw.delta;
      pc.x_off = f32_off(bx);
      pc.y_off = f32_off(by);
      pc.ldy = static_cast<uint32_t>(w.rows);
      pc.m0 = static_cast<uint32_t>(r0);
      Bound b[] = {bw, bx, by};
      if (vec) {
        auto g = e.rec.grid_1d(pc.M);
        e.rec.dispatch(p, b, &pc, sizeof pc, g[0], g[1], 1, label);
      } else {
        e.rec.dispatch(p, b, &pc, sizeof pc, (pc.M + t.bm - 1) / t.bm, (nc + t.bn - 1) / t.bn, 1, label);
      }
    }
  }
}

}  // namespace rocky::vulkan::ops
