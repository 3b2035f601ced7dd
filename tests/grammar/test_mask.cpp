// Token masks against a brute-force check of every token (a separately compiled copy of the
// grammar advanced byte by byte): on a small hand-made vocabulary with multi-element, byte-fallback,
// partial UTF-8 and special tokens, and on Qwen2's real 151,936-token vocabulary.
#include <gtest/gtest.h>

#include <random>

#include "common/shared.hpp"
#include "grammar/json_schema.hpp"
#include "grammar_test_util.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::grammar {
namespace {

bool bit(const std::vector<uint64_t>& m, size_t t) { return (m[t >> 6] >> (t & 63)) & 1; }

// Walks `steps` random allowed tokens (restarting when complete or stuck), comparing each step's
// mask with a per-token check on an independent matcher. Returns the number of steps compared.
int compare_walk(const std::string& gbnf, std::shared_ptr<const TokenTrie> trie, int steps, uint32_t seed,
                 size_t brute_stride = 1) {
  auto g = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf), trie);
  auto ref = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf), trie);
  Matcher m(g), r(ref);
  std::mt19937 rng(seed);
  int compared = 0;
  for (int s = 0; s < steps; ++s) {
    const std::vector<uint64_t> mask = m.mask();
    std::vector<int32_t> allowed;
    const size_t off = brute_stride > 1 ? rng() % brute_stride : 0;
    for (size_t t = 0; t < trie->n_vocab(); ++t) {
      const bool want = (t % brute_stride == off) ? r.allowed(static_cast<int32_t>(t)) : bit(mask, t);
      EXPECT_EQ(bit(mask, t), want) << "step " << s << " token " << t << " '" << trie->piece(static_cast<int32_t>(t))
                                    << "'";
      if (bit(mask, t)) allowed.push_back(static_cast<int32_t>(t));
    }
    ++compared;
    if (allowed.empty()) {
      ADD_FAILURE() << "no token allowed at step " << s;
      break;
    }
    const int32_t t = allowed[rng() % allowed.size()];
    EXPECT_TRUE(m.accept(t));
    EXPECT_TRUE(r.accept(t));
    if (m.finished()) {
      m.reset();
      r.reset();
    }
  }
  return compared;
}

TEST(Mask, SmallVocabMatchesBruteForce) {
  std::vector<std::string> p = {"{",   "}",     "\"",   "\":",        "\"a", "a\"",     "ab",   "\"}",  ",\"",
                                "1",   "12",    "-",    ".",          "e",   " ",       "true", "null", "fal",
                                "se",  "\xc3",  "\xa9", "\xc3\xa9",   "é\"", "[",       "]",    "],",   "\\",
                                "\\n", "\\u00", "x",    "<|im_end|>", "",    "\"b\": ", "0",    "00",   "\n"};
  // 30: a special token (not text, left empty), 31: an empty piece, 36: eos.
  p[30].clear();
  p.push_back("");
  for (char c = ' '; c <= '~'; ++c) p.push_back(std::string(1, c));  // every character stays reachable
  auto trie = TokenTrie::from_pieces(p, {36});
  const std::string gbnf = json_schema_to_gbnf(nlohmann::json::parse(R"({
    "type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {"type": "number"}},
    "c": {"enum": [true, null, "é"]}}, "required": ["a"]})"));
  EXPECT_EQ(compare_walk(gbnf, trie, 400, 1), 400);
}

TEST(Mask, EosOnlyWhenAccepting) {
  auto trie = TokenTrie::from_pieces({"a", "b", ""}, {2});
  auto g = std::make_shared<CompiledGrammar>(parse_gbnf(R"(root ::= "a" "b"?)"), trie);
  Matcher m(g);
  EXPECT_FALSE(bit(m.mask(), 2));
  EXPECT_FALSE(m.accept(2));
  EXPECT_TRUE(m.accept(0));
  EXPECT_TRUE(bit(m.mask(), 2));
  EXPECT_TRUE(bit(m.mask(), 1));
  EXPECT_TRUE(m.accept(2));
  EXPECT_TRUE(m.finished());
  EXPECT_FALSE(m.accept(1));
}

