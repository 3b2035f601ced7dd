// End-to-end comparison of the CPU oracle with llama.cpp's CPU outputs on quantized and f16 models (reference/README.md:
// rel ≤ 1e-3 vs the tight labels, ≤ 0.35 abs at the last position vs the loose labels). The checks
// and case tables live in model/harness.hpp, shared with tests/vulkan.
#include <gtest/gtest.h>

#include "model/harness.hpp"

namespace rocky {
namespace {

using namespace rocky::test;

TEST(Reference, LlamaTinyRandomTight) { check_last({"llama-2-tiny-random", "llama-2-tiny-random.gguf"}, 1e-3, 0); }

TEST(Reference, SynthLlamaQ4KMTight) {
  check_last({"synth-llama-q4_k_m-dequant-f32__kvf32_faoff", "synth-llama-q4_k_m.gguf"}, 1e-3, 0);
}

TEST(Reference, SynthQwen2Q4KMTight) {
  check_last({"synth-qwen2-q4_k_m-dequant-f32__kvf32_faoff", "synth-qwen2-q4_k_m.gguf"}, 1e-3, 0);
}

TEST(Reference, LooseLabelsQuant) {
  check_last({"stories260K-f16", "stories260K-f16.gguf"}, 1e-2, 0);
  for (const auto& c : k_loose_abs) check_last(c, 0, 0.35);
}

// Turn-2 models (qwen3, llama 3 with rope_freqs, qwen2 at 0.5B widths with q5_0/q8_0, q5_K):
// tight against the ideal labels with teacher forcing, loose against the quantized labels.
TEST(Reference, Turn2TightAndTeacherForcing) {
  for (const auto& c : k_turn2) teacher_force({c.ideal, c.model}, cpu_spec(), 1e-2f, 1e-3, 0);
}

TEST(Reference, Turn2LooseLabels) {
  for (const auto& c : k_turn2) check_last({c.quant, c.model}, 0, k_turn2_loose_abs);
}

TEST(Reference, TeacherForcingRandomModels) {
  for (const auto& c : k_teacher_forced) teacher_force(c);
}

}  // namespace
}  // namespace rocky
