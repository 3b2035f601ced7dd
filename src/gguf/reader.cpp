// GGUF reader: parsing and strict validation. See gguf.hpp for the format and the guarantees.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "core/error.hpp"
#include "gguf/gguf.hpp"

static_assert(std::endian::native == std::endian::little, "rocky supports little-endian hosts only");

namespace rocky::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::BOOL: return "bool";
    case ValueType::STRING: return "string";
    case ValueType::ARRAY: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "?";
}

std::optional<uint64_t> value_type_size(uint32_t t) {
  switch (static_cast<ValueType>(t)) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL: return 1;
    case ValueType::U16:
    case ValueType::I16: return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32: return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64: return 8;
    case ValueType::STRING:
    case ValueType::ARRAY: return 0;
  }
  return std::nullopt;
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::U16:
    case ValueType::I16:
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::U64:
    case ValueType::I64: return true;
    default: return false;
  }
}

std::optional<int64_t> Value::as_int() const {
  switch (type) {
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64: return i;
    case ValueType::U8:
    case ValueType::U16:
    case ValueType::U32:
    case ValueType::U64:
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(u);
    default: return std::nullopt;
  }
}

namespace {

constexpr uint32_t k_magic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr int k_max_nesting = 8;          // nested arrays deeper than this are refused

}  // namespace

// Cursor over the file; every read is bounds-checked. Errors name the file, the item being parsed
// (`ctx_`: the header, a metadata key, a tensor) and the byte offset of the offending field.
class Parser {
 public:
  explicit Parser(GgufFile& f) : f_(f), p_(f.data_), n_(f.size_) {}

  void run();

 private:
  [[noreturn]] void bad(uint64_t at, const std::string& what) const {
    fail("{}: {}: {} (at byte offset {:#x})", f_.path(), ctx_, what, at);
  }
  uint64_t remaining() const { return n_ - pos_; }
  void need(uint64_t bytes, const char* what) {
    if (bytes > remaining())
      bad(pos_, fmt::format("truncated file: {} needs {} bytes, {} left (file size {})", what, bytes, remaining(), n_));
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v = load_le<T>(p_ + pos_);
    pos_ += sizeof(T);
    return v;
  }
  std::string_view read_string(const char* what) {
    uint64_t at = pos_;
    uint64_t len = read<uint64_t>(what);
    if (len > remaining())
      bad(at, fmt::format("truncated file or bad length: {} length {} is larger than the {} bytes left "
                          "(file size {})",
                          what, len, remaining(), n_));
    std::string_view s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }
  Value read_value(uint32_t type, uint64_t at, int depth);
  void parse_kv();
  void parse_tensor_infos();
  void validate_tensors();

  GgufFile& f_;
  const uint8_t* p_;
  uint64_t n_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  std::string ctx_ = "header";
};

// Reserve at most this many elements up front from a count read from the file (the count is already
// bounded by the bytes left; this keeps a corrupt count from reserving many times the file size).
constexpr uint64_t k_max_reserve = 4096;

