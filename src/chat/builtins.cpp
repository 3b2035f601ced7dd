// Builtins of the chat-template language: jinja2's filters and tests, Python's str/dict/list
// methods, the globals transformers adds (raise_exception, strftime_now) and jinja2's (range,
// namespace, dict), and Python's arithmetic operators and slicing.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <optional>

#include "chat/interp.hpp"

namespace rocky::chat::detail {

// ---------------- argument helpers ----------------

const Value* arg(const Args& a, size_t i, const char* name) {
  if (i < a.pos.size()) return &a.pos[i];
  for (const auto& [k, v] : a.kw) {
    if (k == name) return &v;
  }
  return nullptr;
}

void check_args(const Args& a, const char* fn, size_t max_pos, std::initializer_list<const char*> names) {
  if (a.pos.size() > max_pos)
    throw_py("TypeError", std::string(fn) + "() takes at most " + std::to_string(max_pos) +
                              " positional argument(s) (" + std::to_string(a.pos.size()) + " given)");
  size_t k = 0;
  for (const auto& [kname, v] : a.kw) {
    (void)v;
    bool ok = false;
    size_t idx = 0;
    for (const char* n : names) {
      if (kname == n) {
        ok = idx >= a.pos.size();
        if (!ok) throw_py("TypeError", std::string(fn) + "() got multiple values for argument '" + kname + "'");
      }
      ++idx;
    }
    if (!ok) throw_py("TypeError", std::string(fn) + "() got an unexpected keyword argument '" + kname + "'");
    ++k;
  }
}

namespace {

const Value& need(const Args& a, size_t i, const char* name, const char* fn) {
  const Value* v = arg(a, i, name);
  if (!v) throw_py("TypeError", std::string(fn) + "() missing required argument '" + name + "'");
  return *v;
}

const std::string& need_str(const Value& v, const char* what) {
  if (!v.is_str()) throw_py("TypeError", std::string(what) + " must be str, not " + type_name(v));
  return v.s;
}

int64_t need_int(const Value& v, const char* what) {
  if (!v.is_integral())
    throw_py("TypeError",
             std::string("'") + type_name(v) + "' object cannot be interpreted as an integer (" + what + ")");
  return v.as_int();
}

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

Value bound(const std::string& name, std::function<Value(Args&)> f) { return Value::func(name, std::move(f)); }

[[noreturn]] void unsupported_method(const Value& obj, const std::string& name) {
  throw_py("NotImplementedError", type_name(obj) + "." + name + "() is not supported in chat templates");
}

[[noreturn]] void unsafe(const Value& obj, const std::string& name) {
  throw_py("SecurityError", "access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.");
}

bool starts_or_ends(const std::string& s, const Value& what, bool start, const char* fn) {
  auto one = [&](const std::string& p) {
    if (p.size() > s.size()) return false;
    return start ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (what.is_str()) return one(what.s);
  if (what.is_list() && what.tuple) {
    for (const auto& x : *what.list) {
      if (!x.is_str())
        throw_py("TypeError", std::string("tuple for ") + fn + " must only contain str, not " + type_name(x));
      if (one(x.s)) return true;
    }
    return false;
  }
  throw_py("TypeError", std::string(fn) + " first arg must be str or a tuple of str, not " + type_name(what));
}

Value str_method(const Value& obj, const std::string& name) {
  const std::string& s = obj.s;
  if (name == "startswith" || name == "endswith") {
    const bool st = name == "startswith";
    return bound(name, [s, st, name](Args& a) {
      check_args(a, name.c_str(), 1, {});
      return Value::boolean(starts_or_ends(s, need(a, 0, "prefix", name.c_str()), st, name.c_str()));
    });
  }
  if (name == "split" || name == "rsplit") {
    const bool right = name == "rsplit";
    return bound(name, [s, right, name](Args& a) {
      check_args(a, name.c_str(), 2, {"sep", "maxsplit"});
      const Value* sep = arg(a, 0, "sep");
      const Value* ms = arg(a, 1, "maxsplit");
      return str_list(split(s, sep, ms ? need_int(*ms, "maxsplit") : -1, right));
    });
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip", r = name != "lstrip";
    return bound(name, [s, l, r, name](Args& a) {
      check_args(a, name.c_str(), 1, {});
      const Value* c = arg(a, 0, "chars");
      if (c && !c->is_none()) return Value::str(py_strip(s, l, r, &need_str(*c, "chars")));
      return Value::str(py_strip(s, l, r, nullptr));
    });
  }
  if (name == "replace") {
    return bound(name, [s](Args& a) {
      check_args(a, "replace", 3, {"count"});
      const Value* c = arg(a, 2, "count");
      return Value::str(replace(s, need_str(need(a, 0, "old", "replace"), "replace() argument 1"),
                                need_str(need(a, 1, "new", "replace"), "replace() argument 2"),
                                c ? need_int(*c, "count") : -1));
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "swapcase" ||
      name == "casefold") {
    return bound(name, [s, name](Args& a) {
      check_args(a, name.c_str(), 0, {});
      if (name == "upper") return Value::str(ascii_upper(s));
      if (name == "lower" || name == "casefold") return Value::str(ascii_lower(s));
      if (name == "title") return Value::str(py_title(s));
      if (name == "capitalize") return Value::str(capitalize(s));
      std::string o = s;
      for (char& c : o) {
        const auto u = static_cast<unsigned char>(c);
        c = static_cast<char>(std::islower(u) ? std::toupper(u) : std::tolower(u));
      }
      return Value::str(o);
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return bound(name, [s, name](Args& a) {
      check_args(a, name.c_str(), 1, {});
      const std::string& sub = need_str(need(a, 0, "sub", name.c_str()), "must be str");
      if (name == "count") {
        if (sub.empty()) return Value::integer(py_len(Value::str(s)) + 1);
        int64_t n = 0;
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
        return Value::integer(n);
      }
      const size_t p = (name[0] == 'r') ? s.rfind(sub) : s.find(sub);
      if (p == std::string::npos) {
        if (name == "index" || name == "rindex") throw_py("ValueError", "substring not found");
        return Value::integer(-1);
      }
      return Value::integer(cp_index(s, p));
    });
  }
  if (name == "join") {
    return bound(name, [s](Args& a) {
      check_args(a, "join", 1, {});
      List items = py_iter(need(a, 0, "iterable", "join"));
      std::string o;
      for (size_t k = 0; k < items.size(); ++k) {
        if (!items[k].is_str())
          throw_py("TypeError",
                   "sequence item " + std::to_string(k) + ": expected str instance, " + type_name(items[k]) + " found");
        if (k) o += s;
        o += items[k].s;
        check_size(o.size());
      }
      return Value::str(o);
    });
  }
  if (name == "splitlines") {
    return bound(name, [s](Args& a) {
      check_args(a, "splitlines", 1, {"keepends"});
      const Value* k = arg(a, 0, "keepends");
      return str_list(splitlines(s, k && truthy(*k)));
    });
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const bool pre = name == "removeprefix";
    return bound(name, [s, pre, name](Args& a) {
      check_args(a, name.c_str(), 1, {});
      const std::string& p = need_str(need(a, 0, "prefix", name.c_str()), name.c_str());
      if (pre && s.compare(0, p.size(), p) == 0) return Value::str(s.substr(p.size()));
      if (!pre && p.size() <= s.size() && s.compare(s.size() - p.size(), p.size(), p) == 0)
        return Value::str(s.substr(0, s.size() - p.size()));
      return Value::str(s);
    });
  }
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric" || name == "isalpha" || name == "isalnum" ||
      name == "isspace" || name == "islower" || name == "isupper" || name == "isascii") {
    return bound(name, [s, name](Args& a) {
      check_args(a, name.c_str(), 0, {});
      if (name == "isascii") return Value::boolean(is_ascii(s));
      const std::u32string u = decode_utf8(s);
      if (name == "islower" || name == "isupper") {
        bool cased = false;
        for (char32_t c : u) {
          if (c < 0x80 && std::isalpha(static_cast<int>(c))) {
            cased = true;
            if ((name == "islower") != (std::islower(static_cast<int>(c)) != 0)) return Value::boolean(false);
          }
        }
        return Value::boolean(cased);
      }
      if (u.empty()) return Value::boolean(false);
      for (char32_t c : u) {
        bool ok;
        if (name == "isspace")
          ok = py_isspace(c);
        else if (name == "isalpha")
          ok = c >= 0x80 ? !py_isspace(c) : std::isalpha(static_cast<int>(c)) != 0;
        else if (name == "isalnum")
          ok = c >= 0x80 ? !py_isspace(c) : std::isalnum(static_cast<int>(c)) != 0;
        else
          ok = c < 0x80 && std::isdigit(static_cast<int>(c));
        if (!ok) return Value::boolean(false);
      }
      return Value::boolean(true);
    });
  }
  static const char* other[] = {"center",       "encode",      "expandtabs", "format",    "format_map",
                                "isidentifier", "isprintable", "istitle",    "ljust",     "maketrans",
                                "partition",    "rjust",       "rpartition", "translate", "zfill"};
  for (const char* o : other) {
    if (name == o) unsupported_method(obj, name);
  }
  return Value::undefined("");
}

Value dict_items(const Value& d) {
  List l;
  for (const auto& [k, v] : d.dict->items) l.push_back(Value::make_list({k, v}, true));
  return Value::make_list(std::move(l));
}

}  // namespace

Value builtin_method(Interp& in, const Value& obj, const std::string& name) {
  (void)in;
  switch (obj.kind) {
    case Kind::Str: return str_method(obj, name);
    case Kind::Dict: {
      const Value d = obj;
      if (name == "items")
        return bound(name, [d](Args& a) {
          check_args(a, "items", 0, {});
          return dict_items(d);
        });
      if (name == "keys" || name == "values") {
        const bool keys = name == "keys";
        return bound(name, [d, keys, name](Args& a) {
          check_args(a, name.c_str(), 0, {});
          List l;
          for (const auto& [k, v] : d.dict->items) l.push_back(keys ? k : v);
          return Value::make_list(std::move(l));
        });
      }
      if (name == "get")
        return bound(name, [d](Args& a) {
          check_args(a, "get", 2, {});
          const Value* v = d.dict->find(need(a, 0, "key", "get"));
          if (v) return *v;
          return a.pos.size() > 1 ? a.pos[1] : Value::none();
        });
      if (name == "copy") return bound(name, [d](Args&) { return Value::make_dict(*d.dict); });
      if (name == "fromkeys") unsupported_method(obj, name);
      if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" || name == "clear")
        unsafe(obj, name);
      return Value::undefined("");
    }
    case Kind::List: {
      const Value l = obj;
      if (name == "index" || name == "count") {
        const bool idx = name == "index";
        return bound(name, [l, idx, name](Args& a) {
          check_args(a, name.c_str(), 1, {});
          const Value& x = need(a, 0, "value", name.c_str());
          int64_t n = 0;
          for (size_t k = 0; k < l.list->size(); ++k) {
            if (py_eq((*l.list)[k], x)) {
              if (idx) return Value::integer(static_cast<int64_t>(k));
              ++n;
            }
          }
          if (idx) throw_py("ValueError", py_repr(x) + " is not in list");
          return Value::integer(n);
        });
      }
      if (name == "copy" && !l.tuple) return bound(name, [l](Args&) { return Value::make_list(*l.list); });
      if (!l.tuple && (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
                       name == "reverse" || name == "sort" || name == "clear"))
        unsafe(obj, name);
      return Value::undefined("");
    }
    default: return Value::undefined("");
  }
}

// ---------------- operators ----------------

namespace {

[[noreturn]] void unsupported_operands(const std::string& op, const Value& a, const Value& b) {
  throw_py("TypeError",
           "unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

[[noreturn]] void overflow() { throw_py("OverflowError", "integer overflow (chat templates use 64-bit integers)"); }

Value repeat(const Value& seq, int64_t n) {
  if (n <= 0) return seq.is_str() ? Value::str("") : Value::make_list({}, seq.tuple);
  if (seq.is_str()) {
    if (!seq.s.empty() && static_cast<uint64_t>(n) > k_max_string / seq.s.size())
      throw_py("MemoryError", "string over 64 MiB");
    std::string o;
    charge_bytes(seq.s.size() * static_cast<size_t>(n));
    o.reserve(seq.s.size() * static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) o += seq.s;
    return Value::str(std::move(o));
  }
  if (!seq.list->empty() && static_cast<uint64_t>(n) > (size_t{1} << 20) / seq.list->size())
    throw_py("MemoryError", "list too long");
  List o;
  charge_bytes(seq.list->size() * static_cast<size_t>(n) * sizeof(Value));
  for (int64_t k = 0; k < n; ++k) o.insert(o.end(), seq.list->begin(), seq.list->end());
  return Value::make_list(std::move(o), seq.tuple);
}

int64_t floordiv(int64_t a, int64_t b) {
  if (a == INT64_MIN && b == -1) overflow();
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = a.is_integral() && b.is_integral();
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) overflow();
      return Value::integer(r);
    }
    if (nums) return Value::real(a.as_float() + b.as_float());
    if (a.is_str() && b.is_str()) {
      check_size(a.s.size() + b.s.size());
      charge_bytes(a.s.size() + b.s.size());
      return Value::str(a.s + b.s);
    }
    if (a.is_list() && b.is_list() && a.tuple == b.tuple) {
      charge_bytes((a.list->size() + b.list->size()) * sizeof(Value));
      List l = *a.list;
      l.insert(l.end(), b.list->begin(), b.list->end());
      return Value::make_list(std::move(l), a.tuple);
    }
    if (a.is_str() || a.is_list())
      throw_py("TypeError",
               "can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " + type_name(a));
    unsupported_operands(op, a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) overflow();
      return Value::integer(r);
    }
    if (nums) return Value::real(a.as_float() - b.as_float());
    unsupported_operands(op, a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) overflow();
      return Value::integer(r);
    }
    if (nums) return Value::real(a.as_float() * b.as_float());
    if ((a.is_str() || a.is_list()) && b.is_integral()) return repeat(a, b.as_int());
    if ((b.is_str() || b.is_list()) && a.is_integral()) return repeat(b, a.as_int());
    if (a.is_str() || a.is_list() || b.is_str() || b.is_list())
      throw_py("TypeError",
               "can't multiply sequence by non-int of type '" + type_name(a.is_str() || a.is_list() ? b : a) + "'");
    unsupported_operands(op, a, b);
  }
  if (op == "/") {
    if (!nums) unsupported_operands(op, a, b);
    if (b.as_float() == 0) throw_py("ZeroDivisionError", "division by zero");
    return Value::real(a.as_float() / b.as_float());
  }
  if (op == "//") {
    if (!nums) unsupported_operands(op, a, b);
    if (ints) {
      if (b.as_int() == 0) throw_py("ZeroDivisionError", "integer division or modulo by zero");
      return Value::integer(floordiv(a.as_int(), b.as_int()));
    }
    if (b.as_float() == 0) throw_py("ZeroDivisionError", "float floor division by zero");
    return Value::real(std::floor(a.as_float() / b.as_float()));
  }
  if (op == "%") {
    if (a.is_str()) throw_py("NotImplementedError", "str % formatting is not supported in chat templates");
    if (!nums) unsupported_operands(op, a, b);
    if (ints) {
      if (b.as_int() == 0) throw_py("ZeroDivisionError", "integer division or modulo by zero");
      if (b.as_int() == -1) return Value::integer(0);
      int64_t r = a.as_int() % b.as_int();
      if (r != 0 && ((r < 0) != (b.as_int() < 0))) r += b.as_int();
      return Value::integer(r);
    }
    if (b.as_float() == 0) throw_py("ZeroDivisionError", "float modulo");
    double r = std::fmod(a.as_float(), b.as_float());
    if (r != 0 && ((r < 0) != (b.as_float() < 0))) r += b.as_float();
    return Value::real(r);
  }
  if (op == "**") {
    if (!nums) unsupported_operands("** or pow()", a, b);
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), r = 1;
      while (e > 0) {
        if (e & 1) {
          if (__builtin_mul_overflow(r, base, &r)) overflow();
        }
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
      }
      return Value::integer(r);
    }
    if (a.as_float() == 0 && b.as_float() < 0)
      throw_py("ZeroDivisionError", "0.0 cannot be raised to a negative power");
    return Value::real(std::pow(a.as_float(), b.as_float()));
  }
  throw_py("TypeError", "unknown operator " + op);
}

Value py_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  auto idx = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    if (!v.is_integral()) throw_py("TypeError", "slice indices must be integers or None or have an __index__ method");
    return v.as_int();
  };
  const auto a = idx(start), b = idx(stop), c = idx(step);
  const int64_t st = c.value_or(1);
  if (st == 0) throw_py("ValueError", "slice step cannot be zero");
  std::u32string u;
  const bool ascii = obj.is_str() && is_ascii(obj.s);
  if (obj.is_str() && !ascii) u = decode_utf8(obj.s);
  const int64_t n = obj.is_list() ? static_cast<int64_t>(obj.list->size())
                                  : (ascii ? static_cast<int64_t>(obj.s.size()) : static_cast<int64_t>(u.size()));
  int64_t lo, hi;
  auto clamp = [&](std::optional<int64_t> v, int64_t def, int64_t min, int64_t max) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) x += n;
    return std::clamp(x, min, max);
  };
  if (st > 0) {
    lo = clamp(a, 0, 0, n);
    hi = clamp(b, n, 0, n);
  } else {
    lo = clamp(a, n - 1, -1, n - 1);
    hi = clamp(b, -1, -1, n - 1);
  }
  std::vector<int64_t> picks;
  charge_bytes(static_cast<size_t>(n));
  if (st > 0) {
    for (int64_t k = lo; k < hi; k += st) picks.push_back(k);
  } else {
    for (int64_t k = lo; k > hi; k += st) picks.push_back(k);
  }
  if (obj.is_list()) {
    List l;
    for (int64_t k : picks) l.push_back((*obj.list)[static_cast<size_t>(k)]);
    return Value::make_list(std::move(l), obj.tuple);
  }
  if (ascii) {
    std::string o;
    for (int64_t k : picks) o.push_back(obj.s[static_cast<size_t>(k)]);
    return Value::str(o);
  }
  std::u32string o;
  for (int64_t k : picks) o.push_back(u[static_cast<size_t>(k)]);
  return Value::str(encode_utf8(o));
}

