// Sampler: greedy ties, seeds, and each filter against its definition (llama.cpp's semantics).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "runtime/sampler.hpp"

namespace rocky::runtime {
namespace {

SamplerParams plain(float temp) {
  SamplerParams p;
  p.temp = temp;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 1234;
  return p;
}

TEST(Sampler, DefaultsAreLlamaCpps) {
  SamplerParams p;
  EXPECT_FLOAT_EQ(p.temp, 0.8f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.repeat_penalty, 1.0f);
  EXPECT_EQ(p.repeat_last_n, 64);
}

TEST(Sampler, GreedyTiesToLowestId) {
  std::vector<float> l = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
  EXPECT_EQ(argmax(l), 1);
  Sampler s(plain(0.0f));
  EXPECT_EQ(s.sample(l), 1);
}

// argmax's eight lanes against the one-chain definition: every length 1 … 40 and a vocabulary's,
// the maximum at every position, and ties (the lowest id wins wherever the copies sit).
TEST(Sampler, ArgmaxLanesMatchTheDefinition) {
  auto naive = [](const std::vector<float>& v) {
    size_t b = 0;
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i] > v[b]) b = i;
    return static_cast<int32_t>(b);
  };
  uint32_t x = 12345;
  auto rnd = [&] {
    x = x * 1664525u + 1013904223u;
    return static_cast<float>(x >> 8) / 16777216.0f - 0.5f;
  };
  for (size_t n :
       {size_t{1}, size_t{2}, size_t{7}, size_t{15}, size_t{16}, size_t{17}, size_t{23}, size_t{40}, size_t{151936}}) {
    std::vector<float> v(n);
    for (auto& f : v) f = rnd();
    EXPECT_EQ(argmax(v), naive(v)) << "n " << n;
    for (size_t at = 0; at < std::min<size_t>(n, 40); ++at) {
      std::vector<float> w = v;
      w[at] = 2.0f;
      EXPECT_EQ(argmax(w), static_cast<int32_t>(at)) << "n " << n << " max at " << at;
      for (size_t also = at + 1; also < std::min<size_t>(n, 48); also += 3) {
        std::vector<float> t = w;
        t[also] = 2.0f;
        t[n - 1] = 2.0f;
        EXPECT_EQ(argmax(t), static_cast<int32_t>(at)) << "n " << n << " ties at " << at << ", " << also;
      }
    }
  }
  // A NaN (never produced when logits are checked) is skipped as the one-chain walk skips it.
  for (size_t at : {size_t{1}, size_t{5}, size_t{9}, size_t{31}}) {
    std::vector<float> w(32, 0.0f);
    w[at] = std::nanf("");
    w[9 + (at == 9)] = 5.0f;
    EXPECT_EQ(argmax(w), naive(w)) << "NaN at " << at;
  }
  std::vector<float> v(100, 1.0f);
  EXPECT_EQ(argmax(v, 50), 0);
  v[60] = 5.0f;
  EXPECT_EQ(argmax(v, 50), 0) << "ids past n_vocab are not tokens";
  EXPECT_EQ(argmax(v), 60);
}

