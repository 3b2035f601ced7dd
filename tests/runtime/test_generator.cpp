// runtime::Generator and StopMatcher: stop strings spanning tokens, UTF-8 split across tokens,
// cancellation, end-of-generation, max_tokens and a full context — on a scripted logit source (the
// stories260K vocabulary, one-hot logits, greedy sampling), so every sampled id is known.
#include <gtest/gtest.h>

#include <limits>
#include <span>
#include <string>
#include <vector>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "grammar/constraint.hpp"
#include "runtime/generator.hpp"
#include "runtime/session.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::runtime {
namespace {

// Greedy sampling picks script[k] after the k-th eval; past the script it repeats the last id.
class ScriptedSource final : public LogitSource {
 public:
  ScriptedSource(int32_t n_vocab, int32_t n_ctx, std::vector<int32_t> script)
      : n_vocab_(n_vocab), n_ctx_(n_ctx), script_(std::move(script)) {}
  std::vector<float> eval(std::span<const int32_t> tokens, bool all_logits, const ProgressFn&) override {
    n_past_ += static_cast<int32_t>(tokens.size());
    evals.push_back(std::vector<int32_t>(tokens.begin(), tokens.end()));
    const size_t rows = all_logits ? tokens.size() : 1;
    std::vector<float> l(rows * static_cast<size_t>(n_vocab_), -1.0f);
    const size_t k = std::min(evals.size() - 1, script_.size() - 1);
    l[(rows - 1) * static_cast<size_t>(n_vocab_) + static_cast<size_t>(script_[k])] = 5.0f;
    return l;
  }
  int32_t n_past() const override { return n_past_; }
  int32_t n_ctx() const override { return n_ctx_; }
  int32_t n_vocab() const override { return n_vocab_; }
  std::vector<std::vector<int32_t>> evals;

 private:
  int32_t n_vocab_, n_ctx_, n_past_ = 0;
  std::vector<int32_t> script_;
};

const tok::Tokenizer& stories() {
  static tok::Tokenizer t = tok::Tokenizer::load(test::shared_path("reference/models/stories260K.gguf"));
  return t;
}

GenerateParams greedy(int32_t max_tokens = -1) {
  GenerateParams p;
  p.sampling.temp = 0;
  p.max_tokens = max_tokens;
  return p;
}

struct Collected {
  std::vector<std::string> texts;  // per event
  std::string all;
};

TokenFn collect(Collected& c) {
  return [&c](const TokenEvent& ev) {
    c.texts.emplace_back(ev.text);
    c.all += ev.text;
    return true;
  };
}

TEST(StopMatcher, HoldsBackPrefixesAndFindsSplitMatches) {
  StopMatcher m({"o Wo", "xyz"});
  EXPECT_EQ(m.push("Hel"), "Hel");
  EXPECT_EQ(m.push("lo"), "l");   // "o" may start "o Wo"
  EXPECT_EQ(m.push(" W"), "");    // "o W" still may
  EXPECT_EQ(m.push("orld"), "");  // complete: nothing from the match on
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "o Wo");
  EXPECT_EQ(m.push("more"), "");
  StopMatcher n({"abc"});
  EXPECT_EQ(n.push("xab"), "x");
  EXPECT_EQ(n.push("d"), "abd");  // the held-back "ab" is released once it cannot match
  EXPECT_EQ(n.push("a"), "");
  EXPECT_EQ(n.flush(), "a");
  EXPECT_FALSE(n.stopped());
  StopMatcher none({});
  EXPECT_EQ(none.push("abc"), "abc");
}

TEST(Generator, StopStringSpanningTokens) {
  const auto& tok = stories();
  const std::vector<int32_t> prompt = tok.tokenize("Once", true, true);
  const std::vector<int32_t> gen = tok.tokenize("upon a time there was a girl", false, false);
  ASSERT_GE(gen.size(), 5u);
  ScriptedSource src(static_cast<int32_t>(tok.vocab().size()), 256, gen);
  Generator g(src, tok);
  GenerateParams p = greedy();
  p.stop = {"n a ti"};  // spans several tokens in this vocab
  Collected c;
  GenerateResult r = g.generate(prompt, p, collect(c));
  EXPECT_EQ(r.reason, StopReason::StopString);
  EXPECT_EQ(r.stop_word, "n a ti");
  EXPECT_EQ(r.text, " upo");
  EXPECT_EQ(c.all, " upo");
  // Generation stopped at the token that completed the match: everything up to it was kept.
  const std::string full =
      tok.detokenize(std::vector<int32_t>(gen.begin(), gen.begin() + static_cast<long>(r.tokens.size())));
  EXPECT_NE(full.find("n a ti"), std::string::npos) << full;
  const std::string shorter =
      tok.detokenize(std::vector<int32_t>(gen.begin(), gen.begin() + static_cast<long>(r.tokens.size()) - 1));
  EXPECT_EQ(shorter.find("n a ti"), std::string::npos) << shorter;
  for (size_t i = 0; i < r.tokens.size(); ++i) EXPECT_EQ(r.tokens[i], gen[i]);
}