// ---------------- filters ----------------

namespace {

// jinja2's make_attrgetter: "a.b.0" through getitem, each part.
Value attr_path(Interp& in, const Value& item, const Value& attribute) {
  if (!attribute.is_str()) return in.getitem(item, attribute);
  Value v = item;
  size_t b = 0;
  const std::string& p = attribute.s;
  while (true) {
    const size_t e = p.find('.', b);
    const std::string part = p.substr(b, e == std::string::npos ? std::string::npos : e - b);
    Value key = Value::str(part);
    if (!part.empty() &&
        std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
        part.size() < 18)
      key = Value::integer(std::stoll(part));
    v = in.getitem(v, key);
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return v;
}

Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_str()) return Value::str(ascii_lower(v.s));
  return v;
}

List iter_or_fail(const Value& v) {
  if (!(v.is_undefined() || v.is_str() || v.is_list() || v.is_dict()))
    throw_py("TypeError", "'" + type_name(v) + "' object is not iterable");
  return py_iter(v);
}

Value do_select(Interp& in, const Value& x, Args& args, bool attr, bool keep) {
  List items = iter_or_fail(x);
  size_t off = 0;
  Value attribute;
  if (attr) {
    if (args.pos.empty()) throw_py("TypeError", "selectattr/rejectattr need an attribute name");
    attribute = args.pos[0];
    off = 1;
  }
  std::string test_name;
  Args targs;
  if (args.pos.size() > off) {
    test_name = need_str(args.pos[off], "test name");
    targs.pos.assign(args.pos.begin() + static_cast<long>(off) + 1, args.pos.end());
    if (test_support(test_name) != 1) throw_py("TemplateRuntimeError", "No test named '" + test_name + "'.");
  }
  targs.kw = args.kw;
  List out;
  for (const auto& item : items) {
    in.step();
    const Value v = attr ? attr_path(in, item, attribute) : item;
    bool r;
    if (test_name.empty()) {
      r = truthy(v);
    } else {
      Args a = targs;
      r = in.test(test_name, v, a);
    }
    if (r == keep) out.push_back(item);
  }
  return Value::make_list(std::move(out));
}