Value Parser::read_value(uint32_t type, uint64_t at, int depth) {
  Value v;
  if (!value_type_size(type)) bad(at, fmt::format("unknown value type id {}", type));
  v.type = static_cast<ValueType>(type);
  switch (v.type) {
    case ValueType::U8: v.u = read<uint8_t>("u8 value"); break;
    case ValueType::I8: v.i = read<int8_t>("i8 value"); break;
    case ValueType::U16: v.u = read<uint16_t>("u16 value"); break;
    case ValueType::I16: v.i = read<int16_t>("i16 value"); break;
    case ValueType::U32: v.u = read<uint32_t>("u32 value"); break;
    case ValueType::I32: v.i = read<int32_t>("i32 value"); break;
    case ValueType::U64: v.u = read<uint64_t>("u64 value"); break;
    case ValueType::I64: v.i = read<int64_t>("i64 value"); break;
    case ValueType::F32: v.f = read<float>("f32 value"); break;
    case ValueType::F64: v.f = read<double>("f64 value"); break;
    case ValueType::BOOL: {
      uint8_t b = read<uint8_t>("bool value");
      if (b > 1) bad(pos_ - 1, fmt::format("bool value {} is neither 0 nor 1", b));
      v.u = b;
      break;
    }
    case ValueType::STRING: v.str = read_string("string value"); break;
    case ValueType::ARRAY: {
      if (depth >= k_max_nesting) bad(at, fmt::format("arrays nested deeper than {} levels", k_max_nesting));
      uint64_t et_at = pos_;
      uint32_t et = read<uint32_t>("array element type");
      auto es = value_type_size(et);
      if (!es) bad(et_at, fmt::format("unknown array element type id {}", et));
      v.elem_type = static_cast<ValueType>(et);
      uint64_t cnt_at = pos_;
      v.count = read<uint64_t>("array count");
      // The smallest encoding of one element bounds the count before anything is allocated:
      // a string is at least its u64 length, a nested array its u32 type + u64 count.
      uint64_t min_elem = *es ? *es : (v.elem_type == ValueType::STRING ? 8 : 12);
      if (v.count > remaining() / min_elem)
        bad(cnt_at, fmt::format("truncated file or bad count: array count {} is larger than the {} bytes left "
                                "can hold (file size {})",
                                v.count, remaining(), n_));
      if (*es) {
        v.raw = p_ + pos_;
        pos_ += v.count * *es;
        if (v.elem_type == ValueType::BOOL) {
          for (uint64_t k = 0; k < v.count; ++k)
            if (v.raw[k] > 1) bad(cnt_at + 8 + k, fmt::format("bool array element {} is neither 0 nor 1", k));
        }
      } else if (v.elem_type == ValueType::STRING) {
        v.strings.reserve(std::min(v.count, k_max_reserve));
        for (uint64_t k = 0; k < v.count; ++k) v.strings.push_back(read_string("array string"));
      } else {
        v.items.reserve(std::min(v.count, k_max_reserve));
        for (uint64_t k = 0; k < v.count; ++k) v.items.push_back(read_value(et, pos_, depth + 1));
      }
      break;
    }
  }
  return v;
}

void Parser::run() {
  need(4, "magic");
  uint32_t magic = read<uint32_t>("magic");
  if (magic != k_magic) {
    bad(0, fmt::format("not a GGUF file: bad magic {:02x} {:02x} {:02x} {:02x} (expected 'GGUF')", p_[0], p_[1], p_[2],
                       p_[3]));
  }
  uint32_t version = read<uint32_t>("version");
  if (version != 2 && version != 3) {
    uint32_t swapped = __builtin_bswap32(version);
    if (swapped == 2 || swapped == 3)
      bad(4, fmt::format("version field: big-endian GGUF (version {} byte-swapped) is not supported", swapped));
    bad(4, fmt::format("version field: unsupported GGUF version {} (rocky reads versions 2 and 3)", version));
  }
  f_.version_ = version;
  // The counts are not trusted: every record is read with bounds checks (a count larger than the file
  // ends in a truncation error naming the record and the count), and at most k_max_reserve entries
  // are reserved up front.
  n_tensors_ = read<uint64_t>("tensor count");
  n_kv_ = read<uint64_t>("metadata count");
  parse_kv();
  parse_tensor_infos();
  validate_tensors();
}

void Parser::parse_kv() {
  f_.kv_.reserve(std::min(n_kv_, k_max_reserve));
  for (uint64_t k = 0; k < n_kv_; ++k) {
    uint64_t at = pos_;
    ctx_ = fmt::format("metadata key #{} of {}", k, n_kv_);
    std::string_view key = read_string("metadata key");
    if (key.empty()) bad(at, "empty metadata key");
    ctx_ = fmt::format("key '{}'", key);
    if (f_.kv_index_.count(key)) bad(at, "duplicate metadata key");
    uint64_t type_at = pos_;
    uint32_t type = read<uint32_t>("value type");
    Value v = read_value(type, type_at, 0);
    f_.kv_index_.emplace(key, f_.kv_.size());
    f_.kv_.emplace_back(key, std::move(v));
    if (key == "general.alignment") {
      const Value& a = f_.kv_.back().second;
      if (a.type != ValueType::U32)
        bad(type_at, fmt::format("alignment has type {}, expected u32", value_type_name(a.type)));
      if (a.u == 0 || (a.u & (a.u - 1)) != 0) bad(type_at + 4, fmt::format("alignment {} is not a power of two", a.u));
      f_.alignment_ = static_cast<uint32_t>(a.u);
    }
  }
}

