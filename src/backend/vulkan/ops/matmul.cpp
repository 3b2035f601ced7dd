// matmul / matvec — shaders/matmul.comp (tiled, N > 1; MatmulPath::BASIC) and shaders/matvec.comp
// (N = 1; matvec_mmq.comp over the mmq repack when the weight has one); the int8 path (mul_mmq) and
// mul_mm are chosen here by Env::matmul (ops.hpp). Weights
// larger than one binding are multiplied in windows of whole rows (one dispatch per window), and
// activations larger than one binding in chunks of whole token columns.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/push_constants.hpp"
#include "core/error.hpp"
#include "backend/vulkan/ops/matmul_fast.hpp"
#include "backend/vulkan/shaders/fast_abi.h"

namespace rocky::vulkan::ops {

uint64_t rows_per_window(Env& e, const Weight& w);  // get_rows.cpp

MatmulPath parse_matmul_path(const std::string& s, const std::string& what) {
  if (s == "auto") return MatmulPath::AUTO;
  if (s == "mmq") return MatmulPath::MMQ;
  if (s == "mm") return MatmulPath::MM;
  if (s == "basic") return MatmulPath::BASIC;
  fail("{} '{}': expected auto, mmq, mm or basic", what, s);
}

const char* matmul_path_name(MatmulPath p) {
  switch (p) {
    case MatmulPath::AUTO: return "auto";
    case MatmulPath::MMQ: return "mmq";
    case MatmulPath::MM: return "mm";
    case MatmulPath::BASIC: return "basic";
  }
  return "?";
}

bool matmul_uses_q8_1(const Env& e, const Weight& w, uint32_t n) {
  if (e.matmul != MatmulPath::AUTO && e.matmul != MatmulPath::MMQ) return false;
  if (e.prof == nullptr || w.mmq_buf == nullptr || n < 1 || !fast::mmq_supports(w.type) || w.ne0 % 32 != 0)
    return false;
  const bool q8 = n <= e.mmv_q8 && e.info.int8_dot && matvec_uses_mmq(e, w);        // the int8-dot matvec
  if (!q8 && (n == 1 || (n <= e.mmv_cols && matvec_uses_mmq(e, w)))) return false;  // matvec_mmq, f32 x
  const uint64_t lim = e.rec.max_binding();
  return fast::q8_1_qs_bytes(w.ne0, n) <= lim && fast::q8_1_ds_bytes(w.ne0, n) <= lim &&
         w.rows * uint64_t{n} * 4 + 256 <= lim && w.ne0 * uint64_t{n} * 4 + 256 <= lim;
}

void matmul_q8_1(Env& e, const Weight& w, Region qs, Region ds, uint32_t n, Region y, const std::string& label) {
  if (e.prof == nullptr) fail("{}: the int8 matmul path needs a tuning profile", label);
  fast::mul_mmq(e, *e.prof, w, qs, ds, n, y, e.info.int8_dot, label);
}

const tune::DeviceProfile& profile(const Env& e) {
  return e.prof != nullptr
             ? *e.prof
             : tune::select_profile(e.info.vendor_id, e.info.driver_name, e.info.type == VK_PHYSICAL_DEVICE_TYPE_CPU);
}

bool matvec_uses_mmq(const Env& e, const Weight& w) {
  (void)e;
  return w.mmq_buf != nullptr && fast::mmq_supports(w.type) && w.ne0 % 32 == 0 && w.mmq_q_row_bytes > 0;
}

void matvec_mmq(Env& e, const Weight& w, Region x, Region y, const std::string& label) {
  fast::matvec_mmq(e, w, x, y, label, {});
}

}  // namespace rocky::vulkan::ops

