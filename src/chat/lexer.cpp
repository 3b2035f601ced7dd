// The chat-template lexer (see lexer.hpp).
#include "chat/lexer.hpp"

#include <cstring>
#include <string_view>

namespace rocky::chat::detail {
namespace {

// Python's str.rstrip() / the lexer's \s* (Unicode whitespace).
size_t rstrip_len(std::string_view s) {
  std::string stripped = py_strip(s, false, true, nullptr);
  return stripped.size();
}
size_t lstrip_skip(std::string_view s) { return s.size() - py_strip(s, true, false, nullptr).size(); }

bool is_space_byte(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class Lexer {
 public:
  Lexer(const std::string& src, const Source& where) : s_(src), where_(where) {}

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    bool strip_next = false;  // the previous tag ended with '-': skip the whitespace that follows
    while (true) {
      const size_t tpos = find_tag(pos);
      std::string text = s_.substr(pos, (tpos == std::string::npos ? s_.size() : tpos) - pos);
      if (tpos == std::string::npos) {
        emit_data(pos, text);
        break;
      }
      const char kind = s_[tpos + 1];  // '{', '%' or '#'
      const char sign = tpos + 2 < s_.size() ? s_[tpos + 2] : '\0';
      if (sign == '-') {
        text.resize(rstrip_len(text));
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: spaces and tabs from the start of the line to a block or comment tag
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if (l_pos > 0 || line_starting) {
          const std::string_view rest = std::string_view(text).substr(l_pos);
          if (!rest.empty() && py_strip(rest, true, true, nullptr).empty()) text.resize(l_pos);
        }
      }
      emit_data(pos, text);
      size_t p = tpos + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        const size_t end = s_.find("#}", p);
        if (end == std::string::npos) syntax(where_.pos(tpos), "missing end of comment tag");
        const char esign = end > p && s_[end - 1] == '-' ? '-' : (end > p && s_[end - 1] == '+' ? '+' : '\0');
        pos = end + 2;
        finish_tag(pos, esign, true, strip_next, line_starting);
        continue;
      }
      const bool var = kind == '{';
      toks_.push_back(Token{var ? TT::VarBegin : TT::BlockBegin, tpos, {}});
      const size_t first = toks_.size();
      char esign = '\0';
      p = lex_tag(p, var, esign, tpos);
      pos = p;
      toks_.push_back(Token{var ? TT::VarEnd : TT::BlockEnd, pos, {}});
      finish_tag(pos, esign, !var, strip_next, line_starting);
      // {% raw %} ... {% endraw %}
      if (!var && toks_.size() == first + 2 && toks_[first].t == TT::Name && toks_[first].s == "raw") {
        toks_.resize(first - 1);
        pos = lex_raw(pos, tpos, strip_next, line_starting);
      }
    }
    toks_.push_back(Token{TT::Eof, s_.size(), {}});
    return std::move(toks_);
  }

 private:
  size_t find_tag(size_t from) const {
    size_t p = from;
    while (true) {
      p = s_.find('{', p);
      if (p == std::string::npos || p + 1 >= s_.size()) return std::string::npos;
      const char c = s_[p + 1];
      if (c == '{' || c == '%' || c == '#') return p;
      ++p;
    }
  }

  void emit_data(size_t off, const std::string& text) {
    if (!text.empty()) toks_.push_back(Token{TT::Data, off, text});
  }

  // After a tag's closing delimiter (pos just past it): '-' strips the following whitespace,
  // trim_blocks removes one newline after a block or comment tag (unless '+').
  void finish_tag(size_t& pos, char esign, bool block, bool& strip_next, bool& line_starting) {
    if (esign == '-') {
      const size_t next = find_tag(pos);
      const size_t n =
          lstrip_skip(std::string_view(s_).substr(pos, (next == std::string::npos ? s_.size() : next) - pos));
      line_starting = n > 0 && s_[pos + n - 1] == '\n';
      pos += n;
      strip_next = false;
      return;
    }
    line_starting = false;
    if (block && esign != '+' && pos < s_.size() && s_[pos] == '\n') {
      ++pos;
      line_starting = true;
    }
  }

