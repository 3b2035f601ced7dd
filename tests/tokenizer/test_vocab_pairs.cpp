// llama.cpp's tokenizer test pairs (../shared/reference/vocab/X.gguf.inp / .out): every string must
// tokenize to exactly the recorded ids (special parsing on, no BOS), for each vocab present.
#include <gtest/gtest.h>

#include <sstream>

#include "tokenizer/common.hpp"

namespace {

// .inp: strings, each followed by "\n__ggml_vocab_test__\n". .out: one line of ids per string.
std::vector<std::string> read_inp(const std::string& path) {
  const std::string all = rocky::test::read_text(path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < all.size()) {
    size_t e = all.find(sep, pos);
    if (e == std::string::npos) {
      ADD_FAILURE() << path << ": trailing text without separator at byte " << pos;
      break;
    }
    out.push_back(all.substr(pos, e - pos));
    pos = e + sep.size();
  }
  return out;
}

std::vector<std::vector<int32_t>> read_out(const std::string& path) {
  const std::string all = rocky::test::read_text(path);
  std::vector<std::vector<int32_t>> out;
  std::istringstream in(all);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    int64_t v;
    while (ls >> v) ids.push_back(static_cast<int32_t>(v));
    out.push_back(ids);
  }
  return out;
}

void check_pairs(const std::string& name) {
  const auto& tok = rocky::test::shared_tokenizer("vocab/" + name);
  const auto inp = read_inp(rocky::test::shared_path("reference/vocab/" + name + ".inp"));
  const auto outp = read_out(rocky::test::shared_path("reference/vocab/" + name + ".out"));
  ASSERT_EQ(inp.size(), 46u) << name;
  ASSERT_EQ(inp.size(), outp.size()) << name;
  int ok = 0;
  for (size_t i = 0; i < inp.size(); ++i) {
    const auto ids = tok.tokenize(inp[i], /*add_special=*/false, /*parse_special=*/true);
    EXPECT_EQ(ids, outp[i]) << name << " string #" << i << ": '" << inp[i] << "'";
    ok += ids == outp[i];
  }
  EXPECT_EQ(ok, static_cast<int>(inp.size())) << name << ": " << ok << "/" << inp.size() << " pairs match";
}

TEST(VocabPairs, LlamaSpm) { check_pairs("ggml-vocab-llama-spm.gguf"); }
TEST(VocabPairs, Qwen2Rebuilt) { check_pairs("ggml-vocab-qwen2-rebuilt.gguf"); }
// Llama 3 byte-level BPE (pre "llama-bpe"), rebuilt from Meta's tokenizer.json (reference/README.md).
TEST(VocabPairs, LlamaBpeRebuilt) { check_pairs("ggml-vocab-llama-bpe-rebuilt.gguf"); }

}  // namespace
