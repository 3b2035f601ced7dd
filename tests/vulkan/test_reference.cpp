// Every shared model through the real runtime (model builders, planner with arena reuse, Session's
// ubatch loop with -ub smaller than the prompt) on the Vulkan backend, against llama.cpp's `.cpu`
// reference files with the tolerances of ../shared/reference/README.md: tight labels rel ≤ 1e-3
// (f32 KV), loose labels ≤ 0.35 absolute at the last position; f16 KV held to rel ≤ 1e-2.
#include <gtest/gtest.h>

#include <cstdio>

#include "model/model.hpp"
#include "model/ref.hpp"
#include "runtime/session.hpp"
#include "vk_test_util.hpp"

namespace rocky::test {
namespace {

struct Case {
  const char* model;   // under reference/models/
  const char* label;   // under reference/ref/
  const char* prompt;
  bool tight;          // rel ≤ 1e-3 (else ≤ 0.35 absolute)
  bool kv_f16;
  int32_t n_ubatch;
};

std::vector<float> eval_last(const Case& c, const RefCase& r) {
  auto m = model::Model::load(shared_path(std::string("reference/models/") + c.model));
  vulkan::VulkanOptions o;
  o.validation = true;
  o.kv_f16 = c.kv_f16;
  o.persist_pipeline_cache = false;
  auto be = std::make_unique<vulkan::VulkanBackend>(o);
  vulkan::VulkanBackend* vk = be.get();
  runtime::Session s(*m, std::move(be), {static_cast<int32_t>(r.eval_tokens.size()) + 4, c.n_ubatch});
  auto logits = s.eval(r.eval_tokens);
  EXPECT_EQ(vk->instance().error_count(), 0u) << c.model;
  return logits;
}

TEST(VulkanReference, SharedModelsMatchLlamaCppCpu) {
  const Case cases[] = {
      {"llama-2-tiny-random.gguf", "llama-2-tiny-random", "p1_short", true, false, 7},
      {"stories260K-f16.gguf", "stories260K-f16", "p3_unicode_code", false, true, 16},
      {"synth/synth-llama-q8_0.gguf", "synth-llama-q8_0", "p1_short", false, false, 5},
      {"synth/synth-llama-q4_k_m.gguf", "synth-llama-q4_k_m", "p1_short", false, true, 512},
      {"synth/synth-qwen2-q4_k_m.gguf", "synth-qwen2-q4_k_m-dequant-f32__kvf32_faoff", "p1_short", true, false, 6},
  };
  for (const Case& c : cases) {
    RefCase r = load_ref(c.label, c.prompt);
    auto got = eval_last(c, r);
    auto ref = load_f32(ref_path(c.label, c.prompt, ".cpu.last_logits.f32"));
    ASSERT_EQ(got.size(), ref.size()) << c.model;
    const double rel = rel_err(got, ref), abs = max_abs_diff(got, ref);
    std::printf("%s %s (kv %s, -ub %d): rel %.3g, max abs %.3g\n", c.label, c.prompt, c.kv_f16 ? "f16" : "f32",
                c.n_ubatch, rel, abs);
    if (c.tight) {
      EXPECT_LE(rel, c.kv_f16 ? 1e-2 : 1e-3) << c.label;
    } else if (std::string(c.label).rfind("stories260K", 0) == 0) {
      EXPECT_LE(rel, 1e-2) << c.label;  // stories260K-f16: loose rel ≤ 1e-2
    } else {
      EXPECT_LE(abs, 0.35) << c.label;
    }
  }
}

}  // namespace
}  // namespace rocky::test
