// Host side of the fast prefill matmul kernels:
//  - quantize_q8_1 (shaders/quantize_q8_1.comp): f32 activations [K, N] → rocky's q8_1 layout
//    (fast_abi.h): `qs` = N·K int8 values as 8 words per 32-block (token-major), `ds` = N·K/32
//    pairs (d, d·Σq) as f32.
//  - mul_mmq (shaders/mul_mmq.comp, or mul_mmq_nodot.comp when the device lacks
//    shaderIntegerDotProduct): y [ldy = M, N] = W · x from weights (q4_0, q5_0, q5_1, q8_0, q4_K,
//    q5_K, q6_K)
//    repacked at load into the mmq layout below, and q8_1 activations; optionally + a bias or a
//    residual in the same dispatch (MmqEpilogue).
//
// The mmq layout (repack_for_mmq; shaders/common/mul_mmq.glsl, matvec_mmq.glsl, get_rows_mmq.comp
// read it) for a weight of `rows` rows of K values (K a multiple of 32), in one buffer. It is
// the weight's only device copy (the GGUF rows are not uploaded), so it is kept about as compact
// as the GGUF blocks:
//  - values at byte 0, row r at r · q_row_bytes: per 32-block of the row, 32 signed int8 (q8_0: q;
//    q4_0: q − 8; q5_0: q − 16; q6_K: q − 32; q4_K: q in 0..15; q5_1, q5_K: q in 0..31),
//    q_row_bytes = K; or, with `nibbles` (q4_K, q6_K), 16 bytes per block where byte i =
//    u[i] & 15 | (u[i + 16] & 15) << 4 (q4_K u = q; q6_K u = q + 32, whose 2 high bits sit in
//    the scale group), q_row_bytes = K / 2;
//  - scale groups at byte s_offset (256-aligned), row r at s_offset + r · s_row_bytes: one group
//    of s_group_words 32-bit words per 8 blocks (the last one padded), the GGUF's own scale
//    fields so that the kernels form the same f32 products as ggml:
//      q4_K, q5_K: word 0 = d | dmin << 16 (f16), word 1 + j/2 half j%2 = sc | m << 8 of block j;
//      q6_K: word 0 = d (f16), word 1 + j/2 half j%2 = the block's two int8 scales (values
//            0..15, 16..31); with nibbles words 5 + 2j, 6 + 2j = block j's high bits: for nibble
//            word c (values 4c.. and 16 + 4c..) 16 bits at half c of them, bits 2k = value
//            4c + k, bits 8 + 2k = value 16 + 4c + k (s_group_words 21, else 5);
//      q8_0, q4_0, q5_0: half j of words 0..3 = block j's f16 d (word 4 unused);
//      q5_1: half j of words 0..3 = block j's f16 d, half j of words 4..7 = its f16 m
//            (s_group_words 8).
// Block value i is then s0 · q_i with s0 = d · sc (q6_K: sc of its half; q8_0 / q4_0 / q5_0 /
// q5_1: s0 = d) and, for the affine types, s0 · q_i + s1: q4_K / q5_K s1 = −(dmin · m), q5_1
// s1 = m — bit-exact with ggml's dequantize_row_* (mmq_value; tests/fast/test_fast_matmul.cpp
// checks every type). Bits per value (GGUF): q4_K 4.625 (4.5), q6_K 6.625 (6.5625), q8_0 8.625
// (8.5), q4_0 8.625 (4.5; without nibbles q4_K / q6_K 8.625); q5_0 8.625 (5.5), q5_1 9 (6), q5_K
// 8.625 (5.5): the q5 types keep int8 values (no nibble / high-bit packing yet), so their
// repack is ≈ 1.5–1.6× their GGUF bytes.
// The tile comes from rocky::tune (a profile chosen for the device, or a JSON override) and is
// refused with a rocky::Error naming the violated limit (accumulators over the profile's budget,
// shared memory over the device's limit, inconsistent shape), and — when the pipelines capture
// statistics (--pipeline-stats) and prof.refuse_spills — when the driver reports spills or
// local/scratch memory for the compiled kernel (pipeline_stats.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "backend/vulkan/memory.hpp"
#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/shaders/fast_abi.h"
#include "tune/tile.hpp"

