// JSON Schema `pattern` → GBNF: the regex subset llama.cpp's converter takes (literals, `.`, classes,
// groups, `|`, `? * + {m,n}`, `\\d \\w \\s`), for the string's JSON-escaped content.
#pragma once

#include <string>
#include <string_view>

namespace rocky::grammar {

// A GBNF literal for the bytes of s.
std::string gbnf_literal(std::string_view s);

struct PatternGbnf {
  std::string expr;       // a GBNF expression for the string's content
  bool anchored = false;  // ^ … $ at both ends
  int min_len = 0;        // lengths (characters) of the strings it matches when anchored
  int max_len = -1;       // < 0: unbounded
};

// rocky::Error naming the JSON pointer `ptr`, the pattern and the offset where it cannot be read.
PatternGbnf pattern_to_gbnf(const std::string& re, const std::string& ptr);

}  // namespace rocky::grammar
