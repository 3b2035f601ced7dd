// Tensor element types: ggml's `enum ggml_type` ids as stored in GGUF tensor infos.
//
// Source: ggml/include/ggml.h and ggml/src/ggml.c type_traits (llama.cpp commit 0253fb21f, May
// 2026). Every id of that enum is known here by name, block size and block bytes, so `rocky info`
// can show files whose types rocky does not compute; `computable` says which types rocky's
// kernels accept (compute refuses the others by name). Removed ids (4, 5, 31–33, 36–38) are
// invalid in a file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace rocky {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
};

inline constexpr uint32_t k_dtype_id_count = 42;  // ids are < this (ggml's GGML_TYPE_COUNT)

struct DTypeInfo {
  std::string_view name;  // ggml's type_name: "f32", "q4_K", …
  uint32_t block_elems;   // elements per block (1 for plain types)
  uint32_t block_bytes;   // bytes per block
  bool computable;        // rocky's CPU/GPU kernels accept this type
};

// Info for a valid id; std::nullopt for ids outside the enum or removed ids.
std::optional<DTypeInfo> dtype_info(uint32_t id);
// Info for a known DType (never fails).
const DTypeInfo& dtype_info(DType t);
inline std::string_view dtype_name(DType t) { return dtype_info(t).name; }
// Parse a ggml type name ("q4_K", case-insensitive); nullopt when unknown.
std::optional<DType> dtype_from_name(std::string_view name);

// Bytes of a row of `n` elements; n must be a multiple of the block size.
inline uint64_t row_bytes(DType t, uint64_t n) {
  const DTypeInfo& i = dtype_info(t);
  return n / i.block_elems * i.block_bytes;
}

}  // namespace rocky
