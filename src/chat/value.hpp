// Values of the chat-template language, with Python semantics (internal to src/chat).
//
// A Value is what a Jinja2 expression evaluates to when Hugging Face transformers renders a chat
// template: Python's None/bool/int/float/str/list/tuple/dict, jinja2's Undefined, a namespace(),
// and callables (macros, globals, bound methods). Strings are UTF-8 bytes; operations that count or
// slice characters decode code points (invalid bytes are kept as single "surrogateescape" code
// points, so no input byte is lost or crashes). Lists are immutable once built (the sandbox forbids
// mutation) and shared; a namespace's dict is the only mutable container.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rocky::chat::detail {

struct Value;
using List = std::vector<Value>;

// A Python exception raised while rendering: `type` is the Python class name ("TypeError",
// "UndefinedError", "TemplateError" for raise_exception, ...). The renderer adds the position.
struct PyError {
  std::string type;
  std::string message;
  bool raised = false;    // from raise_exception(): the message is the template's own
  int line = 0, col = 0;  // where it was raised (set by the renderer)
};
[[noreturn]] void throw_py(std::string type, std::string message);

// Resource limits (a template is untrusted input: GGUF files, --chat-template-file).
constexpr size_t k_max_string = size_t{64} << 20;  // bytes of any string or of the output
constexpr int k_max_nesting = 512;                 // depth of lists/dicts and of recursive walks

// The work budget of the render running on this thread: statements, loop iterations, calls, and
// one unit per KiB copied by string/list operations. Exceeding it raises "template too expensive".
struct Budget {
  int64_t used = 0, max = 0;
};
extern thread_local Budget* t_budget;
void charge(int64_t units);
inline void charge_bytes(size_t n) {
  if (n >= 1024) charge(static_cast<int64_t>(n / 1024));
}
// Guards a recursive walk (repr, ==, <, json.dumps) against cycles through namespaces and deep
// nesting: RecursionError past k_max_nesting levels.
struct DepthGuard {
  DepthGuard();
  ~DepthGuard();
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;
};

struct Dict {
  std::vector<std::pair<Value, Value>> items;  // insertion order, as Python dicts
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(const Value& key, Value v);
};

struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

struct Callable {
  std::string name;
  std::function<Value(Args&)> fn;
};

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, Str, List, Dict, Func, Namespace };

struct Value {
  Kind kind = Kind::Undefined;
  bool tuple = false;  // a List printed and compared as a Python tuple
  uint16_t depth = 0;  // List/Dict nesting (1 + the deepest element), at most k_max_nesting
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                     // Str; Undefined: the UndefinedError message it raises on use
  std::shared_ptr<const List> list;  // List
  std::shared_ptr<Dict> dict;        // Dict (never mutated after construction), Namespace (mutable)
  std::shared_ptr<const Callable> fn;

  static Value undefined(std::string hint) {
    Value v;
    v.s = std::move(hint);
    return v;
  }
  static Value none() {
    Value v;
    v.kind = Kind::None;
    return v;
  }
  static Value boolean(bool x) {
    Value v;
    v.kind = Kind::Bool;
    v.b = x;
    return v;
  }
  static Value integer(int64_t x) {
    Value v;
    v.kind = Kind::Int;
    v.i = x;
    return v;
  }
  static Value real(double x) {
    Value v;
    v.kind = Kind::Float;
    v.f = x;
    return v;
  }
  static Value str(std::string x) {
    Value v;
    v.kind = Kind::Str;
    v.s = std::move(x);
    return v;
  }
  static Value make_list(List items, bool is_tuple = false) {
    Value v;
    v.kind = Kind::List;
    v.tuple = is_tuple;
    v.depth = nesting(items);
    v.list = std::make_shared<const List>(std::move(items));
    return v;
  }
  static Value make_dict(Dict d) {
    Value v;
    v.kind = Kind::Dict;
    uint16_t deepest = 0;
    for (const auto& kv : d.items) deepest = std::max({deepest, kv.first.depth, kv.second.depth});
    v.depth = check_depth(deepest);
    v.dict = std::make_shared<Dict>(std::move(d));
    return v;
  }
  static Value make_namespace(Dict d) {
    Value v;
    v.kind = Kind::Namespace;
    v.dict = std::make_shared<Dict>(std::move(d));
    return v;
  }
  static Value func(std::string name, std::function<Value(Args&)> fn) {
    Value v;
    v.kind = Kind::Func;
    v.fn = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)});
    return v;
  }

  static uint16_t check_depth(uint16_t deepest) {
    if (deepest + 1 > k_max_nesting) throw_py("RecursionError", "lists/dicts nested deeper than 512 levels");
    return static_cast<uint16_t>(deepest + 1);
  }
  static uint16_t nesting(const List& items) {
    uint16_t deepest = 0;
    for (const auto& x : items) deepest = std::max(deepest, x.depth);
    return check_depth(deepest);
  }

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_str() const { return kind == Kind::Str; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }
  bool is_number() const { return kind == Kind::Bool || kind == Kind::Int || kind == Kind::Float; }
  bool is_integral() const { return kind == Kind::Bool || kind == Kind::Int; }
  int64_t as_int() const { return kind == Kind::Bool ? (b ? 1 : 0) : i; }
  double as_float() const { return kind == Kind::Float ? f : static_cast<double>(as_int()); }
};

// ---- conversions ----
Value from_json(const nlohmann::ordered_json& j);
// Python's type(x).__name__ ("NoneType", "str", "list", "dict", "tuple", "Undefined", ...).
std::string type_name(const Value& v);
// jinja2.utils.object_type_repr ("None", "dict object", "list object", ...).
std::string object_type_repr(const Value& v);
// The hint of an Undefined made by a failed lookup of `name` on `obj` (jinja2's wording).
Value missing_attr(const Value& obj, const Value& name);

// ---- Python semantics ----
bool truthy(const Value& v);
std::string py_str(const Value& v);   // str(x); Undefined → ""
std::string py_repr(const Value& v);  // repr(x)
std::string repr_string(std::string_view s);
std::string repr_float(double d);
bool py_eq(const Value& a, const Value& b);
// a < b (Python ordering); TypeError for incomparable types.
bool py_lt(const Value& a, const Value& b);
bool py_contains(const Value& container, const Value& item);  // item in container
int64_t py_len(const Value& v);                               // len(x); TypeError if none
// Iterates x as Python's iter(x) does (str: characters, dict: keys, Undefined: nothing).
List py_iter(const Value& v);
[[noreturn]] void fail_undefined(const Value& v);  // raises the Undefined's UndefinedError

// json.dumps(x, ensure_ascii, indent (<0 = None), separators, sort_keys) as Python writes it.
struct JsonStyle {
  bool ensure_ascii = false;
  int indent = -1;
  std::string indent_str;  // used when indent_is_str
  bool indent_is_str = false;
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
};
std::string py_json_dumps(const Value& v, const JsonStyle& style);

// ---- UTF-8 code points (invalid bytes become U+DC80..U+DCFF and encode back to the byte) ----
std::u32string decode_utf8(std::string_view s);
std::string encode_utf8(std::u32string_view s);
bool py_isspace(char32_t c);
std::string py_strip(std::string_view s, bool left, bool right, const std::string* chars);

}  // namespace rocky::chat::detail
