// A context-free grammar over bytes: the form every constraint (GBNF text, JSON Schema) is lowered
// to before it meets a vocabulary.
//
// Rules are lists of alternatives; an alternative is a sequence of elements, each either a byte set
// (one byte out of 256) or a reference to a rule. All alternatives live in one flat element array,
// each one closed by an End element, so a parse position is one index ("about to match elems[pos]").
// Unicode character classes become small rules of UTF-8 byte sequences (valid UTF-8 only: no
// surrogates, no overlong forms), so tokens that end in the middle of a code point are matched as
// far as their bytes go. Repetitions become right-recursive helper rules, as in llama.cpp.
//
// A finished Grammar (GrammarBuilder::finish) satisfies, checked at build time with clear errors:
//   - every referenced rule is defined and the root rule exists;
//   - no rule is left-recursive (through nullable prefixes too), so expanding a position terminates;
//   - every alternative can derive a finite string (unproductive ones are removed; a root that then
//     admits nothing is an error), so every live parse stack can still be completed;
//   - the size budget: ≤ k_max_elements elements and ≤ k_max_rules rules.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace rocky::grammar {

inline constexpr size_t k_max_elements = 400000;
inline constexpr size_t k_max_rules = 50000;

struct ByteSet {
  std::array<uint64_t, 4> w{};
  bool has(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { w[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  bool empty() const { return (w[0] | w[1] | w[2] | w[3]) == 0; }
  int count() const;
  bool operator==(const ByteSet&) const = default;
};

struct Element {
  enum Kind : uint8_t { Bytes, Ref, End };
  Kind kind = End;
  uint32_t value = 0;  // Bytes: index into Grammar::sets; Ref: rule id
  bool operator==(const Element&) const = default;
};

using Alt = std::vector<Element>;

struct Grammar {
  std::vector<Element> elems;               // every alternative, each closed by End
  std::vector<std::vector<uint32_t>> alts;  // per rule: start positions of its alternatives
  std::vector<ByteSet> sets;                // byte sets the Bytes elements point at
  std::vector<std::string> rule_names;      // per rule (generated helpers: "name_3")
  std::vector<uint8_t> nullable_rest;       // per position: elems[pos..End) can match ""
  // Repetitions e{m,n} of a rule e (n may be unbounded), lowered as m copies of e and then the
  // optional ones (opt_k ::= e opt_{k-1} | "" or star ::= e star | ""). For the position right
  // after a copy of e: counted_star[pos] is the position after e in `star ::= e star` (0: not such
  // a position), counted_need[pos] the copies that must still follow, counted_left[pos] the most
  // that may (k_unbounded: any number). The matcher derives every level's token set from the
  // star's one (matcher.hpp).
  static constexpr uint32_t k_unbounded = 1u << 30;
  std::vector<uint32_t> counted_star, counted_need, counted_left;
  uint32_t root = 0;

  size_t n_rules() const { return alts.size(); }
  // The rule set as GBNF-like text (byte sets as [\xNN-\xNN]), for debugging and tests.
  std::string dump() const;
};

struct CodepointRange {
  uint32_t lo, hi;
};

// Builds a Grammar. Named rules may be referenced before they are defined; generated rules
// (groups, repetitions, character classes) are shared when their content is equal.
class GrammarBuilder {
 public:
  // The id of the named rule, creating an undefined one on first use. `where` ("line 3:7") is what
  // an "undefined rule" error names for a rule that is never defined.
  uint32_t named(const std::string& name, const std::string& where = {});
  bool defined(uint32_t rule) const { return defined_[rule]; }
  void define(uint32_t rule, std::vector<Alt> alts);
  // A generated rule with these alternatives (an existing equal one is reused).
  uint32_t anon(const std::string& base, std::vector<Alt> alts);

  Element bytes(const ByteSet& s);
  Element ref(uint32_t rule) { return {Element::Ref, rule}; }
  // One code point out of `ranges` (or out of their complement when `negated`), in UTF-8.
  Element char_class(std::vector<CodepointRange> ranges, bool negated);
  // The UTF-8 bytes of `s` appended to `alt`.
  void literal(const std::string& s, Alt& alt);
  // `e` repeated min..max times (max < 0: unbounded), as one element.
  Element repeat(const Element& e, int min, int max, const std::string& base);

  // Validates and flattens (see the file comment). Throws rocky::Error.
  Grammar finish(const std::string& root_name = "root");

  size_t n_rules() const { return rules_.size(); }

 private:
  void check_budget() const;
  std::vector<std::vector<Alt>> rules_;
  std::vector<std::string> names_;
  std::vector<std::string> first_use_;
  std::vector<bool> defined_;
  std::unordered_map<std::string, uint32_t> by_name_;
  std::unordered_map<std::string, uint32_t> anon_by_content_;
  std::unordered_map<uint64_t, uint32_t> star_of_;
  uint32_t star_rule(const Element& e, const std::string& base);
  struct Counted {
    uint32_t rule, index, need, left, star;  // rules_[rule][0][index] follows a copy of e
  };
  std::vector<Counted> counted_;
  std::vector<ByteSet> sets_;
  std::unordered_map<std::string, uint32_t> set_index_;
  size_t n_elements_ = 0;
};

}  // namespace rocky::grammar
