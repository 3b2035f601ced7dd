// Sampler: greedy ties, seeds, and each filter against its definition (llama.cpp's semantics).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
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

// Top-k picked in one pass (the chain's first working sampler) equals top-k over the whole candidate
// array (forced by an order that puts a neutral min-p first): the same candidates, order and
// probabilities, with tied logits, removed (-inf) tokens, fewer live tokens than k and a penalty
// that is on (which takes the whole-array path).
TEST(Sampler, TopKInOnePassEqualsTheWholeArray) {
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    std::vector<float> l(5000 + size_t(round) * 37);
    for (float& x : l) x = float(rng() % 64) / 8.0f;  // many ties
    if (round % 4 == 1)
      for (size_t i = 0; i < l.size(); ++i)
        if (rng() % 2 == 0) l[i] = -INFINITY;
    if (round % 4 == 2)
      for (size_t i = 30; i < l.size(); ++i) l[i] = -INFINITY;  // 30 live tokens, k 40
    SamplerParams fast = plain(0.8f);
    fast.top_k = round % 3 == 0 ? 40 : 1 + round;
    fast.top_p = 0.95f;
    fast.min_p = 0.0f;
    SamplerParams whole = fast;
    whole.order.insert(whole.order.begin(), SamplerKind::min_p);
    Sampler a(fast), b(whole);
    if (round % 4 == 3) {  // repetition penalty on: both take the whole array
      fast.repeat_penalty = whole.repeat_penalty = 1.3f;
      a = Sampler(fast);
      b = Sampler(whole);
      for (int32_t t : {3, 9, 27}) a.accept(t), b.accept(t);
    }
    const auto da = a.distribution(l), db = b.distribution(l);
    ASSERT_EQ(da.size(), db.size()) << "round " << round;
    for (size_t i = 0; i < da.size(); ++i) {
      EXPECT_EQ(da[i].first, db[i].first) << "round " << round << " rank " << i;
      EXPECT_EQ(da[i].second, db[i].second) << "round " << round << " rank " << i;
    }
  }
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

// The probabilities p = {0.5, 0.3, 0.15, 0.05} as logits (their logs).
std::vector<float> four() { return {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)}; }

void expect_dist(Sampler& s, const std::vector<float>& l, const std::vector<std::pair<int32_t, double>>& want) {
  const auto got = s.distribution(l);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first) << i;
    EXPECT_NEAR(got[i].second, want[i].second, 1e-5) << i;
  }
}

// Locally typical: H = −Σ p ln p = 1.14212; |−ln p − H| = 0.449, 0.062, 0.755, 1.854, so the order is
// tokens 1, 0, 2, 3. typical_p 0.5: 0.3 is not > 0.5, 0.3 + 0.5 is → {1, 0}, renormalised 0.375 /
// 0.625. typical_p 0.25: token 1 alone (the most likely token is gone, even when greedy).
TEST(Sampler, TypicalP) {
  auto p = plain(1.0f);
  p.typical_p = 0.5f;
  Sampler s(p);
  expect_dist(s, four(), {{0, 0.625}, {1, 0.375}});
  p.typical_p = 0.25f;
  Sampler t(p);
  expect_dist(t, four(), {{1, 1.0}});
  p.temp = 0.0f;
  Sampler g(p);
  EXPECT_EQ(g.sample(four()), 1);
  p.typical_p = 1.0f;  // off
  Sampler off(p);
  EXPECT_EQ(off.sample(four()), 0);
}

// Greedy: the distribution is the point mass on sample()'s pick — the largest adjusted logit (a
// bias or a penalty moves it), ties to the lowest id — as speculative verification reads it.
TEST(Sampler, GreedyDistributionIsThePointMassOnTheSample) {
  auto p = plain(0.0f);
  Sampler s(p);
  expect_dist(s, four(), {{0, 1.0}});
  expect_dist(s, {1.0f, 3.0f, 3.0f, 2.0f}, {{1, 1.0}});
  p.logit_bias = {{3, 10.0f}};
  Sampler b(p);
  expect_dist(b, four(), {{3, 1.0}});
  EXPECT_EQ(b.sample(four()), 3);
}

// XTC at probability 1: threshold 0.1 → tokens 0, 1, 2 have p ≥ 0.1; all but the least likely of them
// (token 2) go: {2, 3} renormalised 0.75 / 0.25. Threshold 0.4: only token 0 qualifies, nothing goes.
// Threshold > 0.5 or probability 0: off.
TEST(Sampler, Xtc) {
  auto p = plain(1.0f);
  p.xtc_probability = 1.0f;
  p.xtc_threshold = 0.1f;
  Sampler s(p);
  expect_dist(s, four(), {{2, 0.75}, {3, 0.25}});
  p.xtc_threshold = 0.4f;
  Sampler t(p);
  expect_dist(t, four(), {{0, 0.5}, {1, 0.3}, {2, 0.15}, {3, 0.05}});
  p.xtc_threshold = 0.6f;
  Sampler u(p);
  EXPECT_EQ(u.distribution(four()).size(), 4u);
  // Probability 0.5: about half of the steps remove tokens 0 and 1.
  p.xtc_threshold = 0.1f;
  p.xtc_probability = 0.5f;
  Sampler h(p);
  int cut = 0;
  for (int i = 0; i < 2000; ++i) cut += h.distribution(four()).size() == 2;
  EXPECT_NEAR(cut / 2000.0, 0.5, 0.05);
}

