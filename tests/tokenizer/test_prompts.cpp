// Token ids of every reference prompt for every shared model equal llama.cpp's
// tokenize.llama_tokenize_default (BOS as the model's metadata says, special parsing on) and
// llama_tokenize_no_bos, from ../shared/reference/ref/<label>/<prompt>.json.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/common.hpp"

namespace {

struct Case {
  const char* model;  // under reference/
  const char* label;  // ref/<label>/
};

const Case k_cases[] = {
    {"models/stories260K.gguf", "stories260K"},
    {"models/stories260K-f16.gguf", "stories260K-f16"},
    {"models/llama-2-tiny-random.gguf", "llama-2-tiny-random"},
    {"models/synth/synth-llama-q4_k_m.gguf", "synth-llama-q4_k_m"},
    {"models/synth/synth-llama-q8_0.gguf", "synth-llama-q8_0"},
    {"models/synth/synth-qwen2-q4_k_m.gguf", "synth-qwen2-q4_k_m"},
};
const char* const k_prompts[] = {"p1_short", "p2_paragraph", "p3_unicode_code"};

TEST(Prompts, MatchLlamaCppForEverySharedModel) {
  int checked = 0;
  for (const auto& c : k_cases) {
    const auto& tok = rocky::test::shared_tokenizer(c.model);
    for (const char* p : k_prompts) {
      const std::string text =
          rocky::test::read_text(rocky::test::shared_path(std::string("reference/prompts/") + p + ".txt"));
      const auto ref = nlohmann::json::parse(rocky::test::read_text(
          rocky::test::shared_path(std::string("reference/ref/") + c.label + "/" + p + ".json")));
      ASSERT_EQ(ref.at("prompt").get<std::string>(), text) << c.label << "/" << p;
      const auto want = ref.at("tokenize").at("llama_tokenize_default").get<std::vector<int32_t>>();
      const auto want_nobos = ref.at("tokenize").at("llama_tokenize_no_bos").get<std::vector<int32_t>>();
      EXPECT_EQ(tok.tokenize(text), want) << c.label << "/" << p;
      EXPECT_EQ(tok.tokenize(text, /*add_special=*/false), want_nobos) << c.label << "/" << p;
      EXPECT_EQ(tok.vocab().add_bos(), ref.at("vocab_add_bos").get<bool>()) << c.label;
      EXPECT_EQ(static_cast<int64_t>(tok.vocab().size()), ref.at("n_vocab").get<int64_t>()) << c.label;
      // Pieces as llama.cpp printed them (special tokens rendered). Incomplete UTF-8 pieces were
      // printed with U+FFFD by the reference tool, so compare only pieces that are valid UTF-8.
      const auto pieces = ref.at("tokenize").at("pieces").get<std::vector<std::string>>();
      ASSERT_EQ(pieces.size(), want.size()) << c.label << "/" << p;
      for (size_t i = 0; i < want.size(); ++i) {
        const std::string mine = tok.token_to_piece(want[i]);
        if (pieces[i].find("\xEF\xBF\xBD") == std::string::npos) {
          EXPECT_EQ(mine, pieces[i]) << c.label << "/" << p << " #" << i;
        }
      }
      // And the ids give the prompt back.
      // (llama.cpp keeps the SPM prefix space when remove_special drops a BOS, so use the no-BOS ids.)
      EXPECT_EQ(tok.detokenize(want_nobos), text) << c.label << "/" << p;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 18);
}

}  // namespace
