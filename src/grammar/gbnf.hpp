// GBNF, llama.cpp's grammar syntax, as llama-server accepts it (reference: llama.cpp's
// grammars/README.md and src/llama-grammar.cpp; the parser here is rocky's own):
//
//   root  ::= item ("," ws item)*         # a rule; `root` is where matching starts
//   item  ::= [a-z]+ | "\"" [^"\\]* "\"" | num{1,3} | (x | y)? | .
//
// Rules are `name ::= alternatives` (names: letters, digits, '-'); a rule ends at the end of its
// line unless a group or an alternation continues it. Elements: "literals", [character classes]
// with ranges and ^negation, `.` (any character), rule references, (groups), and the postfix
// repetitions ? * + {m} {m,} {m,n}. Escapes in literals and classes: \xHH \uHHHH \UHHHHHHHH \t \n
// \r \\ \" \[ \] \- \^ \/. `#` starts a comment. Characters are Unicode code points (UTF-8).
// Errors (rocky::Error) start with "line L:C:" (1-based; the column counts bytes).
#pragma once

#include <string>
#include <string_view>

#include "grammar/grammar.hpp"

namespace rocky::grammar {

Grammar parse_gbnf(std::string_view text, const std::string& root = "root");

}  // namespace rocky::grammar
