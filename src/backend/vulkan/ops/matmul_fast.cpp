#include "backend/vulkan/ops/matmul_fast.hpp"

#include <algorithm>

#include "backend/vulkan/pipeline_stats.hpp"
#include "backend/vulkan/shaders/fast_abi.h"
#include "core/error.hpp"

namespace rocky::vulkan::fast {

static_assert(sizeof(abi::MatmulFastPC) == 9 * 4);
static_assert(sizeof(abi::Q81PC) == 4 * 4);
static_assert(sizeof(abi::RooflinePC) == 4 * 4);

bool mmq_supports(DType t) { return t == DType::Q4_0 || t == DType::Q8_0 || t == DType::Q4_K || t == DType::Q6_K; }

void quantize_q8_1(ops::Env& e, ops::Region x, uint32_t k, uint32_t n, ops::Region qs, ops::Region ds,
                   const std::string& label) {
  if (k % 32) fail("quantize_q8_1: K = {} is not a multiple of 32", k);
  constexpr uint32_t wg = 64;
  const Pipeline& p = e.pipes.get("quantize_q8_1", {{ROCKY_SC_WG, wg}});
  Bound bx = ops::bind(e, x, false), bq = ops::bind(e, qs, true), bd = ops::bind(e, ds, true);
  if (bq.delta || bd.delta) fail("quantize_q8_1: q8_1 regions must be aligned to the storage offset alignment");
  abi::Q81PC pc{k, n, ops::f32_off(bx), 0};
  auto grid = e.rec.grid_1d((static_cast<uint64_t>(k / 32) * n + wg - 1) / wg);
  Bound b[] = {bx, bq, bd};
  e.rec.dispatch(p, b, &pc, sizeof pc, grid[0], grid[1], 1, label);
}

static_assert(sizeof(abi::ProducerQ81PC) == 8 * 4);

void rms_norm_q8_1(ops::Env& e, ops::Region x, ops::Region w, uint32_t ne0, uint32_t n_cols, float eps,
                   ops::Region qs, ops::Region ds, const std::string& label) {
  if (ne0 % 32) fail("rms_norm_q8_1: ne0 = {} is not a multiple of 32", ne0);
  constexpr uint32_t wg = 64;
  const Pipeline& p = e.pipes.get("rms_norm_q8_1", {{ROCKY_SC_WG, wg}});
  Bound bx = ops::bind(e, x, false), bw = ops::bind(e, w, false), bq = ops::bind(e, qs, true), bd = ops::bind(e, ds, true);
  if (bq.delta || bd.delta) fail("rms_norm_q8_1: q8_1 regions must be aligned to the storage offset alignment");
  abi::ProducerQ81PC pc{ne0, n_cols, ops::f32_off(bx), ops::f32_off(bw), eps, 0, 0, 0};
  Bound b[] = {bx, bw, bq, bd};
  e.rec.dispatch(p, b, &pc, sizeof pc, n_cols, 1, 1, label);
}

void silu_mul_q8_1(ops::Env& e, ops::Region gate, ops::Region up, uint32_t ne0, uint32_t n_cols, ops::Region qs,
                   ops::Region ds, const std::string& label) {
  if (ne0 % 32) fail("silu_mul_q8_1: ne0 = {} is not a multiple of 32", ne0);
  constexpr uint32_t wg = 64;
  const Pipeline& p = e.pipes.get("silu_mul_q8_1", {{ROCKY_SC_WG, wg}});
  Bound bg = ops::bind(e, gate, false), bu = ops::bind(e, up, false), bq = ops::bind(e, qs, true), bd = ops::bind(e, ds, true);
  if (bq.delta || bd.delta) fail("silu_mul_q8_1: q8_1 regions must be aligned to the storage offset alignment");
  abi::ProducerQ81PC pc{ne0, n_cols, ops::f32_off(bg), ops::f32_off(bu), 0.0f, 0, 0, 0};
  auto grid = e.rec.grid_1d((static_cast<uint64_t>(ne0 / 32) * n_cols + wg - 1) / wg);
  Bound b[] = {bg, bu, bq, bd};
  e.rec.dispatch(p, b, &pc, sizeof pc, grid[0], grid[1], 1, label);
}

void mul_mmq(ops::Env& e, const tune::DeviceProfile& prof, const ops::Weight& w, ops::Region qs, ops::Region ds,
             uint32_t n, ops::Region y, bool use_dot, const std::string& label) {
  if (!mmq_supports(w.type)) fail("{}: mul_mmq does not support weight type {}", w.name, dtype_name(w.type));
  if (use_dot && !e.info.int8_dot) fail("{}: the device has no shaderIntegerDotProduct (use the fallback)", w.name);
  const tune::MatmulTile& t = prof.mmq;
  std::string why = tune::check_tile(t, t.mmq_accumulators(), t.mmq_shared_bytes(), prof.max_accumulators, e.info.shared_memory,
                                     e.info.max_workgroup_invocations);
  if (!why.empty()) fail("mul_mmq ({} profile): {}", prof.name, why);
  const Pipeline& p = e.pipes.get(use_dot ? "mul_mmq" : "mul_mmq_nodot",
                                  {{ROCKY_SC_WG, t.wg}, {ROCKY_SC_WTYPE, static_cast<uint32_t>(w.type)},
                                   {ROCKY_SC_BM, t.bm}, {ROCKY_SC_BN, t.bn}, {ROCKY_SC_BK, t.bk},
                                   {ROCKY_SC_WM, t.wm}, {ROCKY_SC_WN, t.wn}, {ROCKY_SC_TM, t.tm},
                                   {ROCKY_SC_TN, t.tn}, {ROCKY_SC_BK_STEP, t.bk_step},
                                   {ROCKY_SC_PREFETCH, t.prefetch}});
  if (e.pipes.capture_statistics() && prof.refuse_spills)
    refuse_spills(pipeline_statistics(e.pipes.device(), p, "mul_mmq " + t.str()));
  Bound bq = ops::bind(e, qs, false), bd = ops::bind(e, ds, false), by = ops::bind(e, y, true);
  if (bq.delta || bd.delta) fail("mul_mmq: q8_1 regions must be aligned to the storage offset alignment");
  const uint64_t per = std::max<uint64_t>(1, e.rec.max_binding() / w.row_bytes);
  for (uint64_t r0 = 0; r0 < w.rows; r0 += per) {
    const uint64_t r1 = std::min(w.rows, r0 + per);
    Bound bw = e.rec.bind(*w.buf, r0 * w.row_bytes, (r1 - r0) * w.row_bytes, false);
    if (w.type == DType::Q4_K && bw.delta % 4) fail("{}: q4_K rows must start 4-byte aligned", w.name);
    abi::MatmulFastPC pc{};
    pc.M = static_cast<uint32_t>(r1 - r0);
    pc.K = static_cast<uint32_t>(w.ne0);
    pc.N = n;
    pc.row_bytes = static_cast<uint32_t>(w.row_bytes);
    pc.w_off = bw.delta;
    pc.x_off = 0;
    pc.y_off = ops::f32_off(by);
    pc.ldy = static_cast<uint32_t>(w.rows);
    pc.m0 = static_cast<uint32_t>(r0);
    Bound b[] = {bw, bq, bd, by};
    e.rec.dispatch(p, b, &pc, sizeof pc, (pc.M + t.bm - 1) / t.bm, (n + t.bn - 1) / t.bn, 1, label);
  }
}

void mul_mm(ops::Env& e, const tune::DeviceProfile& prof, const ops::Weight& w, ops::Region x, uint32_t n,
            ops::Region y, bool f16_tiles, const std::string& label) {
  if (!ops::gpu_supports(w.type)) fail("{}: mul_mm does not support weight type {}", w.name, dtype_name(w.type));
  if (f16_tiles && !e.info.fp16) fail("{}: f16 tiles need shaderFloat16, which the device lacks", w.name);
  const tune::MatmulTile& t = prof.mm;
  const uint32_t shared = f16_tiles ? t.mm_shared_bytes() / 2 : t.mm_shared_bytes();
  std::string why = tune::check_tile(t, t.accumulators(), shared, prof.max_accumulators, e.info.shared_memory,
                                     e.info.max_workgroup_invocations);
  // mul_mm's BK need not be a multiple of 32 (check_tile's q8_1 rule): accept BK % 8 == 0.
  if (!why.empty() && !(t.bk % 8 == 0 && why.find("multiple of 32") != std::string::npos))
    fail("mul_mm ({} profile): {}", prof.name, why);
  const Pipeline& p = e.pipes.get(f16_tiles ? "mul_mm_f16" : "mul_mm",
                                  {{ROCKY_SC_WG, t.wg}, {ROCKY_SC_WTYPE, static_cast<uint32_t>(w.type)},
                                   {ROCKY_SC_BM, t.bm}, {ROCKY_SC_BN, t.bn}, {ROCKY_SC_BK, t.bk},
                                   {ROCKY_SC_WM, t.wm}, {ROCKY_SC_WN, t.wn}, {ROCKY_SC_TM, t.tm},
                                   {ROCKY_SC_TN, t.tn}});
  if (e.pipes.capture_statistics() && prof.refuse_spills)
    refuse_spills(pipeline_statistics(e.pipes.device(), p, "mul_mm " + t.str()));
  Bound bx = ops::bind(e, x, false), by = ops::bind(e, y, true);
  const uint64_t per = std::max<uint64_t>(1, e.rec.max_binding() / w.row_bytes);
  for (uint64_t r0 = 0; r0 < w.rows; r0 += per) {
    const uint64_t r1 = std::min(w.rows, r0 + per);
    Bound bw = e.rec.bind(*w.buf, r0 * w.row_bytes, (r1 - r0) * w.row_bytes, false);
    abi::MatmulFastPC pc{};
    pc.M = static_cast<uint32_t>(r1 - r0);
    pc.K = static_cast<uint32_t>(w.ne0);
    pc.N = n;
    pc.row_bytes = static_cast<uint32_t>(w.row_bytes);
    pc.w_off = bw.delta;
    pc.x_off = ops::f32_off(bx);
    pc.y_off = ops::f32_off(by);
    pc.ldy = static_cast<uint32_t>(w.rows);
    pc.m0 = static_cast<uint32_t>(r0);
    Bound b[] = {bw, bx, by};
    e.rec.dispatch(p, b, &pc, sizeof pc, (pc.M + t.bm - 1) / t.bm, (n + t.bn - 1) / t.bn, 1, label);
  }
}

}  // namespace rocky::vulkan::fast
