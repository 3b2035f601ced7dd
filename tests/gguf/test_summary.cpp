// gguf/summary.hpp: totals, architecture summary and value text.
#include <gtest/gtest.h>

#include "common/shared.hpp"
#include "gguf/summary.hpp"
#include "gguf/writer.hpp"

using namespace rocky::gguf;
using rocky::test::shared_path;

TEST(GgufSummary, TotalsAndArchitectureOfTinyRandom) {
  auto f = GgufFile::open(shared_path("reference/models/llama-2-tiny-random.gguf"));
  Totals t = totals(f);
  EXPECT_EQ(t.n_params, 513048u);
  uint64_t bytes = 0;
  for (const auto& ti : f.tensors()) bytes += ti.n_bytes;
  EXPECT_EQ(t.n_bytes, bytes);
  EXPECT_DOUBLE_EQ(t.bits_per_weight, 8.0 * static_cast<double>(bytes) / 513048.0);
  EXPECT_EQ(t.tensors_by_type.size(), 2u);  // f16 + f32
  uint64_t sum = 0;
  for (const auto& [type, n] : t.params_by_type) sum += n;
  EXPECT_EQ(sum, 513048u);
  ArchSummary a = arch_summary(f);
  EXPECT_EQ(a.arch, "llama");
  EXPECT_EQ(a.n_layer, 1u);
  EXPECT_EQ(a.n_embd, 8u);
  EXPECT_EQ(a.n_head, 2u);
  EXPECT_EQ(a.head_dim, 4u);
  EXPECT_EQ(a.n_ff, 32u);
  EXPECT_EQ(a.n_vocab, 32000u);
  EXPECT_EQ(a.rope_type, "norm");
}

TEST(GgufSummary, NVocabFromTheOutputTensorWithoutTokens) {
  Writer w;
  w.set_string("general.architecture", "qwen2");
  w.set_u32("qwen2.embedding_length", 64);
  w.set_u32("qwen2.attention.head_count", 4);
  w.set_u32("qwen2.attention.key_length", 32);
  const uint64_t ne[] = {64, 100};
  w.add_tensor("output.weight", rocky::DType::F16, ne, std::vector<uint8_t>(64 * 100 * 2, 0x3c));
  auto f = GgufFile::from_bytes(w.to_bytes(), "x.gguf");
  ArchSummary a = arch_summary(f);
  EXPECT_EQ(a.n_vocab, 100u);
  EXPECT_EQ(a.n_vocab_from, "output.weight");
  EXPECT_EQ(a.head_dim, 32u);  // key_length wins over n_embd / n_head
  EXPECT_EQ(a.head_dim_from, "key_length");
  EXPECT_EQ(a.n_head_kv, 4u);  // defaults to n_head
  EXPECT_FALSE(a.n_layer.has_value());
  EXPECT_EQ(a.rope_type, "neox");
  EXPECT_EQ(totals(f).bits_per_weight, 16.0);
}

TEST(GgufSummary, ValueText) {
  EXPECT_EQ(group_digits(0), "0");
  EXPECT_EQ(group_digits(999), "999");
  EXPECT_EQ(group_digits(1000), "1,000");
  EXPECT_EQ(group_digits(292800), "292,800");
  EXPECT_EQ(group_digits(1234567890), "1,234,567,890");
  EXPECT_EQ(quote("a\"b\\\n\x01"), "\"a\\\"b\\\\\\n\\x01\"");
  Value s;
  s.type = ValueType::STRING;
  std::string long_str(159, 'x');
  long_str += "\xc3\xa9";  // é, bytes 159 and 160: a cut at 160 must not split it
  long_str += std::string(100, 'y');
  s.str = long_str;
  std::string t = format_value(s);
  EXPECT_EQ(t, "\"" + std::string(159, 'x') + "…\" (261 bytes)");
  Value arr;
  arr.type = ValueType::ARRAY;
  arr.elem_type = ValueType::I32;
  const int32_t xs[] = {1, -2, 3, 4, 5};
  arr.count = 5;
  arr.raw = reinterpret_cast<const uint8_t*>(xs);
  EXPECT_EQ(format_value(arr, 3), "[i32 × 5] [1, -2, 3, … 2 more]");
  EXPECT_EQ(format_value(arr, 8), "[i32 × 5] [1, -2, 3, 4, 5]");
}
