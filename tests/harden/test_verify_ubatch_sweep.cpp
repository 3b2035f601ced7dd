// `rocky verify -ub N` agrees with the CPU oracle at the ubatch sizes where public reports of
// Vulkan engines on Adreno/Intel went wrong (1, around the 32/64 tile edges, 200, 257), on the
// smallest shared models: f32, f16 with n_embd 8 and a 32,000-token output, the int8 path (q4_K/q6_K;
// q5_0/q8_0 with 896-wide rows). For each N the prompt spans several ubatches of N with a ragged tail
// (about 2N + 17 tokens up to N = 65, N + 43 beyond; 24 tokens = 24 ubatches at N = 1), so the
// sweep stays near two minutes on two cores. No single quote in it (run_rocky quotes
// arguments with them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/run_rocky.hpp"

namespace rocky {
namespace {

using namespace rocky::test;

const char* k_prompt =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. One day, "
    "she saw a big, red ball in the park. She ran to the ball and kicked it very hard. The ball went up, up, up "
    "into the sky and came down in a tall tree. Lily was sad because she could not reach the ball. Then her "
    "friend Tom came to the park with his dog, Max. Tom said, \"Do not be sad, Lily. Max can help us!\" Max "
    "barked and jumped, and the tree shook. The ball fell down, and Lily laughed. They played together all day, "
    "and when the sun went down, they were tired and happy. Her mom called her home for dinner. She ate soup "
    "and bread, and then she went to bed. In her dream, she flew over the park with a big, red ball, and Max and "
    "Tom waved at her from the ground. The next morning, Lily woke up early. She put on her blue dress and her "
    "new shoes. She wanted to show Tom her shoes. She ran to his house, but the door was closed. She knocked, and "
    "his mom opened the door with a smile. \"Tom is still sleeping,\" she said. Lily waited on the step and "
    "watched a small bird hop on the grass. The bird found a worm and flew to its nest. Lily thought that birds "
    "must be very busy. When Tom came out, they walked to the pond to look at the ducks, and they counted them: "
    "one, two, three, four, five, six, seven. It was a good day.";

struct SweepModel {
  const char* file;
  double chars_per_token;  // of k_prompt with this model's vocabulary (measured; a little low)
};

// Tokens of prompt for ubatch size N: a few ubatches and a ragged tail, fewer for N = 1 (each token
// is a ubatch there; the cost is per ubatch), at most ~300 (the cost is per token beyond).
int target_tokens(int ub) { return ub == 1 ? 24 : ub <= 65 ? 2 * ub + 17 : ub + 43; }

// The first words of k_prompt worth about `tokens` tokens.
std::string prompt_prefix(double chars_per_token, int tokens) {
  const std::string all = k_prompt;
  size_t n = static_cast<size_t>(chars_per_token * tokens * 1.1);
  if (n >= all.size()) return all;
  while (n < all.size() && all[n] != ' ') ++n;
  return all.substr(0, n);
}

TEST(VerifyUbatchSweep, AgreesWithTheCpuAtEveryUbatchSize) {
  const SweepModel models[] = {
      {"reference/models/stories260K.gguf", 2.2},                          // f32, SPM 512
      {"reference/models/llama-2-tiny-random.gguf", 3.6},                  // f16, n_embd 8, 32,000 outputs
      {"reference/models/synth/synth-llama-q4_k_m.gguf", 3.6},             // int8 path: q4_K, q6_K
      {"reference/models/synth/synth-qwen2-0.5b-shape-q4_k_m.gguf", 2.8},  // q5_0/q8_0, 896-wide rows, biases
  };
  for (const auto& m : models) {
    const std::string path = shared_path(m.file);
    for (int ub : {1, 31, 32, 33, 63, 64, 65, 200, 257}) {
      const std::string prompt = prompt_prefix(m.chars_per_token, target_tokens(ub));
      auto r = run_rocky("harden-sweep", {"verify", "-m", path, "-p", prompt, "-ub", std::to_string(ub), "--json"});
      EXPECT_EQ(r.rc, 0) << m.file << " -ub " << ub << "\n" << r.out << r.err;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(r.out);
      } catch (const std::exception& e) {
        ADD_FAILURE() << m.file << " -ub " << ub << ": " << e.what() << "\n" << r.out << r.err;
        continue;
      }
      const int n = j["n_tokens"].get<int>();
      EXPECT_GT(n, ub == 1 ? 16 : ub) << m.file << ": the prompt must span several ubatches of " << ub;
      EXPECT_EQ(j["n_ubatch"].get<int>(), std::min(ub, n)) << m.file;
      EXPECT_TRUE(j["ok"].get<bool>()) << m.file << " -ub " << ub;
      EXPECT_EQ(j["nonfinite_logits"].get<int>(), 0);
      std::printf("%-56s -ub %3d: %3d tokens, top-1 %.3f, max|dlogit| %.3g (%s tolerance %.3g)\n", m.file, ub, n,
                  j["top1_agreement"].get<double>(), j["max_abs_logit_diff"].get<double>(),
                  j["tolerance_kind"].get<std::string>().c_str(), j["tolerance"].get<double>());
    }
  }
}

}  // namespace
}  // namespace rocky
