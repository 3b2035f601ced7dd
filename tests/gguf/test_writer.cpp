// GGUF writer tests: read → write → read round trips on every shared model and vocab file, and
// files built from scratch with every value type (nested arrays included).
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "gguf/gguf.hpp"
#include "gguf/writer.hpp"

using rocky::DType;
using rocky::gguf::GgufFile;
using rocky::gguf::Value;
using rocky::gguf::ValueType;
using rocky::gguf::Writer;
using rocky::test::shared_path;

namespace {

const char* const k_files[] = {
    "reference/models/stories260K.gguf",
    "reference/models/stories260K-f16.gguf",
    "reference/models/llama-2-tiny-random.gguf",
    "reference/models/synth/synth-llama-q4_k_m.gguf",
    "reference/models/synth/synth-llama-q8_0.gguf",
    "reference/models/synth/synth-qwen2-q4_k_m.gguf",
    "reference/vocab/ggml-vocab-llama-spm.gguf",
    "reference/vocab/ggml-vocab-qwen2-rebuilt.gguf",
};

uint64_t elem_bytes(ValueType t) {
  switch (t) {
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
    default: return 0;
  }
}

// Deep equality; floats compared bit for bit (f32 values compare as the float the file holds).
::testing::AssertionResult same_value(const Value& a, const Value& b, const std::string& where) {
  if (a.type != b.type) return ::testing::AssertionFailure() << where << ": type differs";
  switch (a.type) {
    case ValueType::F32:
      if (std::bit_cast<uint32_t>(static_cast<float>(a.f)) != std::bit_cast<uint32_t>(static_cast<float>(b.f)))
        return ::testing::AssertionFailure() << where << ": f32 differs";
      break;
    case ValueType::F64:
      if (std::bit_cast<uint64_t>(a.f) != std::bit_cast<uint64_t>(b.f))
        return ::testing::AssertionFailure() << where << ": f64 differs";
      break;
    case ValueType::STRING:
      if (a.str != b.str) return ::testing::AssertionFailure() << where << ": string differs";
      break;
    case ValueType::ARRAY: {
      if (a.elem_type != b.elem_type || a.count != b.count)
        return ::testing::AssertionFailure() << where << ": array type/count differs";
      uint64_t es = elem_bytes(a.elem_type);
      if (es) {
        if (a.count && std::memcmp(a.raw, b.raw, a.count * es) != 0)
          return ::testing::AssertionFailure() << where << ": array bytes differ";
      } else if (a.elem_type == ValueType::STRING) {
        if (a.strings != b.strings) return ::testing::AssertionFailure() << where << ": string array differs";
      } else {
        if (a.items.size() != b.items.size()) return ::testing::AssertionFailure() << where << ": items differ";
        for (size_t k = 0; k < a.items.size(); ++k) {
          auto r = same_value(a.items[k], b.items[k], where + "[" + std::to_string(k) + "]");
          if (!r) return r;
        }
      }
      break;
    }
    default:
      if (a.u != b.u || a.i != b.i) return ::testing::AssertionFailure() << where << ": integer differs";
  }
  return ::testing::AssertionSuccess();
}

void expect_same_file(const GgufFile& a, const GgufFile& b) {
  ASSERT_EQ(a.metadata().size(), b.metadata().size());
  for (size_t k = 0; k < a.metadata().size(); ++k) {
    EXPECT_EQ(a.metadata()[k].first, b.metadata()[k].first);
    EXPECT_TRUE(same_value(a.metadata()[k].second, b.metadata()[k].second, std::string(a.metadata()[k].first)));
  }
  EXPECT_EQ(a.alignment(), b.alignment());
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t k = 0; k < a.tensors().size(); ++k) {
    const auto& x = a.tensors()[k];
    const auto& y = b.tensors()[k];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.type, y.type) << x.name;
    EXPECT_EQ(x.n_dims, y.n_dims) << x.name;
    EXPECT_EQ(x.ne, y.ne) << x.name;
    ASSERT_EQ(x.n_bytes, y.n_bytes) << x.name;
    EXPECT_EQ(0, std::memcmp(x.data, y.data, x.n_bytes)) << x.name;
  }
}