namespace rocky::vulkan::fast {

// Bytes of the two q8_1 regions for a [K, N] activation (K a multiple of 32).
inline uint64_t q8_1_qs_bytes(uint64_t k, uint64_t n) { return k * n; }
inline uint64_t q8_1_ds_bytes(uint64_t k, uint64_t n) { return k / 32 * n * 8; }

// True when mul_mmq (and matvec_mmq) handle weight type `t`: q4_0, q5_0, q5_1, q8_0, q4_K, q5_K,
// q6_K; mmq_supported_types() is that list as text (for error messages).
bool mmq_supports(DType t);
const char* mmq_supported_types();

// Sizes of the mmq layout (above) of `rows` rows of K values of `t`.
struct MmqLayout {
  uint64_t q_row_bytes = 0;  // values per row
  uint64_t s_row_bytes = 0;  // scale groups per row (ceil(K/256) · s_group_words · 4)
  uint64_t s_group_words = 5;
  uint64_t s_offset = 0;  // byte offset of the scale region
  uint64_t bytes = 0;     // whole buffer
  bool nibbles = false;
};
MmqLayout mmq_layout(DType t, uint64_t k, uint64_t rows, bool q4k_nibbles);

// Repack `rows` ggml rows of `t` (k values each, ggml row size apart from `src`) into the mmq
// layout at `dst` (mmq_layout(...).bytes). rocky::Error for an unsupported type or K not a
// multiple of the block.
void repack_for_mmq(DType t, const void* src, uint64_t k, uint64_t rows, bool q4k_nibbles, uint8_t* dst);

// Value i of row `row` of a repack (`repack` = the whole buffer, layout `l` of type t), exactly as
// the kernels dequantize it (the tests check it against ggml's dequantize_row_*).
float mmq_value(DType t, const MmqLayout& l, const uint8_t* repack, uint64_t row, uint64_t i);

// Repack w's ggml rows `ggml_rows` (w.rows · w.row_bytes bytes) on the host, upload them into a
// new device buffer and point w.mmq_* at it (q4k_nibbles: the profile's mmq_q4k_nibbles). The
// caller keeps the buffer alive as long as w is used.
Buffer upload_for_mmq(Memory& mem, ops::Weight& w, const void* ggml_rows, bool q4k_nibbles);

void quantize_q8_1(ops::Env& e, ops::Region x, uint32_t k, uint32_t n, ops::Region qs, ops::Region ds,
                   const std::string& label);

// Producers writing q8_1 directly (the prefill path needs no separate quantize dispatch):
// rms_norm of x [ne0, n_cols] with f32 weight w [ne0], and silu(gate) · up over [ne0, n_cols]
// (ne0 a multiple of 32). Same q8_1 values as quantize_q8_1 of the f32 result.
void rms_norm_q8_1(ops::Env& e, ops::Region x, ops::Region w, uint32_t ne0, uint32_t n_cols, float eps, ops::Region qs,
                   ops::Region ds, const std::string& label);
// rms_norm_q8_1's workgroup (one per column; a power of two): the profile's norm_q8_wg where set
// (Mali: 64, the `mali` label's variant), else 256 (128 where the device allows no more), so that a
// 2,048-wide column's Σx² pass has 8 loads per invocation and enough bytes in flight on a big GPU.
uint32_t rms_norm_q8_1_wg(const tune::DeviceProfile& prof, const DeviceInfo& info);
void silu_mul_q8_1(ops::Env& e, ops::Region gate, ops::Region up, uint32_t ne0, uint32_t n_cols, ops::Region qs,
                   ops::Region ds, const std::string& label);

// Epilogue of mul_mmq, applied per output element before the store (spec constant
// ROCKY_SC_MMQ_EPI, binding 5): BIAS adds operand[m] (f32 [M], e.g. attn_q.bias), RESIDUAL adds
// operand[n, m] (f32 [M, N], the y layout, e.g. the residual stream). The result is the same f32
// sum as a separate bias_add / add of the matmul output. The operand must not overlap y unless it
// IS y (same offset): each invocation reads its element before writing it.
enum class Epilogue : uint32_t { NONE = 0, BIAS = 1, RESIDUAL = 2 };
struct MmqEpilogue {
  Epilogue kind = Epilogue::NONE;
  ops::Region operand{};  // BIAS: ≥ M floats; RESIDUAL: ≥ M·N floats
};

// The decode matvec (ops::matvec_mmq; shaders/common/matvec_mmq.glsl) with mul_mmq's
// epilogue: y[m] = (W·x)[m] + operand[m] (BIAS: operand = the bias [M]; RESIDUAL: the residual
// stream [M], N = 1). Same aliasing rule as mul_mmq (the operand may BE y; x must not overlap y).
// With `norm` (its weight: f32 [K]): x is the raw input of an RMSNorm folded into the matvec, y =
// (W·(x ∘ norm.weight)) / sqrt(mean(x²) + norm.eps) (+ the epilogue) — the norm of graph.hpp's
// RMS_NORM computed per workgroup from the x values it loads anyway (shaders/common/matvec_mmq.glsl).
struct MatvecNorm {
  ops::Region weight{};
  float eps = 0;
};
// n > 1 (≤ k_matvec_max_cols): n columns in one dispatch, x [K, n], y [M, n] (and a
// residual operand [M, n]), the weights read once (no norm then).
constexpr uint32_t k_matvec_max_cols = 8;
void matvec_mmq(ops::Env& e, const ops::Weight& w, ops::Region x, ops::Region y, const std::string& label,
                const MmqEpilogue& epi, const MatvecNorm* norm = nullptr, uint32_t n = 1);

// The int8-dot matvec (shaders/common/matvec_q8.glsl): y [M, n] = W · x for n ≤ 64
// columns with x in q8_1 (qs, ds as quantize_q8_1 / rms_norm_q8_1 / silu_mul_q8_1 write them,
// mul_mmq's input), packed int8 dots per 16-value half, scales per block, f32 accumulation — the
// products of mul_mmq, computed as a matvec: a workgroup takes a few rows for up to 16 columns and
// reads each weight unit once for them (columns in groups of ≤ the profile's mmv.q8_group, at most
// k_matvec_q8_group_cols: grid z). Epilogue as mul_mmq's.
// Needs the weight's mmq repack and shaderIntegerDotProduct; rocky::Error otherwise, or when the
// regions are too small. Taken by mul_mmq itself for n ≤ Env::mmv_q8 (ops::matmul_uses_q8_1 then
// routes decode and batched steps through the q8_1 producers).
constexpr uint32_t k_matvec_q8_max_cols = 64;
constexpr uint32_t k_matvec_q8_group_cols = 16;
void matvec_q8(ops::Env& e, const ops::Weight& w, ops::Region qs, ops::Region ds, uint32_t n, ops::Region y,
               const std::string& label, const MmqEpilogue& epi = {});

// Shape of matvec_mmq (data per device class: the profile's mmv rule, then fitted to the weight's
// M and K): invocations per workgroup (a power of two ≥ 4), rows per workgroup, 32 >> split values
// per step (split 0, 1, 2), steps per loop iteration (1 or 2), and whether the subgroup-reduction
// variant runs.
struct MatvecShape {
  uint32_t wg = 64, rows = 4;
  uint32_t split = 0;
  uint32_t unroll = 1;
  bool subgroup = false;
};
// q8_cols ≥ 2: matvec_q8's shape for that many columns per workgroup — the rule's cols_wg ×
// cols_rows (unroll 2) where it sets one.
MatvecShape matvec_shape(const tune::DeviceProfile& prof, const DeviceInfo& d, uint64_t m, uint64_t k,
                         uint32_t q8_cols = 1);

// The mmq repack of `w` bound in windows of whole rows, each window's two bindings (values at
// 16-byte granularity, scale groups at 4; ws_off in words) within the recorder's binding limit including the
// offset-alignment remainder: the prefix of the push constants every mmq kernel shares (M, K, m0,
// wq_off, ws_off). fn(pc, values, scales) is called per window. rocky::Error when one repacked row
// does not fit a binding, or a window is not 16/8-byte aligned.
void for_each_mmq_window(ops::Env& e, const ops::Weight& w,
                         const std::function<void(abi::MatmulMmqPC&, const Bound&, const Bound&)>& fn);

// `use_dot`: OpSDot variant (requires info.int8_dot) or the unpacked fallback. w must carry its
// mmq repack (upload_for_mmq). The tile is tune::pick_mmq_tile(prof, w.rows, n); every tile of the
// profile is checked (tune::check_tile) first. rocky::Error when the epilogue operand is too small.
void mul_mmq(ops::Env& e, const tune::DeviceProfile& prof, const ops::Weight& w, ops::Region qs, ops::Region ds,
             uint32_t n, ops::Region y, bool use_dot, const std::string& label, const MmqEpilogue& epi = {});

// mul_mm (shaders/mul_mm.comp, or mul_mm_f16.comp with f16 tiles: needs shaderFloat16): y [ldy =
// M, N] = W · x for any weight type ops::gpu_supports() lists and f32 activations x [K, N]; the
// weights are dequantized into shared-memory tiles, FMA with f32 accumulators. Tile: prof.mm.
void mul_mm(ops::Env& e, const tune::DeviceProfile& prof, const ops::Weight& w, ops::Region x, uint32_t n,
            ops::Region y, bool f16_tiles, const std::string& label);

}  // namespace rocky::vulkan::fast