int64_t to_int_filter(const Value& x, int64_t def, int64_t base) {
  if (x.is_integral()) return x.as_int();
  if (x.kind == Kind::Float) {
    if (!std::isfinite(x.f) || std::fabs(x.f) > 9.2e18) return def;
    return static_cast<int64_t>(x.f);
  }
  if (x.is_str()) {
    const std::string t = py_strip(x.s, true, true, nullptr);
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(t.c_str(), &end, static_cast<int>(base));
    if (!t.empty() && end && *end == '\0' && errno == 0) return v;
    char* fe = nullptr;
    const double d = std::strtod(t.c_str(), &fe);
    if (!t.empty() && fe && *fe == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
    return def;
  }
  return def;
}

JsonStyle json_style(const Args& a) {
  check_args(a, "tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle st;
  if (const Value* v = arg(a, 0, "ensure_ascii")) st.ensure_ascii = truthy(*v);
  if (const Value* v = arg(a, 1, "indent"); v && !v->is_none()) {
    if (v->is_str()) {
      st.indent_is_str = true;
      st.indent_str = v->s;
    } else if (v->is_integral()) {
      st.indent = static_cast<int>(std::clamp<int64_t>(v->as_int(), 0, 1024));
    } else {
      throw_py("TypeError", "indent must be an int or str, not " + type_name(*v));
    }
    st.item_sep = ",";
  }
  if (const Value* v = arg(a, 2, "separators"); v && !v->is_none()) {
    if (!v->is_list() || v->list->size() != 2 || !(*v->list)[0].is_str() || !(*v->list)[1].is_str())
      throw_py("TypeError", "separators must be a (item_separator, key_separator) pair of str");
    st.item_sep = (*v->list)[0].s;
    st.key_sep = (*v->list)[1].s;
  }
  if (const Value* v = arg(a, 3, "sort_keys")) st.sort_keys = truthy(*v);
  return st;
}

Value do_indent(const Value& x, const Args& a) {
  check_args(a, "indent", 3, {"width", "first", "blank"});
  std::string ind = "    ";
  if (const Value* w = arg(a, 0, "width")) {
    if (w->is_str())
      ind = w->s;
    else
      ind = std::string(static_cast<size_t>(std::clamp<int64_t>(need_int(*w, "width"), 0, 1 << 16)), ' ');
  }
  const Value* f = arg(a, 1, "first");
  const Value* bl = arg(a, 2, "blank");
  std::string s = py_str(x) + "\n";
  std::vector<std::string> lines = splitlines(s, false);
  std::string rv;
  if (bl && truthy(*bl)) {
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) rv += "\n" + ind;
      rv += lines[k];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) {
      rv += "\n";
      if (!lines[k].empty()) rv += ind;
      rv += lines[k];
      check_size(rv.size());
    }
  }
  if (f && truthy(*f)) rv = ind + rv;
  return Value::str(rv);
}

