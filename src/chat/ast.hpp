// The parsed form of a chat template (internal to src/chat): expression and statement trees with
// their source positions, and the parser's entry point.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/value.hpp"

namespace rocky::chat::detail {

struct Pos {
  int line = 0, col = 0;  // 1-based
};

enum class EK : uint8_t {
  Literal,  // lit
  Name,     // name
  ListLit,  // a = items
  TupleLit,
  DictLit,  // a = k0, v0, k1, v1, ...
  Attr,     // a[0].name
  Item,     // a[0][a[1]]
  Slice,    // a[0][a[1]:a[2]:a[3]] (null = omitted)
  Call,     // a[0](a[1..]); the last kw.size() arguments are keyword arguments named kw
  Filter,   // a[0] | name(a[1..]) (a[0] null inside a filter block)
  Test,     // a[0] is [not] name(a[1..])
  Neg,
  Pos,
  Not,
  Binary,   // a[0] op a[1]; op in name: + - * / // % **
  Compare,  // a[0] ops[0] a[1] ops[1] a[2] ...
  And,
  Or,
  Cond,    // a[0] if a[1] else a[2] (a[2] null: no else)
  Concat,  // a[0] ~ a[1] ~ ...
};

struct Expr {
  EK k;
  Pos pos;
  Value lit;
  std::string name;
  std::vector<std::unique_ptr<Expr>> a;
  std::vector<std::string> kw;
  std::vector<std::string> ops;
  bool negated = false;
  size_t npos() const { return a.size() - 1 - kw.size(); }  // positional arguments of Call/Filter/Test
};
using ExprP = std::unique_ptr<Expr>;

enum class SK : uint8_t { Text, Print, If, For, Set, SetBlock, Macro, Break, Continue, FilterBlock, Scope, With };

struct Stmt;
using StmtP = std::unique_ptr<Stmt>;
using Body = std::vector<StmtP>;

struct Stmt {
  SK k;
  Pos pos;
  std::string text;                              // Text; Macro: name
  ExprP expr;                                    // Print, Set value, For iterable, FilterBlock filter (Filter chain)
  ExprP cond;                                    // For: `if` filter
  std::vector<std::string> targets;              // For/Set: names (more than one: unpack); SetBlock: one
  bool ns_target = false;                        // Set: targets = {namespace name, attribute}
  std::vector<std::pair<ExprP, Body>> branches;  // If: (cond, body) for if and each elif
  Body body, else_body;
  std::vector<std::string> params;  // Macro
  std::vector<ExprP> defaults;      // Macro: one per param (null = none); With: values for params
};

struct Program {
  std::string source;  // as given
  Body body;
};

// Parses `source` (Jinja2 syntax, transformers' environment). Throws TemplateError (syntax).
std::shared_ptr<Program> parse_program(std::string source);

// Whether the renderer implements a filter / test: 1 yes, 2 a jinja2 builtin this subset does not
// implement, 0 no such name. The parser rejects 0 and 2 at the filter's position.
int filter_support(const std::string& name);
int test_support(const std::string& name);

}  // namespace rocky::chat::detail
