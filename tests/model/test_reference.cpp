// End-to-end comparison of the CPU oracle with llama.cpp's CPU outputs (reference/README.md:
// rel ≤ 1e-3 vs the tight labels, ≤ 0.35 abs at the last position vs the loose labels).
#include <gtest/gtest.h>

#include "model/harness.hpp"

namespace rocky {
namespace {

using namespace rocky::test;

// stories260K__kvf32_faoff: every prompt position, tight.
TEST(Reference, Stories260KAllPositionsTight) {
  auto m = model::Model::load(model_path("stories260K.gguf"));
  for (const auto& p : k_prompts) {
    auto r = test::load_ref("stories260K__kvf32_faoff", p);
    auto ref = test::load_f32(test::ref_path("stories260K__kvf32_faoff", p, ".cpu.all_logits.f32"));
    ASSERT_EQ(ref.size(), r.eval_tokens.size() * static_cast<size_t>(r.n_vocab));
    auto s = make_session(*m);
    auto got = s->eval(r.eval_tokens, /*all_logits=*/true);
    double rel = test::rel_err(got, ref);
    EXPECT_LE(rel, 1e-3) << p;
    RecordProperty("rel_" + p, std::to_string(rel));
    std::printf("stories260K %s: rel %.3g over %zu positions\n", p.c_str(), rel, r.eval_tokens.size());
  }
}

TEST(Reference, LooseLabels) {
  check_last({"stories260K", "stories260K.gguf"}, 1e-2, 0);
}

// stories260K free-running greedy equals llama.cpp's tokens for every prompt (both labels).
TEST(Reference, Stories260KGreedy) {
  auto m = model::Model::load(model_path("stories260K.gguf"));
  for (const char* label : {"stories260K__kvf32_faoff", "stories260K"}) {
    for (const auto& p : k_prompts) {
      auto r = test::load_ref(label, p);
      auto s = make_session(*m);
      auto logits = s->eval(r.eval_tokens);
      std::vector<int32_t> gen;
      for (size_t i = 0; i < r.greedy_ids.size(); ++i) {
        int32_t t = runtime::argmax(logits);
        gen.push_back(t);
        logits = s->eval(std::span<const int32_t>(&t, 1));
      }
      EXPECT_EQ(gen, r.greedy_ids) << label << " " << p;
    }
  }
}

}  // namespace
}  // namespace rocky