TEST(Generator, StopStringEndingInAMultiByteCharacter) {
  // A stop string ending in a character split over two byte tokens: matched once the decoder
  // completes the character; the "k" held back before it is never emitted.
  const auto& tok = stories();
  const auto& v = tok.vocab();
  std::vector<int32_t> gen = tok.tokenize("ok", false, false);
  for (uint8_t b : {0xC3, 0xA9}) gen.push_back(v.byte_token(b));
  ScriptedSource src(static_cast<int32_t>(v.size()), 256, gen);
  Generator g(src, tok);
  GenerateParams p = greedy(static_cast<int32_t>(gen.size()));
  p.stop = {"k\xC3\xA9"};
  GenerateResult r = g.generate(tok.tokenize("Hi", true, true), p);
  EXPECT_EQ(r.reason, StopReason::StopString);
  EXPECT_EQ(r.text, " o");
}

bool complete_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

TEST(Generator, NeverEmitsHalfACodePoint) {
  const auto& tok = stories();
  const auto& v = tok.vocab();
  // "é€😀" spelled byte by byte: 2 + 3 + 4 bytes, each its own token.
  const std::string want = "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
  std::vector<int32_t> gen;
  for (unsigned char b : want) {
    const int32_t id = v.byte_token(b);
    ASSERT_NE(id, tok::k_null_token);
    ASSERT_EQ(tok.token_to_piece(id), std::string(1, static_cast<char>(b)));
    gen.push_back(id);
  }
  ScriptedSource src(static_cast<int32_t>(v.size()), 256, gen);
  Generator g(src, tok);
  Collected c;
  GenerateResult r = g.generate(tok.tokenize("Hi", true, true), greedy(static_cast<int32_t>(gen.size())), collect(c));
  EXPECT_EQ(r.reason, StopReason::Length);
  EXPECT_EQ(r.text, want);
  EXPECT_EQ(c.all, want);
  ASSERT_EQ(c.texts.size(), gen.size() + 1);  // one per token, plus the final flush
  const std::vector<std::string> expect = {"", "\xC3\xA9", "", "", "\xE2\x82\xAC", "", "", "", "\xF0\x9F\x98\x80", ""};
  EXPECT_EQ(c.texts, expect);
  for (const auto& t : c.texts) EXPECT_TRUE(complete_utf8(t));
}

TEST(Generator, CallbackCancelsAfterItsToken) {
  const auto& tok = stories();
  const std::vector<int32_t> gen = tok.tokenize("upon a time there was a little girl", false, false);
  ASSERT_GE(gen.size(), 6u);
  ScriptedSource src(static_cast<int32_t>(tok.vocab().size()), 256, gen);
  Generator g(src, tok);
  const std::vector<int32_t> prompt = tok.tokenize("Once", true, true);
  int calls = 0;
  GenerateResult r = g.generate(prompt, greedy(), [&](const TokenEvent& ev) {
    if (ev.token >= 0) ++calls;
    return ev.index < 2;
  });
  EXPECT_EQ(r.reason, StopReason::Cancelled);
  ASSERT_EQ(r.tokens.size(), 3u);
  EXPECT_EQ(calls, 3);
  // Prefill + 2 decode evals: the cancelled token is not evaluated.
  ASSERT_EQ(src.evals.size(), 3u);
  EXPECT_EQ(src.evals[0], prompt);
  EXPECT_EQ(src.evals[1], std::vector<int32_t>{gen[0]});
  EXPECT_EQ(src.evals[2], std::vector<int32_t>{gen[1]});
}

TEST(Generator, EndOfGenerationLengthAndFullContext) {
  const auto& tok = stories();
  const int32_t nv = static_cast<int32_t>(tok.vocab().size());
  const std::vector<int32_t> prompt = tok.tokenize("Once upon", true, true);
  const std::vector<int32_t> words = tok.tokenize("a time there", false, false);
  {
    std::vector<int32_t> script = words;
    script.push_back(tok.vocab().eos());
    ScriptedSource src(nv, 256, script);
    GenerateResult r = Generator(src, tok).generate(prompt, greedy());
    EXPECT_EQ(r.reason, StopReason::Eog);
    EXPECT_EQ(r.tokens, words);
    EXPECT_EQ(r.text, " a time there");
    EXPECT_EQ(r.n_prompt, static_cast<int32_t>(prompt.size()));
  }
  {
    ScriptedSource src(nv, 256, words);
    GenerateResult r = Generator(src, tok).generate(prompt, greedy(2));
    EXPECT_EQ(r.reason, StopReason::Length);
    EXPECT_EQ(r.tokens.size(), 2u);
  }
  {
    ScriptedSource src(nv, 256, words);
    GenerateResult r = Generator(src, tok).generate(prompt, greedy(0));
    EXPECT_EQ(r.reason, StopReason::Length);
    EXPECT_TRUE(r.tokens.empty());
    EXPECT_EQ(src.evals.size(), 1u);
  }
  {
    // Room for 2 generated tokens' evaluation: the third token fills the context.
    const int32_t n_ctx = static_cast<int32_t>(prompt.size()) + 2;
    ScriptedSource src(nv, n_ctx, words);
    GenerateResult r = Generator(src, tok).generate(prompt, greedy());
    EXPECT_EQ(r.reason, StopReason::ContextFull);
    EXPECT_EQ(r.tokens.size(), 3u);
    EXPECT_EQ(src.n_past(), n_ctx);
  }
  {
    ScriptedSource src(nv, static_cast<int32_t>(prompt.size()) - 1, words);
    EXPECT_THROW(Generator(src, tok).generate(prompt, greedy()), Error);
  }
  {
    // ignore_eos keeps the end-of-generation id.
    std::vector<int32_t> script = {words[0], tok.vocab().eos(), words[1]};
    ScriptedSource src(nv, 256, script);
    GenerateParams p = greedy(3);
    p.ignore_eos = true;
    GenerateResult r = Generator(src, tok).generate(prompt, p);
    EXPECT_EQ(r.tokens, script);
  }
}

