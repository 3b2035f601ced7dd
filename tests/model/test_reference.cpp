// End-to-end comparison of the CPU oracle with llama.cpp's CPU outputs (reference/README.md:
// rel ≤ 1e-3 vs the tight labels, ≤ 0.35 abs at the last position vs the loose labels). The checks
// live in model/harness.hpp, shared with tests/vulkan.
#include <gtest/gtest.h>

#include "model/harness.hpp"

namespace rocky {
namespace {

using namespace rocky::test;

// stories260K__kvf32_faoff: every prompt position, tight.
TEST(Reference, Stories260KAllPositionsTight) {
  check_all_positions({"stories260K__kvf32_faoff", "stories260K.gguf"}, 1e-3);
}

TEST(Reference, LooseLabels) { check_last({"stories260K", "stories260K.gguf"}, 1e-2, 0); }

// stories260K free-running greedy equals llama.cpp's tokens for every prompt (both labels).
TEST(Reference, Stories260KGreedy) {
  for (const char* label : {"stories260K__kvf32_faoff", "stories260K"}) check_greedy({label, "stories260K.gguf"});
}

}  // namespace
}  // namespace rocky