namespace rocky::vulkan::fast {

// matvec_mmq's shape per device class: data in the tuning profile (tune::MatvecRule, src/tune/tile.cpp;
// docs/tuning-log.md #16). `rows` is the most rows per workgroup; it is halved (down to 1) while
// fewer than `min_groups` workgroups would cover M, so that small matrices (attn_k: 256 rows) still
// spread over the whole GPU.
//  - lavapipe runs a workgroup as one CPU thread's SIMD loop: few wide groups amortize its
//    per-group cost (32 × 8 rows);
//  - NVIDIA: up to 4 rows, x reused across the rows from registers, ≥ 256 groups; invocations by
//    the row's 32-blocks (wg_by_k; measured on the H200, tuning-log #16): ≤ 64 blocks (K ≤ 2,048) 32
//    invocations (the q6_K head 134 → 124 µs) with rows by M (#24: 2 / 4 × 2 steps / 8; the
//    rule's rows and unroll do not apply there), ≥ 256 blocks (K ≥ 8,192) 128 with two steps per
//    loop iteration (ffn_down 16.8 → 14.0 µs), else 64 (64 × 4 beat × 2, × 8, × 16 there);
//  - Mali (Valhall, 16-wide warps, ≤ 32 work registers for full occupancy): quarter-block steps
//    (8 x values live) × 1 row — the offline G610 compiler gives 32 work registers for every type
//    and both reductions (2 rows: 64 for q6_K with subgroups, i.e. half occupancy);
//  - anything else: 64 × up to 4 rows, ≥ 512 groups.
// A lab experiment sets any of these through ROCKY_TUNE (e.g. {"mmv": {"wg": 64, "rows": 2, "min_groups": 0}}).
MatvecShape matvec_shape(const tune::DeviceProfile& prof, const DeviceInfo& d, uint64_t m, uint64_t k,
                         uint32_t q8_cols) {
  MatvecShape s;
  s.subgroup = d.subgroup_arith;
  const tune::MatvecRule& c = prof.mmv;
  s.wg = std::min(c.wg, d.max_workgroup_invocations);
  s.split = c.split;
  s.unroll = c.unroll;
  s.rows = 0;  // 0: the rule's rows (below)
  if (c.wg_by_k) {
    const uint64_t blocks = k / 32;
    if (blocks <= 64) {
      // K ≤ 2,048 (tuning-log #24, bench-op at decode's conditions): the head (151936 rows) 8
      // rows, 144 → 130 µs; ffn_up (11008) 4 rows × 2 steps per iteration, 15.2 → 13.7 µs;
      // attn_q (2048) 2 rows, 8.3 → 6.9 µs.
      s.wg = 32;
      s.rows = m >= 65536 ? 8 : (m >= 8192 ? 4 : 2);
      if (s.rows == 4) s.unroll = 2;
    } else if (blocks >= 256 && d.max_workgroup_invocations >= 128) {
      s.wg = 128;
      s.unroll = 2;
    }
  }
  if (s.rows == 0) s.rows = std::min(c.rows, s.wg);
  while (s.rows > 1 && (m + s.rows - 1) / s.rows < c.min_groups) s.rows /= 2;
  // A profile's rule may not fit a smaller device: its shared-memory reduction needs rows · wg floats.
  while (s.rows > 1 && uint64_t{s.rows} * s.wg * 4 > d.shared_memory) s.rows /= 2;
  if (q8_cols < 2) return s;
  // matvec_q8 of several columns: the profile's column shape (MatvecRule::cols_wg / cols_rows, unroll 2).
  if (c.cols_wg != 0) {
    s.wg = std::min(c.cols_wg, d.max_workgroup_invocations);
    s.rows = c.cols_rows;
    s.unroll = 2;
  }
  return s;
}

void matvec_mmq(ops::Env& e, const ops::Weight& w, ops::Region x, ops::Region y, const std::string& label,
                const MmqEpilogue& epi, const MatvecNorm* norm, uint32_t n) {
  if (!ops::matvec_uses_mmq(e, w))
    fail("{}: matvec_mmq needs a weight of a type mul_mmq supports with its mmq repack (K = {})", w.name, w.ne0);
  if (n < 1 || n > k_matvec_max_cols || (n > 1 && norm != nullptr))
    fail("{}: matvec_mmq of {} columns (1 … {}, a folded norm only with 1)", label, n, k_matvec_max_cols);
  if (x.bytes < w.ne0 * 4 * n || y.bytes < w.rows * 4 * n)
    fail("{}: matvec_mmq regions too small (x {} bytes for K = {}, y {} bytes for M = {}, {} columns)", label, x.bytes,
         w.ne0, y.bytes, w.rows, n);
  const uint64_t epi_need = w.rows * 4 * (epi.kind == Epilogue::RESIDUAL ? n : 1);
  if (epi.kind != Epilogue::NONE && (!epi.operand.buf || epi.operand.bytes < epi_need))
    fail("{}: matvec_mmq {} operand holds {} bytes, {} needed", label, epi.kind == Epilogue::BIAS ? "bias" : "residual",
         epi.operand.bytes, epi_need);
  if (norm != nullptr && (!norm->weight.buf || norm->weight.bytes < w.ne0 * 4))
    fail("{}: matvec_mmq norm weight holds {} bytes, {} needed", label, norm->weight.bytes, w.ne0 * 4);
  const tune::DeviceProfile& prof = ops::profile(e);
  MatvecShape sh = matvec_shape(prof, e.info, w.rows, w.ne0);
  if (n > 1) {  // fewer x values per step as columns grow (registers), and ROWS·n ≤ WG (stores)
    sh.split = std::max(sh.split, n <= 2 ? 0u : (n <= 4 ? 1u : 2u));
    // The profile's mmv.col_split 0|1|2 replaces that rule (whole / half / quarter blocks per step
    // for every n > 1): wider loads and fewer loop rounds against the x registers, n · 32 >> SPLIT
    // floats per step (docs/tuning-log.md #27).
    if (prof.mmv.col_split != tune::MatvecRule::k_col_split_by_cols) sh.split = prof.mmv.col_split;
    sh.rows = std::max(1u, std::min(sh.rows, sh.wg / n));
    while (sh.rows > 1 && uint64_t{sh.rows * n + 1} * sh.wg * 4 > e.info.shared_memory) sh.rows /= 2;
  }
  Bound bx = ops::bind(e, ops::Region{x.buf, x.offset, w.ne0 * 4 * n}, false);
  Bound by = ops::bind(e, ops::Region{y.buf, y.offset, w.rows * 4 * n}, true);
  // Binding 4: the epilogue operand, or x again as a read-only dummy.
  Bound be =
      epi.kind != Epilogue::NONE ? ops::bind(e, ops::Region{epi.operand.buf, epi.operand.offset, epi_need}, false) : bx;
  // Binding 5: the folded norm's weight, or x again.
  Bound bn = norm != nullptr ? ops::bind(e, ops::Region{norm->weight.buf, norm->weight.offset, w.ne0 * 4}, false) : bx;
  const uint32_t xo = ops::f32_off(bx), no = norm != nullptr ? ops::f32_off(bn) : 0;
  const Pipeline& p = e.pipes.get(sh.subgroup ? "matvec_mmq" : "matvec_mmq_shared",
                                  {{ROCKY_SC_WG, sh.wg},
                                   {ROCKY_SC_WTYPE, static_cast<uint32_t>(w.type)},
                                   {ROCKY_SC_BM, sh.rows},
                                   {ROCKY_SC_MMQ_NIB, w.mmq_nibbles ? 1u : 0u},
                                   {ROCKY_SC_MMV_HALF, sh.split},
                                   {ROCKY_SC_MMV_XVEC4, xo % 4 == 0 && no % 4 == 0 ? 1u : 0u},
                                   {ROCKY_SC_MMQ_EPI, static_cast<uint32_t>(epi.kind)},
                                   {ROCKY_SC_MMV_UNROLL, sh.unroll},
                                   {ROCKY_SC_MMV_NORM, norm != nullptr ? 1u : 0u},
                                   {ROCKY_SC_MMV_COLS, n}});
  for_each_mmq_window(e, w, [&](abi::MatmulMmqPC& pc, const Bound& bw, const Bound& bs) {
    pc.N = n;
    pc.x_off = xo;
    pc.y_off = ops::f32_off(by);
    pc.ldy = static_cast<uint32_t>(w.rows);
    pc.e_off = epi.kind == Epilogue::NONE ? 0 : ops::f32_off(be);
    pc.n_off = no;
    pc.eps = norm != nullptr ? norm->eps : 0.0f;
    Bound b[] = {bw, bs, bx, by, be, bn};
    auto g = e.rec.grid_1d((pc.M + sh.rows - 1) / sh.rows);
    e.rec.dispatch(p, b, &pc, sizeof pc, g[0], g[1], 1, label);
  });
}

void matvec_q8(ops::Env& e, const ops::Weight& w, ops::Region qs, ops::Region ds, uint32_t n, ops::Region y,
               const std::string& label, const MmqEpilogue& epi) {
  if (!ops::matvec_uses_mmq(e, w))
    fail("{}: matvec_q8 needs a weight of a type mul_mmq supports with its mmq repack (K = {})", w.name, w.ne0);
  if (!e.info.int8_dot) fail("{}: matvec_q8 needs shaderIntegerDotProduct, which the device lacks", label);
  if (n < 1 || n > k_matvec_q8_max_cols) fail("{}: matvec_q8 of {} columns (1 … {})", label, n, k_matvec_q8_max_cols);
  if (qs.bytes < q8_1_qs_bytes(w.ne0, n) || ds.bytes < q8_1_ds_bytes(w.ne0, n) || y.bytes < w.rows * 4 * n)
    fail("{}: matvec_q8 regions too small (q8_1 {} + {} bytes for K = {}, y {} bytes for M = {}, {} columns)", label,
         qs.bytes, ds.bytes, w.ne0, y.bytes, w.rows, n);
  const uint64_t epi_need = w.rows * 4 * (epi.kind == Epilogue::RESIDUAL ? n : 1);
  if (epi.kind != Epilogue::NONE && (!epi.operand.buf || epi.operand.bytes < epi_need))
    fail("{}: matvec_q8 {} operand holds {} bytes, {} needed", label, epi.kind == Epilogue::BIAS ? "bias" : "residual",
         epi.operand.bytes, epi_need);
  // Columns per workgroup: groups of ≤ mmv.q8_group, as even as possible (12 columns in groups of
  // ≤ 8: 2 × 6).
  const tune::MatvecRule& rule = ops::profile(e).mmv;
  const uint32_t per = std::clamp<uint32_t>(rule.q8_group, 1, k_matvec_q8_group_cols);
  const uint32_t groups = (n + per - 1) / per, cols = (n + groups - 1) / groups;
  MatvecShape sh = matvec_shape(ops::profile(e), e.info, w.rows, w.ne0, cols);
  sh.wg = std::max<uint32_t>(sh.wg, 4);                     // the shared-memory reduction reads 4 at a time
  sh.rows = std::max(1u, std::min(sh.rows, sh.wg / cols));  // ≤ one output per invocation where it can
  while (sh.rows > 1 && uint64_t{sh.rows} * cols * sh.wg * 4 > e.info.shared_memory) sh.rows /= 2;
  Bound bq = ops::bind(e, ops::Region{qs.buf, qs.offset, q8_1_qs_bytes(w.ne0, n)}, false);
  Bound bd = ops::bind(e, ops::Region{ds.buf, ds.offset, q8_1_ds_bytes(w.ne0, n)}, false);
  if (bq.delta || bd.delta) fail("{}: matvec_q8: q8_1 regions must be aligned to the storage offset alignment", label);
  Bound by = ops::bind(e, ops::Region{y.buf, y.offset, w.rows * 4 * n}, true);
  Bound be =
      epi.kind != Epilogue::NONE ? ops::bind(e, ops::Region{epi.operand.buf, epi.operand.offset, epi_need}, false) : bd;
  const Pipeline& p =
      e.pipes.get(sh.subgroup ? "matvec_q8" : "matvec_q8_shared", {{ROCKY_SC_WG, sh.wg},
                                                                   {ROCKY_SC_WTYPE, static_cast<uint32_t>(w.type)},
                                                                   {ROCKY_SC_BM, sh.rows},
                                                                   {ROCKY_SC_MMQ_NIB, w.mmq_nibbles ? 1u : 0u},
                                                                   {ROCKY_SC_MMQ_EPI, static_cast<uint32_t>(epi.kind)},
                                                                   {ROCKY_SC_MMV_UNROLL, sh.unroll},
                                                                   {ROCKY_SC_MMV_COLS, cols},
                                                                   {ROCKY_SC_MMV_WOUTER, rule.q8_wouter}});
  for_each_mmq_window(e, w, [&](abi::MatmulMmqPC& pc, const Bound& bw, const Bound& bs) {
    pc.N = n;
    pc.x_off = 0;
    pc.y_off = ops::f32_off(by);
    pc.ldy = static_cast<uint32_t>(w.rows);
    pc.e_off = epi.kind == Epilogue::NONE ? 0 : ops::f32_off(be);
    Bound b[] = {bw, bs, bq, bd, by, be};
    auto g = e.rec.grid_1d((pc.M + sh.rows - 1) / sh.rows);
    e.rec.dispatch(p, b, &pc, sizeof pc, g[0], g[1], groups, label);
  });
}

}  // namespace rocky::vulkan::fast