Value do_minmax(Interp& in, const Value& x, const Args& a, bool want_max) {
  check_args(a, want_max ? "max" : "min", 2, {"case_sensitive", "attribute"});
  const Value* cs = arg(a, 0, "case_sensitive");
  const Value* at = arg(a, 1, "attribute");
  List items = iter_or_fail(x);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  auto key = [&](const Value& v) {
    return sort_key(at && !at->is_none() ? attr_path(in, v, *at) : v, cs && truthy(*cs));
  };
  Value bk = key(items[0]);
  for (size_t k = 1; k < items.size(); ++k) {
    Value kk = key(items[k]);
    if (want_max ? py_lt(bk, kk) : py_lt(kk, bk)) {
      best = k;
      bk = kk;
    }
  }
  return items[best];
}

}  // namespace

Value builtin_filter(Interp& in, const std::string& name, const Value& x, Args& a) {
  const char* n = name.c_str();
  if (name == "tojson") return Value::str(py_json_dumps(x, json_style(a)));
  if (name == "trim") {
    check_args(a, n, 1, {"chars"});
    const Value* c = arg(a, 0, "chars");
    if (c && !c->is_none()) return Value::str(py_strip(py_str(x), true, true, &need_str(*c, "chars")));
    return Value::str(py_strip(py_str(x), true, true, nullptr));
  }
  if (name == "length" || name == "count") {
    check_args(a, n, 0, {});
    return Value::integer(py_len(x));
  }
  if (name == "string") {
    check_args(a, n, 0, {});
    return Value::str(py_str(x));
  }
  if (name == "safe") return x.is_str() ? x : Value::str(py_str(x));
  if (name == "e" || name == "escape" || name == "forceescape") return Value::str(html_escape(py_str(x)));
  if (name == "items") {
    check_args(a, n, 0, {});
    if (x.is_undefined()) return Value::make_list({});
    if (!x.is_dict()) throw_py("TypeError", "Can only get item pairs from a mapping.");
    return dict_items(x);
  }
  if (name == "list") {
    check_args(a, n, 0, {});
    return Value::make_list(iter_or_fail(x));
  }
  if (name == "join") {
    check_args(a, n, 2, {"d", "attribute"});
    const Value* d = arg(a, 0, "d");
    const Value* at = arg(a, 1, "attribute");
    const std::string sep = d ? py_str(*d) : "";
    std::string o;
    List items = iter_or_fail(x);
    for (size_t k = 0; k < items.size(); ++k) {
      if (k) o += sep;
      o += py_str(at && !at->is_none() ? attr_path(in, items[k], *at) : items[k]);
      check_size(o.size());
    }
    return Value::str(o);
  }
  if (name == "default" || name == "d") {
    check_args(a, n, 2, {"default_value", "boolean"});
    const Value* dv = arg(a, 0, "default_value");
    const Value* bo = arg(a, 1, "boolean");
    if (x.is_undefined() || (bo && truthy(*bo) && !truthy(x))) return dv ? *dv : Value::str("");
    return x;
  }
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    check_args(a, n, 0, {});
    const std::string s = py_str(x);
    if (name == "upper") return Value::str(ascii_upper(s));
    if (name == "lower") return Value::str(ascii_lower(s));
    if (name == "capitalize") return Value::str(capitalize(s));
    // jinja2 do_title: words split at [-\s({[<]+, each word's first char upper, rest lower
    std::string o;
    bool start = true;
    for (char c : s) {
      const auto u = static_cast<unsigned char>(c);
      const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || (u < 0x80 && std::isspace(u));
      if (sep) {
        o.push_back(c);
        start = true;
      } else {
        o.push_back(static_cast<char>(start ? std::toupper(u) : std::tolower(u)));
        start = false;
      }
    }
    return Value::str(o);
  }
  if (name == "replace") {
    check_args(a, n, 3, {"old", "new", "count"});
    const Value* c = arg(a, 2, "count");
    return Value::str(replace(py_str(x), py_str(need(a, 0, "old", n)), py_str(need(a, 1, "new", n)),
                              c && !c->is_none() ? need_int(*c, "count") : -1));
  }
  if (name == "first" || name == "last") {
    check_args(a, n, 0, {});
    List items = iter_or_fail(x);
    if (items.empty()) return Value::undefined(std::string("No ") + n + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    check_args(a, n, 0, {});
    if (x.is_str()) {
      std::u32string u = decode_utf8(x.s);
      std::reverse(u.begin(), u.end());
      return Value::str(encode_utf8(u));
    }
    List items = iter_or_fail(x);
    std::reverse(items.begin(), items.end());
    return Value::make_list(std::move(items));
  }
  if (name == "select" || name == "reject") return do_select(in, x, a, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return do_select(in, x, a, true, name == "selectattr");
  if (name == "map") {
    List items = iter_or_fail(x);
    List out;
    const Value* at = nullptr;
    for (const auto& [k, v] : a.kw) {
      if (k == "attribute") at = &v;
    }
    if (at) {
      const Value* def = nullptr;
      for (const auto& [k, v] : a.kw) {
        if (k == "default")
          def = &v;
        else if (k != "attribute")
          throw_py("FilterArgumentError", "Unexpected keyword argument '" + k + "'");
      }
      for (const auto& item : items) {
        Value v = attr_path(in, item, *at);
        if (v.is_undefined() && def) v = *def;
        out.push_back(v);
      }
      return Value::make_list(std::move(out));
    }
    if (a.pos.empty()) throw_py("FilterArgumentError", "map requires a filter argument");
    const std::string fname = need_str(a.pos[0], "filter name");
    if (filter_support(fname) != 1) throw_py("TemplateRuntimeError", "No filter named '" + fname + "'.");
    Args fa;
    fa.pos.assign(a.pos.begin() + 1, a.pos.end());
    fa.kw = a.kw;
    for (const auto& item : items) {
      in.step();
      Args c = fa;
      out.push_back(in.filter(fname, item, c));
    }
    return Value::make_list(std::move(out));
  }
  if (name == "sort") {
    check_args(a, n, 3, {"reverse", "case_sensitive", "attribute"});
    const Value* rv = arg(a, 0, "reverse");
    const Value* cs = arg(a, 1, "case_sensitive");
    const Value* at = arg(a, 2, "attribute");
    List items = iter_or_fail(x);
    std::vector<std::pair<Value, size_t>> keyed;
    for (size_t k = 0; k < items.size(); ++k)
      keyed.emplace_back(sort_key(at && !at->is_none() ? attr_path(in, items[k], *at) : items[k], cs && truthy(*cs)),
                         k);
    const bool rev = rv && truthy(*rv);
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& p, const auto& q) {
      return rev ? py_lt(q.first, p.first) : py_lt(p.first, q.first);
    });
    List out;
    for (const auto& [k, i] : keyed) out.push_back(items[i]);
    return Value::make_list(std::move(out));
  }
  if (name == "dictsort") {
    check_args(a, n, 3, {"case_sensitive", "by", "reverse"});
    if (!x.is_dict()) throw_py("TypeError", "dictsort needs a mapping");
    const Value* cs = arg(a, 0, "case_sensitive");
    const Value* by = arg(a, 1, "by");
    const Value* rv = arg(a, 2, "reverse");
    const bool by_value = by && by->is_str() && by->s == "value";
    if (by && !(by->is_str() && (by->s == "key" || by->s == "value")))
      throw_py("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
    auto items = x.dict->items;
    const bool rev = rv && truthy(*rv);
    const bool c = cs && truthy(*cs);
    std::stable_sort(items.begin(), items.end(), [&](const auto& p, const auto& q) {
      const Value ka = sort_key(by_value ? p.second : p.first, c), kb = sort_key(by_value ? q.second : q.first, c);
      return rev ? py_lt(kb, ka) : py_lt(ka, kb);
    });
    List out;
    for (const auto& [k, v] : items) out.push_back(Value::make_list({k, v}, true));
    return Value::make_list(std::move(out));
  }
  if (name == "unique") {
    check_args(a, n, 2, {"case_sensitive", "attribute"});
    const Value* cs = arg(a, 0, "case_sensitive");
    const Value* at = arg(a, 1, "attribute");
    List items = iter_or_fail(x), out, seen;
    for (const auto& item : items) {
      Value k = sort_key(at && !at->is_none() ? attr_path(in, item, *at) : item, cs && truthy(*cs));
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return py_eq(s, k); })) {
        seen.push_back(k);
        out.push_back(item);
      }
    }
    return Value::make_list(std::move(out));
  }
  if (name == "max" || name == "min") return do_minmax(in, x, a, name == "max");
  if (name == "sum") {
    check_args(a, n, 2, {"attribute", "start"});
    const Value* at = arg(a, 0, "attribute");
    const Value* st = arg(a, 1, "start");
    Value acc = st ? *st : Value::integer(0);
    for (const auto& item : iter_or_fail(x))
      acc = binary_op("+", acc, at && !at->is_none() ? attr_path(in, item, *at) : item);
    return acc;
  }
  if (name == "abs") {
    check_args(a, n, 0, {});
    if (x.kind == Kind::Float) return Value::real(std::fabs(x.f));
    if (x.is_integral()) {
      if (x.as_int() == INT64_MIN) overflow();
      return Value::integer(std::llabs(x.as_int()));
    }
    throw_py("TypeError", "bad operand type for abs(): '" + type_name(x) + "'");
  }
  if (name == "int") {
    check_args(a, n, 2, {"default", "base"});
    const Value* d = arg(a, 0, "default");
    const Value* b = arg(a, 1, "base");
    const int64_t base = b ? need_int(*b, "base") : 10;
    if (base != 0 && (base < 2 || base > 36)) throw_py("ValueError", "int() base must be >= 2 and <= 36, or 0");
    const int64_t def = d ? (d->is_integral() ? d->as_int() : 0) : 0;
    if (d && !d->is_integral()) {
      // a non-int default is returned as is when the conversion fails
      const int64_t sentinel = INT64_MIN + 7;
      const int64_t r = to_int_filter(x, sentinel, base);
      return r == sentinel ? *d : Value::integer(r);
    }
    return Value::integer(to_int_filter(x, def, base));
  }
  if (name == "float") {
    check_args(a, n, 1, {"default"});
    const Value* d = arg(a, 0, "default");
    if (x.is_number()) return Value::real(x.as_float());
    if (x.is_str()) {
      const std::string t = py_strip(x.s, true, true, nullptr);
      char* end = nullptr;
      const double v = std::strtod(t.c_str(), &end);
      if (!t.empty() && end && *end == '\0') return Value::real(v);
    }
    return d ? *d : Value::real(0.0);
  }
  if (name == "round") {
    check_args(a, n, 2, {"precision", "method"});
    const Value* p = arg(a, 0, "precision");
    const Value* m = arg(a, 1, "method");
    const int64_t prec = p ? need_int(*p, "precision") : 0;
    const std::string method = m ? py_str(*m) : "common";
    if (method != "common" && method != "ceil" && method != "floor")
      throw_py("FilterArgumentError", "method must be common, ceil or floor");
    if (!x.is_number()) throw_py("TypeError", "type " + type_name(x) + " doesn't define __round__ method");
    const double scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(prec, -300, 300)));
    const double v = x.as_float() * scale;
    const double r = method == "ceil" ? std::ceil(v) : method == "floor" ? std::floor(v) : std::nearbyint(v);
    return Value::real(r / scale);
  }
  if (name == "indent") return do_indent(x, a);
  if (name == "center") {
    check_args(a, n, 1, {"width"});
    const Value* w = arg(a, 0, "width");
    const int64_t width = std::min<int64_t>(w ? need_int(*w, "width") : 80, 1 << 20);
    const std::string s = py_str(x);
    const int64_t len = py_len(Value::str(s));
    if (width <= len) return Value::str(s);
    const int64_t marg = width - len;
    const int64_t left = marg / 2 + (marg & width & 1);
    return Value::str(std::string(static_cast<size_t>(left), ' ') + s +
                      std::string(static_cast<size_t>(marg - left), ' '));
  }
  if (name == "wordcount") {
    check_args(a, n, 0, {});
    return Value::integer(static_cast<int64_t>(split(py_str(x), nullptr, -1, false).size()));
  }
  if (name == "attr") {
    check_args(a, n, 1, {});
    return in.getattr(x, need_str(need(a, 0, "name", n), "attribute name"));
  }
  if (name == "batch") {
    check_args(a, n, 2, {"linecount", "fill_with"});
    const int64_t count = need_int(need(a, 0, "linecount", n), "linecount");
    if (count <= 0) throw_py("ValueError", "batch size must be positive");
    const Value* fill = arg(a, 1, "fill_with");
    List items = iter_or_fail(x), out, cur;
    for (auto& item : items) {
      cur.push_back(item);
      if (static_cast<int64_t>(cur.size()) == count) {
        out.push_back(Value::make_list(std::move(cur)));
        cur.clear();
      }
    }
    if (!cur.empty()) {
      if (fill && !fill->is_none())
        while (static_cast<int64_t>(cur.size()) < count) cur.push_back(*fill);
      out.push_back(Value::make_list(std::move(cur)));
    }
    return Value::make_list(std::move(out));
  }
  throw_py("TemplateRuntimeError", "No filter named '" + name + "'.");
}

