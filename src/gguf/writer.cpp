// GGUF writer: encoding and layout. See writer.hpp for the format and the guarantees.
#include "gguf/writer.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/error.hpp"

namespace rocky::gguf {
namespace {

constexpr uint32_t k_magic = 0x46554747;  // "GGUF" as a little-endian u32
constexpr uint32_t k_version = 3;

// Appends bytes (resize + memcpy: gcc 12 warns falsely on vector::insert of small arrays).
void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  if (n == 0) return;
  size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  put_bytes(out, &v, sizeof(T));  // little-endian host (static_assert in reader.cpp)
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

// The value without its type prefix (an array element of type ARRAY is encoded this way too).
void put_payload(std::vector<uint8_t>& out, const Value& v, std::string_view key) {
  switch (v.type) {
    case ValueType::U8: put<uint8_t>(out, static_cast<uint8_t>(v.u)); return;
    case ValueType::I8: put<int8_t>(out, static_cast<int8_t>(v.i)); return;
    case ValueType::U16: put<uint16_t>(out, static_cast<uint16_t>(v.u)); return;
    case ValueType::I16: put<int16_t>(out, static_cast<int16_t>(v.i)); return;
    case ValueType::U32: put<uint32_t>(out, static_cast<uint32_t>(v.u)); return;
    case ValueType::I32: put<int32_t>(out, static_cast<int32_t>(v.i)); return;
    case ValueType::U64: put<uint64_t>(out, v.u); return;
    case ValueType::I64: put<int64_t>(out, v.i); return;
    case ValueType::F32: put<float>(out, static_cast<float>(v.f)); return;
    case ValueType::F64: put<double>(out, v.f); return;
    case ValueType::BOOL: put<uint8_t>(out, v.u ? 1 : 0); return;
    case ValueType::STRING: put_string(out, v.str); return;
    case ValueType::ARRAY: {
      uint64_t es = value_type_size(static_cast<uint32_t>(v.elem_type)).value_or(0);
      put<uint32_t>(out, static_cast<uint32_t>(v.elem_type));
      put<uint64_t>(out, v.count);
      if (es) {
        if (v.count && !v.raw)
          fail("gguf writer: key '{}': array of {} {} has no element bytes", key, v.count,
               value_type_name(v.elem_type));
        if (v.elem_type == ValueType::BOOL) {
          for (uint64_t k = 0; k < v.count; ++k) put<uint8_t>(out, v.raw[k] ? 1 : 0);
        } else {
          put_bytes(out, v.raw, v.count * es);
        }
      } else if (v.elem_type == ValueType::STRING) {
        if (v.strings.size() != v.count)
          fail("gguf writer: key '{}': array count {} but {} strings", key, v.count, v.strings.size());
        for (std::string_view s : v.strings) put_string(out, s);
      } else {
        if (v.items.size() != v.count)
          fail("gguf writer: key '{}': array count {} but {} nested arrays", key, v.count, v.items.size());
        for (const Value& it : v.items) {
          if (it.type != ValueType::ARRAY)
            fail("gguf writer: key '{}': element of an array of arrays has type {}", key, value_type_name(it.type));
          put_payload(out, it, key);
        }
      }
      return;
    }
  }
  fail("gguf writer: key '{}': unknown value type id {}", key, static_cast<uint32_t>(v.type));
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

void Writer::set_encoded(std::string_view key, std::vector<uint8_t> enc) {
  if (key.empty()) fail("gguf writer: empty metadata key");
  for (Kv& kv : kv_) {
    if (kv.key == key) {
      kv.encoded = std::move(enc);
      return;
    }
  }
  kv_.push_back(Kv{std::string(key), std::move(enc)});
}

void Writer::set(std::string_view key, const Value& v) {
  if (key == "general.alignment") {
    if (v.type != ValueType::U32)
      fail("gguf writer: key 'general.alignment' must be u32, not {}", value_type_name(v.type));
    if (v.u == 0 || (v.u & (v.u - 1)) != 0)
      fail("gguf writer: key 'general.alignment' = {} is not a power of two", v.u);
    alignment_ = static_cast<uint32_t>(v.u);
  }
  std::vector<uint8_t> enc;
  put<uint32_t>(enc, static_cast<uint32_t>(v.type));
  put_payload(enc, v, key);
  set_encoded(key, std::move(enc));
}

namespace {
Value scalar_u(ValueType t, uint64_t x) {
  Value v;
  v.type = t;
  v.u = x;
  return v;
}
Value scalar_i(ValueType t, int64_t x) {
  Value v;
  v.type = t;
  v.i = x;
  return v;
}
Value scalar_f(ValueType t, double x) {
  Value v;
  v.type = t;
  v.f = x;
  return v;
}
Value numeric_array(ValueType et, const void* p, uint64_t n) {
  Value v;
  v.type = ValueType::ARRAY;
  v.elem_type = et;
  v.count = n;
  v.raw = static_cast<const uint8_t*>(p);
  return v;
}
}  // namespace

void Writer::set_u8(std::string_view k, uint8_t x) { set(k, scalar_u(ValueType::U8, x)); }
void Writer::set_i8(std::string_view k, int8_t x) { set(k, scalar_i(ValueType::I8, x)); }
void Writer::set_u16(std::string_view k, uint16_t x) { set(k, scalar_u(ValueType::U16, x)); }
void Writer::set_i16(std::string_view k, int16_t x) { set(k, scalar_i(ValueType::I16, x)); }
void Writer::set_u32(std::string_view k, uint32_t x) { set(k, scalar_u(ValueType::U32, x)); }
void Writer::set_i32(std::string_view k, int32_t x) { set(k, scalar_i(ValueType::I32, x)); }
void Writer::set_u64(std::string_view k, uint64_t x) { set(k, scalar_u(ValueType::U64, x)); }
void Writer::set_i64(std::string_view k, int64_t x) { set(k, scalar_i(ValueType::I64, x)); }
void Writer::set_f32(std::string_view k, float x) { set(k, scalar_f(ValueType::F32, x)); }
void Writer::set_f64(std::string_view k, double x) { set(k, scalar_f(ValueType::F64, x)); }
void Writer::set_bool(std::string_view k, bool x) { set(k, scalar_u(ValueType::BOOL, x ? 1 : 0)); }

void Writer::set_string(std::string_view k, std::string_view x) {
  Value v;
  v.type = ValueType::STRING;
  v.str = x;
  set(k, v);
}

void Writer::set_string_array(std::string_view k, const std::vector<std::string_view>& xs) {
  Value v;
  v.type = ValueType::ARRAY;
  v.elem_type = ValueType::STRING;
  v.count = xs.size();
  v.strings = xs;
  set(k, v);
}

void Writer::set_f32_array(std::string_view k, std::span<const float> xs) {
  set(k, numeric_array(ValueType::F32, xs.data(), xs.size()));
}

void Writer::set_i32_array(std::string_view k, std::span<const int32_t> xs) {
  set(k, numeric_array(ValueType::I32, xs.data(), xs.size()));
}

Writer::Tensor& Writer::push_tensor(std::string_view name, DType type, std::span<const uint64_t> ne,
                                    uint64_t data_size) {
  if (name.empty()) fail("gguf writer: empty tensor name");
  for (const Tensor& t : tensors_)
    if (t.name == name) fail("gguf writer: duplicate tensor name '{}'", name);
  if (ne.empty() || ne.size() > k_max_dims)
    fail("gguf writer: tensor '{}': {} dimensions (must be 1..{})", name, ne.size(), k_max_dims);
  auto info = dtype_info(static_cast<uint32_t>(type));
  if (!info) fail("gguf writer: tensor '{}': unknown type id {}", name, static_cast<uint32_t>(type));
  Tensor t{std::string(name), type, static_cast<uint32_t>(ne.size()), {1, 1, 1, 1}, {}, {}};
  uint64_t n = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] == 0 || ne[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / n)
      fail("gguf writer: tensor '{}': bad dimension ne{} = {}", name, d, ne[d]);
    t.ne[d] = ne[d];
    n *= ne[d];
  }
  if (t.ne[0] % info->block_elems != 0)
    fail("gguf writer: tensor '{}': ne0 = {} is not a multiple of {}'s block size {}", name, t.ne[0], info->name,
         info->block_elems);
  uint64_t bytes = n / info->block_elems * info->block_bytes;
  if (bytes != data_size)
    fail("gguf writer: tensor '{}': {} data bytes given, its shape and type need {}", name, data_size, bytes);
  tensors_.push_back(std::move(t));
  return tensors_.back();
}

void Writer::add_tensor(std::string_view name, DType type, std::span<const uint64_t> ne,
                        std::span<const uint8_t> data) {
  push_tensor(name, type, ne, data.size()).data = data;
}

void Writer::add_tensor(std::string_view name, DType type, std::span<const uint64_t> ne, std::vector<uint8_t>&& data) {
  Tensor& t = push_tensor(name, type, ne, data.size());
  t.owned = std::move(data);
  t.data = t.owned;  // the vector's buffer does not move when tensors_ grows
}

std::vector<uint8_t> Writer::header(std::vector<uint64_t>& offsets) const {
  std::vector<uint8_t> out;
  put<uint32_t>(out, k_magic);
  put<uint32_t>(out, k_version);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kv_.size());
  for (const Kv& kv : kv_) {
    put_string(out, kv.key);
    put_bytes(out, kv.encoded.data(), kv.encoded.size());
  }
  offsets.clear();
  uint64_t off = 0;
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, t.n_dims);
    for (uint32_t d = 0; d < t.n_dims; ++d) put<uint64_t>(out, t.ne[d]);
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, off);
    offsets.push_back(off);
    off = align_up(off + t.data.size(), alignment_);
  }
  if (!tensors_.empty()) out.resize(align_up(out.size(), alignment_), 0);  // no data section: no padding
  return out;
}