namespace rocky::vulkan::ops {

void matmul(Env& e, const Weight& w, Region x, uint32_t n, Region y, const std::string& label) {
  if (!gpu_supports(w.type))
    fail("{}: weight type {} is not supported by the Vulkan kernels", w.name, dtype_name(w.type));
  if (n == 1 && matvec_uses_mmq(e, w)) {
    matvec_mmq(e, w, x, y, label);
    return;
  }
  // A few columns (a batched decode step, a short ubatch): one multi-column matvec.
  if (n > 1 && n <= e.mmv_cols && n <= fast::k_matvec_max_cols && matvec_uses_mmq(e, w) &&
      uint64_t{w.ne0} * n * 4 + 256 <= e.rec.max_binding() && uint64_t{w.rows} * n * 4 + 256 <= e.rec.max_binding()) {
    fast::matvec_mmq(e, w, x, y, label, {}, nullptr, n);
    return;
  }
  // Int8 path with matmul()'s own quantization (the backend quantizes in the producer instead).
  if (e.q81_qs && e.q81_ds && matmul_uses_q8_1(e, w, n) && fast::q8_1_qs_bytes(w.ne0, n) <= e.q81_qs->size() &&
      fast::q8_1_ds_bytes(w.ne0, n) <= e.q81_ds->size()) {
    Region qs{e.q81_qs, 0, fast::q8_1_qs_bytes(w.ne0, n)}, ds{e.q81_ds, 0, fast::q8_1_ds_bytes(w.ne0, n)};
    fast::quantize_q8_1(e, x, static_cast<uint32_t>(w.ne0), n, qs, ds, label + " q8_1");
    matmul_q8_1(e, w, qs, ds, n, y, label);
    return;
  }
  // Only the mmq repack on the device (the backend's default): a product the int8 path does
  // not take (its q8_1 / y regions over one binding, or no q8_1 scratch) runs per token column
  // over the repack with f32 activations.
  if (w.buf == nullptr) {
    if (!matvec_uses_mmq(e, w)) fail("{}: weight {} has no device copy", label, w.name);
    for (uint32_t c = 0; c < n; ++c)
      matvec_mmq(e, w, Region{x.buf, x.offset + uint64_t{c} * w.ne0 * 4, w.ne0 * 4},
                 Region{y.buf, y.offset + uint64_t{c} * w.rows * 4, w.rows * 4}, label);
    return;
  }
  // mul_mm, f32 tiles: x and y each within one binding (no chunking in mul_mm).
  if (e.matmul == MatmulPath::MM && e.prof && n > 1 && x.bytes + 256 <= e.rec.max_binding() &&
      y.bytes + 256 <= e.rec.max_binding()) {
    fast::mul_mm(e, *e.prof, w, x, n, y, /*f16_tiles=*/false, label);
    return;
  }
  const MatmulTile& t = e.tile;
  const bool vec = n == 1;
  std::vector<SpecConst> spec{{ROCKY_SC_WTYPE, static_cast<uint32_t>(w.type)}};
  if (vec) {
    spec.push_back({ROCKY_SC_WG, 64});
  } else {
    if (t.tm == 0 || t.tn == 0 || t.bk == 0 || t.bm % t.tm || t.bn % t.tn ||
        t.invocations() > e.info.max_workgroup_invocations || t.shared_bytes() > e.info.shared_memory) {
      fail("matmul tile {}x{}x{} / {}x{} does not fit the device ({} invocations, {} bytes shared)", t.bm, t.bn, t.bk,
           t.tm, t.tn, e.info.max_workgroup_invocations, e.info.shared_memory);
    }
    spec.insert(spec.end(), {{ROCKY_SC_WG, t.invocations()},
                             {ROCKY_SC_BM, t.bm},
                             {ROCKY_SC_BN, t.bn},
                             {ROCKY_SC_BK, t.bk},
                             {ROCKY_SC_TM, t.tm},
                             {ROCKY_SC_TN, t.tn}});
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
