// jinja2's filters in the chat-template language, by kind: text, sequences and mappings, numbers.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <optional>

#include "chat/builtins.hpp"
#include "chat/interp.hpp"

namespace rocky::chat::detail {

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

namespace {

// Filters of text (and the value-or-default ones): tojson, trim, escape, case, replace, indent, …
std::optional<Value> text_filter([[maybe_unused]] Interp& in, const std::string& name, const Value& x, Args& a) {
  [[maybe_unused]] const char* n = name.c_str();
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
  return std::nullopt;
}

// Filters of sequences and mappings: items, list, join, first/last, select, map, sort, unique, batch, …
std::optional<Value> sequence_filter([[maybe_unused]] Interp& in, const std::string& name, const Value& x, Args& a) {
  [[maybe_unused]] const char* n = name.c_str();
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
  return std::nullopt;
}

// Filters of numbers: abs, int, float, round.
std::optional<Value> number_filter([[maybe_unused]] Interp& in, const std::string& name, const Value& x, Args& a) {
  [[maybe_unused]] const char* n = name.c_str();
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
  return std::nullopt;
}

}  // namespace

Value builtin_filter(Interp& in, const std::string& name, const Value& x, Args& a) {
  for (auto* group : {text_filter, sequence_filter, number_filter})
    if (std::optional<Value> v = group(in, name, x, a)) return *std::move(v);
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
}  // namespace rocky::chat::detail
