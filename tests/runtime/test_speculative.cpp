// Speculative decoding (runtime/speculative.hpp, Generator::generate with a drafter):
//   - the acceptance rule on fixed distributions: over N = 200,000 seeds the kept token's
//     distribution equals the target's (chi-square, p = 0.001) and the acceptance rate is Σ min(p, q);
//   - the drafters (n-gram lookup, lab) and the draft-vocabulary check;
//   - end to end on real sessions (CPU, and Vulkan/lavapipe where present): at temperature 0 the
//     text with speculation (n-gram, a draft model that differs from the target, the lab drafter
//     at α = 0.5) equals the text without; rejected drafts leave no KV behind (a follow-up equals a
//     fresh run); at temperature 1 the first generated tokens have the same distribution with and
//     without speculation (two-sample chi-square over 600 seeds each, p = 0.001);
//   - a recurrent target refuses speculation, naming why.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "grammar/constraint.hpp"
#include "model/model.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/generator.hpp"
#include "runtime/session.hpp"
#include "runtime/speculative.hpp"
#include "runtime/warmup.hpp"
#include "synth/synth.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::runtime {
namespace {
namespace fs = std::filesystem;

// Chi-square statistic of observed counts against expected probabilities (bins with expected count
// below 5 pooled into one).
double chi_square(const std::vector<double>& expect_p, const std::vector<int64_t>& observed, int64_t n, int* dof) {
  double chi = 0, pool_e = 0, pool_o = 0;
  int bins = 0;
  for (size_t i = 0; i < expect_p.size(); ++i) {
    const double e = expect_p[i] * static_cast<double>(n);
    if (e < 5) {
      pool_e += e;
      pool_o += static_cast<double>(observed[i]);
      continue;
    }
    chi += (static_cast<double>(observed[i]) - e) * (static_cast<double>(observed[i]) - e) / e;
    ++bins;
  }
  if (pool_e > 0) {
    chi += (pool_o - pool_e) * (pool_o - pool_e) / std::max(pool_e, 1e-9);
    ++bins;
  }
  *dof = bins - 1;
  return chi;
}
// Upper 0.1 % points of chi-square for 1 .. 10 degrees of freedom.
double chi_crit_001(int dof) {
  static const double k[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59};
  return k[std::clamp(dof, 1, 10)];
}

TokenDist dist(std::vector<int32_t> ids, std::vector<double> p) { return TokenDist{std::move(ids), std::move(p)}; }

// Draw x ~ q, apply the rule: the kept token must be distributed as p.
void check_rule(const TokenDist& p, const TokenDist& q_or_point, int32_t fixed_x, int n_tokens) {
  const int64_t n = 200000;
  std::vector<int64_t> count(static_cast<size_t>(n_tokens), 0);
  int64_t accepted = 0;
  for (int64_t s = 0; s < n; ++s) {
    std::mt19937 rng(static_cast<uint32_t>(s));
    int32_t x = fixed_x;
    if (!q_or_point.ids.empty()) {
      std::uniform_real_distribution<double> u(0, 1);
      double r = u(rng), cum = 0;
      x = q_or_point.ids.back();
      for (size_t i = 0; i < q_or_point.ids.size(); ++i)
        if (r < (cum += q_or_point.p[i])) {
          x = q_or_point.ids[i];
          break;
        }
    }
    const SpecVerdict v = speculative_accept(p, x, q_or_point, rng);
    ASSERT_GE(v.token, 0);
    ASSERT_LT(v.token, n_tokens);
    ++count[static_cast<size_t>(v.token)];
    accepted += v.accepted;
  }
  std::vector<double> e(static_cast<size_t>(n_tokens), 0.0);
  for (size_t i = 0; i < p.ids.size(); ++i) e[static_cast<size_t>(p.ids[i])] = p.p[i];
  int dof = 0;
  const double chi = chi_square(e, count, n, &dof);
  EXPECT_LT(chi, chi_crit_001(dof)) << "dof " << dof;
  // Acceptance: Σ min(p, q) (the point mass: p(x)).
  double want = 0;
  if (q_or_point.ids.empty()) {
    want = p.prob(fixed_x);
  } else {
    for (int32_t t = 0; t < n_tokens; ++t) want += std::min(p.prob(t), q_or_point.prob(t));
  }
  EXPECT_NEAR(static_cast<double>(accepted) / static_cast<double>(n), want, 0.005);
}

TEST(SpeculativeRule, KeepsTheTargetDistributionForADraftDistribution) {
  // p and q overlap partly (acceptance 0.55); q also proposes a token p never samples (id 5).
  const TokenDist p = dist({0, 1, 2, 3, 4}, {0.4, 0.25, 0.15, 0.12, 0.08});
  const TokenDist q = dist({1, 0, 5, 2}, {0.4, 0.2, 0.3, 0.1});
  check_rule(p, q, -1, 6);
}

TEST(SpeculativeRule, KeepsTheTargetDistributionForAPointMass) {
  const TokenDist p = dist({3, 1, 0, 2}, {0.5, 0.3, 0.15, 0.05});
  check_rule(p, TokenDist{}, 1, 4);  // a likely-ish draft
  check_rule(p, TokenDist{}, 4, 5);  // a draft p never samples: always rejected
}

TEST(SpeculativeRule, GreedyKeepsOnlyTheArgmax) {
  std::mt19937 rng(7);
  const TokenDist p = dist({9}, {1.0});
  EXPECT_EQ(speculative_accept(p, 9, TokenDist{}, rng).accepted, true);
  const SpecVerdict v = speculative_accept(p, 4, TokenDist{}, rng);
  EXPECT_FALSE(v.accepted);
  EXPECT_EQ(v.token, 9);
}

TEST(NgramDrafter, ProposesWhatFollowedTheLatestMatch) {
  NgramDrafter d(2, 4);
  Draft out;
  const std::vector<int32_t> h = {5, 6, 7, 8, 9, 1, 5, 6, 7, 2, 3, 6, 7};
  d.draft(h, 16, out);  // key {6, 7}: latest earlier at index 7 → 2, 3, 6, 7 (m = 4)
  EXPECT_EQ(out.tokens, (std::vector<int32_t>{2, 3, 6, 7}));
  d.draft(h, 2, out);
  EXPECT_EQ(out.tokens, (std::vector<int32_t>{2, 3}));
  d.draft(std::vector<int32_t>{1, 2, 3, 4}, 8, out);  // no earlier {3, 4}
  EXPECT_TRUE(out.tokens.empty());
  EXPECT_THROW(NgramDrafter(0, 4), Error);
}

TEST(LabDrafter, CorruptsAtTheGivenRate) {
  std::vector<int32_t> oracle(20000);
  for (size_t i = 0; i < oracle.size(); ++i) oracle[i] = static_cast<int32_t>(i % 97);
  LabDrafter d(oracle, 3, 0.6, 100, 1);
  std::vector<int32_t> h = {1, 2, 3, oracle[0]};
  Draft out;
  d.draft(h, 10000, out);
  ASSERT_EQ(out.tokens.size(), 10000u);
  int same = 0;
  for (size_t i = 0; i < out.tokens.size(); ++i) same += out.tokens[i] == oracle[i + 1];
  EXPECT_NEAR(same / 10000.0, 0.6, 0.02);
  h.back() = 55;  // off the oracle: nothing
  d.draft(h, 8, out);
  EXPECT_TRUE(out.tokens.empty());
}

// --- Real sessions ---

std::string stories() { return test::shared_path("reference/models/stories260K.gguf"); }

// Synthetic qwen2.5-0.5b-shaped models (1 block, 512-token vocabulary); different seeds give
// different weights over the same vocabulary.
std::string synth(const std::string& preset, uint64_t seed) {
  const std::string p = test::scratch_dir("speculative-models") + "/" + preset + "-" + std::to_string(seed) + ".gguf";
  if (!fs::exists(p)) {
    fs::create_directories(fs::path(p).parent_path());
    synth::SynthOptions o;
    o.preset = preset;
    o.out = p;
    o.progress = false;
    o.seed = seed;
    if (preset != "qwen35-test") {
      o.layers = 1;
      o.vocab = 512;
    }
    synth::synth_model(o);
  }
  return p;
}

std::vector<std::string> devices() { return {"cpu", "vulkan"}; }

struct Loaded {
  std::unique_ptr<model::Model> m;
  tok::Tokenizer tok;
  explicit Loaded(const std::string& path) : m(model::Model::load(path)), tok(tok::Tokenizer::from_gguf(m->file())) {}
};

std::shared_ptr<backend::Backend> backend_for(const std::string& dev) {
  BackendOptions bo;
  bo.device = dev;
  return make_backend(bo);
}

GenerateParams greedy(int32_t n) {
  GenerateParams g;
  g.sampling.temp = 0;
  g.max_tokens = n;
  g.ignore_eos = true;
  return g;
}

// A prompt that repeats itself, so the n-gram drafter finds matches.
std::vector<int32_t> repeating_prompt(const tok::Tokenizer& tok) {
  return tok.tokenize("Once upon a time there was a little dog. Once upon a time there was a little cat. Once upon a",
                      true, false);
}

class SpeculativeEndToEnd : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeculativeEndToEnd, GreedyTextIsUnchangedAndRejectedCellsAreDropped) {
  Loaded t(stories());
  auto be = backend_for(GetParam());
  const std::vector<int32_t> prompt = repeating_prompt(t.tok);
  const int32_t n_gen = 48;
  Session plain_s(*t.m, be, SessionOptions{256, 64});
  SessionSource plain_src(plain_s);
  const GenerateResult plain = Generator(plain_src, t.tok).generate(prompt, greedy(n_gen));
  ASSERT_EQ(plain.tokens.size(), static_cast<size_t>(n_gen));

