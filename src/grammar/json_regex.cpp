// JSON Schema `pattern` → GBNF (see json_regex.hpp).
#include "grammar/json_regex.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace rocky::grammar {

// A GBNF literal for the bytes of s.
std::string gbnf_literal(std::string_view s) {
  std::string o = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"')
      o += "\\\"";
    else if (c == '\\')
      o += "\\\\";
    else if (u < 0x20 || u == 0x7F)
      o += fmt::format("\\x{:02X}", u);
    else
      o += c;
  }
  return o + "\"";
}

namespace {

std::string lit(std::string_view s) { return gbnf_literal(s); }

// The regex subset of JSON Schema patterns → a GBNF expression for the string's content (JSON
// escaped). Anchors ^ and $ are taken at the ends only; an unanchored side matches any text.
class RegexConv {
 public:
  RegexConv(const std::string& re, const std::string& ptr) : r_(re), ptr_(ptr) {}

  // Lengths (in characters) of the strings the pattern matches when anchored at both ends;
  // max < 0: unbounded. Valid after run().
  int min_len = 0, max_len = -1;
  bool anchored = false;

  std::string run() {
    const bool start = !r_.empty() && r_[0] == '^';
    if (start) ++i_;
    std::string e = alt();
    if (i_ < r_.size()) fail_at("unexpected ')'");
    const bool end = end_anchored_;
    anchored = start && end;
    min_len = len_.back().first;
    max_len = len_.back().second;
    const std::string any = std::string("(") + k_any + ")*";
    return (start ? "" : any + " ") + "(" + e + ")" + (end ? "" : " " + any);
  }

 private:
  static constexpr const char* k_any = R"([^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt]))";

  [[noreturn]] void fail_at(const std::string& what) const {
    throw Error(fmt::format("json schema at {}: pattern '{}': {} at offset {}", ptr_, r_, what, i_));
  }

  // Each alt()/seq()/atom() leaves its [min, max] length on len_ (max -1: unbounded).
  std::string alt() {
    std::string o = seq();
    auto acc = len_.back();
    len_.pop_back();
    while (i_ < r_.size() && r_[i_] == '|') {
      ++i_;
      o += " | " + seq();
      const auto l = len_.back();
      len_.pop_back();
      acc.first = std::min(acc.first, l.first);
      acc.second = (acc.second < 0 || l.second < 0) ? -1 : std::max(acc.second, l.second);
    }
    len_.push_back(acc);
    return o;
  }

  std::string seq() {
    std::vector<std::string> items;
    std::pair<int, int> total{0, 0};
    while (i_ < r_.size() && r_[i_] != '|' && r_[i_] != ')') {
      if (r_[i_] == '$') {
        if (i_ + 1 != r_.size()) fail_at("'$' is supported only at the end");
        end_anchored_ = true;
        ++i_;
        break;
      }
      std::string a = atom();
      auto l = len_.back();
      len_.pop_back();
      if (i_ < r_.size()) {
        const char q = r_[i_];
        if (q == '*' || q == '+' || q == '?') {
          ++i_;
          a = "(" + a + ")" + q;
          if (q == '*') l = {0, -1};
          if (q == '+') l.second = -1;
          if (q == '?') l.first = 0;
        } else if (q == '{') {
          const size_t close = r_.find('}', i_);
          if (close == std::string::npos) fail_at("unterminated {m,n}");
          const std::string body = r_.substr(i_ + 1, close - i_ - 1);
          for (char c : body)
            if (!std::isdigit(static_cast<unsigned char>(c)) && c != ',') fail_at("bad repetition {" + body + "}");
          if (body.empty() || body[0] == ',' || body.size() > 12) fail_at("bad repetition {" + body + "}");
          i_ = close + 1;
          a = "(" + a + "){" + body + "}";
          const size_t comma = body.find(',');
          const long m = std::stol(body.substr(0, comma));
          const long n = comma == std::string::npos ? m
                         : comma + 1 == body.size() ? -1
                                                    : std::stol(body.substr(comma + 1));
          l.first = static_cast<int>(std::min<long>(l.first * m, 1000000));
          l.second = (l.second < 0 || n < 0) ? -1 : static_cast<int>(std::min<long>(l.second * n, 1000000));
        }
        if (i_ < r_.size() && r_[i_] == '?') ++i_;  // lazy: same language
      }
      total.first += l.first;
      total.second = (total.second < 0 || l.second < 0) ? -1 : total.second + l.second;
      items.push_back(a);
    }
    len_.push_back(total);
    if (items.empty()) return "\"\"";
    std::string o;
    for (size_t k = 0; k < items.size(); ++k) o += (k ? " " : "") + items[k];
    return o;
  }

