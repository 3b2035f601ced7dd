// GBNF parser (see gbnf.hpp).
#include "grammar/gbnf.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/error.hpp"

namespace rocky::grammar {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {
    lines_.push_back(0);
    for (size_t k = 0; k < t_.size(); ++k)
      if (t_[k] == '\n') lines_.push_back(k + 1);
  }

  Grammar run(const std::string& root) {
    space(true);
    while (i_ < t_.size()) rule();
    try {
      return b_.finish(root);
    } catch (const Error& e) {
      throw Error(std::string("grammar: ") + e.what());
    }
  }

 private:
  std::string where(size_t at) const {
    const auto it = std::upper_bound(lines_.begin(), lines_.end(), at);
    const size_t line = static_cast<size_t>(it - lines_.begin());
    return fmt::format("line {}:{}", line, at - lines_[line - 1] + 1);
  }
  template <typename... Args>
  [[noreturn]] void err(size_t at, fmt::format_string<Args...> f, Args&&... args) const {
    throw Error(where(at) + ": " + fmt::format(f, std::forward<Args>(args)...));
  }

  bool eof() const { return i_ >= t_.size(); }
  char peek(size_t k = 0) const { return i_ + k < t_.size() ? t_[i_ + k] : '\0'; }

  void space(bool newline_ok) {
    while (!eof()) {
      const char c = peek();
      if (c == ' ' || c == '\t') {
        ++i_;
      } else if (c == '#') {
        while (!eof() && peek() != '\n' && peek() != '\r') ++i_;
      } else if (newline_ok && (c == '\n' || c == '\r')) {
        ++i_;
      } else {
        break;
      }
    }
  }