// top-n-sigma: logits {4, 2, 0, −2}: mean 1, σ = √5 = 2.236; n = 1 keeps logits ≥ 4 − 2.236 → {0, 1}.
TEST(Sampler, TopNSigma) {
  auto p = plain(1.0f);
  p.top_n_sigma = 1.0f;
  Sampler s(p);
  const double e2 = std::exp(-2.0);
  expect_dist(s, {4.0f, 2.0f, 0.0f, -2.0f}, {{0, 1 / (1 + e2)}, {1, e2 / (1 + e2)}});
}

// Mirostat 2 (τ 1.5 → μ = 3): surprises −log2 p = 1, 1.74, 2.74, 4.32; those ≤ μ stay → {0, 1, 2}
// renormalised by 0.95. After drawing x: μ ← μ − η (−log2 p'(x) − τ).
TEST(Sampler, Mirostat2) {
  auto p = plain(1.0f);
  p.mirostat = 2;
  p.mirostat_tau = 1.5f;
  p.mirostat_eta = 0.25f;
  p.repeat_penalty = 5.0f;  // not applied with mirostat (as llama.cpp)
  Sampler s(p);
  s.accept(0);
  EXPECT_FLOAT_EQ(s.mirostat_mu(), 3.0f);
  expect_dist(s, four(), {{0, 0.5 / 0.95}, {1, 0.3 / 0.95}, {2, 0.15 / 0.95}});
  const int32_t t = s.sample(four());
  const double q[] = {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95};
  ASSERT_LT(t, 3);
  EXPECT_NEAR(s.mirostat_mu(), 3.0 - 0.25 * (-std::log2(q[t]) - 1.5), 1e-5);
}

// Mirostat 1 on a Zipf distribution p_i ∝ 1/(i+1)² over 10 tokens: ŝ = 2 exactly, ε = 1, and with
// τ = 2.5 (μ = 5) k = (ε·2^μ / (1 − 10^−ε))^(1/ŝ) = (32 / 0.9)^0.5 = 5.96 → the top 5 tokens.
TEST(Sampler, Mirostat1) {
  std::vector<float> l(10);
  for (size_t i = 0; i < l.size(); ++i) l[i] = -2.0f * std::log(static_cast<float>(i + 1));
  auto p = plain(1.0f);
  p.mirostat = 1;
  p.mirostat_tau = 2.5f;
  Sampler s(p);
  double z = 0;
  for (int i = 1; i <= 5; ++i) z += 1.0 / (i * i);
  std::vector<std::pair<int32_t, double>> want;
  for (int i = 1; i <= 5; ++i) want.emplace_back(i - 1, 1.0 / (i * i) / z);
  expect_dist(s, l, want);
  // τ = 0.5 (μ = 1): k = (2 / 0.9)^0.5 = 1.49 → one token.
  p.mirostat_tau = 0.5f;
  Sampler one(p);
  expect_dist(one, l, {{0, 1.0}});
}

