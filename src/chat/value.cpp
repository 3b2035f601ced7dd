// Python semantics of template values: str/repr, equality and ordering, len/iter/in, json.dumps.
#include "chat/value.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace rocky::chat::detail {

void throw_py(std::string type, std::string message) { throw PyError{std::move(type), std::move(message), false}; }

thread_local Budget* t_budget = nullptr;

void charge(int64_t units) {
  if (!t_budget) return;
  t_budget->used += units;
  if (t_budget->used > t_budget->max)
    throw_py("RuntimeError", "template too expensive (more than " + std::to_string(t_budget->max) + " steps)");
}

namespace {
thread_local int t_walk_depth = 0;
}
DepthGuard::DepthGuard() {
  if (++t_walk_depth > k_max_nesting) {
    --t_walk_depth;
    throw_py("RecursionError", "maximum recursion depth exceeded (values nested deeper than 512 levels)");
  }
}
DepthGuard::~DepthGuard() { --t_walk_depth; }

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (py_eq(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.kind == Kind::Str && k.s == key) return &v;
  }
  return nullptr;
}

void Dict::set(const Value& key, Value v) {
  for (auto& [k, old] : items) {
    if (py_eq(k, key)) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

namespace {
Value from_json_at(const nlohmann::ordered_json& j, int depth);
}
Value from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

namespace {
Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  if (depth > k_max_nesting) throw_py("RecursionError", "JSON input nested deeper than 512 levels");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::real(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::real(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      l.reserve(j.size());
      for (const auto& e : j) l.push_back(from_json_at(e, depth + 1));
      return Value::make_list(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      d.items.reserve(j.size());
      for (const auto& [k, v] : j.items()) d.items.emplace_back(Value::str(k), from_json_at(v, depth + 1));
      return Value::make_dict(std::move(d));
    }
    default: return Value::none();  // binary / discarded: not produced by the JSON parser
  }
}
}  // namespace

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::Str: return "str";
    case Kind::List: return v.tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Func: return "function";
    case Kind::Namespace: return "Namespace";
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  switch (v.kind) {
    case Kind::None: return "None";
    case Kind::Undefined: return "jinja2.runtime.Undefined object";
    case Kind::Namespace: return "jinja2.utils.Namespace object";
    default: return type_name(v) + " object";
  }
}

Value missing_attr(const Value& obj, const Value& name) {
  if (name.is_str())
    return Value::undefined(repr_string(object_type_repr(obj)) + " has no attribute " + repr_string(name.s));
  return Value::undefined(repr_string(object_type_repr(obj)) + " has no element " + py_repr(name));
}

void fail_undefined(const Value& v) { throw_py("UndefinedError", v.s.empty() ? "value is undefined" : v.s); }

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return v.b;
    case Kind::Int: return v.i != 0;
    case Kind::Float: return v.f != 0.0;
    case Kind::Str: return !v.s.empty();
    case Kind::List: return !v.list->empty();
    case Kind::Dict: return !v.dict->items.empty();
    case Kind::Func:
    case Kind::Namespace: return true;
  }
  return false;
}

// ---- UTF-8 ----
std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = 0;
    char32_t cp = 0;
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      n = -1;
    }
    bool ok = n > 0 && i + static_cast<size_t>(n) < s.size();
    for (int k = 1; ok && k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((cc & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (ok) {
      const char32_t min = n == 1 ? 0x80 : n == 2 ? 0x800 : 0x10000;
      if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) ok = false;
    }
    if (ok) {
      out.push_back(cp);
      i += static_cast<size_t>(n) + 1;
    } else {
      out.push_back(0xDC00 + c);  // surrogateescape
      ++i;
    }
  }
  return out;
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c >= 0xDC80 && c <= 0xDCFF) {
      out.push_back(static_cast<char>(c - 0xDC00));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

bool py_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string py_strip(std::string_view s, bool left, bool right, const std::string* chars) {
  charge_bytes(s.size());
  const bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  if (ascii && (chars == nullptr || std::all_of(chars->begin(), chars->end(),
                                                [](char c) { return static_cast<unsigned char>(c) < 0x80; }))) {
    auto is_strip = [&](char c) {
      return chars ? chars->find(c) != std::string::npos : py_isspace(static_cast<unsigned char>(c));
    };
    size_t b = 0, e = s.size();
    if (left)
      while (b < e && is_strip(s[b])) ++b;
    if (right)
      while (e > b && is_strip(s[e - 1])) --e;
    return std::string(s.substr(b, e - b));
  }
  const std::u32string u = decode_utf8(s);
  const std::u32string set = chars ? decode_utf8(*chars) : std::u32string();
  auto is_strip = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : py_isspace(c); };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && is_strip(u[b])) ++b;
  if (right)
    while (e > b && is_strip(u[e - 1])) --e;
  return encode_utf8(std::u32string_view(u).substr(b, e - b));
}

