// `rocky tokenize` end to end: its --ids output is byte-identical to llama-tokenize's printed ids
// (ref/<label>/<prompt>.tok_default.txt / .tok_nobos.txt) for every shared model and prompt; the
// default output lists "id -> 'piece'" lines; a bad model path exits 1.
#include <gtest/gtest.h>

#include <cstdio>
#include <sys/wait.h>

#include "tokenizer/common.hpp"

namespace {

struct Result {
  int rc = -1;
  std::string out;
};

Result run(const std::string& args) {
  const std::string cmd = std::string(ROCKY_BINARY_DIR) + "/rocky tokenize " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

const char* const k_models[][2] = {
    {"models/stories260K.gguf", "stories260K"},
    {"models/stories260K-f16.gguf", "stories260K-f16"},
    {"models/llama-2-tiny-random.gguf", "llama-2-tiny-random"},
    {"models/synth/synth-llama-q4_k_m.gguf", "synth-llama-q4_k_m"},
    {"models/synth/synth-llama-q8_0.gguf", "synth-llama-q8_0"},
    {"models/synth/synth-qwen2-q4_k_m.gguf", "synth-qwen2-q4_k_m"},
};

TEST(TokenizeCli, IdsMatchLlamaTokenize) {
  int checked = 0;
  for (const auto& m : k_models) {
    for (const char* p : {"p1_short", "p2_paragraph", "p3_unicode_code"}) {
      const std::string model = rocky::test::shared_path(std::string("reference/") + m[0]);
      const std::string prompt = rocky::test::shared_path(std::string("reference/prompts/") + p + ".txt");
      const std::string ref = std::string("reference/ref/") + m[1] + "/" + p;
      const std::string base = "-m '" + model + "' -p \"$(cat '" + prompt + "')\" --ids";
      const Result d = run(base);
      EXPECT_EQ(d.rc, 0) << d.out;
      EXPECT_EQ(d.out, rocky::test::read_text(rocky::test::shared_path(ref + ".tok_default.txt"))) << m[1] << "/" << p;
      const Result nb = run(base + " --no-bos");
      EXPECT_EQ(nb.out, rocky::test::read_text(rocky::test::shared_path(ref + ".tok_nobos.txt"))) << m[1] << "/" << p;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 18);
}

TEST(TokenizeCli, PiecesAndErrors) {
  const std::string model = rocky::test::shared_path("reference/vocab/ggml-vocab-qwen2-rebuilt.gguf");
  const Result r = run("-m '" + model + "' -p 'Hello world<|im_end|>'");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.out, "  9707 -> 'Hello'\n  1879 -> ' world'\n151645 -> '<|im_end|>'\n");
  const Result ns = run("-m '" + model + "' -p '<|im_end|>' --ids --no-parse-special");
  EXPECT_EQ(ns.rc, 0);
  EXPECT_EQ(ns.out.find("151645"), std::string::npos) << ns.out;
  const Result bad = run("-m /nonexistent/model.gguf -p x");
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.out.find("/nonexistent/model.gguf"), std::string::npos) << bad.out;
  const Result usage = run("-p x");
  EXPECT_EQ(usage.rc, 2);
}

}  // namespace
