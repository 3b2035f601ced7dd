// Pre-tokenizer splits for `llama-bpe` (Llama 3), `gpt-2` and llama.cpp's `default` chain, on the
// 46 strings of ../shared/reference/vocab/ggml-vocab-llama-bpe.gguf.inp.
//
// There is no llama-bpe (or gpt-2) vocab file in ../shared — too large to ship — so the token-id
// pairs in ggml-vocab-llama-bpe.gguf.out cannot be run here. What is tested instead is the part of
// the tokenizer that the regex decides: the words. The expected splits below were derived from the
// published patterns (Llama 3 tokenizer.json / llama.cpp llm_tokenizer_bpe: alternatives tried in
// order at each position — contractions, [^\r\n\p{L}\p{N}]?\p{L}+, \p{N}{1,3}, ' ?[^\s\p{L}\p{N}]+
// [\r\n]*', \s*[\r\n]+, \s+(?!\S), \s+; GPT-2: 's|'t|…| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|
// \s+(?!\S); default: punctuation runs [\p{P}$+<=>^~|]+, then GPT-2, then \p{N}+, then [0-9]{3}),
// worked by hand string by string, and cross-checked when written with an independent engine
// (Python's `regex` module), not with rocky's code. Text that no alternative matches stays a piece
// of its own (as in llama.cpp). Pieces are separated by '|' below (no test string contains '|').
#include <gtest/gtest.h>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "tokenizer/pretokenize.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

std::vector<std::string> read_inp(const std::string& path) {
  auto b = rocky::test::read_file_bytes(path);
  const std::string all(b.begin(), b.end());
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  for (size_t pos = 0; pos < all.size();) {
    size_t e = all.find(sep, pos);
    if (e == std::string::npos) break;
    out.push_back(all.substr(pos, e - pos));
    pos = e + sep.size();
  }
  return out;
}

std::string joined(const rocky::tok::RegexSplitter& s, const std::string& text) {
  std::string r;
  bool first = true;
  for (auto p : s.split(text)) {
    if (!first) r += '|';
    r += p;
    first = false;
  }
  return r;
}

void check(rocky::tok::PreType type, const char* const* expected, size_t n_expected, const char* name) {
  const auto inp = read_inp(rocky::test::shared_path("reference/vocab/ggml-vocab-llama-bpe.gguf.inp"));
  ASSERT_EQ(inp.size(), 46u);
  ASSERT_EQ(n_expected, inp.size());
  rocky::tok::RegexSplitter s(rocky::tok::pretokenizer_patterns(type));
  int ok = 0;
  for (size_t i = 0; i < inp.size(); ++i) {
    // The pieces always concatenate back to the input.
    std::string cat;
    for (auto p : s.split(inp[i])) cat += p;
    EXPECT_EQ(cat, inp[i]) << name << " #" << i;
    const std::string got = joined(s, inp[i]);
    EXPECT_EQ(got, expected[i]) << name << " #" << i;
    ok += got == expected[i];
  }
  EXPECT_EQ(ok, 46) << name;
}