  auto run_with = [&](Drafter& d, int32_t draft_max, Session& s) {
    SessionSource src(s);
    GenerateParams g = greedy(n_gen);
    g.drafter = &d;
    g.draft_max = draft_max;
    return Generator(src, t.tok).generate(prompt, g);
  };
  {
    Session s(*t.m, be, SessionOptions{256, 64});
    NgramDrafter d(2, 48);
    const GenerateResult r = run_with(d, 8, s);
    EXPECT_EQ(r.tokens, plain.tokens);
    EXPECT_EQ(r.text, plain.text);
    EXPECT_GT(r.draft_n, 0);
    EXPECT_LE(r.draft_n_accepted, r.draft_n);
    // The context holds exactly prompt + output but the last token (rejected drafts dropped).
    EXPECT_EQ(s.n_past(), static_cast<int32_t>(prompt.size() + r.tokens.size()) - 1);
  }
  for (const double alpha : {0.5, 1.0}) {
    Session s(*t.m, be, SessionOptions{256, 64});
    LabDrafter d(plain.tokens, prompt.size(), alpha, 512, 3);
    const GenerateResult r = run_with(d, 8, s);
    EXPECT_EQ(r.tokens, plain.tokens) << "alpha " << alpha;
    EXPECT_GT(r.draft_n, 0);
    if (alpha == 1.0) {
      EXPECT_EQ(r.draft_n_accepted, r.draft_n);
      // Every full draft's verification is one shape whose positions come from the step buffer: on a
      // GPU it is recorded once and replayed after (again only where attention's split changes).
      if (GetParam() == "vulkan") {
        const int64_t replays = s.context().stats().host.replays;
        EXPECT_GE(replays, r.spec_steps / 2);
        EXPECT_GE(r.spec_steps, 4);
      }
    } else {
      EXPECT_LT(r.draft_n_accepted, r.draft_n);  // some drafts rejected
      EXPECT_GT(r.draft_n_accepted, 0);
    }
    // A follow-up on this context equals a fresh run over the same tokens: no rejected cell stayed.
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), r.tokens.begin(), r.tokens.end());
    SessionSource src(s);
    GenerateParams g = greedy(16);
    g.n_cached = s.n_past();
    const GenerateResult follow = Generator(src, t.tok).generate(all, g);
    Session fresh_s(*t.m, be, SessionOptions{256, 64});
    SessionSource fresh_src(fresh_s);
    const GenerateResult fresh = Generator(fresh_src, t.tok).generate(all, greedy(16));
    EXPECT_EQ(follow.tokens, fresh.tokens) << "alpha " << alpha;
  }
}