std::vector<uint8_t> Writer::to_bytes() const {
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> out = header(offsets);
  const uint64_t data_start = out.size();
  for (size_t k = 0; k < tensors_.size(); ++k) {
    out.resize(data_start + offsets[k], 0);
    put_bytes(out, tensors_[k].data.data(), tensors_[k].data.size());
  }
  if (!tensors_.empty()) out.resize(align_up(out.size(), alignment_), 0);
  return out;
}

void Writer::write(const std::string& path) const {
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> head = header(offsets);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail("{}: cannot create: {}", path, std::strerror(errno));
  uint64_t pos = 0;
  auto emit = [&](const uint8_t* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f) != n) {
      int e = errno;
      std::fclose(f);
      fail("{}: write failed at byte offset {:#x}: {}", path, pos, std::strerror(e));
    }
    pos += n;
  };
  static const uint8_t zeros[256] = {};
  auto pad_to = [&](uint64_t target) {
    while (pos < target) emit(zeros, static_cast<size_t>(std::min<uint64_t>(target - pos, sizeof zeros)));
  };
  emit(head.data(), head.size());
  const uint64_t data_start = head.size();
  for (size_t k = 0; k < tensors_.size(); ++k) {
    pad_to(data_start + offsets[k]);
    emit(tensors_[k].data.data(), tensors_[k].data.size());
  }
  if (!tensors_.empty()) pad_to(align_up(pos, alignment_));
  if (std::fclose(f) != 0) fail("{}: close failed: {}", path, std::strerror(errno));
}

}  // namespace rocky::gguf