// clang-format off
const char* const k_llama3[] = {
    /* 0*/ "ied| |4| |½| months",
    /* 1*/ "Äpfel",
    /* 2*/ "",
    /* 3*/ " ",
    /* 4*/ "  ",
    /* 5*/ "   ",
    /* 6*/ "\t",
    /* 7*/ "\n",
    /* 8*/ "\n\n",
    /* 9*/ "\n\n\n",
    /*10*/ "\t\n",
    /*11*/ "Hello| world",
    /*12*/ " Hello| world",
    /*13*/ "Hello| World",
    /*14*/ " Hello| World",
    /*15*/ " Hello| World|!",
    /*16*/ "Hello|,| world|!",
    /*17*/ " Hello|,| world|!",
    /*18*/ " this| is| 🦙.|cpp",
    /*19*/ "w|048| |7|tuijk| dsdfhu",
    /*20*/ "нещо| на| Български",
    /*21*/ "ក|ាន|់ត|ែព|ិស|េសអ|ាចខលច|េញ",
    /*22*/ "🚀| (|normal|)| 😶‍🌫️| (|multiple| emojis| concatenated|)| ✅| (|only| emoji| that| has| its| own| token|)",
    /*23*/ "Hello",
    /*24*/ " Hello",
    /*25*/ " | Hello",
    /*26*/ "  | Hello",
    /*27*/ "   | Hello",
    /*28*/ "   | Hello|\n|   | Hello",
    /*29*/ " (",
    /*30*/ "\n| =",
    /*31*/ "'| era",
    /*32*/ "Hello|,| y|'all|!| How| are| you| 😁| ?|我想在apple工作|131|415|1|天|～",
    /*33*/ "!!!!!!",
    /*34*/ "3",
    /*35*/ "33",
    /*36*/ "333",
    /*37*/ "333|3",
    /*38*/ "333|33",
    /*39*/ "333|333",
    /*40*/ "333|333|3",
    /*41*/ "333|333|33",
    /*42*/ "333|333|333",
    /*43*/ "Cửa| Việt",
    /*44*/ " discards",
    /*45*/ "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n|🚀| (|normal|)| 😶‍🌫️| (|multiple| emojis| concatenated|)| ✅| 🦙🦙| |3| |33| |333| |333|3| |333|33| |333|333| |333|333|3| |333|333|33| |3|.|3| |3|..|3| |3|...|3| ក|ាន|់ត|ែព|ិស|េសអ|ាច|😁| ?|我想在apple工作|131|415|1|天|～| ------=======| нещо| на| Български| ''''''```````\"\"\"\"......!!!!!!??????| I|'ve| been| '|told| he|'s| there|,| '|RE| you| sure|?| '|M| not| sure| I|'ll| make| it|,| '|D| you| like| some| tea|?| We|'Ve| a|'lL",
};

const char* const k_gpt2[] = {
    /* 0*/ "ied| 4| ½| months",
    /* 1*/ "Äpfel",
    /* 2*/ "",
    /* 3*/ " ",
    /* 4*/ "  ",
    /* 5*/ "   ",
    /* 6*/ "\t",
    /* 7*/ "\n",
    /* 8*/ "\n\n",
    /* 9*/ "\n\n\n",
    /*10*/ "\t\n",
    /*11*/ "Hello| world",
    /*12*/ " Hello| world",
    /*13*/ "Hello| World",
    /*14*/ " Hello| World",
    /*15*/ " Hello| World|!",
    /*16*/ "Hello|,| world|!",
    /*17*/ " Hello|,| world|!",
    /*18*/ " this| is| 🦙.|cpp",
    /*19*/ "w|048| 7|tuijk| dsdfhu",
    /*20*/ "нещо| на| Български",
    /*21*/ "ក|ា|ន|់|ត|ែ|ព|ិ|ស|េ|សអ|ា|ចខលច|េ|ញ",
    /*22*/ "🚀| (|normal|)| 😶‍🌫️| (|multiple| emojis| concatenated|)| ✅| (|only| emoji| that| has| its| own| token|)",
    /*23*/ "Hello",
    /*24*/ " Hello",
    /*25*/ " | Hello",
    /*26*/ "  | Hello",
    /*27*/ "   | Hello",
    /*28*/ "   | Hello|\n   | Hello",
    /*29*/ " (",
    /*30*/ "\n| =",
    /*31*/ "'| era",
    /*32*/ "Hello|,| y|'|all|!| How| are| you| 😁| ?|我想在apple工作|1314151|天|～",
    /*33*/ "!!!!!!",
    /*34*/ "3",
    /*35*/ "33",
    /*36*/ "333",
    /*37*/ "3333",
    /*38*/ "33333",
    /*39*/ "333333",
    /*40*/ "3333333",
    /*41*/ "33333333",
    /*42*/ "333333333",
    /*43*/ "Cửa| Việt",
    /*44*/ " discards",
    /*45*/ "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     |\n|🚀| (|normal|)| 😶‍🌫️| (|multiple| emojis| concatenated|)| ✅| 🦙🦙| 3| 33| 333| 3333| 33333| 333333| 3333333| 33333333| 3|.|3| 3|..|3| 3|...|3| ក|ា|ន|់|ត|ែ|ព|ិ|ស|េ|សអ|ា|ច|😁| ?|我想在apple工作|1314151|天|～| ------=======| нещо| на| Български| ''''''```````\"\"\"\"......!!!!!!??????| I|'ve| been| '|told| he|'s| there|,| '|RE| you| sure|?| '|M| not| sure| I|'ll| make| it|,| '|D| you| like| some| tea|?| We|'|Ve| a|'|lL",
};