// Stop strings, the length limit and a grammar mask land in the middle of a verified draft: the
// same text, the same reason and a context holding exactly what plain decoding leaves.
TEST_P(SpeculativeEndToEnd, StopRulesAndGrammarInsideADraft) {
  Loaded t(stories());
  auto be = backend_for(GetParam());
  const std::vector<int32_t> prompt = repeating_prompt(t.tok);
  auto run = [&](GenerateParams g, bool spec, int32_t* n_past) {
    Session s(*t.m, be, SessionOptions{256, 64});
    SessionSource src(s);
    Generator gen(src, t.tok);
    const GenerateResult oracle = gen.generate(prompt, greedy(60));
    s.reset();
    LabDrafter d(oracle.tokens, prompt.size(), 0.9, 512, 5);
    NgramDrafter ng(2, 16);
    if (spec) {
      g.drafter = g.grammar ? static_cast<Drafter*>(&ng) : &d;
      g.draft_max = 8;
    }
    GenerateResult r = gen.generate(prompt, g);
    *n_past = s.n_past();
    return r;
  };
  GenerateParams stop = greedy(60);
  stop.stop = {"named"};
  GenerateParams len = greedy(13);
  GenerateParams gram = greedy(30);
  gram.grammar = grammar::compile_gbnf("root ::= (\" a\" | \" little\" | \" dog\" | \" time\" | \".\")+", t.tok);
  for (const GenerateParams* g : {&stop, &len, &gram}) {
    int32_t np_plain = 0, np_spec = 0;
    GenerateParams a = *g, b = *g;
    if (g == &gram)
      b.grammar = grammar::compile_gbnf("root ::= (\" a\" | \" little\" | \" dog\" | \" time\" | \".\")+", t.tok);
    const GenerateResult plain = run(a, false, &np_plain);
    const GenerateResult spec = run(b, true, &np_spec);
    EXPECT_EQ(spec.text, plain.text);
    EXPECT_EQ(spec.tokens, plain.tokens);
    EXPECT_EQ(spec.reason, plain.reason);
    EXPECT_EQ(np_spec, np_plain);
    EXPECT_GT(spec.draft_n, 0);
    if (g == &stop) {
      EXPECT_EQ(plain.reason, StopReason::StopString);
    } else if (g == &len) {
      EXPECT_EQ(plain.reason, StopReason::Length);
    } else {
      EXPECT_GT(spec.grammar_checked, 0);
    }
  }
}

