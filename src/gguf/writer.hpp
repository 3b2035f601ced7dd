// GGUF writer: builds a GGUF version 3 file (little-endian) from metadata and tensors.
//
// Format source: the GGUF specification (ggml/docs/gguf.md); the layout is the one gguf.hpp reads:
//   header · metadata in the order it was first set · tensor infos in the order added ·
//   zero padding to the alignment · tensor data, each tensor at an aligned offset (relative to the
//   data section) in the order added, zero-padded to the alignment. A file without tensors ends
//   right after its metadata (as llama.cpp writes vocab-only files). This is the layout llama.cpp's
//   gguf writer produces: a read → write round trip of its files is byte-identical (tested).
// The alignment is `general.alignment` when set (a u32 power of two), else 32 (k_default_alignment).
//
// Values are encoded as they are set (copied), so a metadata Value taken from a GgufFile may be
// passed straight through (read → write round trip). Tensor data given by span is NOT copied: it must
// stay valid until write()/to_bytes() returns; add_tensor with a vector takes ownership.
// Errors (bad shapes, a data size that does not match the shape, duplicate tensor names, an
// inconsistent Value, I/O failures) throw rocky::Error naming the key, tensor or path.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "gguf/gguf.hpp"

namespace rocky::gguf {

class Writer {
 public:
  // Sets (or replaces, keeping its first position) a metadata key to any Value: scalars use the field
  // that matches `type` (u, i or f; f is narrowed to float for F32); STRING uses `str`; ARRAY uses
  // `elem_type`, `count` and `raw` (numeric/bool: count × element size little-endian bytes),
  // `strings` (STRING elements) or `items` (ARRAY elements, each itself an ARRAY Value).
  void set(std::string_view key, const Value& v);

  void set_u8(std::string_view key, uint8_t x);
  void set_i8(std::string_view key, int8_t x);
  void set_u16(std::string_view key, uint16_t x);
  void set_i16(std::string_view key, int16_t x);
  void set_u32(std::string_view key, uint32_t x);
  void set_i32(std::string_view key, int32_t x);
  void set_u64(std::string_view key, uint64_t x);
  void set_i64(std::string_view key, int64_t x);
  void set_f32(std::string_view key, float x);
  void set_f64(std::string_view key, double x);
  void set_bool(std::string_view key, bool x);
  void set_string(std::string_view key, std::string_view x);
  void set_string_array(std::string_view key, const std::vector<std::string_view>& xs);
  void set_f32_array(std::string_view key, std::span<const float> xs);
  void set_i32_array(std::string_view key, std::span<const int32_t> xs);

  // Adds a tensor. `ne` holds 1..4 dimensions in GGUF order (ne[0] = row length, a multiple of the
  // type's block size); `data` must hold exactly the tensor's bytes (row_bytes(type, ne0) × rows).
  void add_tensor(std::string_view name, DType type, std::span<const uint64_t> ne, std::span<const uint8_t> data);
  void add_tensor(std::string_view name, DType type, std::span<const uint64_t> ne, std::vector<uint8_t>&& data);

  uint32_t alignment() const { return alignment_; }
  size_t n_kv() const { return kv_.size(); }
  size_t n_tensors() const { return tensors_.size(); }

  // The whole file in memory (for tests and small files).
  std::vector<uint8_t> to_bytes() const;
  // Writes the file to `path` (replacing it); tensor data is streamed, not copied.
  void write(const std::string& path) const;

 private:
  struct Kv {
    std::string key;
    std::vector<uint8_t> encoded;  // u32 type + value
  };
  struct Tensor {
    std::string name;
    DType type;
    uint32_t n_dims;
    uint64_t ne[4];
    std::span<const uint8_t> data;  // views `owned` when the writer owns the bytes
    std::vector<uint8_t> owned;
  };
  void set_encoded(std::string_view key, std::vector<uint8_t> enc);
  Tensor& push_tensor(std::string_view name, DType type, std::span<const uint64_t> ne, uint64_t data_size);
  // Everything before the data section, padded; offsets[k] = tensor k's offset in the data section.
  std::vector<uint8_t> header(std::vector<uint64_t>& offsets) const;

  std::vector<Kv> kv_;
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = k_default_alignment;
};

}  // namespace rocky::gguf