void Parser::parse_tensor_infos() {
  f_.tensors_.reserve(std::min(n_tensors_, k_max_reserve));
  for (uint64_t k = 0; k < n_tensors_; ++k) {
    TensorInfo t;
    t.info_offset = pos_;
    ctx_ = fmt::format("tensor info #{} of {}", k, n_tensors_);
    std::string_view name = read_string("tensor name");
    if (name.empty()) bad(t.info_offset, "empty tensor name");
    ctx_ = fmt::format("tensor '{}'", name);
    t.name = std::string(name);
    if (f_.tensor_index_.count(name)) bad(t.info_offset, "duplicate tensor name");
    uint64_t at = pos_;
    t.n_dims = read<uint32_t>("tensor n_dims");
    if (t.n_dims == 0 || t.n_dims > k_max_dims) bad(at, fmt::format("n_dims {} (must be 1..{})", t.n_dims, k_max_dims));
    uint64_t n = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      at = pos_;
      uint64_t ne = read<uint64_t>("tensor dimension");
      if (ne == 0) bad(at, fmt::format("dimension ne{} is zero", d));
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne)
        bad(at, fmt::format("element count overflows int64 (dimension ne{} = {})", d, ne));
      t.ne[d] = ne;
      n *= ne;
    }
    t.n_elements = n;
    at = pos_;
    uint32_t type_id = read<uint32_t>("tensor type");
    auto info = dtype_info(type_id);
    if (!info) bad(at, fmt::format("unknown ggml type id {}", type_id));
    t.type = static_cast<DType>(type_id);
    if (t.ne[0] % info->block_elems != 0)
      bad(at, fmt::format("row length ne0 = {} is not a multiple of {}'s block size {}", t.ne[0], info->name,
                          info->block_elems));
    // n_elements < 2^63 and block_bytes / block_elems ≤ 4 for every ggml type except f64/i64 (8),
    // so the byte count could still exceed 2^64 for 8-byte types: check.
    uint64_t blocks = n / info->block_elems;
    if (blocks > std::numeric_limits<uint64_t>::max() / info->block_bytes) bad(at, "byte size overflows");
    t.n_bytes = blocks * info->block_bytes;
    at = pos_;
    t.offset = read<uint64_t>("tensor data offset");
    if (t.offset % f_.alignment_ != 0)
      bad(at, fmt::format("data offset {:#x} is not a multiple of the alignment {}", t.offset, f_.alignment_));
    f_.tensors_.push_back(std::move(t));
    f_.tensor_index_.emplace(name, f_.tensors_.size() - 1);  // `name` views the file: stable
  }
}

void Parser::validate_tensors() {
  ctx_ = "tensor data";
  uint64_t a = f_.alignment_;
  uint64_t data = (pos_ + a - 1) / a * a;
  f_.data_offset_ = data;
  if (f_.tensors_.empty()) return;  // vocab-only files may end right after the infos
  if (data > n_)
    bad(pos_, fmt::format("truncated file: data section starts at {:#x}, past the end (file size {})", data, n_));
  uint64_t avail = n_ - data;
  for (TensorInfo& t : f_.tensors_) {
    if (t.offset > avail || t.n_bytes > avail - t.offset) {
      ctx_ = fmt::format("tensor '{}'", t.name);
      bad(t.info_offset, fmt::format("data offset {:#x} + {} bytes runs past the end of the file (data section "
                                     "at {:#x}, {} bytes long; file size {})",
                                     t.offset, t.n_bytes, data, avail, n_));
    }
    t.data = p_ + data + t.offset;
  }
  std::vector<size_t> order(f_.tensors_.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return f_.tensors_[x].offset < f_.tensors_[y].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& prev = f_.tensors_[order[k - 1]];
    const TensorInfo& cur = f_.tensors_[order[k]];
    if (prev.offset + prev.n_bytes > cur.offset) {
      ctx_ = fmt::format("tensor '{}'", cur.name);
      bad(cur.info_offset, fmt::format("data at {:#x} overlaps tensor '{}' (data [{:#x}, {:#x}))", data + cur.offset,
                                       prev.name, data + prev.offset, data + prev.offset + prev.n_bytes));
    }
  }
}

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.file_ = MappedFile(path);
  f.name_ = path;
  f.data_ = f.file_.data();
  f.size_ = f.file_.size();
  Parser(f).run();
  return f;
}