// ---- str / repr ----
std::string repr_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest digits that round-trip (Python's repr).
  char buf[64];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  // buf = [-]D.DDDDe[+-]XX
  std::string t(buf);
  const bool neg = t[0] == '-';
  if (neg) t.erase(0, 1);
  const size_t epos = t.find('e');
  std::string digits = t.substr(0, epos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::atoi(t.c_str() + epos + 1);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  } else if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else {
    const auto ip = static_cast<size_t>(exp) + 1;
    if (digits.size() <= ip) {
      out = digits + std::string(ip - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, ip) + "." + digits.substr(ip);
    }
  }
  return neg ? "-" + out : out;
}

namespace {

bool printable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  if (c >= 0x80 && c <= 0xA0) return false;
  if (c == 0xAD || c == 0x1680 || c == 0x180E || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) ||
      (c >= 0xD800 && c <= 0xDFFF) || (c >= 0xE000 && c <= 0xF8FF) || c == 0xFFFE || c == 0xFFFF || c >= 0xF0000 ||
      (c >= 0xE0000 && c <= 0xE0FFF))
    return false;
  return true;
}

void append_hex(std::string& out, const char* prefix, unsigned v, int width) {
  char b[16];
  std::snprintf(b, sizeof b, "%s%0*x", prefix, width, v);
  out += b;
}

}  // namespace

std::string repr_string(std::string_view s) {
  const bool has_sq = s.find('\'') != std::string_view::npos;
  const bool has_dq = s.find('"') != std::string_view::npos;
  const char q = (has_sq && !has_dq) ? '"' : '\'';
  std::string out(1, q);
  for (char32_t c : decode_utf8(s)) {
    if (c == static_cast<char32_t>(q) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (printable(c)) {
      out += encode_utf8(std::u32string_view(&c, 1));
    } else if (c < 0x100) {
      append_hex(out, "\\x", c, 2);
    } else if (c < 0x10000) {
      append_hex(out, "\\u", c, 4);
    } else {
      append_hex(out, "\\U", c, 8);
    }
  }
  out.push_back(q);
  return out;
}

std::string py_repr(const Value& v) {
  DepthGuard guard;
  switch (v.kind) {
    case Kind::Str: return repr_string(v.s);
    case Kind::Undefined: return "Undefined";
    case Kind::List: {
      std::string out = v.tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        out += py_repr((*v.list)[k]);
        if (out.size() > k_max_string) throw_py("MemoryError", "repr over 64 MiB");
      }
      charge_bytes(out.size());
      if (v.tuple && v.list->size() == 1) out += ",";
      out += v.tuple ? ")" : "]";
      return out;
    }
    case Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(k) + ": " + py_repr(x);
        if (out.size() > k_max_string) throw_py("MemoryError", "repr over 64 MiB");
      }
      charge_bytes(out.size());
      return out + "}";
    }
    case Kind::Namespace: {
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [k, x] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(k) + ": " + py_repr(x);
      }
      return out + "}>";
    }
    default: return py_str(v);
  }
}

std::string py_str(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return v.b ? "True" : "False";
    case Kind::Int: return std::to_string(v.i);
    case Kind::Float: return repr_float(v.f);
    case Kind::Str: return v.s;
    case Kind::Func: return "<function " + v.fn->name + ">";
    default: return py_repr(v);
  }
}

bool py_eq(const Value& a, const Value& b) {
  DepthGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_float() == b.as_float();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::Str: return a.s == b.s;
    case Kind::List: {
      if (a.list == b.list) return a.tuple == b.tuple;
      if (a.tuple != b.tuple || a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k) {
        if (!py_eq((*a.list)[k], (*b.list)[k])) return false;
      }
      return true;
    }
    case Kind::Dict: {
      if (a.dict == b.dict) return true;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, x] : a.dict->items) {
        const Value* y = b.dict->find(k);
        if (!y || !py_eq(x, *y)) return false;
      }
      return true;
    }
    case Kind::Func: return a.fn == b.fn;
    case Kind::Namespace: return a.dict == b.dict;
    default: return false;
  }
}

bool py_lt(const Value& a, const Value& b) {
  DepthGuard guard;
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int();
    return a.as_float() < b.as_float();
  }
  if (a.is_str() && b.is_str()) return a.s < b.s;  // UTF-8 byte order = code point order
  if (a.is_list() && b.is_list() && a.tuple == b.tuple) {
    const auto& x = *a.list;
    const auto& y = *b.list;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (!py_eq(x[k], y[k])) return py_lt(x[k], y[k]);
    }
    return x.size() < y.size();
  }
  throw_py("TypeError", "'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

int64_t py_len(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return 0;
    case Kind::Str: {
      int64_t n = 0;
      for (char c : v.s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
      // invalid bytes count as characters too; the fast path is exact for valid UTF-8
      if (std::any_of(v.s.begin(), v.s.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; }))
        return static_cast<int64_t>(decode_utf8(v.s).size());
      return n;
    }
    case Kind::List: return static_cast<int64_t>(v.list->size());
    case Kind::Dict: return static_cast<int64_t>(v.dict->items.size());
    default: throw_py("TypeError", "object of type '" + type_name(v) + "' has no len()");
  }
}