TEST_P(SpeculativeEndToEnd, DraftModelGreedyTextIsUnchanged) {
  // Target and draft: qwen2.5-0.5b shapes with different weights over one vocabulary.
  Loaded t(synth("qwen2.5-0.5b", 1));
  Loaded dm(synth("qwen2.5-0.5b", 2));
  check_draft_vocab(t.tok.vocab(), dm.tok.vocab(), "target", "draft");
  auto be = backend_for(GetParam());
  std::vector<int32_t> prompt = t.tok.tokenize("the the the a b c the the the a b c", true, false);
  const int32_t n_gen = 40;
  Session plain_s(*t.m, be, SessionOptions{256, 64});
  SessionSource plain_src(plain_s);
  const GenerateResult plain = Generator(plain_src, t.tok).generate(prompt, greedy(n_gen));
  for (const auto* which : {"draft", "self"}) {
    Session ts(*t.m, be, SessionOptions{256, 64});
    Session ds(std::string(which) == "self" ? *t.m : *dm.m, be, SessionOptions{256, 64});
    ModelDrafter d(ds, greedy(n_gen).sampling, 512, 0.0f);
    SessionSource src(ts);
    GenerateParams g = greedy(n_gen);
    g.drafter = &d;
    g.draft_max = 6;
    const GenerateResult r = Generator(src, t.tok).generate(prompt, g);
    EXPECT_EQ(r.tokens, plain.tokens) << which;
    EXPECT_GT(r.draft_n, 0) << which;
    if (std::string(which) == "self") {
      EXPECT_EQ(r.draft_n_accepted, r.draft_n);  // the target drafts itself
    }
  }
}

