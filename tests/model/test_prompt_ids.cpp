// Prompt ids: rocky's tokenizer on each reference model gives llama.cpp's eval_tokens for every
// label and prompt (BOS as the model's metadata says).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "model/ref.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky {
namespace {

TEST(PromptIds, EqualEverywhere) {
  const std::filesystem::path ref = test::shared_path("reference/ref");
  int checked = 0;
  std::map<std::string, std::unique_ptr<tok::Tokenizer>> toks;  // one load per vocab (qwen2's is big)
  for (const auto& d : std::filesystem::directory_iterator(ref)) {
    const std::string label = d.path().filename().string();
    if (label == "dequant") continue;
    for (const auto& p : test::k_prompts) {
      auto r = test::load_ref(label, p);
      std::string mf = r.meta.at("model_file").get<std::string>();
      // The -dequant-f32 labels ran an f32 copy of the q4_K_M file: same vocab.
      if (auto pos = mf.find("-dequant-f32"); pos != std::string::npos) mf.erase(pos, 12);
      const std::string dir = mf.rfind("synth-", 0) == 0 ? "reference/models/synth/" : "reference/models/";
      auto& tk = toks[mf];
      if (!tk) tk = std::make_unique<tok::Tokenizer>(tok::Tokenizer::load(test::shared_path(dir + mf)));
      std::ifstream pf(test::shared_path("reference/prompts/" + p + ".txt"), std::ios::binary);
      std::stringstream ss;
      ss << pf.rdbuf();
      EXPECT_EQ(tk->tokenize(ss.str(), true, true), r.eval_tokens) << label << " " << p;
      ++checked;
    }
  }
  EXPECT_GE(checked, 30);
}

}  // namespace
}  // namespace rocky
