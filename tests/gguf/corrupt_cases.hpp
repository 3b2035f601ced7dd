// Corrupt GGUF files for tests, each made by mutating the bytes of a real file.
//
// scan() walks a GGUF image independently of the reader (it trusts the image: use it on the
// pristine file only) and records where every field lives; corrupt_cases() patches those fields.
// Each case lists substrings the reader's error message must contain (the field, key or tensor).
// Used by tests/gguf (reader errors) and tests/cli (`rocky info` exits 1 with one line).
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace rocky::test {

using Bytes = std::vector<uint8_t>;

struct KvLoc {
  std::string key;
  size_t start = 0;     // the key's u64 length
  size_t type_at = 0;   // u32 value type
  size_t value_at = 0;  // value payload
  size_t end = 0;
  uint32_t type = 0;
};

struct TensorLoc {
  std::string name;
  size_t start = 0;  // the name's u64 length
  size_t ndims_at = 0, ne_at = 0, type_at = 0, offset_at = 0, end = 0;
  uint32_t n_dims = 0, type = 0;
  uint64_t ne[4] = {1, 1, 1, 1};
  uint64_t offset = 0;
};

struct Layout {
  std::vector<KvLoc> kvs;
  std::vector<TensorLoc> tensors;
  size_t infos_end = 0;
};

template <typename T>
T get_le(const Bytes& b, size_t at) {
  if (at + sizeof(T) > b.size()) throw std::runtime_error("scan: read past end");
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

template <typename T>
void put_le(Bytes& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof(T));
}

template <typename T>
void append_le(Bytes& b, T v) {
  uint8_t tmp[sizeof(T)];
  std::memcpy(tmp, &v, sizeof(T));
  b.insert(b.end(), tmp, tmp + sizeof(T));
}

inline void append_str(Bytes& b, const std::string& s) {
  append_le<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

// Skips a value of type `t` at `at`; returns the offset after it.
inline size_t skip_value(const Bytes& b, uint32_t t, size_t at) {
  switch (t) {
    case 0:
    case 1:
    case 7: return at + 1;
    case 2:
    case 3: return at + 2;
    case 4:
    case 5:
    case 6: return at + 4;
    case 10:
    case 11:
    case 12: return at + 8;
    case 8: return at + 8 + get_le<uint64_t>(b, at);
    case 9: {
      uint32_t et = get_le<uint32_t>(b, at);
      uint64_t n = get_le<uint64_t>(b, at + 4);
      at += 12;
      for (uint64_t k = 0; k < n; ++k) at = skip_value(b, et, at);
      return at;
    }
    default: throw std::runtime_error("scan: unknown value type");
  }
}

inline Layout scan(const Bytes& b) {
  Layout l;
  uint64_t n_tensors = get_le<uint64_t>(b, 8), n_kv = get_le<uint64_t>(b, 16);
  size_t at = 24;
  for (uint64_t k = 0; k < n_kv; ++k) {
    KvLoc kv;
    kv.start = at;
    uint64_t len = get_le<uint64_t>(b, at);
    kv.key.assign(reinterpret_cast<const char*>(b.data() + at + 8), len);
    kv.type_at = at + 8 + len;
    kv.type = get_le<uint32_t>(b, kv.type_at);
    kv.value_at = kv.type_at + 4;
    kv.end = at = skip_value(b, kv.type, kv.value_at);
    l.kvs.push_back(kv);
  }
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorLoc t;
    t.start = at;
    uint64_t len = get_le<uint64_t>(b, at);
    t.name.assign(reinterpret_cast<const char*>(b.data() + at + 8), len);
    t.ndims_at = at + 8 + len;
    t.n_dims = get_le<uint32_t>(b, t.ndims_at);
    t.ne_at = t.ndims_at + 4;
    for (uint32_t d = 0; d < t.n_dims; ++d) t.ne[d] = get_le<uint64_t>(b, t.ne_at + 8 * d);
    t.type_at = t.ne_at + 8 * t.n_dims;
    t.type = get_le<uint32_t>(b, t.type_at);
    t.offset_at = t.type_at + 4;
    t.offset = get_le<uint64_t>(b, t.offset_at);
    t.end = at = t.offset_at + 8;
    l.tensors.push_back(t);
  }
  l.infos_end = at;
  return l;
}

// A metadata record: key, u32 type, payload.
inline Bytes kv_record(const std::string& key, uint32_t type, const Bytes& payload) {
  Bytes r;
  append_str(r, key);
  append_le<uint32_t>(r, type);
  r.insert(r.end(), payload.begin(), payload.end());
  return r;
}

// Inserts metadata records before the first key and bumps the metadata count.
inline Bytes with_kv_first(const Bytes& b, const Bytes& records, uint64_t n_records = 1) {
  Bytes out = b;
  out.insert(out.begin() + 24, records.begin(), records.end());
  put_le<uint64_t>(out, 16, get_le<uint64_t>(b, 16) + n_records);
  return out;
}

struct CorruptCase {
  std::string name;                 // what is wrong (also a file name)
  Bytes bytes;                      // the corrupt file
  std::vector<std::string> expect;  // substrings of the error message
};

// Every corruption kind of the M1 issue, applied to `base` (a real model with ≥ 2 tensors, ≥ 2 of
// them 2-D with ne0 a multiple of 32 but not of 256, and a `tokenizer.ggml.tokens` array).
inline std::vector<CorruptCase> corrupt_cases(const Bytes& base) {
  const Layout l = scan(base);
  const TensorLoc* t2d = nullptr;  // a 2-D tensor
  for (const TensorLoc& t : l.tensors)
    if (t.n_dims == 2 && !t2d) t2d = &t;
  const KvLoc* tokens = nullptr;
  const KvLoc* arch = nullptr;
  for (const KvLoc& kv : l.kvs) {
    if (kv.key == "tokenizer.ggml.tokens") tokens = &kv;
    if (kv.key == "general.architecture") arch = &kv;
  }
  if (!t2d || !tokens || !arch || l.tensors.size() < 2) throw std::runtime_error("corrupt_cases: unsuitable base");
  const TensorLoc& t0 = l.tensors[0];
  const TensorLoc& t1 = l.tensors[1];
  const TensorLoc& tl = l.tensors.back();
  std::vector<CorruptCase> cs;
  auto add = [&](std::string name, Bytes b, std::vector<std::string> expect) {
    cs.push_back({std::move(name), std::move(b), std::move(expect)});
  };
  auto patched = [&](auto fn) {
    Bytes b = base;
    fn(b);
    return b;
  };

  add("bad-magic", patched([](Bytes& b) { b[0] = 'X'; }), {"bad magic"});
  add("bad-version", patched([](Bytes& b) { put_le<uint32_t>(b, 4, 4); }), {"version", "4"});
  add("version-zero", patched([](Bytes& b) { put_le<uint32_t>(b, 4, 0); }), {"version", "0"});
  add("big-endian", patched([](Bytes& b) { put_le<uint32_t>(b, 4, 0x03000000); }), {"big-endian"});
  add("truncated-header", Bytes(base.begin(), base.begin() + 10), {"truncated", "header"});
  add("truncated-in-metadata", Bytes(base.begin(), base.begin() + static_cast<long>(tokens->value_at + 100)),
      {"truncated", "tokenizer.ggml.tokens"});
  add("truncated-in-tensor-info", Bytes(base.begin(), base.begin() + static_cast<long>(t1.type_at + 2)),
      {"truncated", t1.name});
  add("truncated-in-data", Bytes(base.begin(), base.end() - 100), {"past the end", "tensor '"});
  add("kv-count-too-large", patched([](Bytes& b) { put_le<uint64_t>(b, 16, 1ull << 40); }),
      {"truncated", "of 1099511627776"});
  add("tensor-count-too-large", patched([](Bytes& b) { put_le<uint64_t>(b, 8, 1ull << 60); }),
      {"tensor info #", "of 1152921504606846976"});
  add("key-length-too-large", patched([&](Bytes& b) { put_le<uint64_t>(b, l.kvs[1].start, 1ull << 62); }),
      {"metadata key #1", "length"});
  add("string-length-too-large", patched([&](Bytes& b) { put_le<uint64_t>(b, arch->value_at, base.size()); }),
      {"general.architecture", "length"});
  add("array-count-too-large",
      patched([&](Bytes& b) { put_le<uint64_t>(b, tokens->value_at + 4, 0x7fffffffffffffffull); }),
      {"tokenizer.ggml.tokens", "array count"});
  add("unknown-value-type", patched([&](Bytes& b) { put_le<uint32_t>(b, arch->type_at, 13); }),
      {"general.architecture", "unknown value type id 13"});
  add("unknown-array-element-type", patched([&](Bytes& b) { put_le<uint32_t>(b, tokens->value_at, 99); }),
      {"tokenizer.ggml.tokens", "element type id 99"});
  add("tensor-name-length-too-large", patched([&](Bytes& b) { put_le<uint64_t>(b, t1.start, 1ull << 50); }),
      {"tensor info #1", "length"});
  add("n-dims-5", patched([&](Bytes& b) { put_le<uint32_t>(b, t1.ndims_at, 5); }), {t1.name, "n_dims 5"});
  add("n-dims-0", patched([&](Bytes& b) { put_le<uint32_t>(b, t1.ndims_at, 0); }), {t1.name, "n_dims 0"});
  add("zero-dim", patched([&](Bytes& b) { put_le<uint64_t>(b, t2d->ne_at + 8, 0); }), {t2d->name, "ne1 is zero"});
  add("overflowing-dims", patched([&](Bytes& b) {
        put_le<uint64_t>(b, t2d->ne_at, 1ull << 32);
        put_le<uint64_t>(b, t2d->ne_at + 8, 1ull << 32);
      }),
      {t2d->name, "overflows"});
  add("huge-dim", patched([&](Bytes& b) { put_le<uint64_t>(b, t2d->ne_at, ~0ull); }), {t2d->name, "overflows"});
  add("ne0-not-multiple-of-block", patched([&](Bytes& b) { put_le<uint32_t>(b, t2d->type_at, 12); }),
      {t2d->name, "q4_K", "block size 256"});
  add("unknown-type-id", patched([&](Bytes& b) { put_le<uint32_t>(b, t1.type_at, 42); }),
      {t1.name, "unknown ggml type id 42"});
  add("removed-type-id", patched([&](Bytes& b) { put_le<uint32_t>(b, t1.type_at, 4); }),
      {t1.name, "unknown ggml type id 4"});
  add("misaligned-offset", patched([&](Bytes& b) { put_le<uint64_t>(b, t1.offset_at, t1.offset + 4); }),
      {t1.name, "not a multiple of the alignment"});
  add("offset-past-end", patched([&](Bytes& b) { put_le<uint64_t>(b, tl.offset_at, 1ull << 40); }),
      {tl.name, "past the end"});
  add("offset-near-u64-max", patched([&](Bytes& b) { put_le<uint64_t>(b, tl.offset_at, ~0ull - 31); }),
      {tl.name, "past the end"});
  add("overlapping-tensors", patched([&](Bytes& b) { put_le<uint64_t>(b, t1.offset_at, t0.offset); }),
      {"overlaps", t0.name, t1.name});
  {  // a copy of metadata record #1 right after itself
    Bytes b = base;
    b.insert(b.begin() + static_cast<long>(l.kvs[1].end), base.begin() + static_cast<long>(l.kvs[1].start),
             base.begin() + static_cast<long>(l.kvs[1].end));
    put_le<uint64_t>(b, 16, l.kvs.size() + 1);
    add("duplicate-key", b, {"duplicate metadata key", l.kvs[1].key});
  }
  {  // a copy of tensor info #0 right after itself
    Bytes b = base;
    b.insert(b.begin() + static_cast<long>(t0.end), base.begin() + static_cast<long>(t0.start),
             base.begin() + static_cast<long>(t0.end));
    put_le<uint64_t>(b, 8, l.tensors.size() + 1);
    add("duplicate-tensor-name", b, {"duplicate tensor name", t0.name});
  }
  auto u32 = [](uint32_t v) {
    Bytes p;
    append_le<uint32_t>(p, v);
    return p;
  };
  add("alignment-zero", with_kv_first(base, kv_record("general.alignment", 4, u32(0))),
      {"general.alignment", "not a power of two"});
  add("alignment-48", with_kv_first(base, kv_record("general.alignment", 4, u32(48))),
      {"general.alignment", "48", "not a power of two"});
  {
    Bytes p;
    append_le<uint64_t>(p, 32);
    add("alignment-u64", with_kv_first(base, kv_record("general.alignment", 10, p)),
        {"general.alignment", "expected u32"});
  }
  add("bool-value-2", with_kv_first(base, kv_record("test.flag", 7, Bytes{2})), {"test.flag", "bool"});
  {  // arrays nested 9 deep (the reader accepts up to 8)
    Bytes p;
    for (int d = 0; d < 9; ++d) {
      append_le<uint32_t>(p, 9);
      append_le<uint64_t>(p, 1);
    }
    append_le<uint32_t>(p, 4);
    append_le<uint64_t>(p, 0);
    add("arrays-nested-too-deep", with_kv_first(base, kv_record("test.deep", 9, p)), {"test.deep", "nested deeper"});
  }
  {  // nested array whose inner count is too large
    Bytes p;
    append_le<uint32_t>(p, 9);
    append_le<uint64_t>(p, 1);
    append_le<uint32_t>(p, 8);
    append_le<uint64_t>(p, 1ull << 61);
    add("nested-array-count-too-large", with_kv_first(base, kv_record("test.nested", 9, p)),
        {"test.nested", "array count"});
  }
  return cs;
}

}  // namespace rocky::test
