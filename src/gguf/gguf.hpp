// GGUF reader: a validated, read-only view of a GGUF model file (versions 2 and 3, little-endian).
//
// Format source: the GGUF specification (ggml/docs/gguf.md in ggml / llama.cpp). Layout:
//   u32 magic "GGUF" · u32 version · u64 n_tensors · u64 n_kv
//   n_kv × { string key · u32 value_type · value }
//   n_tensors × { string name · u32 n_dims · u64 ne[n_dims] · u32 ggml_type · u64 offset }
//   padding to `general.alignment` (default 32) · tensor data (offsets relative to its start)
// A string is u64 length + bytes (no terminator); an array is u32 elem_type + u64 count + elements.
//
// The whole file is mmap'ed; strings, arrays and tensor data are views into the mapping and live
// as long as the GgufFile. Everything is validated at open, before any value is used: a bad file
// throws rocky::Error whose message names the file, the key or tensor, and the byte offset, e.g.
//   "m.gguf: tensor 'blk.0.ffn_up.weight': data offset 0x20 is not a multiple of the alignment 32
//    (at byte offset 0x2f1c)"  (the part after the file: "header", "key 'K'", "metadata key #i of N",
//   "tensor info #i of N" before the name is known, "tensor 'T'").
// Checked: magic; version 2 or 3 (a byte-swapped version is reported as big-endian); every length
// and count against the bytes left; value type ids; bools 0/1; arrays nested at most 8 deep;
// duplicate or empty keys and tensor names; general.alignment a u32 power of two; n_dims 1..4;
// dims nonzero with an element count < 2^63; ggml type ids (dtype.hpp); ne0 a multiple of the
// type's block size; data offsets aligned, inside the file and not overlapping.
// No read goes out of bounds and no allocation is sized from an unchecked count (at most 4096
// entries are reserved from a count; the rest grows only as records are actually read).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.hpp"
#include "core/mapped_file.hpp"

namespace rocky::gguf {

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
std::string_view value_type_name(ValueType t);
// Bytes of one element of a scalar type; 0 for STRING and ARRAY (variable size); nullopt for a type
// id outside the GGUF enum.
std::optional<uint64_t> value_type_size(uint32_t type_id);

inline constexpr uint32_t k_default_alignment = 32;
inline constexpr uint32_t k_max_dims = 4;

// One metadata value. Scalars are widened (integers to u64/i64, floats to f64) and the original
// type is kept in `type`. Arrays keep their element type and count; numeric elements stay in the
// file (`raw`, little-endian, possibly unaligned — read them with the typed accessors), string
// elements are views, nested arrays are parsed into `items`.
struct Value {
  ValueType type = ValueType::U8;
  uint64_t u = 0;        // U8/U16/U32/U64/BOOL
  int64_t i = 0;         // I8/I16/I32/I64
  double f = 0;          // F32/F64
  std::string_view str;  // STRING

  // ARRAY only:
  ValueType elem_type = ValueType::U8;
  uint64_t count = 0;
  const uint8_t* raw = nullptr;           // numeric/bool elements
  std::vector<std::string_view> strings;  // STRING elements
  std::vector<Value> items;               // ARRAY elements (nested arrays)

  bool is_integer() const;
  bool is_float() const { return type == ValueType::F32 || type == ValueType::F64; }
  // Integer value as int64 (u64 values above INT64_MAX → nullopt).
  std::optional<int64_t> as_int() const;
};

struct TensorInfo {
  std::string name;
  DType type = DType::F32;
  uint32_t n_dims = 0;
  std::array<uint64_t, 4> ne{1, 1, 1, 1};  // GGUF order: ne[0] innermost (row length)
  uint64_t offset = 0;                     // relative to the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  uint64_t info_offset = 0;       // file offset of this tensor's info record (for messages)
  const uint8_t* data = nullptr;  // into the mapping

  uint64_t rows() const { return n_elements / ne[0]; }
  uint64_t file_offset(uint64_t data_start) const { return data_start + offset; }
};

class GgufFile {
 public:
  // Opens, maps and validates `path`. Throws rocky::Error on any problem.
  static GgufFile open(const std::string& path);
  // Validates an in-memory image (copied into the GgufFile); `name` stands for the path in messages.
  // Used by the fuzzer and by tests that check a writer's output without touching the disk.
  static GgufFile from_bytes(std::vector<uint8_t> bytes, std::string name);

  const std::string& path() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return size_; }
  const uint8_t* file_data() const { return data_; }  // the whole file (mapping or owned copy)
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section

  // Metadata in file order.
  const std::vector<std::pair<std::string_view, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters: nullopt when absent; rocky::Error (naming file and key) on a type mismatch.
  std::optional<std::string_view> get_string(std::string_view key) const;
  std::optional<uint64_t> get_uint(std::string_view key) const;  // any non-negative integer
  std::optional<int64_t> get_int(std::string_view key) const;    // any integer
  std::optional<double> get_float(std::string_view key) const;   // f32/f64 (or integer)
  std::optional<bool> get_bool(std::string_view key) const;
  // Arrays (converted on the fly; empty optional when absent; error on element-type mismatch).
  std::optional<std::vector<std::string_view>> get_string_array(std::string_view key) const;
  std::optional<std::vector<float>> get_f32_array(std::string_view key) const;    // f32 elements
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;  // integer elements

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

  // "general.architecture", or an error naming the file when it is missing.
  std::string_view architecture() const;

 private:
  GgufFile() = default;
  MappedFile file_;             // the mapping (open), or empty (from_bytes)
  std::vector<uint8_t> owned_;  // the bytes (from_bytes), or empty (open)
  std::string name_;
  const uint8_t* data_ = nullptr;  // file_ or owned_
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = k_default_alignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string_view, Value>> kv_;
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;  // keys view the file's bytes

  friend class Parser;
};

// Little-endian scalar loads from possibly unaligned memory.
template <typename T>
T load_le(const uint8_t* p) {
  T v;
  __builtin_memcpy(&v, p, sizeof(T));
  return v;  // rocky supports little-endian hosts only (static_assert in reader.cpp)
}

}  // namespace rocky::gguf
