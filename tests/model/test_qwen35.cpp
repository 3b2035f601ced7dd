// qwen35 (Qwen3.5 hybrid: Gated DeltaNet linear attention + gated full attention) on the CPU
// oracle against llama.cpp (reference/README.md, synth-qwen35): rel ≤ 1e-3 against the
// dequant-f32 ideal label on every prompt (with teacher forcing through the reference greedy ids,
// which carries the recurrent state through 31 single-token decodes), ≤ 1.35 absolute against the
// quantized label; the recurrent state carried across ubatches (a prefill split into ubatches of 7
// tokens, and one token at a time, equals the one-ubatch prefill) and zeroed by reset().
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "model/harness.hpp"

namespace rocky {
namespace {

using namespace rocky::test;

constexpr const char* k_model = "synth-qwen35-q4_k_m.gguf";
constexpr const char* k_ideal = "synth-qwen35-q4_k_m-dequant-f32__kvf32_faoff";
constexpr const char* k_quant = "synth-qwen35-q4_k_m__kvf32_faoff";

TEST(Qwen35, IdealLabelTightWithTeacherForcing) { teacher_force({k_ideal, k_model}, cpu_spec(), 1e-2f, 1e-3, 0); }

TEST(Qwen35, QuantizedLabelLoose) { check_last({k_quant, k_model}, 0, 1.35); }

TEST(Qwen35, StateCarriedAcrossUbatches) {
  auto m = model::Model::load(model_path(k_model));
  ASSERT_TRUE(m->hparams().is_recurrent_layer(0));
  ASSERT_FALSE(m->hparams().is_recurrent_layer(3));
  for (const std::string p : {"p1_short", "p3_unicode_code"}) {
    auto r = load_ref(k_ideal, p);
    auto one = make_session(*m, 512, 512);
    const std::vector<float> ref = one->eval(r.eval_tokens);
    for (int32_t ub : {7, 1}) {
      auto s = make_session(*m, 512, ub);
      const std::vector<float> got = s->eval(r.eval_tokens);
      // The state is rounded to f32 between ubatches (as within one); nothing else differs.
      EXPECT_LE(rel_err(got, ref), 1e-5) << p << " -ub " << ub;
      // Reset zeroes the state: the same prompt again gives the same logits.
      s->reset();
      EXPECT_EQ(s->eval(r.eval_tokens), got) << p << " -ub " << ub << " after reset";
    }
    // Without a reset the state of the first prompt leaks into the second: the logits differ.
    const std::vector<float> again = one->eval(std::span<const int32_t>(r.eval_tokens).first(4));
    auto fresh = make_session(*m, 512, 512);
    EXPECT_GT(max_abs_diff(again, fresh->eval(std::span<const int32_t>(r.eval_tokens).first(4))), 1e-3) << p;
  }
}

// A recurrent state cannot be cut back like a KV cache: truncating a hybrid session is refused.
TEST(Qwen35, TruncateRefused) {
  auto m = model::Model::load(model_path(k_model));
  auto s = make_session(*m, 256, 512);
  const std::vector<int32_t> toks = {1, 2, 3, 4, 5};
  s->eval(toks);
  s->truncate(5);  // no-op: allowed
  EXPECT_THROW(s->truncate(3), rocky::Error);
}

}  // namespace
}  // namespace rocky