  size_t lex_raw(size_t pos, size_t tag_off, bool& strip_next, bool& line_starting) {
    size_t p = pos;
    while (true) {
      const size_t b = s_.find("{%", p);
      if (b == std::string::npos) syntax(where_.pos(tag_off), "missing end of raw directive");
      size_t q = b + 2;
      char sign = '\0';
      if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) sign = s_[q++];
      while (q < s_.size() && is_space_byte(s_[q])) ++q;
      if (s_.compare(q, 6, "endraw") != 0) {
        p = b + 2;
        continue;
      }
      q += 6;
      while (q < s_.size() && is_space_byte(s_[q])) ++q;
      char esign = '\0';
      if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) esign = s_[q++];
      if (s_.compare(q, 2, "%}") != 0) syntax(where_.pos(q), "expected '%}' after 'endraw'");
      std::string text = s_.substr(pos, b - pos);
      if (sign == '-') {
        text.resize(rstrip_len(text));
      } else if (sign != '+') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        const std::string_view rest = std::string_view(text).substr(l_pos);
        if ((l_pos > 0 || line_starting) && !rest.empty() && py_strip(rest, true, true, nullptr).empty())
          text.resize(l_pos);
      }
      emit_data(pos, text);
      size_t end = q + 2;
      finish_tag(end, esign, true, strip_next, line_starting);
      return end;
    }
  }

  // Tokens inside {{ }} or {% %}; returns the offset just past the closing delimiter.
  size_t lex_tag(size_t p, bool var, char& esign, size_t tag_off) {
    std::vector<char> stack;
    while (true) {
      while (p < s_.size() && is_space_byte(s_[p])) ++p;
      if (p >= s_.size())
        syntax(where_.pos(tag_off),
               var ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'");
      if (stack.empty()) {
        const char* close = var ? "}}" : "%}";
        if ((s_[p] == '-' || (!var && s_[p] == '+')) && s_.compare(p + 1, 2, close) == 0) {
          esign = s_[p];
          return p + 3;
        }
        if (s_.compare(p, 2, close) == 0) {
          esign = '\0';
          return p + 2;
        }
      }
      const char c = s_[p];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = p;
        while (e < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[e])) || s_[e] == '_')) ++e;
        toks_.push_back(Token{TT::Name, p, s_.substr(p, e - p)});
        p = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        p = lex_number(p);
      } else if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else {
        static const char* ops2[] = {"//", "**", "==", "!=", ">=", "<="};
        std::string op;
        for (const char* o : ops2) {
          if (s_.compare(p, 2, o) == 0) op = o;
        }
        if (op.empty()) {
          if (std::strchr("+-/*%~<>=.,:|()[]{}", c) == nullptr || c == '\0')
            syntax(where_.pos(p), std::string("unexpected char ") + repr_string(std::string(1, c)));
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") {
          stack.push_back(op[0] == '(' ? ')' : op[0] == '[' ? ']' : '}');
        } else if (op == ")" || op == "]" || op == "}") {
          if (stack.empty()) syntax(where_.pos(p), "unexpected '" + op + "'");
          if (stack.back() != op[0])
            syntax(where_.pos(p), "unexpected '" + op + "', expected '" + std::string(1, stack.back()) + "'");
          stack.pop_back();
        }
        toks_.push_back(Token{TT::Op, p, op});
        p += op.size();
      }
    }
  }

  size_t lex_number(size_t p) {
    const size_t start = p;
    auto digits = [&](size_t q) {
      const size_t b = q;
      while (q < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[q])) || (s_[q] == '_' && q > b))) ++q;
      return q;
    };
    size_t e = digits(p);
    bool is_float = false;
    const bool after_dot = !toks_.empty() && toks_.back().t == TT::Op && toks_.back().s == ".";
    if (!after_dot) {
      if (e + 1 < s_.size() && s_[e] == '.' && std::isdigit(static_cast<unsigned char>(s_[e + 1]))) {
        e = digits(e + 1);
        is_float = true;
      }
      if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
        size_t q = e + 1;
        if (q < s_.size() && (s_[q] == '+' || s_[q] == '-')) ++q;
        if (q < s_.size() && std::isdigit(static_cast<unsigned char>(s_[q]))) {
          e = digits(q);
          is_float = true;
        }
      }
    }
    std::string text = s_.substr(start, e - start);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    Token t{is_float ? TT::Float : TT::Int, start, text};
    if (is_float) {
      t.f = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      char* endp = nullptr;
      const long long v = std::strtoll(text.c_str(), &endp, 10);
      if (errno == ERANGE) syntax(where_.pos(start), "integer literal too large: " + text);
      t.i = v;
    }
    toks_.push_back(std::move(t));
    return e;
  }

  size_t lex_string(size_t p) {
    const char q = s_[p];
    const size_t start = p;
    std::string out;
    ++p;
    auto hex = [&](size_t n) -> char32_t {
      if (p + n > s_.size()) syntax(where_.pos(p), "truncated \\x/\\u escape in string literal");
      char32_t v = 0;
      for (size_t k = 0; k < n; ++k) {
        const char c = s_[p + k];
        if (!std::isxdigit(static_cast<unsigned char>(c)))
          syntax(where_.pos(p), "truncated \\x/\\u escape in string literal");
        v = v * 16 +
            static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (std::tolower(c) - 'a' + 10));
      }
      p += n;
      return v;
    };
    while (true) {
      if (p >= s_.size()) syntax(where_.pos(start), "unterminated string literal");
      const char c = s_[p];
      if (c == q) {
        ++p;
        break;
      }
      if (c != '\\') {
        out.push_back(c);
        ++p;
        continue;
      }
      if (p + 1 >= s_.size()) syntax(where_.pos(start), "unterminated string literal");
      const char e = s_[p + 1];
      p += 2;
      char32_t cp = 0;
      switch (e) {
        case '\n': continue;
        case '\\': out.push_back('\\'); continue;
        case '\'': out.push_back('\''); continue;
        case '"': out.push_back('"'); continue;
        case 'a': out.push_back('\a'); continue;
        case 'b': out.push_back('\b'); continue;
        case 'f': out.push_back('\f'); continue;
        case 'n': out.push_back('\n'); continue;
        case 'r': out.push_back('\r'); continue;
        case 't': out.push_back('\t'); continue;
        case 'v': out.push_back('\v'); continue;
        case 'x': cp = hex(2); break;
        case 'u': cp = hex(4); break;
        case 'U': cp = hex(8); break;
        case 'N': syntax(where_.pos(p - 2), "\\N{...} escapes are not supported");
        default:
          if (e >= '0' && e <= '7') {
            cp = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && p < s_.size() && s_[p] >= '0' && s_[p] <= '7'; ++k)
              cp = cp * 8 + static_cast<char32_t>(s_[p++] - '0');
            break;
          }
          out.push_back('\\');
          out.push_back(e);
          continue;
      }
      if (cp > 0x10FFFF) syntax(where_.pos(p), "illegal Unicode character in string literal");
      out += encode_utf8(std::u32string_view(&cp, 1));
    }
    toks_.push_back(Token{TT::Str, start, std::move(out)});
    return p;
  }

  const std::string& s_;
  const Source& where_;
  std::vector<Token> toks_;
};

}  // namespace

std::vector<Token> lex(const std::string& src, const Source& where) { return Lexer(src, where).run(); }

}  // namespace rocky::chat::detail