int filter_support(const std::string& name) {
  static const char* yes[] = {"abs",     "attr",     "batch",  "capitalize", "center",     "count",      "d",
                              "default", "dictsort", "e",      "escape",     "first",      "float",      "forceescape",
                              "indent",  "int",      "items",  "join",       "last",       "length",     "list",
                              "lower",   "map",      "max",    "min",        "reject",     "rejectattr", "replace",
                              "reverse", "round",    "safe",   "select",     "selectattr", "sort",       "string",
                              "sum",     "title",    "tojson", "trim",       "unique",     "upper",      "wordcount"};
  static const char* known[] = {"filesizeformat", "format",   "groupby",   "pprint", "random",   "slice",
                                "striptags",      "truncate", "urlencode", "urlize", "wordwrap", "xmlattr"};
  for (const char* y : yes) {
    if (name == y) return 1;
  }
  for (const char* k : known) {
    if (name == k) return 2;
  }
  return 0;
}

// ---------------- tests ----------------

bool builtin_test(Interp& in, const std::string& name, const Value& x, Args& a) {
  (void)in;
  auto other = [&]() -> const Value& { return need(a, 0, "other", name.c_str()); };
  if (name == "defined") return !x.is_undefined();
  if (name == "undefined") return x.is_undefined();
  if (name == "none") return x.is_none();
  if (name == "boolean") return x.kind == Kind::Bool;
  if (name == "false") return x.kind == Kind::Bool && !x.b;
  if (name == "true") return x.kind == Kind::Bool && x.b;
  if (name == "string") return x.is_str();
  if (name == "number") return x.is_number();
  if (name == "integer") return x.kind == Kind::Int;
  if (name == "float") return x.kind == Kind::Float;
  if (name == "mapping") return x.is_dict();
  if (name == "iterable") return x.is_undefined() || x.is_str() || x.is_list() || x.is_dict();
  if (name == "sequence") return x.is_undefined() || x.is_str() || x.is_list() || x.is_dict();
  if (name == "callable") return x.kind == Kind::Func;
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    const std::string s = py_str(x);
    return name == "lower" ? s == ascii_lower(s) : s == ascii_upper(s);
  }
  if (name == "even" || name == "odd" || name == "divisibleby") {
    const int64_t d = name == "divisibleby" ? need_int(other(), "divisibleby") : 2;
    if (x.is_undefined()) fail_undefined(x);
    if (!x.is_integral()) throw_py("TypeError", "not all arguments converted during string formatting");
    if (d == 0) throw_py("ZeroDivisionError", "integer division or modulo by zero");
    const int64_t r = binary_op("%", x, Value::integer(d)).as_int();
    return name == "odd" ? r == 1 : r == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return py_eq(x, other());
  if (name == "ne" || name == "!=") return !py_eq(x, other());
  if (name == "lt" || name == "lessthan" || name == "<") return py_lt(x, other());
  if (name == "le" || name == "<=") return py_lt(x, other()) || py_eq(x, other());
  if (name == "gt" || name == "greaterthan" || name == ">") return py_lt(other(), x);
  if (name == "ge" || name == ">=") return py_lt(other(), x) || py_eq(x, other());
  if (name == "in") return py_contains(need(a, 0, "seq", "in"), x);
  if (name == "sameas") {
    const Value& o = other();
    if (x.kind != o.kind) return false;
    switch (x.kind) {
      case Kind::None:
      case Kind::Undefined: return true;
      case Kind::Bool: return x.b == o.b;
      case Kind::List: return x.list == o.list;
      case Kind::Dict:
      case Kind::Namespace: return x.dict == o.dict;
      case Kind::Func: return x.fn == o.fn;
      default: return py_eq(x, o);
    }
  }
  if (name == "filter") return x.is_str() && filter_support(x.s) == 1;
  if (name == "test") return x.is_str() && test_support(x.s) == 1;
  throw_py("TemplateRuntimeError", "No test named '" + name + "'.");
}