Writer copy_of(const GgufFile& f) {
  Writer w;
  for (const auto& [key, value] : f.metadata()) w.set(key, value);
  for (const auto& t : f.tensors())
    w.add_tensor(t.name, t.type, std::span<const uint64_t>(t.ne.data(), t.n_dims), {t.data, t.n_bytes});
  return w;
}

}  // namespace

TEST(GgufWriter, RoundTripEverySharedFile) {
  const std::string dir = rocky::test::scratch_dir("gguf_writer");
  for (const char* rel : k_files) {
    SCOPED_TRACE(rel);
    auto src = GgufFile::open(shared_path(rel));
    Writer w = copy_of(src);
    const std::string out = dir + "/" + std::filesystem::path(rel).filename().string();
    w.write(out);
    auto back = GgufFile::open(out);
    expect_same_file(src, back);
    // The in-memory image is the same file, and both are byte-identical to the source file (the
    // shared files were written by llama.cpp/gguf-py with the same layout rules).
    auto bytes = w.to_bytes();
    EXPECT_EQ(bytes, rocky::test::read_file_bytes(out));
    EXPECT_TRUE(bytes == rocky::test::read_file_bytes(shared_path(rel))) << "differs from the source file";
    // Writing what was read back gives the same bytes again (the layout is a fixed point).
    EXPECT_EQ(copy_of(back).to_bytes(), bytes);
  }
}

