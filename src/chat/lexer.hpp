// The chat-template lexer: jinja2's lexer rules (trim_blocks, lstrip_blocks, - and + whitespace
// control, raw blocks) over a normalised source, giving the parser's tokens (internal to src/chat).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "chat/ast.hpp"
#include "chat/template.hpp"

namespace rocky::chat::detail {

enum class TT : uint8_t { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, Str, Int, Float, Op, Eof };

struct Token {
  TT t;
  size_t off;     // byte offset in the normalised source
  std::string s;  // Data text, Name, Str value, Op
  int64_t i = 0;  // Int
  double f = 0;   // Float
};

class Source {
 public:
  explicit Source(const std::string& text) {
    line_starts_.push_back(0);
    for (size_t k = 0; k < text.size(); ++k) {
      if (text[k] == '\n') line_starts_.push_back(k + 1);
    }
  }
  Pos pos(size_t off) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), off);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    return Pos{static_cast<int>(line), static_cast<int>(off - line_starts_[line - 1] + 1)};
  }

 private:
  std::vector<size_t> line_starts_;
};

[[noreturn]] inline void syntax(const Pos& p, const std::string& msg) {
  throw TemplateError(TemplateError::Kind::syntax, "TemplateSyntaxError", msg, p.line, p.col);
}

// The tokens of `src` (normalised: \n line ends, the final newline dropped), ending with Eof;
// a malformed tag throws TemplateError (syntax) at its position in `where`.
std::vector<Token> lex(const std::string& src, const Source& where);

}  // namespace rocky::chat::detail
