// Builtins of the chat-template language, by kind: jinja2's tests and the globals (here),
// filters (filters.cpp), Python's str/dict/list methods (methods.cpp, over pystr.cpp's string
// semantics), and Python's arithmetic operators and slicing (operators.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <optional>

#include "chat/builtins.hpp"
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
  // llama-server's context: today as "%d %b %Y" (Llama 3.x templates print it), the same clock as
  // strftime_now; chat_template_kwargs may give another.
  g.vars["date_string"] = Value::str(strftime_at(ip->now(), ip->utc(), "%d %b %Y"));
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
