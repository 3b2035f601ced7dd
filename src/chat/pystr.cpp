// Python's str semantics over UTF-8 for the chat-template language: case mapping, escaping,
// split/splitlines/replace, capitalize/title (shared by the str methods and the filters).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <optional>

#include "chat/builtins.hpp"
#include "chat/interp.hpp"

namespace rocky::chat::detail {

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

void check_size(size_t n) {
  if (n > k_max_string) throw_py("MemoryError", "string over 64 MiB");
  charge_bytes(n / 16);
}

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&#34;"; break;
      case '\'': o += "&#39;"; break;
      default: o.push_back(c);
    }
  }
  return o;
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

std::vector<std::string> splitlines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  const std::u32string u = decode_utf8(s);
  size_t b = 0, i = 0;
  while (i < u.size()) {
    if (is_line_break(u[i])) {
      size_t e = i + 1;
      if (u[i] == '\r' && e < u.size() && u[e] == '\n') ++e;
      out.push_back(encode_utf8(std::u32string_view(u).substr(b, (keepends ? e : i) - b)));
      b = i = e;
    } else {
      ++i;
    }
  }
  if (b < u.size()) out.push_back(encode_utf8(std::u32string_view(u).substr(b)));
  return out;
}

Value str_list(const std::vector<std::string>& parts) {
  List l;
  for (const auto& p : parts) l.push_back(Value::str(p));
  return Value::make_list(std::move(l));
}

std::vector<std::string> split(const std::string& s, const Value* sepv, int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (!sepv || sepv->is_none()) {
    const std::u32string u = decode_utf8(s);
    if (!from_right) {
      size_t i = 0;
      while (true) {
        while (i < u.size() && py_isspace(u[i])) ++i;
        if (i >= u.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
          out.push_back(encode_utf8(std::u32string_view(u).substr(i)));
          break;
        }
        size_t e = i;
        while (e < u.size() && !py_isspace(u[e])) ++e;
        out.push_back(encode_utf8(std::u32string_view(u).substr(i, e - i)));
        i = e;
      }
    } else {
      size_t i = u.size();
      while (true) {
        while (i > 0 && py_isspace(u[i - 1])) --i;
        if (i == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
          out.push_back(encode_utf8(std::u32string_view(u).substr(0, i)));
          break;
        }
        size_t b = i;
        while (b > 0 && !py_isspace(u[b - 1])) --b;
        out.push_back(encode_utf8(std::u32string_view(u).substr(b, i - b)));
        i = b;
      }
      std::reverse(out.begin(), out.end());
    }
    return out;
  }
  const std::string& sep = need_str(*sepv, "separator");
  if (sep.empty()) throw_py("ValueError", "empty separator");
  if (!from_right) {
    size_t b = 0;
    while (true) {
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) break;
      const size_t p = s.find(sep, b);
      if (p == std::string::npos) break;
      out.push_back(s.substr(b, p - b));
      b = p + sep.size();
    }
    out.push_back(s.substr(b));
  } else {
    size_t e = s.size();
    while (true) {
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) break;
      if (e < sep.size()) break;
      const size_t p = s.rfind(sep, e - sep.size());
      if (p == std::string::npos) break;
      out.push_back(s.substr(p + sep.size(), e - p - sep.size()));
      e = p;
    }
    out.push_back(s.substr(0, e));
    std::reverse(out.begin(), out.end());
  }
  return out;
}

std::string replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    const std::u32string u = decode_utf8(s);
    int64_t n = 0;
    for (size_t k = 0; k <= u.size(); ++k) {
      if (count < 0 || n < count) {
        out += repl;
        ++n;
      }
      if (k < u.size()) out += encode_utf8(std::u32string_view(u).substr(k, 1));
      check_size(out.size());
    }
    return out;
  }
  size_t b = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t p = s.find(old, b);
    if (p == std::string::npos) break;
    out.append(s, b, p - b);
    out += repl;
    check_size(out.size());
    b = p + old.size();
    ++n;
  }
  out.append(s, b, std::string::npos);
  return out;
}

int64_t cp_index(const std::string& s, size_t byte_pos) {
  if (is_ascii(std::string_view(s).substr(0, byte_pos))) return static_cast<int64_t>(byte_pos);
  return static_cast<int64_t>(decode_utf8(std::string_view(s).substr(0, byte_pos)).size());
}

std::string capitalize(const std::string& s) {
  std::string o = ascii_lower(s);
  if (!o.empty()) o[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(o[0])));
  return o;
}

// Python str.title(): a cased character after an uncased one starts a word.
std::string py_title(const std::string& s) {
  std::string o = s;
  bool prev_cased = false;
  for (char& c : o) {
    const auto u = static_cast<unsigned char>(c);
    const bool cased = std::isalpha(u) != 0;
    if (cased) c = static_cast<char>(prev_cased ? std::tolower(u) : std::toupper(u));
    prev_cased = cased || u >= 0x80;
  }
  return o;
}
}  // namespace rocky::chat::detail