int test_support(const std::string& name) {
  static const char* yes[] = {
      "boolean",  "callable", "defined", "divisibleby", "eq",   "equalto",   "==",     "escaped",
      "even",     "false",    "filter",  "float",       "ge",   ">=",        "gt",     "greaterthan",
      ">",        "in",       "integer", "iterable",    "le",   "<=",        "lower",  "lt",
      "lessthan", "<",        "mapping", "ne",          "!=",   "none",      "number", "odd",
      "sameas",   "sequence", "string",  "test",        "true", "undefined", "upper"};
  for (const char* y : yes) {
    if (name == y) return 1;
  }
  return 0;
}

// ---------------- globals ----------------

namespace {

std::string strftime_at(int64_t now, bool utc, const std::string& fmt) {
  if (fmt.find('\0') != std::string::npos) throw_py("ValueError", "embedded null character");
  if (fmt.size() > 4096) throw_py("ValueError", "strftime format too long");
  const auto t = static_cast<std::time_t>(now);
  std::tm tm{};
  if (utc ? gmtime_r(&t, &tm) == nullptr : localtime_r(&t, &tm) == nullptr)
    throw_py("OverflowError", "timestamp out of range");
  if (fmt.empty()) return "";
  for (size_t cap : {size_t{256}, size_t{8192}, size_t{1} << 17}) {
    std::string buf(cap, '\0');
    const size_t n = std::strftime(buf.data(), cap, fmt.c_str(), &tm);
    if (n > 0) {
      buf.resize(n);
      return buf;
    }
  }
  return "";
}

}  // namespace