// DRY on fixed contexts (multiplier 1, base 2, allowed length 2, no breakers unless given).
TEST(Sampler, Dry) {
  auto p = plain(0.0f);
  p.dry_multiplier = 1.0f;
  p.dry_base = 2.0f;
  p.dry_allowed_length = 2;
  p.dry_breakers = std::make_shared<DryBreakers>();
  const std::vector<float> l(10, 0.0f);
  auto adjusted_after = [&](const SamplerParams& q, std::vector<int32_t> ctx) {
    Sampler s(q);
    for (int32_t t : ctx) s.accept(t);
    return s.adjusted(l);
  };
  // 1 2 3 4 1 2 3: the end "1 2 3" (3 tokens) repeats what token 4 followed → 4 loses 2^(3−2) = 2.
  auto a = adjusted_after(p, {1, 2, 3, 4, 1, 2, 3});
  for (int32_t t = 0; t < 10; ++t) EXPECT_FLOAT_EQ(a[static_cast<size_t>(t)], t == 4 ? -2.0f : 0.0f) << t;
  // A longer repeat: 1 2 3 4 5 1 2 3 4 → 5 loses 2^(4−2) = 4.
  EXPECT_FLOAT_EQ(adjusted_after(p, {1, 2, 3, 4, 5, 1, 2, 3, 4})[5], -4.0f);
  // A repeat of exactly allowed_length: 1 2 7 1 2 → 7 loses 2^0 = 1 …
  EXPECT_FLOAT_EQ(adjusted_after(p, {1, 2, 7, 1, 2})[7], -1.0f);
  // … but not when 7 is a breaker on its own (the repeat stops at it, and it is never penalised).
  auto b = p;
  b.dry_breakers = std::make_shared<DryBreakers>(DryBreakers{{7, {}}});
  EXPECT_FLOAT_EQ(adjusted_after(b, {1, 2, 7, 1, 2})[7], 0.0f);
  // A breaker in the repeated end cuts it: 2 alone, or the two-token breaker "1 2".
  b.dry_breakers = std::make_shared<DryBreakers>(DryBreakers{{2, {}}});
  EXPECT_FLOAT_EQ(adjusted_after(b, {1, 2, 3, 4, 1, 2, 3})[4], 0.0f);
  b.dry_breakers = std::make_shared<DryBreakers>(DryBreakers{{1, {2}}});
  EXPECT_FLOAT_EQ(adjusted_after(b, {1, 2, 3, 4, 1, 2, 3})[4], 0.0f);
  b.dry_breakers = std::make_shared<DryBreakers>(DryBreakers{{1, {5}}});  // not matched: no cut
  EXPECT_FLOAT_EQ(adjusted_after(b, {1, 2, 3, 4, 1, 2, 3})[4], -2.0f);
  // dry_penalty_last_n 4 sees 4 1 2 3: nothing repeats.
  auto w = p;
  w.dry_penalty_last_n = 4;
  EXPECT_FLOAT_EQ(adjusted_after(w, {1, 2, 3, 4, 1, 2, 3})[4], 0.0f);
  // Greedy picks around the penalty: token 4 would win by 1, loses by 1.
  std::vector<float> g(10, 0.0f);
  g[4] = 1.0f;
  g[6] = 0.0f;
  Sampler s(p);
  for (int32_t t : {1, 2, 3, 4, 1, 2, 3}) s.accept(t);
  EXPECT_EQ(s.sample(g), 0);
  // Off with multiplier 0.
  auto off = p;
  off.dry_multiplier = 0.0f;
  EXPECT_FLOAT_EQ(adjusted_after(off, {1, 2, 3, 4, 1, 2, 3})[4], 0.0f);
}

// The breaker strings against a toy vocabulary, as llama.cpp processes them.
TEST(Sampler, DryBreakerSequences) {
  const std::vector<std::string> pieces = {"a", "b", "xa", "ab", "c", "q\nq"};
  auto piece = [&](int32_t t) { return pieces[static_cast<size_t>(t)]; };
  auto tokenize = [](const std::string& s) {
    std::vector<int32_t> out;
    for (char ch : s) out.push_back(ch == 'a' ? 0 : ch == 'b' ? 1 : 4);
    return out;
  };
  const DryBreakers got = dry_breaker_sequences({"ab", "\n"}, 6, piece, tokenize);
  // "ab": 3 contains it; 0 ("a") and 2 ("xa") end with its start "a", then "b" = token 1 must follow.
  // "\n": 5 contains it.
  const DryBreakers want = {{0, {1}}, {2, {1}}, {3, {}}, {5, {}}};
  EXPECT_EQ(got, want);
}

// The order: min_p 0.4 before the temperature (llama.cpp's default) removes token 1 (p ratio 1/4);
// after a temperature of 2 the ratio is 1/2 and it stays, at 1/3. A chain without penalties ignores
// repeat_penalty; without temperature, temp 0 is no longer greedy.
TEST(Sampler, Order) {
  const std::vector<float> l = {0.0f, -std::log(4.0f)};
  auto p = plain(2.0f);
  p.min_p = 0.4f;
  Sampler d(p);
  expect_dist(d, l, {{0, 1.0}});
  p.order = {SamplerKind::temperature, SamplerKind::min_p};
  Sampler t(p);
  expect_dist(t, l, {{0, 2.0 / 3}, {1, 1.0 / 3}});
  auto q = plain(0.0f);
  q.repeat_penalty = 100.0f;
  q.order = {SamplerKind::top_k, SamplerKind::temperature};
  Sampler np(q);
  np.accept(0);
  EXPECT_EQ(np.sample(std::vector<float>{2.0f, 1.0f}), 0);
  q.order = {SamplerKind::top_k};
  Sampler nt(q);
  expect_dist(nt, std::vector<float>{0.0f, 0.0f}, {{0, 0.5}, {1, 0.5}});
}

TEST(Sampler, Names) {
  std::string seq;
  for (SamplerKind k : default_sampler_order()) seq += std::string(sampler_name(k)) + ";";
  EXPECT_EQ(seq, "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature;");
  std::vector<SamplerKind> from_chars;
  for (char c : std::string("edskypmxt")) from_chars.push_back(*sampler_from_char(c));
  EXPECT_EQ(from_chars, default_sampler_order());
  EXPECT_EQ(sampler_from_name("typical"), SamplerKind::typical_p);
  EXPECT_EQ(sampler_from_name("temp"), SamplerKind::temperature);
  EXPECT_EQ(sampler_from_name("nucleus"), SamplerKind::top_p);
  EXPECT_FALSE(sampler_from_name("temp", false));
  EXPECT_FALSE(sampler_from_name("infill"));
  EXPECT_FALSE(sampler_from_char('i'));
}

}  // namespace
}  // namespace rocky::runtime