TEST(Mask, Qwen2VocabMatchesBruteForce) {
  auto tok = tok::Tokenizer::load(test::shared_path("reference/vocab/ggml-vocab-qwen2-rebuilt.gguf"));
  auto trie = TokenTrie::build(tok);
  ASSERT_EQ(trie->n_vocab(), 151936u);
  // Special tokens are never text.
  EXPECT_TRUE(trie->piece(tok.vocab().find("<|im_end|>")).empty());
  const std::string gbnf = json_schema_to_gbnf(nlohmann::json::parse(R"({
    "type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer",
    "minimum": 0, "maximum": 150}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "when": {"type": "string", "format": "date"}}, "required": ["name", "age"]})"));
  // Every 7th token brute-forced per step (all of them would take minutes); 60 steps.
  EXPECT_EQ(compare_walk(gbnf, trie, 60, 7, 7), 60);
}

// Bounded repetitions of a rule: every level's token set is derived from the unbounded repetition's
// walk (counting the copies each token starts); against the brute force, with multi-copy tokens,
// escapes, multi-byte characters and a repetition whose copies end ambiguously (walked as it is).
TEST(Mask, CountedRepetitionMatchesBruteForce) {
  std::vector<std::string> p = {"\"",   "a",   "ab", "abc", "abcabc", "aaaa", "\\", "\\n", "n\"", "\xc3\xa9", "\xc3",
                                "\xa9", "é\"", "ba", "c",   "cc\"",   "\"}",  "x",  "xy",  "y",   ","};
  for (char c = ' '; c <= '~'; ++c) p.push_back(std::string(1, c));
  p.push_back("");
  auto trie = TokenTrie::from_pieces(p, {static_cast<int32_t>(p.size() - 1)});
  const std::string char_rule = R"(char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))";
  for (const std::string& g : {
           "root ::= \"\\\"\" char{0,9} \"\\\"\" \"x\"\n" + char_rule,
           "root ::= \"\\\"\" char{2,7} \"\\\"\" (\",\" root)?\n" + char_rule,
           std::string("root ::= (\"ab\" | \"c\"){1,8} \"x\"{0,3} \"y\""),
           std::string("root ::= (\"a\" | \"ab\" | \"b\"){0,6} \"c\""),  // copies end ambiguously
       })
    for (uint32_t seed : {1u, 2u, 3u}) EXPECT_EQ(compare_walk(g, trie, 150, seed), 150) << g;
}

// Multi-byte characters in counted repetitions: tokens that end inside a 2-, 3- or 4-byte character,
// start inside one (continuation bytes) or hold several, in every level down to the last one (which
// allows no further character), against the brute force; the last level's keys come from the
// star's walk too (no walk of their own).
TEST(Mask, CountedRepetitionMultiByteMatchesBruteForce) {
  std::vector<std::string> p = {"\"",
                                "a",
                                "ab",
                                "\\",
                                "\\n",
                                "x",
                                ",",
                                "\"}",
                                "\"x",
                                "\xc3\xa9",  // é
                                "\xc3",
                                "\xa9",
                                "\xa9\"",
                                "\xc3\xa9\"",
                                "a\xc3\xa9",
                                "\xe2\x82\xac",  // €
                                "\xe2",
                                "\xe2\x82",
                                "\x82",
                                "\x82\xac",
                                "\xac",
                                "\xac\"",
                                "\xe2\x82\xac\xc3\xa9",
                                "a\xe2\x82\xac",
                                "\xe2\x82\xac\"",
                                "\xf0\x9f\x98\x80",  // U+1F600
                                "\xf0",
                                "\xf0\x9f",
                                "\x9f\x98",
                                "\x98\x80",
                                "\x80",
                                "\x80\"",
                                "\x9f\x98\x80\"",
                                "\xf0\x9f\x98\x80"
                                "a",
                                "\xc3\xa9\xf0\x9f\x98\x80\xe2\x82\xac"};
  for (char c = ' '; c <= '~'; ++c) p.push_back(std::string(1, c));
  p.push_back("");
  auto trie = TokenTrie::from_pieces(p, {static_cast<int32_t>(p.size() - 1)});
  const std::string char_rule = R"(char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))";
  for (const std::string& g : {
           "root ::= \"\\\"\" char{0,4} \"\\\"\" \"x\"\n" + char_rule,
           "root ::= \"\\\"\" char{3,6} \"\\\"\" (\",\" root)?\n" + char_rule,
           "root ::= \"\\\"\" char{2,3} \"\\\"\"\n" + char_rule,
       })
    for (uint32_t seed : {1u, 2u, 3u, 4u}) EXPECT_EQ(compare_walk(g, trie, 150, seed), 150) << g;

  // Every level down to the last (no character may follow), inside 2- and 3-byte characters.
  const std::string g = "root ::= \"\\\"\" char{0,4} \"\\\"\"\n" + char_rule;
  auto fast = std::make_shared<CompiledGrammar>(parse_gbnf(g), trie);
  auto slow = std::make_shared<CompiledGrammar>(parse_gbnf(g), trie, /*derive_counted=*/false);
  Matcher a(fast), b(slow);
  for (const char* prefix : {"\"", "\"a", "\"a€", "\"a€é", "\"a€é\xe2", "\"a€é\xe2\x82", "\"a€é€"}) {
    a.reset();
    b.reset();
    ASSERT_TRUE(a.accept_bytes(prefix)) << prefix;
    ASSERT_TRUE(b.accept_bytes(prefix)) << prefix;
    EXPECT_EQ(a.mask(), b.mask()) << prefix;
  }
  // Inside a 4-byte character: the first level walks that position's star once; the last level
  // (three characters later) reuses it, where walking each level walks again.
  a.reset();
  b.reset();
  ASSERT_TRUE(a.accept_bytes("\"\xf0\x9f"));
  ASSERT_TRUE(b.accept_bytes("\"\xf0\x9f"));
  EXPECT_EQ(a.mask(), b.mask());
  const size_t walks = fast->n_trie_walks(), slow_walks = slow->n_trie_walks();
  a.reset();
  b.reset();
  ASSERT_TRUE(a.accept_bytes("\"ab\xe2\x82\xac\xf0\x9f"));
  ASSERT_TRUE(b.accept_bytes("\"ab\xe2\x82\xac\xf0\x9f"));
  EXPECT_EQ(a.mask(), b.mask());
  EXPECT_EQ(fast->n_trie_walks(), walks);
  EXPECT_GT(slow->n_trie_walks(), slow_walks);
}

