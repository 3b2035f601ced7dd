// [M5] Host side of the fast prefill matmul kernels:
//  - quantize_q8_1 (shaders/quantize_q8_1.comp): f32 activations [K, N] → rocky's q8_1 layout
//    (fast_abi.h): `qs` = N·K int8 values as 8 words per 32-block (token-major), `ds` = N·K/32
//    pairs (d, d·Σq) as f32.
//  - mul_mmq (shaders/mul_mmq.comp, or mul_mmq_nodot.comp when the device lacks
//    shaderIntegerDotProduct): y [ldy = M, N] = W · x from ggml weight rows (q4_0, q8_0, q4_K, q6_K,
//    read in their ggml layout; no repacking yet) and q8_1 activations.
// The tile comes from rocky::tune (a profile chosen for the device, or a JSON override) and is
// refused with a rocky::Error naming the violated limit (accumulators over the profile's budget,
// shared memory over the device's limit, inconsistent shape), and — when the pipelines capture
// statistics (--pipeline-stats) and prof.refuse_spills — when the driver reports spills or
// local/scratch memory for the compiled kernel (pipeline_stats.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "backend/vulkan/ops/ops.hpp"
#include "tune/tile.hpp"

namespace rocky::vulkan::fast {

// Bytes of the two q8_1 regions for a [K, N] activation (K a multiple of 32).
inline uint64_t q8_1_qs_bytes(uint64_t k, uint64_t n) { return k * n; }
inline uint64_t q8_1_ds_bytes(uint64_t k, uint64_t n) { return k / 32 * n * 8; }

// True when mul_mmq handles weight type `t`.
bool mmq_supports(DType t);

void quantize_q8_1(ops::Env& e, ops::Region x, uint32_t k, uint32_t n, ops::Region qs, ops::Region ds,
                   const std::string& label);

// Producers writing q8_1 directly (the prefill path needs no separate quantize dispatch):
// rms_norm of x [ne0, n_cols] with f32 weight w [ne0], and silu(gate) · up over [ne0, n_cols]
// (ne0 a multiple of 32). Same q8_1 values as quantize_q8_1 of the f32 result.
void rms_norm_q8_1(ops::Env& e, ops::Region x, ops::Region w, uint32_t ne0, uint32_t n_cols, float eps,
                   ops::Region qs, ops::Region ds, const std::string& label);
void silu_mul_q8_1(ops::Env& e, ops::Region gate, ops::Region up, uint32_t ne0, uint32_t n_cols, ops::Region qs,
                   ops::Region ds, const std::string& label);

// `use_dot`: OpSDot variant (requires info.int8_dot) or the unpacked fallback.
void mul_mmq(ops::Env& e, const tune::DeviceProfile& prof, const ops::Weight& w, ops::Region qs, ops::Region ds,
             uint32_t n, ops::Region y, bool use_dot, const std::string& label);

// mul_mm (shaders/mul_mm.comp, or mul_mm_f16.comp with f16 tiles: needs shaderFloat16): y [ldy =
// M, N] = W · x for any weight type ops::gpu_supports() lists and f32 activations x [K, N]; the
// weights are dequantized into shared-memory tiles, FMA with f32 accumulators. Tile: prof.mm.
void mul_mm(ops::Env& e, const tune::DeviceProfile& prof, const ops::Weight& w, ops::Region x, uint32_t n,
            ops::Region y, bool f16_tiles, const std::string& label);

}  // namespace rocky::vulkan::fast
