#include "backend/vulkan/ops/matmul_fast.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/vulkan/pipeline_stats.hpp"
#include <fmt/format.h>

#include "backend/vulkan/shaders/fast_abi.h"
#include "core/error.hpp"

namespace rocky::vulkan::fast {

static_assert(sizeof(abi::MatmulFastPC) == 9 * 4);
static_assert(sizeof(abi::MatmulMmqPC) == 12 * 4);
static_assert(sizeof(abi::Q81PC) == 4 * 4);
static_assert(sizeof(abi::RooflinePC) == 4 * 4);

bool mmq_supports(DType t) {
  return t == DType::Q4_0 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0 || t == DType::Q4_K ||
         t == DType::Q5_K || t == DType::Q6_K;
}

const char* mmq_supported_types() { return "q4_0, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K"; }

namespace {

// IEEE binary16 → binary32 (exact: every half is a float).
float half_to_float(const uint8_t* p) {
  const uint32_t h = static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8;
  const uint32_t sign = (h >> 15) & 1, e = (h >> 10) & 0x1F, m = h & 0x3FF;
  float v;
  if (e == 0)
    v = std::ldexp(static_cast<float>(m), -24);
  else if (e == 31)
    v = m ? std::nanf("") : INFINITY;
  else
    v = std::ldexp(static_cast<float>(m | 0x400), static_cast<int>(e) - 25);
  return sign ? -v : v;
}

// 6-bit scale and min of sub-block j of a q4_K super-block's 12 scale bytes (ggml's get_scale_min_k4).
void q4k_scale_min(const uint8_t* s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// One 32-block: int8 values v[32] and the scale pair.
struct Block32 {
  int8_t v[32];
  float s0, s1;
};

// Block b (0-based, 32 values) of a ggml row.
Block32 decode_block(DType t, const uint8_t* row, uint64_t b) {
  Block32 o{};
  if (t == DType::Q8_0) {
    const uint8_t* p = row + b * 34;
    o.s0 = o.s1 = half_to_float(p);
    std::memcpy(o.v, p + 2, 32);
  } else if (t == DType::Q4_0) {
    const uint8_t* p = row + b * 18;
    o.s0 = o.s1 = half_to_float(p);
    for (int i = 0; i < 16; ++i) {
      o.v[i] = static_cast<int8_t>((p[2 + i] & 0xF) - 8);
      o.v[i + 16] = static_cast<int8_t>((p[2 + i] >> 4) - 8);
    }
  } else if (t == DType::Q5_0 || t == DType::Q5_1) {  // 22 bytes: d, qh[4], qs[16]; q5_1 24: d, m, qh, qs
    const bool q51 = t == DType::Q5_1;
    const uint8_t* p = row + b * (q51 ? 24 : 22);
    const uint8_t* qh_p = p + (q51 ? 4 : 2);
    const uint8_t* qs = qh_p + 4;
    const uint32_t qh = static_cast<uint32_t>(qh_p[0]) | static_cast<uint32_t>(qh_p[1]) << 8 |
                        static_cast<uint32_t>(qh_p[2]) << 16 | static_cast<uint32_t>(qh_p[3]) << 24;
    const int off = q51 ? 0 : 16;
    for (int i = 0; i < 16; ++i) {
      o.v[i] = static_cast<int8_t>(((qs[i] & 0xF) | ((qh >> i) & 1) << 4) - off);
      o.v[i + 16] = static_cast<int8_t>(((qs[i] >> 4) | ((qh >> (i + 16)) & 1) << 4) - off);
    }
    o.s0 = half_to_float(p);
    o.s1 = q51 ? half_to_float(p + 2) : o.s0;  // q5_1: value = d·q + m
  } else if (t == DType::Q5_K) {               // 176 bytes: d, dmin, scales[12], qh[32], qs[128]
    const uint8_t* p = row + (b / 8) * 176;
    const int j = static_cast<int>(b % 8);
    int sc = 0, m = 0;
    q4k_scale_min(p + 4, j, sc, m);
    o.s0 = half_to_float(p) * static_cast<float>(sc);
    o.s1 = -(half_to_float(p + 2) * static_cast<float>(m));
    const uint8_t *qh = p + 16, *q = p + 48 + (j / 2) * 32;
    for (int l = 0; l < 32; ++l)
      o.v[l] = static_cast<int8_t>((j % 2 ? q[l] >> 4 : q[l] & 0xF) | ((qh[l] >> j) & 1) << 4);
  } else if (t == DType::Q4_K) {  // 144 bytes: d, dmin, scales[12], qs[128]
    const uint8_t* p = row + (b / 8) * 144;
    const int j = static_cast<int>(b % 8);
    int sc = 0, m = 0;
    q4k_scale_min(p + 4, j, sc, m);
    o.s0 = half_to_float(p) * static_cast<float>(sc);
    o.s1 = -(half_to_float(p + 2) * static_cast<float>(m));
    const uint8_t* q = p + 16 + (j / 2) * 32;
    for (int l = 0; l < 32; ++l) o.v[l] = static_cast<int8_t>(j % 2 ? q[l] >> 4 : q[l] & 0xF);
  } else if (t == DType::Q6_K) {  // 210 bytes: ql[128], qh[64], scales[16] (int8), d
    const uint8_t* p = row + (b / 8) * 210;
    const int j = static_cast<int>(b % 8), n = j / 4, r = j % 4;  // element 128n + 32r + l
    const uint8_t *ql = p + 64 * n, *qh = p + 128 + 32 * n;
    const int8_t* sc = reinterpret_cast<const int8_t*>(p + 192) + 8 * n;
    const float d = half_to_float(p + 208);
    for (int l = 0; l < 32; ++l) {
      const int lo = r < 2 ? ql[32 * r + l] & 0xF : ql[32 * (r - 2) + l] >> 4;
      const int hi = (qh[l] >> (2 * r)) & 3;
      o.v[l] = static_cast<int8_t>((lo | hi << 4) - 32);
    }
    o.s0 = d * static_cast<float>(sc[2 * r]);
    o.s1 = d * static_cast<float>(sc[2 * r + 1]);
  } else {
    fail("repack_for_mmq: weight type {} is not supported by mul_mmq (supported: {})", dtype_name(t),
         mmq_supported_types());
  }
  return o;
}

}  // namespace

MmqLayout mmq_layout(DType t, uint64_t k, uint64_t rows, bool q4k_nibbles) {
  if (!mmq_supports(t))
    fail("mmq layout: weight type {} is not supported by mul_mmq (supported: {})", dtype_name(t),
         mmq_supported_types());
  if (k % dtype_info(t).block_elems || k % 32)
    fail("mmq layout: K = {} is not a multiple of {}'s block", k, dtype_name(t));
  MmqLayout l;
  l.nibbles = q4k_nibbles && (t == DType::Q4_K || t == DType::Q6_K);
  l.q_row_bytes = l.nibbles ? k / 2 : k;
  l.s_group_words = l.nibbles && t == DType::Q6_K ? 21 : (t == DType::Q5_1 ? 8 : 5);
  l.s_row_bytes = (k / 32 + 7) / 8 * l.s_group_words * 4;
  l.s_offset = (rows * l.q_row_bytes + 255) / 256 * 256;
  l.bytes = l.s_offset + rows * l.s_row_bytes;
  return l;
}

namespace {

uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
void wr16(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

}  // namespace

void repack_for_mmq(DType t, const void* src, uint64_t k, uint64_t rows, bool q4k_nibbles, uint8_t* dst) {
  const MmqLayout l = mmq_layout(t, k, rows, q4k_nibbles);
  const uint64_t rb = row_bytes(t, k), nblk = k / 32;
  const auto* in = static_cast<const uint8_t*>(src);
  std::memset(dst, 0, l.bytes);
  for (uint64_t r = 0; r < rows; ++r) {
    const uint8_t* row = in + r * rb;
    uint8_t* q = dst + r * l.q_row_bytes;
    uint8_t* s = dst + l.s_offset + r * l.s_row_bytes;
    for (uint64_t b = 0; b < nblk; ++b) {
      const Block32 blk = decode_block(t, row, b);
      uint8_t* g = s + (b / 8) * l.s_group_words * 4;  // the block's scale group (8 blocks)
      const uint64_t j = b % 8;
      if (l.nibbles && t == DType::Q6_K) {  // u = q + 32: low nibbles as pairs, high 2 bits in the group
        uint8_t* hw = g + 20 + j * 8;       // nibble word c (values 4c.. and 16 + 4c..): 16 bits at hw + 2c
        for (int c = 0; c < 4; ++c) {
          uint32_t h = 0;
          for (int kk = 0; kk < 4; ++kk) {
            const int i = 4 * c + kk;
            const uint32_t u0 = static_cast<uint32_t>(blk.v[i] + 32), u1 = static_cast<uint32_t>(blk.v[i + 16] + 32);
            q[b * 16 + static_cast<uint64_t>(i)] = static_cast<uint8_t>((u0 & 0xF) | (u1 & 0xF) << 4);
            h |= (u0 >> 4) << (2 * kk) | (u1 >> 4) << (8 + 2 * kk);
          }
          wr16(hw + 2 * c, h);
        }
      } else if (l.nibbles) {
        for (int i = 0; i < 16; ++i)
          q[b * 16 + static_cast<uint64_t>(i)] = static_cast<uint8_t>(blk.v[i] | blk.v[i + 16] << 4);
      } else {
        std::memcpy(q + b * 32, blk.v, 32);
      }
      // Scales as stored in the GGUF (f16 d, 6-bit / int8 sub-block scales): the kernel forms the
      // same f32 products decode_block does.
      if (t == DType::Q4_K || t == DType::Q5_K) {  // word 0: d | dmin << 16; word 1 + j/2, half j%2: sc | m << 8
        const uint8_t* p = row + (b / 8) * (t == DType::Q4_K ? 144 : 176);
        int sc = 0, m = 0;
        q4k_scale_min(p + 4, static_cast<int>(j), sc, m);
        wr16(g, rd16(p));
        wr16(g + 2, rd16(p + 2));
        wr16(g + 4 + j * 2, static_cast<uint32_t>(sc) | static_cast<uint32_t>(m) << 8);
      } else if (t == DType::Q6_K) {  // word 0: d; word 1 + j/2, half j%2: the two int8 scales
        const uint8_t* p = row + (b / 8) * 210;
        wr16(g, rd16(p + 208));
        const int n = static_cast<int>(j) / 4, rr = static_cast<int>(j) % 4;
        g[4 + j * 2] = p[192 + 8 * n + 2 * rr];
        g[4 + j * 2 + 1] = p[192 + 8 * n + 2 * rr + 1];
      } else if (t == DType::Q5_1) {  // the block's f16 d at half j of words 0..3, its f16 m at half j of 4..7
        wr16(g + j * 2, rd16(row + b * 24));
        wr16(g + 16 + j * 2, rd16(row + b * 24 + 2));
      } else {  // q8_0, q4_0, q5_0: the block's f16 d at half j of the group
        wr16(g + j * 2, rd16(row + b * (t == DType::Q8_0 ? 34 : (t == DType::Q5_0 ? 22 : 18))));
      }
    }
  }
}

float mmq_value(DType t, const MmqLayout& l, const uint8_t* repack, uint64_t row, uint64_t i) {
  const uint64_t b = i / 32, li = i % 32, j = b % 8;
  const uint8_t* q = repack + row * l.q_row_bytes;
  const uint8_t* g = repack + l.s_offset + row * l.s_row_bytes + (b / 8) * l.s_group_words * 4;
  int v;
  if (l.nibbles) {
    const uint8_t byte = q[b * 16 + li % 16];
    v = li < 16 ? byte & 0xF : byte >> 4;
    if (t == DType::Q6_K) {
      const uint64_t c = (li % 16) / 4, kk = li % 4;
      const uint32_t h = rd16(g + 20 + j * 8 + c * 2);
      v = (v | static_cast<int>((h >> ((li < 16 ? 0 : 8) + 2 * kk)) & 3) << 4) - 32;
    }
  } else {
    v = static_cast<int8_t>(q[b * 32 + li]);
  }
  if (t == DType::Q4_K || t == DType::Q5_K) {
    const uint32_t p = rd16(g + 4 + j * 2);
    const float s0 = half_to_float(g) * static_cast<float>(p & 0xFF);
    const float s1 = -(half_to_float(g + 2) * static_cast<float>(p >> 8));
    const float a = s0 * static_cast<float>(v);
    return a + s1;
  }
  if (t == DType::Q6_K) {
    const float d = half_to_float(g);
    return d * static_cast<float>(static_cast<int8_t>(g[4 + j * 2 + (li < 16 ? 0 : 1)])) * static_cast<float>(v);
  }
  if (t == DType::Q5_1) {
    const float a = half_to_float(g + j * 2) * static_cast<float>(v);
    return a + half_to_float(g + 16 + j * 2);
  }
  return half_to_float(g + j * 2) * static_cast<float>(v);
}

Buffer upload_for_mmq(Memory& mem, ops::Weight& w, const void* ggml_rows, bool q4k_nibbles) {
  const MmqLayout l = mmq_layout(w.type, w.ne0, w.rows, q4k_nibbles);
  std::vector<uint8_t> bytes(l.bytes);
  repack_for_mmq(w.type, ggml_rows, w.ne0, w.rows, q4k_nibbles, bytes.data());
  Buffer b = mem.create("mmq repack " + w.name, l.bytes, BufferKind::DEVICE, MemUse::WEIGHTS);
  mem.upload(b, 0, bytes.data(), bytes.size());
  w.mmq_q_row_bytes = l.q_row_bytes;
  w.mmq_s_offset = l.s_offset;
  w.mmq_s_row_bytes = l.s_row_bytes;
  w.mmq_nibbles = l.nibbles;
  return b;  // the caller sets w.mmq_buf once the buffer has its final address
}

void quantize_q8_1(ops::Env& e, ops::Region x, uint32_t k, uint32_t n, ops::Region qs, ops::Region ds,
                   const std::string& label) {
  if (k % 32) fail("quantize_q8_1: K = {} is not a multiple of 32", k);
  constexpr uint32_t wg = 64;
  const Pipeline& p = e.pipes.get("quantize_q8_1", {{ROCKY_SC_WG, wg}});
  Bound bx = ops::bind(e, x, false), bq = ops::bind(e, qs, true), bd = ops::bind(e, ds, true);
  if (bq.delta || bd.delta) fail("quantize_q8_1: q8_1 regions must be aligned to the storage offset alignment");
  abi::Q81PC pc{k, n, ops::f32_off(bx), 0};
  auto grid = e.rec.grid_1d((static_cast<uint64_t>(k / 32) * n * 8 + wg - 1) / wg);  // 8 invocations per block
  Bound b[] = {bx, bq, bd};
  e.rec.dispatch(p, b, &pc, sizeof pc, grid[0], grid[1], 1, label);
}

static_assert(sizeof(abi::ProducerQ81PC) == 8 * 4);

uint32_t rms_norm_q8_1_wg(const tune::DeviceProfile& prof, const DeviceInfo& info) {
  if (prof.norm_q8_wg != 0) return std::min(prof.norm_q8_wg, info.max_workgroup_invocations);
  return info.max_workgroup_invocations >= 256 && info.max_workgroup_size[0] >= 256 ? 256
                                                                                    : 128;  // Vulkan's minimum is 128
}

void rms_norm_q8_1(ops::Env& e, ops::Region x, ops::Region w, uint32_t ne0, uint32_t n_cols, float eps, ops::Region qs,
                   ops::Region ds, const std::string& label) {
  if (ne0 % 32) fail("rms_norm_q8_1: ne0 = {} is not a multiple of 32", ne0);
  const uint32_t wg = rms_norm_q8_1_wg(ops::profile(e), e.info);
  // ≤ 8 columns (decode, a batched step): Σx² in two flat passes instead of the tree.
  const uint32_t flat = n_cols <= k_matvec_max_cols && wg % 32 == 0 ? 1u : 0u;
  const Pipeline& p = e.pipes.get("rms_norm_q8_1", {{ROCKY_SC_WG, wg}, {ROCKY_SC_RMS_FLAT, flat}});
  Bound bx = ops::bind(e, x, false), bw = ops::bind(e, w, false), bq = ops::bind(e, qs, true),
        bd = ops::bind(e, ds, true);
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
  Bound bg = ops::bind(e, gate, false), bu = ops::bind(e, up, false), bq = ops::bind(e, qs, true),
        bd = ops::bind(e, ds, true);
  if (bq.delta || bd.delta) fail("silu_mul_q8_1: q8_1 regions must be aligned to the storage offset alignment");
  abi::ProducerQ81PC pc{ne0, n_cols, ops::f32_off(bg), ops::f32_off(bu), 0.0f, 0, 0, 0};
  auto grid = e.rec.grid_1d((static_cast<uint64_t>(ne0 / 32) * n_cols * 8 + wg - 1) / wg);  // 8 invocations per block
  Bound b[] = {bg, bu, bq, bd};
  e.rec.dispatch(p, b, &pc, sizeof pc, grid[0], grid[1], 1, label);
}

void mul_mmq(ops::Env& e, const tune::DeviceProfile& prof, const ops::Weight& w, ops::Region qs, ops::Region ds,
             uint32_t n, ops::Region y, bool use_dot, const std::string& label, const MmqEpilogue& epi) {
  if (!mmq_supports(w.type))
    fail("{}: mul_mmq does not support weight type {} (supported: {})", w.name, dtype_name(w.type),
         mmq_supported_types());
  if (use_dot && !e.info.int8_dot) fail("{}: the device has no shaderIntegerDotProduct (use the fallback)", w.name);
  if (use_dot && n <= e.mmv_q8 && ops::matvec_uses_mmq(e, w)) {  // few columns: the int8-dot matvec
    matvec_q8(e, w, qs, ds, n, y, label, epi);
    return;
  }
  for (size_t i = 0; i <= prof.mmq_alt.size(); ++i) {
    const tune::MatmulTile& c = i == 0 ? prof.mmq : prof.mmq_alt[i - 1];
    std::string why = tune::check_tile(c, c.mmq_accumulators(), c.mmq_shared_bytes(), prof.max_accumulators,
                                       e.info.shared_memory, e.info.max_workgroup_invocations);
    if (!why.empty()) fail("mul_mmq ({} profile{}): {}", prof.name, i ? fmt::format(", mmq_alt[{}]", i - 1) : "", why);
  }
  if (!w.mmq_buf)
    fail(
        "{}: mul_mmq needs the weight repacked at load (fast::upload_for_mmq; the backend does it when the int8 "
        "path is on)",
        w.name);
  const tune::MatmulTile& t = tune::pick_mmq_tile(prof, static_cast<uint32_t>(w.rows), n);
  const Pipeline& p =
      e.pipes.get(use_dot ? "mul_mmq" : "mul_mmq_nodot", {{ROCKY_SC_WG, t.wg},
                                                          {ROCKY_SC_WTYPE, static_cast<uint32_t>(w.type)},
                                                          {ROCKY_SC_BM, t.bm},
                                                          {ROCKY_SC_BN, t.bn},
                                                          {ROCKY_SC_BK, t.bk},
                                                          {ROCKY_SC_WM, t.wm},
                                                          {ROCKY_SC_WN, t.wn},
                                                          {ROCKY_SC_TM, t.tm},
                                                          {ROCKY_SC_TN, t.tn},
                                                          {ROCKY_SC_BK_STEP, t.bk_step},
                                                          {ROCKY_SC_PREFETCH, t.prefetch},
                                                          {ROCKY_SC_MMQ_NIB, w.mmq_nibbles ? 1u : 0u},
                                                          {ROCKY_SC_MMQ_VEC4, t.vec4},
                                                          {ROCKY_SC_MMQ_EPI, static_cast<uint32_t>(epi.kind)}});
  if (e.pipes.capture_statistics() && prof.refuse_spills)
    refuse_spills(pipeline_statistics(e.pipes.device(), p, "mul_mmq " + t.str()));
  Bound bq = ops::bind(e, qs, false), bd = ops::bind(e, ds, false), by = ops::bind(e, y, true);
  if (bq.delta || bd.delta) fail("mul_mmq: q8_1 regions must be aligned to the storage offset alignment");
  // Binding 5: the epilogue operand, or (no epilogue) the q8_1 scales again as a read-only dummy.
  Bound be = bd;
  if (epi.kind != Epilogue::NONE) {
    const uint64_t need = (epi.kind == Epilogue::BIAS ? w.rows : w.rows * n) * 4;
    if (!epi.operand.buf || epi.operand.bytes < need)
      fail("{}: mul_mmq {} operand holds {} bytes, {} needed", label, epi.kind == Epilogue::BIAS ? "bias" : "residual",
           epi.operand.bytes, need);
    be = ops::bind(e, epi.operand, false);
  }
  for_each_mmq_window(e, w, [&](abi::MatmulMmqPC& pc, const Bound& bw, const Bound& bs) {
    pc.N = n;
    pc.x_off = 0;
    pc.y_off = ops::f32_off(by);
    pc.ldy = static_cast<uint32_t>(w.rows);
    pc.e_off = epi.kind == Epilogue::NONE ? 0 : ops::f32_off(be);
    Bound b[] = {bw, bs, bq, bd, by, be};
    e.rec.dispatch(p, b, &pc, sizeof pc, (pc.M + t.bm - 1) / t.bm, (n + t.bn - 1) / t.bn, 1, label);
  });
}

void for_each_mmq_window(ops::Env& e, const ops::Weight& w,
                         const std::function<void(abi::MatmulMmqPC&, const Bound&, const Bound&)>& fn) {
  const uint64_t srow = w.mmq_s_row_bytes;
  const uint64_t slack = std::max<uint64_t>(4, e.info.min_storage_offset_alignment) + 4;
  const uint64_t row_max = std::max(w.mmq_q_row_bytes, srow);
  if (e.rec.max_binding() < slack + row_max)
    fail("{}: one repacked row ({} bytes) exceeds the storage binding limit ({} bytes)", w.name, row_max,
         e.rec.max_binding());
  const uint64_t per = (e.rec.max_binding() - slack) / row_max;
  for (uint64_t r0 = 0; r0 < w.rows; r0 += per) {
    const uint64_t r1 = std::min(w.rows, r0 + per);
    Bound bw = e.rec.bind(*w.mmq_buf, r0 * w.mmq_q_row_bytes, (r1 - r0) * w.mmq_q_row_bytes, false);
    Bound bs = e.rec.bind(*w.mmq_buf, w.mmq_s_offset + r0 * srow, (r1 - r0) * srow, false);
    if (bw.delta % 16 || bs.delta % 4) fail("{}: mmq repack windows are not 16/4-byte aligned", w.name);
    abi::MatmulMmqPC pc{};
    pc.M = static_cast<uint32_t>(r1 - r0);
    pc.K = static_cast<uint32_t>(w.ne0);
    pc.wq_off = bw.delta / 16;
    pc.ws_off = bs.delta / 4;
    pc.m0 = static_cast<uint32_t>(r0);
    fn(pc, bw, bs);
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
  const Pipeline& p = e.pipes.get(f16_tiles ? "mul_mm_f16" : "mul_mm", {{ROCKY_SC_WG, t.wg},
                                                                        {ROCKY_SC_WTYPE, static_cast<uint32_t>(w.type)},
                                                                        {ROCKY_SC_BM, t.bm},
                                                                        {ROCKY_SC_BN, t.bn},
                                                                        {ROCKY_SC_BK, t.bk},
                                                                        {ROCKY_SC_WM, t.wm},
                                                                        {ROCKY_SC_WN, t.wn},
                                                                        {ROCKY_SC_TM, t.tm},
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
