// GBNF parsing: the syntax llama.cpp accepts, errors with line:col, and string matching of the
// samples (arithmetic, a list, a choice) through the byte-level matcher.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "grammar/gbnf.hpp"
#include "grammar_test_util.hpp"

namespace rocky::grammar {
namespace {

using test::compile;
using test::matches;
using test::prefix_ok;

std::string error_of(const std::string& gbnf) {
  try {
    parse_gbnf(gbnf);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gbnf, Arithmetic) {
  auto g = compile(R"g(
root  ::= expr
expr  ::= term (("+" | "-") term)*
term  ::= factor (("*" | "/") factor)*
factor ::= num | "(" expr ")"   # parentheses nest
num   ::= [0-9]+
)g");
  EXPECT_TRUE(matches(g, "1+2*3"));
  EXPECT_TRUE(matches(g, "(1+2)*(30/4)"));
  EXPECT_TRUE(matches(g, "((7))"));
  EXPECT_FALSE(matches(g, "1+"));
  EXPECT_TRUE(prefix_ok(g, "1+"));
  EXPECT_FALSE(prefix_ok(g, "1++"));
  EXPECT_FALSE(matches(g, "(1"));
  EXPECT_FALSE(prefix_ok(g, "a"));
}

TEST(Gbnf, ListAndChoice) {
  auto list = compile(R"(root ::= "[" ( item ("," " "? item)* )? "]"
item ::= "\"" [a-z]{1,3} "\"")");
  EXPECT_TRUE(matches(list, "[]"));
  EXPECT_TRUE(matches(list, R"(["ab", "c","xyz"])"));
  EXPECT_FALSE(matches(list, R"(["abcd"])"));
  EXPECT_FALSE(matches(list, R"(["",])"));
  auto choice = compile(R"(root ::= ("yes" | "no" | "maybe") "."?)");
  EXPECT_TRUE(matches(choice, "yes"));
  EXPECT_TRUE(matches(choice, "maybe."));
  EXPECT_FALSE(matches(choice, "yess"));
  EXPECT_FALSE(matches(choice, "n"));
  EXPECT_TRUE(prefix_ok(choice, "n"));
}

TEST(Gbnf, RepetitionForms) {
  auto g = compile(R"(root ::= "a"{2} "b"{1,} "c"{0,2} "d"? "e"*)");
  EXPECT_TRUE(matches(g, "aab"));
  EXPECT_TRUE(matches(g, "aabbbccdeee"));
  EXPECT_FALSE(matches(g, "ab"));
  EXPECT_FALSE(matches(g, "aabccc"));
  auto lit = compile(R"(root ::= "ab"+)");
  EXPECT_TRUE(matches(lit, "ababab"));
  EXPECT_FALSE(matches(lit, "aba"));
}

TEST(Gbnf, ClassesEscapesAndUnicode) {
  auto g = compile(R"(root ::= [^a-c\n] [\x41-\x43] "\u00e9" [α-γ] . "\t\\\"" [\]\-])");
  EXPECT_TRUE(matches(g, "zBéβ€\t\\\"]"));
  EXPECT_TRUE(matches(g, "😀Aéαx\t\\\"-"));
  EXPECT_FALSE(matches(g, "aBéβx\t\\\"]"));
  EXPECT_FALSE(matches(g, "zDéβx\t\\\"]"));
  EXPECT_FALSE(matches(g, "zBéδx\t\\\"]"));
  // A negated class takes any other code point, in valid UTF-8 only.
  auto neg = compile(R"(root ::= [^"]+)");
  EXPECT_TRUE(matches(neg, "日本語"));
  EXPECT_TRUE(prefix_ok(neg, "\xe6\x97"));       // a partial code point is a valid prefix
  EXPECT_FALSE(prefix_ok(neg, "\xe6\x41"));      // a broken one is not
  EXPECT_FALSE(prefix_ok(neg, "\xed\xa0\x80"));  // a surrogate is not UTF-8
  EXPECT_FALSE(prefix_ok(neg, "\xc0\x80"));      // an overlong form neither
}

TEST(Gbnf, Multiline) {
  auto g = compile("root ::= (\n  \"a\" |\n  \"b\"\n) c\nc ::= \"c\" # trailing comment\n\n# only a comment\n");
  EXPECT_TRUE(matches(g, "ac"));
  EXPECT_TRUE(matches(g, "bc"));
}

TEST(Gbnf, ErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("root ::= \"a\"\nfoo ::= \"b\" @"),
            "line 2:13: expected the end of the line after rule 'foo', found '@'");
  EXPECT_EQ(error_of("root ::= \"abc"), "line 1:10: unterminated string literal");
  EXPECT_EQ(error_of("root ::= [a-"), "line 1:10: unterminated character class");
  EXPECT_EQ(error_of("root ::= x\n"), "grammar: undefined rule 'x' (used at line 1:10)");
  EXPECT_EQ(error_of("start ::= \"a\""), "grammar: the grammar has no 'root' rule");
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\""), "line 2:1: rule 'root' is defined twice");
  EXPECT_EQ(error_of("root ::= * \"a\""), "line 1:10: '*' has nothing before it to repeat");
  EXPECT_EQ(error_of("root ::= \"a\"{3,1}"), "line 1:13: repetition {3,1}: the maximum is below the minimum");
  EXPECT_EQ(error_of("root ::= \"\\q\""), "line 1:11: unknown escape '\\q'");
  EXPECT_EQ(error_of("root ::= (\"a\""), "line 1:14: expected ')' to close the group opened at line 1:10");
  EXPECT_EQ(error_of("root = \"a\""), "line 1:6: expected '::=' after rule name 'root'");
  EXPECT_EQ(error_of("root ::= [z-a]"), "line 1:13: character range is out of order (U+007A > U+0061)");
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x \"a\"\nx ::= \"\" | root").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\" root").find("admits no string"), std::string::npos);
  EXPECT_NE(error_of("root ::= [^\\x00-\\U0010FFFF]").find("admits no string"), std::string::npos);
}

TEST(Gbnf, EmptyAndNullable) {
  auto g = compile(R"(root ::= "" | "x" root)");
  EXPECT_TRUE(matches(g, ""));
  EXPECT_TRUE(matches(g, "xxx"));
  // An unproductive alternative is dropped, the rest stays.
  auto h = compile("root ::= \"a\" | dead\ndead ::= \"b\" dead");
  EXPECT_TRUE(matches(h, "a"));
  EXPECT_FALSE(prefix_ok(h, "b"));
}

TEST(Gbnf, SizeLimit) {
  EXPECT_NE(error_of("root ::= [a-z]{0,100001}").find("limit"), std::string::npos);
  std::string big = "root ::= r0\n";
  for (int i = 0; i < 60000; ++i) big += fmt::format("r{} ::= \"abcdefgh\" r{} | \"\"\n", i, i + 1);
  big += "r60000 ::= \"z\"\n";
  EXPECT_NE(error_of(big).find("too large"), std::string::npos);
}

}  // namespace
}  // namespace rocky::grammar