List py_iter(const Value& v) {
  switch (v.kind) {
    case Kind::List:
    case Kind::Dict: charge_bytes(py_len(v) * sizeof(Value)); break;
    case Kind::Str: charge_bytes(v.s.size() * sizeof(Value)); break;
    default: break;
  }
  switch (v.kind) {
    case Kind::Undefined: return {};
    case Kind::Str: {
      List out;
      for (char32_t c : decode_utf8(v.s)) out.push_back(Value::str(encode_utf8(std::u32string_view(&c, 1))));
      return out;
    }
    case Kind::List: return *v.list;
    case Kind::Dict: {
      List out;
      for (const auto& kv : v.dict->items) out.push_back(kv.first);
      return out;
    }
    default: throw_py("TypeError", "'" + type_name(v) + "' object is not iterable");
  }
}

bool py_contains(const Value& c, const Value& item) {
  switch (c.kind) {
    case Kind::Undefined: return false;
    case Kind::Str:
      if (!item.is_str())
        throw_py("TypeError", "'in <string>' requires string as left operand, not " + type_name(item));
      return c.s.find(item.s) != std::string::npos;
    case Kind::List: return std::any_of(c.list->begin(), c.list->end(), [&](const Value& x) { return py_eq(x, item); });
    case Kind::Dict: return c.dict->find(item) != nullptr;
    default: throw_py("TypeError", "argument of type '" + type_name(c) + "' is not iterable");
  }
}

// ---- json.dumps ----
namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  for (char32_t c : decode_utf8(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          append_hex(out, "\\u", c, 4);
        } else if (ensure_ascii && c >= 0x7F) {
          if (c >= 0x10000) {
            const char32_t v = c - 0x10000;
            append_hex(out, "\\u", 0xD800 + (v >> 10), 4);
            append_hex(out, "\\u", 0xDC00 + (v & 0x3FF), 4);
          } else {
            append_hex(out, "\\u", c, 4);
          }
        } else {
          out += encode_utf8(std::u32string_view(&c, 1));
        }
    }
  }
  out.push_back('"');
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return repr_float(d);
}

std::string json_key(const Value& k) {
  switch (k.kind) {
    case Kind::Str: return k.s;
    case Kind::Bool: return k.b ? "true" : "false";
    case Kind::Int: return std::to_string(k.i);
    case Kind::Float: return json_float(k.f);
    case Kind::None: return "null";
    default: throw_py("TypeError", "keys must be str, int, float, bool or None, not " + type_name(k));
  }
}

void dump(std::string& out, const Value& v, const JsonStyle& st, int level) {
  if (level > k_max_nesting)
    throw_py("RecursionError", "maximum recursion depth exceeded while encoding a JSON object");
  if (out.size() > k_max_string) throw_py("MemoryError", "JSON over 64 MiB");
  const bool pretty = st.indent >= 0 || st.indent_is_str;
  auto newline = [&](int lv) {
    out.push_back('\n');
    for (int k = 0; k < lv; ++k) {
      if (st.indent_is_str)
        out += st.indent_str;
      else
        out.append(static_cast<size_t>(st.indent), ' ');
    }
  };
  switch (v.kind) {
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.b ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.i); return;
    case Kind::Float: out += json_float(v.f); return;
    case Kind::Str: json_string(out, v.s, st.ensure_ascii); return;
    case Kind::List: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += st.item_sep;
        if (pretty) newline(level + 1);
        dump(out, (*v.list)[k], st, level + 1);
      }
      if (pretty) newline(level);
      out.push_back(']');
      return;
    }
    case Kind::Dict: {
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<Value, Value>*> items;
      for (const auto& kv : v.dict->items) items.push_back(&kv);
      if (st.sort_keys) {
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return py_lt(a->first, b->first); });
      }
      out.push_back('{');
      bool first = true;
      for (const auto* kv : items) {
        if (!first) out += st.item_sep;
        first = false;
        if (pretty) newline(level + 1);
        json_string(out, json_key(kv->first), st.ensure_ascii);
        out += st.key_sep;
        dump(out, kv->second, st, level + 1);
      }
      if (pretty) newline(level);
      out.push_back('}');
      return;
    }
    default: throw_py("TypeError", "Object of type " + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string py_json_dumps(const Value& v, const JsonStyle& style) {
  std::string out;
  dump(out, v, style, 0);
  charge_bytes(out.size());
  return out;
}

}  // namespace rocky::chat::detail
