// Reference (de)quantization of ggml's block formats, bit-exact with ggml.
//
// Source: ggml/src/ggml-common.h (block layouts) and ggml-quants.c (algorithms), llama.cpp commit
// 0253fb21f — read for the facts; the code here is rocky's own. Block structs live in blocks.hpp
// with static_assert'ed sizes. All multi-byte fields are little-endian.
//
// Units: n = number of elements, always a multiple of the type's block size (dtype_info(t)).
// Errors: unsupported types throw rocky::Error naming the type.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"

namespace rocky::quant {

// IEEE half <-> float (round-to-nearest-even, as ggml's GGML_FP32_TO_FP16); bf16 as ggml (RNE,
// NaN kept quiet). Exact semantics (subnormals, overflow, NaN) in half.hpp.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

// True when dequantize_row supports `t` (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q8_1,
// q2_K, q3_K, q4_K, q5_K, q6_K, q8_K).
bool can_dequantize(DType t);
// dst[0..n) = dequant(src); src holds n / block_elems blocks of type t (any alignment). Bit-exact
// with ggml's to_float (q8_1, which ggml cannot decode: fp32(d) * q). Throws rocky::Error when t is
// unsupported or n is negative or not a multiple of the block size.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// True when quantize_row supports `t` (f32, f16, bf16, q8_0, q8_1, q5_0, q5_1, q4_K, q5_K, q6_K).
bool can_quantize(DType t);
// dst = quant(src[0..n)); dst must hold n / block_elems · block_bytes bytes (any alignment).
// Byte-exact with ggml's reference quantizers (quantize_row_*_ref, no importance matrix).
// Non-finite inputs give unspecified (but defined, memory-safe) blocks. Throws like dequantize_row.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

}  // namespace rocky::quant