TEST(GgufWriter, EveryValueTypeAndNestedArrays) {
  Writer w;
  w.set_u8("t.u8", 250);
  w.set_i8("t.i8", -100);
  w.set_u16("t.u16", 65000);
  w.set_i16("t.i16", -32000);
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -2000000000);
  w.set_u64("t.u64", 0xfedcba9876543210ull);
  w.set_i64("t.i64", -0x7edcba9876543210ll);
  w.set_f32("t.f32", -0.0f);
  w.set_f64("t.f64", 1e300);
  w.set_bool("t.bool", true);
  w.set_string("t.str", std::string_view("a\0b", 3));
  w.set_string_array("t.strs", {"x", "", "\xff\xfe", "long string"});
  const float fs[] = {1.5f, -2.25f, 3e-39f};
  w.set_f32_array("t.f32s", fs);
  const int32_t is[] = {-1, 0, 7};
  w.set_i32_array("t.i32s", is);
  // [[1,2,3],[4]] of u16, and [[["a"]], []] of strings, nested two deep.
  const uint16_t u16s[] = {1, 2, 3, 4};
  Value inner1, inner2, nested;
  inner1.type = inner2.type = nested.type = ValueType::ARRAY;
  inner1.elem_type = inner2.elem_type = ValueType::U16;
  inner1.count = 3;
  inner1.raw = reinterpret_cast<const uint8_t*>(u16s);
  inner2.count = 1;
  inner2.raw = reinterpret_cast<const uint8_t*>(u16s + 3);
  nested.elem_type = ValueType::ARRAY;
  nested.count = 2;
  nested.items = {inner1, inner2};
  w.set("t.nested", nested);
  Value s1, s2, s3;
  s1.type = s2.type = s3.type = ValueType::ARRAY;
  s1.elem_type = ValueType::STRING;
  s1.count = 1;
  s1.strings = {"a"};
  s2.elem_type = ValueType::ARRAY;
  s2.count = 1;
  s2.items = {s1};
  s3.elem_type = ValueType::ARRAY;
  s3.count = 2;
  Value empty;
  empty.type = ValueType::ARRAY;
  empty.elem_type = ValueType::ARRAY;
  s3.items = {s2, empty};
  w.set("t.nested2", s3);
  w.set_u32("general.alignment", 64);
  w.set_u8("t.u8", 251);  // replaces, keeps the first position

  std::vector<float> a(3 * 5);
  for (size_t k = 0; k < a.size(); ++k) a[k] = static_cast<float>(k) * 0.5f - 3.0f;
  const uint64_t ne_a[] = {3, 5};
  w.add_tensor("a", DType::F32, ne_a, {reinterpret_cast<const uint8_t*>(a.data()), a.size() * 4});
  std::vector<uint8_t> q(2 * 34);
  for (size_t k = 0; k < q.size(); ++k) q[k] = static_cast<uint8_t>(k * 37 + 11);
  const uint64_t ne_q[] = {32, 1, 2};
  w.add_tensor("q", DType::Q8_0, ne_q, std::vector<uint8_t>(q));

  auto f = GgufFile::from_bytes(w.to_bytes(), "built.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  ASSERT_EQ(f.metadata().size(), 18u);
  EXPECT_EQ(f.metadata()[0].first, "t.u8");
  EXPECT_EQ(f.get_uint("t.u8"), 251u);
  EXPECT_EQ(f.get_int("t.i8"), -100);
  EXPECT_EQ(f.get_uint("t.u16"), 65000u);
  EXPECT_EQ(f.get_int("t.i16"), -32000);
  EXPECT_EQ(f.get_uint("t.u32"), 4000000000u);
  EXPECT_EQ(f.get_int("t.i32"), -2000000000);
  EXPECT_EQ(f.get_uint("t.u64"), 0xfedcba9876543210ull);
  EXPECT_EQ(f.get_int("t.i64"), -0x7edcba9876543210ll);
  EXPECT_EQ(std::bit_cast<uint64_t>(*f.get_float("t.f32")), std::bit_cast<uint64_t>(-0.0));
  EXPECT_EQ(f.get_float("t.f64"), 1e300);
  EXPECT_EQ(f.get_bool("t.bool"), true);
  EXPECT_EQ(f.get_string("t.str"), std::string_view("a\0b", 3));
  EXPECT_EQ(*f.get_string_array("t.strs"), (std::vector<std::string_view>{"x", "", "\xff\xfe", "long string"}));
  EXPECT_EQ(*f.get_f32_array("t.f32s"), (std::vector<float>{1.5f, -2.25f, 3e-39f}));
  EXPECT_EQ(*f.get_int_array("t.i32s"), (std::vector<int64_t>{-1, 0, 7}));
  EXPECT_TRUE(same_value(*f.find("t.nested"), nested, "t.nested"));
  EXPECT_TRUE(same_value(*f.find("t.nested2"), s3, "t.nested2"));
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.tensors()[0].offset, 0u);
  EXPECT_EQ(f.tensors()[1].offset, 64u);  // 60 bytes of a, padded to 64
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(0, std::memcmp(f.tensors()[0].data, a.data(), 60));
  EXPECT_EQ(0, std::memcmp(f.tensors()[1].data, q.data(), q.size()));
  EXPECT_EQ(f.tensors()[1].ne, (std::array<uint64_t, 4>{32, 1, 2, 1}));
}

TEST(GgufWriter, RefusesBadInput) {
  Writer w;
  const uint64_t ne[] = {31};
  std::vector<uint8_t> d(34);
  EXPECT_THROW(w.add_tensor("x", DType::Q8_0, ne, d), rocky::Error);  // ne0 not a multiple of 32
  const uint64_t ne2[] = {32};
  EXPECT_THROW(w.add_tensor("x", DType::Q8_0, ne2, std::span<const uint8_t>(d.data(), 33)), rocky::Error);
  w.add_tensor("x", DType::Q8_0, ne2, d);
  EXPECT_THROW(w.add_tensor("x", DType::Q8_0, ne2, d), rocky::Error);  // duplicate name
  EXPECT_THROW(w.set_u32("general.alignment", 48), rocky::Error);
  EXPECT_THROW(w.set_u64("general.alignment", 64), rocky::Error);
  Value bad;
  bad.type = ValueType::ARRAY;
  bad.elem_type = ValueType::STRING;
  bad.count = 2;
  bad.strings = {"only one"};
  EXPECT_THROW(w.set("k", bad), rocky::Error);
}