void install_globals(Interp& in, Scope& g) {
  Interp* ip = &in;
  g.vars["raise_exception"] = Value::func("raise_exception", [](Args& a) -> Value {
    const Value* m = arg(a, 0, "message");
    throw PyError{"TemplateError", m ? py_str(*m) : "", true};
  });
  g.vars["strftime_now"] = Value::func("strftime_now", [ip](Args& a) -> Value {
    check_args(a, "strftime_now", 1, {"format"});
    return Value::str(strftime_at(ip->now(), ip->utc(), need_str(need(a, 0, "format", "strftime_now"), "format")));
  });
  g.vars["range"] = Value::func("range", [ip](Args& a) -> Value {
    check_args(a, "range", 3, {});
    if (a.pos.empty()) throw_py("TypeError", "range expected at least 1 argument, got 0");
    int64_t start = 0, stop, step = 1;
    if (a.pos.size() == 1) {
      stop = need_int(a.pos[0], "range");
    } else {
      start = need_int(a.pos[0], "range");
      stop = need_int(a.pos[1], "range");
      if (a.pos.size() == 3) step = need_int(a.pos[2], "range");
    }
    if (step == 0) throw_py("ValueError", "range() arg 3 must not be zero");
    uint64_t len = 0;
    if (step > 0 && stop > start) {
      const uint64_t span = static_cast<uint64_t>(stop) - static_cast<uint64_t>(start);
      len = span / static_cast<uint64_t>(step) + (span % static_cast<uint64_t>(step) != 0);
    } else if (step < 0 && start > stop) {
      const uint64_t span = static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
      const uint64_t st = 0 - static_cast<uint64_t>(step);
      len = span / st + (span % st != 0);
    }
    if (len > static_cast<uint64_t>(k_max_range))
      throw_py("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    List l;
    for (int64_t k = 0; k < static_cast<int64_t>(len); ++k) {
      ip->step();
      l.push_back(Value::integer(start + k * step));
    }
    return Value::make_list(std::move(l));
  });
  auto make_dict = [](Args& a) {
    Dict d;
    if (!a.pos.empty()) {
      if (a.pos.size() > 1) throw_py("TypeError", "expected at most 1 positional argument");
      if (a.pos[0].is_dict()) {
        d = *a.pos[0].dict;
      } else if (a.pos[0].kind == Kind::Namespace) {
        d = *a.pos[0].dict;
      } else {
        for (const auto& item : py_iter(a.pos[0])) {
          List kv = py_iter(item);
          if (kv.size() != 2) throw_py("ValueError", "dictionary update sequence element has wrong length");
          d.set(kv[0], kv[1]);
        }
      }
    }
    for (auto& [k, v] : a.kw) d.set(Value::str(k), v);
    return d;
  };
  g.vars["namespace"] = Value::func("namespace", [ip, make_dict](Args& a) { return ip->make_namespace(make_dict(a)); });
  g.vars["dict"] = Value::func("dict", [make_dict](Args& a) { return Value::make_dict(make_dict(a)); });
}

}  // namespace rocky::chat::detail