TEST(Sampler, SameSeedSameTokens) {
  std::vector<float> l = {1.0f, 1.2f, 0.9f, 1.1f, 0.3f, 1.05f};
  Sampler a(plain(1.0f)), b(plain(1.0f));
  std::vector<int32_t> ta, tb;
  for (int i = 0; i < 50; ++i) {
    ta.push_back(a.sample(l));
    tb.push_back(b.sample(l));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_GT(std::set<int32_t>(ta.begin(), ta.end()).size(), 2u);  // really random, not constant
}

// Draw frequencies match softmax(l / temp) (no filters).
TEST(Sampler, TemperatureDistribution) {
  std::vector<float> l = {1.0f, 2.0f, 0.0f, 1.5f};
  const float temp = 0.7f;
  Sampler s(plain(temp));
  const int n = 40000;
  std::vector<int> cnt(l.size());
  for (int i = 0; i < n; ++i) ++cnt[static_cast<size_t>(s.sample(l))];
  double z = 0;
  for (float v : l) z += std::exp(v / temp);
  for (size_t i = 0; i < l.size(); ++i) {
    const double p = std::exp(l[i] / temp) / z;
    const double sd = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(static_cast<double>(cnt[i]) / n, p, 5 * sd + 1e-4) << i;
  }
}

std::set<int32_t> support(SamplerParams p, const std::vector<float>& l, int n = 3000) {
  Sampler s(p);
  std::set<int32_t> seen;
  for (int i = 0; i < n; ++i) seen.insert(s.sample(l));
  return seen;
}

TEST(Sampler, TopK) {
  std::vector<float> l = {0.1f, 0.5f, 0.4f, 0.45f, 0.0f};
  auto p = plain(5.0f);
  p.top_k = 3;
  EXPECT_EQ(support(p, l), (std::set<int32_t>{1, 2, 3}));
  p.top_k = 1;
  EXPECT_EQ(support(p, l), (std::set<int32_t>{1}));
}

TEST(Sampler, TopP) {
  // softmax of log(probs) = probs: 0.5, 0.3, 0.15, 0.05. top_p 0.75 keeps the smallest prefix
  // whose mass reaches 0.75: {0, 1}; 0.85 keeps {0, 1, 2}.
  std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  auto p = plain(1.0f);
  p.top_p = 0.75f;
  EXPECT_EQ(support(p, l), (std::set<int32_t>{0, 1}));
  p.top_p = 0.85f;
  EXPECT_EQ(support(p, l), (std::set<int32_t>{0, 1, 2}));
}

TEST(Sampler, MinP) {
  // min_p 0.25: keep tokens with p ≥ 0.25 · p_max = 0.125 → {0, 1, 2}.
  std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  auto p = plain(1.0f);
  p.min_p = 0.25f;
  EXPECT_EQ(support(p, l), (std::set<int32_t>{0, 1, 2}));
}

TEST(Sampler, RepetitionPenalty) {
  std::vector<float> l = {2.0f, 1.9f, -0.5f, -0.45f};
  auto p = plain(0.0f);
  p.repeat_penalty = 1.1f;
  Sampler s(p);
  EXPECT_EQ(s.sample(l), 0);
  s.accept(0);  // 2.0 / 1.1 = 1.82 < 1.9
  EXPECT_EQ(s.sample(l), 1);
  std::vector<float> neg = {-0.5f, -0.52f};
  Sampler s2(p);
  s2.accept(0);  // -0.5 · 1.1 = -0.55 < -0.52
  EXPECT_EQ(s2.sample(neg), 1);
  // Only the last repeat_last_n tokens count.
  p.repeat_last_n = 1;
  Sampler s3(p);
  s3.accept(0);
  s3.accept(3);
  EXPECT_EQ(s3.sample(l), 0);
}

// llama.cpp's penalties: a token seen c times among the last repeat_last_n gets
// logit' = (logit ≤ 0 ? logit·r : logit/r) − c·frequency − presence. Hand-computed on fixed logits.
TEST(Sampler, FrequencyAndPresencePenalties) {
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s(p);
  for (int32_t t : {1, 1, 1, 2}) s.accept(t);  // token 1 three times, token 2 once
  const std::vector<float> l = {1.0f, 4.0f, -1.0f, 3.0f};
  const std::vector<float> a = s.adjusted(l);
  EXPECT_FLOAT_EQ(a[0], 1.0f);                          // unseen
  EXPECT_FLOAT_EQ(a[1], 4.0f / 2 - 3 * 0.5f - 0.25f);   // 0.25
  EXPECT_FLOAT_EQ(a[2], -1.0f * 2 - 1 * 0.5f - 0.25f);  // -2.75
  EXPECT_FLOAT_EQ(a[3], 3.0f);
  EXPECT_EQ(s.sample(l), 3);  // 3.0 now beats token 1 (0.25) and token 0 (1.0)
  // repeat_last_n 2 sees only the last two tokens (1, 2): token 1 counted once.
  p.repeat_last_n = 2;
  Sampler w(p);
  for (int32_t t : {1, 1, 1, 2}) w.accept(t);
  EXPECT_FLOAT_EQ(w.adjusted(l)[1], 4.0f / 2 - 0.5f - 0.25f);
  // A negative presence penalty favours seen tokens.
  SamplerParams q = plain(0.0f);
  q.presence_penalty = -1.5f;
  Sampler n(q);
  n.accept(0);
  EXPECT_EQ(n.sample(std::vector<float>{3.0f, 4.0f}), 0);  // 3 + 1.5 > 4
}

// logit_bias is added first; -inf removes a token, also from a temperature draw.
TEST(Sampler, LogitBias) {
  SamplerParams p = plain(0.0f);
  p.logit_bias = {{1, -INFINITY}, {2, 1.5f}};
  Sampler s(p);
  const std::vector<float> l = {2.0f, 9.0f, 1.0f};
  const std::vector<float> a = s.adjusted(l);
  EXPECT_TRUE(std::isinf(a[1]) && a[1] < 0);
  EXPECT_FLOAT_EQ(a[2], 2.5f);
  EXPECT_EQ(s.sample(l), 2);  // 2.5 > 2.0; token 1 is gone
  SamplerParams t = plain(1.0f);
  t.logit_bias = {{0, -INFINITY}};
  Sampler d(t);
  for (int i = 0; i < 200; ++i) EXPECT_NE(d.sample(std::vector<float>{50.0f, 0.0f, 0.0f}), 0);
}

// The mask hook (a grammar's constraint) runs before the bias and the penalties.
TEST(Sampler, MaskRunsFirst) {
  SamplerParams p = plain(0.0f);
  p.logit_bias = {{0, 100.0f}};
  Sampler s(p);
  std::vector<size_t> seen;
  s.set_mask([&](std::span<float> l) {
    seen.push_back(l.size());
    EXPECT_FLOAT_EQ(l[0], 1.0f);  // the bias is not applied yet
    l[0] = -INFINITY;
  });
  EXPECT_EQ(s.sample(std::vector<float>{1.0f, 0.5f, 0.0f}), 1);
  EXPECT_EQ(seen, std::vector<size_t>{3});
}

// Log-probabilities: log-softmax of the raw logits. Logits {0, ln 2, ln 5} → p = {1/8, 2/8, 5/8}.
TEST(Sampler, TokenProbsAreLogSoftmax) {
  const std::vector<float> l = {0.0f, std::log(2.0f), std::log(5.0f), 7.0f};
  const TokenProbs tp = token_probs(l, 3, 1, 2);  // the 4th logit is padding (n_vocab 3)
  EXPECT_EQ(tp.token, 1);
  EXPECT_NEAR(tp.logprob, std::log(2.0 / 8), 1e-6);
  ASSERT_EQ(tp.top.size(), 2u);
  EXPECT_EQ(tp.top[0].first, 2);
  EXPECT_NEAR(tp.top[0].second, std::log(5.0 / 8), 1e-6);
  EXPECT_EQ(tp.top[1].first, 1);
  EXPECT_TRUE(token_probs(l, 3, 0, 0).top.empty());
  EXPECT_NEAR(token_probs(l, 3, 0, 0).logprob, std::log(1.0 / 8), 1e-6);
  // Large logits do not overflow.
  const std::vector<float> big = {1000.0f, 1000.0f};
  EXPECT_NEAR(token_probs(big, 0, 1, 5).logprob, std::log(0.5), 1e-6);
  EXPECT_EQ(token_probs(big, 0, 1, 5).top.size(), 2u);
}

}  // namespace
}  // namespace rocky::runtime
