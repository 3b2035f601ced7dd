// Generated vocabularies: right size, unique tokens, the fixed tokens where the real models have
// them, every BPE merge's parts and result in the vocab, SPM scores ordered, deterministic.
#include <gtest/gtest.h>

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "synth/presets.hpp"
#include "synth/vocab_gen.hpp"

using namespace rocky::synth;

namespace {

void check_common(const GeneratedVocab& v, size_t n_vocab) {
  ASSERT_EQ(v.tokens.size(), n_vocab);
  ASSERT_EQ(v.types.size(), n_vocab);
  std::unordered_set<std::string> seen;
  for (const auto& t : v.tokens) {
    EXPECT_FALSE(t.empty());
    EXPECT_TRUE(seen.insert(t).second) << "duplicate token " << t;
  }
  for (int32_t t : v.types) EXPECT_TRUE(t >= 1 && t <= 6) << t;
  ASSERT_GE(v.bos, 0);
  ASSERT_GE(v.eos, 0);
  EXPECT_LT(static_cast<size_t>(v.bos), n_vocab);
  EXPECT_LT(static_cast<size_t>(v.eos), n_vocab);
}

}  // namespace

TEST(SynthVocab, Qwen2BpeFullSize) {
  const Preset& p = find_preset("qwen2.5-3b");
  const GeneratedVocab v = generate_vocab(p);
  check_common(v, 151936);
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "qwen2");
  EXPECT_TRUE(v.scores.empty());
  // Qwen2.5's layout: 151643 text tokens, then the added tokens, then padding.
  EXPECT_EQ(v.tokens[151643], "<|endoftext|>");
  EXPECT_EQ(v.tokens[151644], "<|im_start|>");
  EXPECT_EQ(v.tokens[151645], "<|im_end|>");
  EXPECT_EQ(v.types[151643], 3);
  EXPECT_EQ(v.types[151645], 3);
  EXPECT_EQ(v.tokens[151665], "[PAD151665]");
  EXPECT_EQ(v.types[151935], 5);
  EXPECT_EQ(v.bos, 151643);
  EXPECT_EQ(v.eos, 151645);
  EXPECT_EQ(v.merges.size(), 151643u - 256u);
  // Byte tokens through the GPT-2 map: space → "Ġ" (U+0120), '\n' → "Ċ" (U+010A), 'a' → "a".
  EXPECT_EQ(v.tokens[' '], "\xc4\xa0");
  EXPECT_EQ(v.tokens['\n'], "\xc4\x8a");
  EXPECT_EQ(v.tokens['a'], "a");
  // Merge k joins two earlier tokens into token 256 + k.
  std::unordered_map<std::string, size_t> id;
  for (size_t i = 0; i < v.tokens.size(); ++i) id[v.tokens[i]] = i;
  size_t multi = 0;
  for (size_t k = 0; k < v.merges.size(); ++k) {
    const std::string& m = v.merges[k];
    const size_t sp = m.find(' ');
    ASSERT_NE(sp, std::string::npos) << m;
    ASSERT_EQ(m.find(' ', sp + 1), std::string::npos) << m;
    const std::string l = m.substr(0, sp), r = m.substr(sp + 1);
    ASSERT_TRUE(id.count(l) && id.count(r)) << m;
    EXPECT_LT(id[l], 256 + k) << m;
    EXPECT_LT(id[r], 256 + k) << m;
    ASSERT_EQ(v.tokens[256 + k], l + r) << k;
    multi += (l + r).size() >= 4;
  }
  EXPECT_GT(multi, 100000u);  // mostly real multi-character pieces, not just pairs
  // Deterministic.
  const GeneratedVocab v2 = generate_vocab(p);
  EXPECT_EQ(v.tokens, v2.tokens);
  EXPECT_EQ(v.merges, v2.merges);
  // The 7B vocab pads further.
  const GeneratedVocab v7 = generate_vocab(find_preset("qwen2.5-7b"));
  check_common(v7, 152064);
  EXPECT_EQ(v7.tokens[151645], "<|im_end|>");
}

TEST(SynthVocab, LlamaSpm) {
  const GeneratedVocab v = generate_vocab(find_preset("tinyllama-1.1b"));
  check_common(v, 32000);
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.tokens[0], "<unk>");
  EXPECT_EQ(v.tokens[1], "<s>");
  EXPECT_EQ(v.tokens[2], "</s>");
  EXPECT_EQ(v.tokens[3], "<0x00>");
  EXPECT_EQ(v.tokens[3 + 0x0A], "<0x0A>");
  EXPECT_EQ(v.tokens[258], "<0xFF>");
  EXPECT_EQ(v.types[0], 2);
  EXPECT_EQ(v.types[1], 3);
  EXPECT_EQ(v.types[100], 6);
  EXPECT_EQ(v.tokens[259], "\xe2\x96\x81");  // "▁"
  ASSERT_EQ(v.scores.size(), 32000u);
  for (size_t i = 260; i < v.scores.size(); ++i) ASSERT_LT(v.scores[i], v.scores[i - 1]) << i;
  EXPECT_EQ(v.bos, 1);
  EXPECT_EQ(v.eos, 2);
  EXPECT_EQ(v.unk, 0);
  EXPECT_TRUE(v.add_bos);
  // Every multi-character piece splits into two earlier pieces (reachable by bigram merges).
  std::unordered_map<std::string, size_t> id;
  for (size_t i = 0; i < v.tokens.size(); ++i) id[v.tokens[i]] = i;
  for (size_t i = 259 + 95; i < v.tokens.size(); ++i) {
    const std::string& t = v.tokens[i];
    bool ok = false;
    for (size_t cut = 1; cut < t.size() && !ok; ++cut) {
      auto a = id.find(t.substr(0, cut)), b = id.find(t.substr(cut));
      ok = a != id.end() && b != id.end() && a->second >= 259 && b->second >= 259 && a->second < i && b->second < i;
    }
    ASSERT_TRUE(ok) << i << " " << t;
  }
}

// Gemma 3: 262,144 SPM tokens, Gemma's specials and turn markers, no space prefix.
TEST(SynthVocab, Gemma3Spm) {
  const GeneratedVocab v = generate_vocab(find_preset("gemma-3-4b"));
  check_common(v, 262144);
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.tokens[0], "<pad>");
  EXPECT_EQ(v.tokens[1], "<eos>");
  EXPECT_EQ(v.tokens[2], "<bos>");
  EXPECT_EQ(v.tokens[3], "<unk>");
  EXPECT_EQ(v.tokens[106], "<start_of_turn>");
  EXPECT_EQ(v.tokens[107], "<end_of_turn>");
  EXPECT_EQ(v.types[106], 3);
  EXPECT_EQ(v.types[107], 3);
  EXPECT_EQ(v.tokens[108], "<0x00>");
  EXPECT_EQ(v.types[108 + 255], 6);
  EXPECT_EQ(v.bos, 2);
  EXPECT_EQ(v.eos, 107);
  EXPECT_EQ(v.unk, 3);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_space_prefix);
  EXPECT_NE(v.chat_template.find("<start_of_turn>"), std::string::npos);
}

TEST(SynthVocab, SmallSizes) {
  check_common(generate_vocab(find_preset("qwen2-test")), 1024);
  check_common(generate_vocab(find_preset("llama-test")), 1000);
}
