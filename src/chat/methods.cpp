// Python's str/dict/list methods in the chat-template language, as bound callables; the ones
// that would mutate a value are refused as jinja2's sandbox refuses them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <optional>

#include "chat/builtins.hpp"
#include "chat/interp.hpp"

namespace rocky::chat::detail {

namespace {

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

}  // namespace

Value dict_items(const Value& d) {
  List l;
  for (const auto& [k, v] : d.dict->items) l.push_back(Value::make_list({k, v}, true));
  return Value::make_list(std::move(l));
}

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
}  // namespace rocky::chat::detail