// At temperature 1, with a drafter whose distribution differs from the target's (the target itself
// sampled at temperature 2.5: some drafts rejected), the first four generated tokens have the same
// distribution with and without speculation (each position a two-sample chi-square test over 600
// seeds per arm, p = 0.001; positions 1 .. 3 are drafted ones).
// The rule does not depend on the backend (the greedy tests run both): the CPU only.
TEST(SpeculativeSampled, DistributionMatchesPlainSampling) {
  Loaded t(stories());
  auto be = backend_for("cpu");
  const std::vector<int32_t> prompt = t.tok.tokenize("Once upon a time", true, false);
  const int32_t n_gen = 4, n_seeds = 600;
  GenerateParams g;
  g.sampling.temp = 1.0f;
  g.sampling.top_k = 8;  // few outcomes per position: enough counts per bin
  g.sampling.top_p = 1.0f;
  g.sampling.min_p = 0.0f;
  g.max_tokens = n_gen;
  g.ignore_eos = true;
  Session s(*t.m, be, SessionOptions{64, 64});
  Session ds(*t.m, be, SessionOptions{64, 64});
  SessionSource src(s);
  Generator gen(src, t.tok);
  std::vector<std::map<int32_t, int64_t>> plain(n_gen), spec(n_gen);
  int64_t drafted = 0, accepted = 0;
  for (int32_t seed = 0; seed < n_seeds; ++seed) {
    for (int arm = 0; arm < 2; ++arm) {
      s.reset();
      GenerateParams gp = g;
      gp.sampling.seed = static_cast<uint32_t>(1000 + seed + arm * 100000);
      SamplerParams q = gp.sampling;
      q.temp = 2.5f;
      ModelDrafter d(ds, q, 512, 0.0f);
      if (arm == 1) {
        gp.drafter = &d;
        gp.draft_max = 3;
      }
      const GenerateResult r = gen.generate(prompt, gp);
      ASSERT_EQ(r.tokens.size(), static_cast<size_t>(n_gen));
      for (int32_t i = 0; i < n_gen; ++i)
        ++(arm ? spec : plain)[static_cast<size_t>(i)][r.tokens[static_cast<size_t>(i)]];
      if (arm) {
        drafted += r.draft_n;
        accepted += r.draft_n_accepted;
      }
    }
  }
  EXPECT_GE(drafted, int64_t{n_seeds});
  // A draft that differs from the target: acceptance well inside (20 %, 80 %).
  const double rate = static_cast<double>(accepted) / static_cast<double>(drafted);
  EXPECT_GT(rate, 0.2);
  EXPECT_LT(rate, 0.8);
  std::printf("drafted %lld, accepted %.1f %%\n", static_cast<long long>(drafted), 100.0 * rate);
  for (int32_t i = 0; i < n_gen; ++i) {
    // Two-sample chi-square on the union of outcomes (rare ones pooled: each arm's count < 5).
    std::map<int32_t, std::pair<int64_t, int64_t>> both;
    for (auto [tk, c] : plain[static_cast<size_t>(i)]) both[tk].first += c;
    for (auto [tk, c] : spec[static_cast<size_t>(i)]) both[tk].second += c;
    std::vector<std::pair<int64_t, int64_t>> bins;
    std::pair<int64_t, int64_t> pool{0, 0};
    for (auto [tk, c] : both) {
      if (c.first + c.second < 10) {
        pool.first += c.first;
        pool.second += c.second;
      } else {
        bins.push_back(c);
      }
    }
    if (pool.first + pool.second > 0) bins.push_back(pool);
    double chi = 0;
    for (auto [a, b] : bins) {
      const double e = (a + b) / 2.0;  // equal arm sizes
      chi += (a - e) * (a - e) / e + (b - e) * (b - e) / e;
    }
    const int dof = static_cast<int>(bins.size()) - 1;
    if (dof < 1) continue;
    EXPECT_LT(chi, chi_crit_001(dof)) << "position " << i << ", " << bins.size() << " bins";
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, SpeculativeEndToEnd, ::testing::ValuesIn(devices()),
                         [](const auto& info) { return info.param; });

// The warm-up's verifications (warm_verifications, and warm_up with n_verify): they make kernels
// (each column count of a verification has its own), leave the context where it was, and afterwards
// a verification of every length 2 … 9 at another depth creates no pipeline; a recurrent model
// runs none.
TEST(Speculative, WarmVerificationsMakeEveryLengthsKernels) {
  Loaded t(synth("qwen2.5-0.5b", 1));
  auto be = backend_for("vulkan");
  Session s(*t.m, be, SessionOptions{128, 64});
  const std::vector<int32_t> p = t.tok.tokenize("Once upon a time there was", true, false);
  s.eval(p);
  const uint64_t before = be->stats().pipelines;
  EXPECT_EQ(warm_verifications(s, p.back(), 9), 8);
  EXPECT_GT(be->stats().pipelines, before) << "the verifications made no kernel: nothing was warmed";
  EXPECT_EQ(s.n_past(), static_cast<int32_t>(p.size()));
  s.eval(std::vector<int32_t>(1, p.back()));  // one position deeper
  const uint64_t warm = be->stats().pipelines;
  std::vector<float> out;
  for (int32_t k = 2; k <= 9; ++k) {
    s.eval_draft(std::vector<int32_t>(static_cast<size_t>(k), p.back()), out);
    s.truncate(s.n_past() - k);
  }
  EXPECT_EQ(be->stats().pipelines, warm) << "a verification length was not warmed";
  const WarmupReport w = warm_up(*t.m, be, p.back(), 256, 64, 9);
  EXPECT_EQ(w.n_verify, 8);
  Loaded r(synth("qwen35-test", 0));
  Session rs(*r.m, backend_for("cpu"), SessionOptions{64, 16});
  EXPECT_EQ(warm_verifications(rs, 1, 9), 0);
}

TEST(Speculative, RecurrentTargetRefusesWithTheReason) {
  Loaded t(synth("qwen35-test", 0));
  Session s(*t.m, backend_for("cpu"), SessionOptions{128, 64});
  ASSERT_TRUE(s.recurrent());
  SessionSource src(s);
  NgramDrafter d(2, 8);
  GenerateParams g = greedy(4);
  g.drafter = &d;
  try {
    Generator(src, t.tok).generate(t.tok.tokenize("a b a b", true, false), g);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recurrent"), std::string::npos) << e.what();
  }
}

TEST(Speculative, DraftVocabularyMismatchNamesTheToken) {
  Loaded a(stories());
  Loaded b(synth("qwen2.5-0.5b", 1));
  try {
    check_draft_vocab(a.tok.vocab(), b.tok.vocab(), "a.gguf", "b.gguf");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("b.gguf"), std::string::npos) << m;
    EXPECT_NE(m.find("differ"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace rocky::runtime