TEST(Generator, CachedPrefixIsNotEvaluatedAgain) {
  const auto& tok = stories();
  const std::vector<int32_t> prompt = tok.tokenize("Once upon a time", true, true);
  ScriptedSource src(static_cast<int32_t>(tok.vocab().size()), 256, {prompt[1]});
  GenerateParams p = greedy(1);
  p.n_cached = 2;
  GenerateResult r = Generator(src, tok).generate(prompt, p);
  EXPECT_EQ(r.n_cached, 2);
  EXPECT_EQ(src.evals[0], std::vector<int32_t>(prompt.begin() + 2, prompt.end()));
}

// Structured output: the mask steers a source that wants other tokens; every sampled token is
// checked against its step's mask (grammar_checked counts them, end-of-generation included).
TEST(Generator, GrammarConstrainsEveryToken) {
  const tok::Tokenizer& tok = stories();
  const auto prompt = tok.tokenize("Once", true);
  const auto noise = tok.tokenize(" upon a time there was a cat", false);
  ScriptedSource src(static_cast<int32_t>(tok.vocab().size()), 256, noise);
  Generator g(src, tok);
  GenerateParams p = greedy(32);
  p.grammar = grammar::compile_gbnf(R"(root ::= ("yes" | "no") "!"?)", tok);
  const GenerateResult r = g.generate(prompt, p);
  EXPECT_TRUE(r.text == "yes" || r.text == "no" || r.text == "yes!" || r.text == "no!") << r.text;
  EXPECT_EQ(r.reason, StopReason::Eog);
  EXPECT_EQ(r.grammar_checked, static_cast<int32_t>(r.tokens.size()) + 1);
}

// A lazy grammar lets text through until a trigger, then constrains from the trigger's first byte.
TEST(Generator, LazyGrammarStartsAtTrigger) {
  const tok::Tokenizer& tok = stories();
  const auto prompt = tok.tokenize("Once", true);
  auto script = tok.tokenize(" upon a time there was a cat", false);
  ScriptedSource src(static_cast<int32_t>(tok.vocab().size()), 256, script);
  Generator g(src, tok);
  GenerateParams p = greedy(40);
  p.grammar = grammar::compile_gbnf(R"(root ::= "time" [!?])", tok);
  p.grammar_triggers = {"time"};
  const GenerateResult r = g.generate(prompt, p);
  // Free text up to the trigger (the scripted tokens), then "time" and one of the two marks.
  ASSERT_GE(r.text.size(), 12u) << r.text;
  const std::string tail = r.text.substr(r.text.size() - 12);
  EXPECT_TRUE(tail == "upon a time!" || tail == "upon a time?") << r.text;
  EXPECT_EQ(r.reason, StopReason::Eog);
  EXPECT_GT(r.grammar_checked, 0);
}

// The finite check every evaluation runs over its logits: the index of the first NaN / ±inf at any
// offset (the eight-lane body and the tail), denormals, ±0 and the largest finite values pass.
TEST(FirstNonfinite, FindsTheFirstAnywhere) {
  std::vector<float> v(1003);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 17) - 8.5f;
  v[3] = std::numeric_limits<float>::max();
  v[5] = -std::numeric_limits<float>::max();
  v[7] = std::numeric_limits<float>::denorm_min();
  v[9] = -0.0f;
  EXPECT_EQ(first_nonfinite(v), k_all_finite);
  EXPECT_EQ(first_nonfinite(std::span<const float>()), k_all_finite);
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()})
    for (size_t at : {size_t{0}, size_t{7}, size_t{8}, size_t{500}, size_t{999}, size_t{1002}}) {
      std::vector<float> w = v;
      w[at] = bad;
      if (at + 2 < w.size()) w[at + 2] = bad;  // a later one too: the first is reported
      EXPECT_EQ(first_nonfinite(w), at) << bad << " at " << at;
    }
}

}  // namespace
}  // namespace rocky::runtime