GgufFile GgufFile::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  GgufFile f;
  f.owned_ = std::move(bytes);
  f.name_ = std::move(name);
  f.data_ = f.owned_.data();
  f.size_ = f.owned_.size();
  Parser(f).run();
  return f;
}

const Value* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
[[noreturn]] void type_mismatch(const GgufFile& f, std::string_view key, const Value& v, const char* want) {
  fail("{}: key '{}' has type {}, expected {}", f.path(), key,
       v.type == ValueType::ARRAY ? fmt::format("array of {}", value_type_name(v.elem_type))
                                  : std::string(value_type_name(v.type)),
       want);
}
}  // namespace

std::optional<std::string_view> GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::STRING) type_mismatch(*this, key, *v, "string");
  return v->str;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  auto i = v->as_int();
  if (!i) type_mismatch(*this, key, *v, "an integer (that fits int64)");
  return i;
}

std::optional<uint64_t> GgufFile::get_uint(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer()) type_mismatch(*this, key, *v, "an unsigned integer");
  if (v->type == ValueType::U8 || v->type == ValueType::U16 || v->type == ValueType::U32 || v->type == ValueType::U64)
    return v->u;
  if (v->i < 0) fail("{}: key '{}' = {} is negative", path(), key, v->i);
  return static_cast<uint64_t>(v->i);
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->is_float()) return v->f;
  if (auto i = v->as_int()) return static_cast<double>(*i);
  type_mismatch(*this, key, *v, "a number");
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::BOOL) type_mismatch(*this, key, *v, "bool");
  return v->u != 0;
}

std::optional<std::vector<std::string_view>> GgufFile::get_string_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::ARRAY || v->elem_type != ValueType::STRING)
    type_mismatch(*this, key, *v, "array of string");
  return v->strings;
}

std::optional<std::vector<float>> GgufFile::get_f32_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::ARRAY || v->elem_type != ValueType::F32) type_mismatch(*this, key, *v, "array of f32");
  std::vector<float> out(v->count);
  if (v->count) std::memcpy(out.data(), v->raw, v->count * sizeof(float));
  return out;
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::ARRAY) type_mismatch(*this, key, *v, "array of integers");
  std::vector<int64_t> out;
  out.reserve(v->count);
  const uint8_t* r = v->raw;
  for (uint64_t k = 0; k < v->count; ++k) {
    switch (v->elem_type) {
      case ValueType::U8: out.push_back(r[k]); break;
      case ValueType::I8: out.push_back(static_cast<int8_t>(r[k])); break;
      case ValueType::U16: out.push_back(load_le<uint16_t>(r + 2 * k)); break;
      case ValueType::I16: out.push_back(load_le<int16_t>(r + 2 * k)); break;
      case ValueType::U32: out.push_back(load_le<uint32_t>(r + 4 * k)); break;
      case ValueType::I32: out.push_back(load_le<int32_t>(r + 4 * k)); break;
      case ValueType::I64: out.push_back(load_le<int64_t>(r + 8 * k)); break;
      case ValueType::U64: {
        uint64_t u = load_le<uint64_t>(r + 8 * k);
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          fail("{}: key '{}': element {} = {} does not fit int64", path(), key, k, u);
        out.push_back(static_cast<int64_t>(u));
        break;
      }
      default: type_mismatch(*this, key, *v, "array of integers");
    }
  }
  return out;
}

std::string_view GgufFile::architecture() const {
  auto a = get_string("general.architecture");
  if (!a) fail("{}: missing metadata key 'general.architecture'", path());
  return *a;
}

}  // namespace rocky::gguf