// On Qwen2's vocabulary: the derived token sets equal walking every level of a string's maxLength.
TEST(Mask, CountedRepetitionQwen2SameAsWalkingEachLevel) {
  auto tok = tok::Tokenizer::load(test::shared_path("reference/vocab/ggml-vocab-qwen2-rebuilt.gguf"));
  auto trie = TokenTrie::build(tok);
  const std::string gbnf = json_schema_to_gbnf(nlohmann::json::parse(R"({"type": "array", "items":
    {"type": "string", "minLength": 2, "maxLength": 30}, "maxItems": 4})"));
  auto fast = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf), trie);
  auto slow = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf), trie, /*derive_counted=*/false);
  Matcher a(fast), b(slow);
  // Inside a 30-character string the levels come from one walk per alternative of a character.
  ASSERT_TRUE(a.accept_bytes("[\"ab"));
  ASSERT_TRUE(b.accept_bytes("[\"ab"));
  for (int k = 0; k < 25; ++k) {
    ASSERT_EQ(a.mask(), b.mask()) << "character " << k;
    ASSERT_TRUE(a.accept_bytes("x"));
    ASSERT_TRUE(b.accept_bytes("x"));
  }
  EXPECT_LT(a.compiled().n_trie_walks(), 20u);
  EXPECT_GT(b.compiled().n_trie_walks(), 25u);
  // Byte by byte through 2-, 3- and 4-byte characters up to the last level (30 characters), so
  // that keys end inside a character at every level.
  a.reset();
  b.reset();
  const std::string text = "[\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" + std::string(23, 'y') + "\xe2\x82\xac\xc3\xa9\"";
  for (size_t i = 0; i < text.size(); ++i) {
    ASSERT_EQ(a.mask(), b.mask()) << "byte " << i;
    ASSERT_TRUE(a.accept_bytes(text.substr(i, 1))) << "byte " << i;
    ASSERT_TRUE(b.accept_bytes(text.substr(i, 1))) << "byte " << i;
  }
  a.reset();
  b.reset();
  std::mt19937 rng(5);
  for (int s = 0; s < 120; ++s) {
    const std::vector<uint64_t> m = a.mask();
    ASSERT_EQ(m, b.mask()) << "step " << s;
    std::vector<int32_t> allowed;
    for (size_t t = 0; t < trie->n_vocab(); ++t)
      if (bit(m, t)) allowed.push_back(static_cast<int32_t>(t));
    ASSERT_FALSE(allowed.empty());
    const int32_t t = allowed[rng() % allowed.size()];
    ASSERT_TRUE(a.accept(t));
    ASSERT_TRUE(b.accept(t));
    if (a.finished()) {
      a.reset();
      b.reset();
    }
  }
}

}  // namespace
}  // namespace rocky::grammar