const char* const k_default[] = {
    /* 0*/ "ied| |4| |½| months",
    /* 1*/ "Äpfel",
    /* 2*/ "",
    /* 3*/ " ",
    /* 4*/ "  ",
    /* 5*/ "   ",
    /* 6*/ "\t",
    /* 7*/ "\n",
    /* 8*/ "\n\n",
    /* 9*/ "\n\n\n",
    /*10*/ "\t\n",
    /*11*/ "Hello| world",
    /*12*/ " Hello| world",
    /*13*/ "Hello| World",
    /*14*/ " Hello| World",
    /*15*/ " Hello| World|!",
    /*16*/ "Hello|,| world|!",
    /*17*/ " Hello|,| world|!",
    /*18*/ " this| is| 🦙|.|cpp",
    /*19*/ "w|048| |7|tuijk| dsdfhu",
    /*20*/ "нещо| на| Български",
    /*21*/ "ក|ា|ន|់|ត|ែ|ព|ិ|ស|េ|សអ|ា|ចខលច|េ|ញ",
    /*22*/ "🚀| |(|normal|)| 😶‍🌫️| |(|multiple| emojis| concatenated|)| ✅| |(|only| emoji| that| has| its| own| token|)",
    /*23*/ "Hello",
    /*24*/ " Hello",
    /*25*/ " | Hello",
    /*26*/ "  | Hello",
    /*27*/ "   | Hello",
    /*28*/ "   | Hello|\n   | Hello",
    /*29*/ " |(",
    /*30*/ "\n |=",
    /*31*/ "'| era",
    /*32*/ "Hello|,| y|'|all|!| How| are| you| 😁| |?|我想在apple工作|131|415|1|天|～",
    /*33*/ "!!!!!!",
    /*34*/ "3",
    /*35*/ "33",
    /*36*/ "333",
    /*37*/ "333|3",
    /*38*/ "333|33",
    /*39*/ "333|333",
    /*40*/ "333|333|3",
    /*41*/ "333|333|33",
    /*42*/ "333|333|333",
    /*43*/ "Cửa| Việt",
    /*44*/ " discards",
    /*45*/ "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     |\n|🚀| |(|normal|)| 😶‍🌫️| |(|multiple| emojis| concatenated|)| ✅| 🦙🦙| |3| |33| |333| |333|3| |333|33| |333|333| |333|333|3| |333|333|33| |3|.|3| |3|..|3| |3|...|3| ក|ា|ន|់|ត|ែ|ព|ិ|ស|េ|សអ|ា|ច|😁| |?|我想在apple工作|131|415|1|天|～| |------=======| нещо| на| Български| |''''''|```````|\"\"\"\"......!!!!!!??????| I|'|ve| been| |'|told| he|'|s| there|,| |'|RE| you| sure|?| |'|M| not| sure| I|'|ll| make| it|,| |'|D| you| like| some| tea|?| We|'|Ve| a|'|lL",
};
// clang-format on

TEST(PreTokenizer, LlamaBpeSplits) { check(rocky::tok::PreType::Llama3, k_llama3, std::size(k_llama3), "llama-bpe"); }
TEST(PreTokenizer, Gpt2Splits) { check(rocky::tok::PreType::Gpt2, k_gpt2, std::size(k_gpt2), "gpt-2"); }
TEST(PreTokenizer, DefaultChainSplits) {
  check(rocky::tok::PreType::Default, k_default, std::size(k_default), "default");
}

TEST(PreTokenizer, EmptyTextHasNoPieces) {
  rocky::tok::RegexSplitter s(rocky::tok::pretokenizer_patterns(rocky::tok::PreType::Llama3));
  EXPECT_TRUE(s.split("").empty());
}

TEST(PreTokenizer, BadPatternIsAnError) { EXPECT_THROW(rocky::tok::RegexSplitter({"(unclosed"}), rocky::Error); }

}  // namespace