  // A JSON-escaped literal for one character.
  static std::string ch(unsigned char c) {
    if (c == '"') return R"("\\\"")";
    if (c == '\\') return R"("\\\\")";
    if (c < 0x20) return fmt::format("\"\\\\u{:04x}\"", c);
    return lit(std::string(1, static_cast<char>(c)));
  }

  std::string escape_class(char e) {
    switch (e) {
      case 'd': return "0-9";
      case 'w': return "a-zA-Z0-9_";
      case 's': return " ";
      default: break;
    }
    if (std::isalnum(static_cast<unsigned char>(e)) && e != 't' && e != 'n' && e != 'r')
      fail_at(std::string("unsupported escape \\") + e);
    if (e == 't' || e == 'n' || e == 'r') fail_at("control characters in a class are not supported");
    return std::string("\\") + e;
  }

  std::string atom() {
    if (r_[i_] == '(') return group();
    len_.push_back({1, 1});
    return char_atom();
  }

  std::string group() {
    const char c = r_[i_];
    if (c == '(') {
      ++i_;
      if (i_ < r_.size() && r_[i_] == '?') {
        if (i_ + 1 < r_.size() && r_[i_ + 1] == ':')
          i_ += 2;
        else
          fail_at("(?…) groups other than (?:…) are not supported");
      }
      std::string e = alt();  // leaves its length on len_
      if (i_ >= r_.size() || r_[i_] != ')') fail_at("missing ')'");
      ++i_;
      return "(" + e + ")";
    }
    return "";
  }

  std::string char_atom() {
    const char c = r_[i_];
    if (c == '[') {
      ++i_;
      std::string cls = "[";
      bool neg = false;
      if (i_ < r_.size() && r_[i_] == '^') {
        neg = true;
        cls += '^';
        ++i_;
      }
      bool first = true;
      while (i_ < r_.size() && (r_[i_] != ']' || first)) {
        first = false;
        const char x = r_[i_];
        if (x == '\\') {
          if (i_ + 1 >= r_.size()) fail_at("dangling '\\'");
          cls += escape_class(r_[i_ + 1]);
          i_ += 2;
          continue;
        }
        if (x == '"' && !neg) fail_at("'\"' in a character class is not supported");
        if (x == '[')
          cls += "\\[";
        else
          cls += x;
        ++i_;
      }
      if (i_ >= r_.size()) fail_at("unterminated character class");
      ++i_;
      if (neg) cls += R"("\\\x7F\x00-\x1F)";
      return cls + "]";
    }
    if (c == '.') {
      ++i_;
      return std::string("(") + k_any + ")";
    }
    if (c == '\\') {
      if (i_ + 1 >= r_.size()) fail_at("dangling '\\'");
      const char e = r_[i_ + 1];
      i_ += 2;
      switch (e) {
        case 'd': return "[0-9]";
        case 'w': return "[a-zA-Z0-9_]";
        case 's': return "\" \"";
        case 'D': return R"([^0-9"\\\x7F\x00-\x1F])";
        case 'W': return R"([^a-zA-Z0-9_"\\\x7F\x00-\x1F])";
        case 'S': return R"([^ "\\\x7F\x00-\x1F])";
        default: break;
      }
      if (std::isalnum(static_cast<unsigned char>(e))) fail_at(std::string("unsupported escape \\") + e);
      return ch(static_cast<unsigned char>(e));
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') fail_at(std::string("'") + c + "' has nothing to repeat");
    if (c == '^') fail_at("'^' is supported only at the start");
    ++i_;
    return ch(static_cast<unsigned char>(c));
  }

  const std::string& r_;
  std::string ptr_;
  size_t i_ = 0;
  bool end_anchored_ = false;
  std::vector<std::pair<int, int>> len_;
};

}  // namespace

PatternGbnf pattern_to_gbnf(const std::string& re, const std::string& ptr) {
  RegexConv r(re, ptr);
  PatternGbnf g;
  g.expr = r.run();
  g.anchored = r.anchored;
  g.min_len = r.min_len;
  g.max_len = r.max_len;
  return g;
}

}  // namespace rocky::grammar
