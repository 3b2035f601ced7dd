// The weight scales of weights.hpp, checked by running the synthetic models: a naive f64 forward
// pass (RMSNorm, q/k/v (+bias), RoPE, causal GQA attention, SwiGLU FFN, tied or untied LM head)
// over weights regenerated row by row exactly as rocky synth writes them (fill_row + init_spec, in
// f32), so no file and no other module is involved. For every preset (real widths, vocab cut to
// 2048 to bound time; the logit distribution does not depend on the vocab size) and for depths up
// to 36 at the test width: last-position logits have std in [1, 5] and max |logit| ≤ 30, and the
// residual RMS grows ≤ 10× from the embedding (and from block 0's output) to the last block.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "naive_forward.hpp"
#include "synth/rng.hpp"

using namespace rocky::synth;
using namespace rocky::synth::test;

namespace {

void check(const std::string& preset, uint32_t n_layer, uint32_t vocab, uint32_t n_tokens) {
  SCOPED_TRACE(preset + " n_layer " + std::to_string(n_layer));
  Preset p = find_preset(preset);
  p.n_vocab = vocab;
  SplitMix64 r(99);
  std::vector<uint32_t> tokens;
  for (uint32_t i = 0; i < n_tokens; ++i) tokens.push_back(static_cast<uint32_t>(r.next() % vocab));
  tokens.back() = tokens.front();  // a repeated token: the tied head's self-logit case, attended too
  const ForwardResult res = forward(p, n_layer, synth_weights(p, n_layer, 1234), tokens);
  const Vec& z = res.logits.back();
  double mean = 0, ss = 0, mx = 0;
  for (double v : z) {
    mean += v;
    mx = std::max(mx, std::fabs(v));
  }
  mean /= static_cast<double>(z.size());
  for (double v : z) ss += (v - mean) * (v - mean);
  const double sd = std::sqrt(ss / static_cast<double>(z.size()));
  std::printf("%-16s L=%-2u logits std %.3f max %.2f | residual rms embd %.4f block0 %.4f last %.4f (x%.2f, x%.2f)\n",
              preset.c_str(), n_layer, sd, mx, res.rms_embd, res.rms_block0, res.rms_last, res.rms_last / res.rms_embd,
              res.rms_last / res.rms_block0);
  EXPECT_GE(sd, 1.0);
  EXPECT_LE(sd, 5.0);
  EXPECT_LE(mx, 30.0);
  EXPECT_LE(res.rms_last / res.rms_embd, 10.0);
  EXPECT_LE(res.rms_last / res.rms_block0, 10.0);
  EXPECT_GE(res.rms_last / res.rms_embd, 1.5);  // the blocks do contribute
}
}  // namespace

TEST(SynthScale, RealWidthsOneBlock) {
  for (const char* p : {"qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "tinyllama-1.1b"}) check(p, 1, 2048, 6);
}

TEST(SynthScale, DepthsAtTestWidth) {
  for (const char* p : {"qwen2-test", "llama-test"})
    for (uint32_t n : {1u, 2u, 8u, 28u, 36u}) check(p, n, 1000, 24);
}