  static bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  }

  std::string name() {
    const size_t s = i_;
    while (!eof() && word_char(peek())) ++i_;
    return std::string(t_.substr(s, i_ - s));
  }

  uint32_t hex(size_t n) {
    uint32_t v = 0;
    for (size_t k = 0; k < n; ++k) {
      const char c = peek();
      uint32_t d;
      if (c >= '0' && c <= '9')
        d = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        d = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        d = static_cast<uint32_t>(c - 'A' + 10);
      else
        err(i_, "expected {} hex digits", n);
      v = v * 16 + d;
      ++i_;
    }
    return v;
  }

  // One code point of a literal or class, escapes decoded.
  uint32_t codepoint() {
    if (eof()) err(i_, "unexpected end of input");
    const size_t at = i_;
    const auto c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      ++i_;
      const char e = peek();
      ++i_;
      switch (e) {
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': {
          const uint32_t v = hex(8);
          if (v > 0x10FFFF) err(at, "escape \\U{:08X} is past U+10FFFF", v);
          return v;
        }
        case 't': return '\t';
        case 'n': return '\n';
        case 'r': return '\r';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
        case '\'':
        case '.': return static_cast<uint32_t>(e);
        default: err(at, "unknown escape '\\{}'", e == '\0' ? std::string("end of input") : std::string(1, e));
      }
    }
    if (c < 0x80) {
      ++i_;
      return c;
    }
    int n = c >= 0xF0 && c < 0xF8 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (n == 0 || i_ + static_cast<size_t>(n) > t_.size()) err(at, "invalid UTF-8");
    uint32_t v = c & (0x7F >> (n + 1));
    for (int k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(t_[i_ + static_cast<size_t>(k)]);
      if ((cc & 0xC0) != 0x80) err(at, "invalid UTF-8");
      v = (v << 6) | (cc & 0x3F);
    }
    i_ += static_cast<size_t>(n);
    return v;
  }

  static void utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  int integer() {
    const size_t at = i_;
    if (!(peek() >= '0' && peek() <= '9')) err(at, "expected a number");
    long v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > 100000) err(at, "repetition count over the limit of 100000");
      ++i_;
    }
    return static_cast<int>(v);
  }

  void rule() {
    const size_t at = i_;
    const std::string n = name();
    if (n.empty()) err(at, "expected a rule name");
    space(false);
    if (t_.substr(i_, 3) != "::=") err(i_, "expected '::=' after rule name '{}'", n);
    i_ += 3;
    space(true);
    const uint32_t id = b_.named(n, where(at));
    if (b_.defined(id)) err(at, "rule '{}' is defined twice", n);
    std::vector<Alt> alts = alternates(n, false);
    b_.define(id, std::move(alts));
    if (peek() == '\r') ++i_;
    if (peek() == '\n')
      ++i_;
    else if (!eof())
      err(i_, "expected the end of the line after rule '{}', found '{}'", n, peek());
    space(true);
  }

  std::vector<Alt> alternates(const std::string& rule, bool nested) {
    std::vector<Alt> alts;
    alts.push_back(sequence(rule, nested));
    while (peek() == '|') {
      ++i_;
      space(true);
      alts.push_back(sequence(rule, nested));
    }
    return alts;
  }

  Alt sequence(const std::string& rule, bool nested) {
    Alt alt;
    size_t last = SIZE_MAX;  // where the last item's elements start in alt
    while (!eof()) {
      const size_t at = i_;
      const char c = peek();
      if (c == '"') {
        ++i_;
        last = alt.size();
        std::string lit;
        while (peek() != '"') {
          if (eof() || peek() == '\n') err(at, "unterminated string literal");
          utf8(codepoint(), lit);
        }
        ++i_;
        b_.literal(lit, alt);
        if (lit.empty()) last = SIZE_MAX;
      } else if (c == '[') {
        ++i_;
        bool neg = false;
        if (peek() == '^') {
          neg = true;
          ++i_;
        }
        std::vector<CodepointRange> ranges;
        while (peek() != ']') {
          if (eof()) err(at, "unterminated character class");
          const uint32_t lo = codepoint();
          uint32_t hi = lo;
          if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
            ++i_;
            const size_t hat = i_;
            hi = codepoint();
            if (hi < lo) err(hat, "character range is out of order (U+{:04X} > U+{:04X})", lo, hi);
          }
          ranges.push_back({lo, hi});
        }
        ++i_;
        last = alt.size();
        alt.push_back(b_.char_class(std::move(ranges), neg));
      } else if (word_char(c)) {
        const std::string n = name();
        last = alt.size();
        alt.push_back(b_.ref(b_.named(n, where(at))));
      } else if (c == '(') {
        ++i_;
        space(true);
        std::vector<Alt> sub = alternates(rule, true);
        if (peek() != ')') err(i_, "expected ')' to close the group opened at {}", where(at));
        ++i_;
        last = alt.size();
        alt.push_back(b_.ref(b_.anon(rule, std::move(sub))));
      } else if (c == '.') {
        ++i_;
        last = alt.size();
        alt.push_back(b_.char_class({{0, 0x10FFFF}}, false));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last == SIZE_MAX) err(at, "'{}' has nothing before it to repeat", c);
        ++i_;
        int mn = 0, mx = -1;
        if (c == '+') mn = 1;
        if (c == '?') mx = 1;
        if (c == '{') {
          space(nested);
          mn = integer();
          space(nested);
          mx = mn;
          if (peek() == ',') {
            ++i_;
            space(nested);
            mx = (peek() >= '0' && peek() <= '9') ? integer() : -1;
            space(nested);
          }
          if (peek() != '}') err(i_, "expected '}}' to close the repetition");
          ++i_;
          if (mx >= 0 && mx < mn) err(at, "repetition {{{},{}}}: the maximum is below the minimum", mn, mx);
        }
        Element item = alt[last];
        if (alt.size() - last > 1)
          item = b_.ref(b_.anon(rule, {Alt(alt.begin() + static_cast<long>(last), alt.end())}));
        alt.resize(last);
        try {
          alt.push_back(b_.repeat(item, mn, mx, rule));
        } catch (const Error& e) {
          err(at, "{}", e.what());
        }
        last = SIZE_MAX;  // "a**" is an error, as in llama.cpp
      } else {
        break;
      }
      space(nested);
    }
    return alt;
  }

  std::string_view t_;
  std::vector<size_t> lines_;  // offsets where lines start
  size_t i_ = 0;
  GrammarBuilder b_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text, const std::string& root) { return Parser(text).run(root); }

}  // namespace rocky::grammar
