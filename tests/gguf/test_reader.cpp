#include <gtest/gtest.h>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "gguf/gguf.hpp"

using rocky::gguf::GgufFile;
using rocky::test::shared_path;

namespace {
uint64_t param_count(const GgufFile& f) {
  uint64_t n = 0;
  for (const auto& t : f.tensors()) n += t.n_elements;
  return n;
}
}  // namespace

TEST(GgufReader, Stories260KParams) {
  auto f = GgufFile::open(shared_path("reference/models/stories260K.gguf"));
  EXPECT_EQ(param_count(f), 292800u);
  EXPECT_EQ(f.architecture(), "llama");
  auto f16 = GgufFile::open(shared_path("reference/models/stories260K-f16.gguf"));
  EXPECT_EQ(param_count(f16), 292800u);
}

TEST(GgufReader, TinyRandomParams) {
  auto f = GgufFile::open(shared_path("reference/models/llama-2-tiny-random.gguf"));
  EXPECT_EQ(param_count(f), 513048u);
}

TEST(GgufReader, VocabOnlyFilesLoad) {
  for (const char* v : {"reference/vocab/ggml-vocab-llama-spm.gguf", "reference/vocab/ggml-vocab-qwen2-rebuilt.gguf"}) {
    auto f = GgufFile::open(shared_path(v));
    EXPECT_TRUE(f.tensors().empty()) << v;
    auto toks = f.get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(toks.has_value()) << v;
    EXPECT_GT(toks->size(), 1000u) << v;
  }
}

TEST(GgufReader, MissingFileIsAnError) { EXPECT_THROW(GgufFile::open("/nonexistent/model.gguf"), rocky::Error); }
