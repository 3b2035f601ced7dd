// Rendering: statements and expressions of a parsed template, with jinja2's scoping (for bodies and
// macros have their own scope; if does not), and the public Template API.
#include <algorithm>
#include <cstdlib>
#include <ctime>

#include "chat/interp.hpp"
#include "chat/template.hpp"

namespace rocky::chat {

TemplateError::TemplateError(Kind kind, std::string type, std::string message, int line, int col)
    : Error(kind == Kind::raise_exception
                ? message
                : (line > 0 ? fmt::format("chat template:{}:{}: {}: {}", line, col, type, message)
                            : fmt::format("chat template: {}: {}", type, message))),
      kind_(kind),
      type_(std::move(type)),
      message_(std::move(message)),
      line_(line),
      col_(col) {}

namespace detail {

Interp::~Interp() {
  for (auto& d : namespaces_) d->items.clear();
  t_budget = saved_;
}

void Interp::step() { charge(1); }

Value Interp::make_namespace(Dict d) {
  Value v = Value::make_namespace(std::move(d));
  namespaces_.push_back(v.dict);
  return v;
}

namespace {

void set_pos(PyError& e, const Pos& p) {
  if (e.line == 0) {
    e.line = p.line;
    e.col = p.col;
  }
}

void append_out(std::string& out, const std::string& s) {
  if (out.size() + s.size() > k_max_string) throw_py("MemoryError", "template output over 64 MiB");
  out += s;
}

List unpack(const Value& item, size_t n) {
  List parts = py_iter(item);
  if (parts.size() < n)
    throw_py("ValueError", "not enough values to unpack (expected " + std::to_string(n) + ", got " +
                               std::to_string(parts.size()) + ")");
  if (parts.size() > n) throw_py("ValueError", "too many values to unpack (expected " + std::to_string(n) + ")");
  return parts;
}

void assign(Scope& scope, const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    scope.vars[targets[0]] = v;
    return;
  }
  List parts = unpack(v, targets.size());
  for (size_t k = 0; k < targets.size(); ++k) scope.vars[targets[k]] = parts[k];
}

}  // namespace

Flow Interp::exec(const Body& body, const ScopeP& scope, std::string& out) {
  for (const auto& s : body) {
    const Flow f = exec_stmt(*s, scope, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Value Interp::make_macro(const Stmt& s, const ScopeP& scope) {
  std::weak_ptr<Scope> def = scope;
  const Stmt* m = &s;
  return Value::func(s.text, [this, m, def](Args& args) -> Value {
    ScopeP parent = def.lock();
    if (!parent) throw_py("RuntimeError", "macro '" + m->text + "' called after its scope ended");
    if (++depth_ > k_max_call_depth) {
      --depth_;
      throw_py("RecursionError", "maximum recursion depth exceeded (macro '" + m->text + "')");
    }
    struct Guard {
      int& d;
      ~Guard() { --d; }
    } guard{depth_};
    auto sc = std::make_shared<Scope>();
    sc->parent = parent;
    if (args.pos.size() > m->params.size())
      throw_py("TypeError",
               "macro '" + m->text + "' takes not more than " + std::to_string(m->params.size()) + " argument(s)");
    std::vector<bool> bound(m->params.size(), false);
    for (size_t k = 0; k < args.pos.size(); ++k) {
      sc->vars[m->params[k]] = args.pos[k];
      bound[k] = true;
    }
    for (auto& [name, v] : args.kw) {
      size_t k = 0;
      while (k < m->params.size() && m->params[k] != name) ++k;
      if (k == m->params.size())
        throw_py("TypeError", "macro '" + m->text + "' takes no keyword argument '" + name + "'");
      if (bound[k]) throw_py("TypeError", "macro '" + m->text + "' got multiple values for argument '" + name + "'");
      sc->vars[name] = v;
      bound[k] = true;
    }
    for (size_t k = 0; k < m->params.size(); ++k) {
      if (bound[k]) continue;
      sc->vars[m->params[k]] = m->defaults[k] ? eval(*m->defaults[k], sc)
                                              : Value::undefined("parameter '" + m->params[k] + "' was not provided");
    }
    std::string out;
    exec(m->body, sc, out);
    return Value::str(std::move(out));
  });
}

namespace {
// `{% set x | f | g %}` / `{% filter f | g %}`: the filters of the chain `head` (innermost first,
// linked through a[0]) applied in order to `v`, their arguments evaluated as an EK::Filter's are.
Value apply_filter_chain(Interp& in, const Expr* head, Value v, const ScopeP& scope);
}  // namespace

Flow Interp::exec_stmt(const Stmt& s, const ScopeP& scope, std::string& out) {
  step();
  try {
    switch (s.k) {
      case SK::Text: append_out(out, s.text); return Flow::Normal;
      case SK::Print: append_out(out, py_str(eval(*s.expr, scope))); return Flow::Normal;
      case SK::If:
        for (const auto& [c, b] : s.branches) {
          if (truthy(eval(*c, scope))) return exec(b, scope, out);
        }
        return exec(s.else_body, scope, out);
      case SK::For: {
        const Value it = eval(*s.expr, scope);
        if (it.is_none() || !(it.is_undefined() || it.is_str() || it.is_list() || it.is_dict()))
          throw_py("TypeError", "'" + type_name(it) + "' object is not iterable");
        List items = py_iter(it);
        if (s.cond) {
          List kept;
          for (auto& x : items) {
            step();
            auto tmp = std::make_shared<Scope>();
            tmp->parent = scope;
            assign(*tmp, s.targets, x);
            if (truthy(eval(*s.cond, tmp))) kept.push_back(std::move(x));
          }
          items = std::move(kept);
        }
        const auto n = static_cast<int64_t>(items.size());
        if (n == 0) {
          auto sc = std::make_shared<Scope>();
          sc->parent = scope;
          exec(s.else_body, sc, out);
          return Flow::Normal;
        }
        auto all = std::make_shared<const List>(items);
        for (int64_t k = 0; k < n; ++k) {
          step();
          auto sc = std::make_shared<Scope>();
          sc->parent = scope;
          assign(*sc, s.targets, items[static_cast<size_t>(k)]);
          Dict loop;
          loop.items.reserve(12);
          loop.items.emplace_back(Value::str("index"), Value::integer(k + 1));
          loop.items.emplace_back(Value::str("index0"), Value::integer(k));
          loop.items.emplace_back(Value::str("revindex"), Value::integer(n - k));
          loop.items.emplace_back(Value::str("revindex0"), Value::integer(n - k - 1));
          loop.items.emplace_back(Value::str("first"), Value::boolean(k == 0));
          loop.items.emplace_back(Value::str("last"), Value::boolean(k == n - 1));
          loop.items.emplace_back(Value::str("length"), Value::integer(n));
          loop.items.emplace_back(Value::str("depth"), Value::integer(1));
          loop.items.emplace_back(Value::str("depth0"), Value::integer(0));
          if (k > 0) loop.items.emplace_back(Value::str("previtem"), items[static_cast<size_t>(k - 1)]);
          if (k + 1 < n) loop.items.emplace_back(Value::str("nextitem"), items[static_cast<size_t>(k + 1)]);
          loop.items.emplace_back(Value::str("cycle"), Value::func("cycle", [k](Args& a) -> Value {
                                    if (a.pos.empty()) throw_py("TypeError", "no items for cycling given");
                                    return a.pos[static_cast<size_t>(k) % a.pos.size()];
                                  }));
          sc->vars["loop"] = Value::make_dict(std::move(loop));
          const Flow f = exec(s.body, sc, out);
          if (f == Flow::Break) break;
        }
        (void)all;
        return Flow::Normal;
      }
      case SK::Set: {
        Value v = eval(*s.expr, scope);
        if (s.ns_target) {
          const Value* ns = scope->find(s.targets[0]);
          if (!ns || ns->kind != Kind::Namespace)
            throw_py("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
          ns->dict->set(Value::str(s.targets[1]), std::move(v));
          return Flow::Normal;
        }
        assign(*scope, s.targets, v);
        return Flow::Normal;
      }
      case SK::SetBlock: {
        std::string body;
        exec(s.body, scope, body);
        Value v = Value::str(std::move(body));
        if (s.expr) v = apply_filter_chain(*this, s.expr.get(), std::move(v), scope);  // to the captured text
        scope->vars[s.targets[0]] = std::move(v);
        return Flow::Normal;
      }
      case SK::FilterBlock: {
        std::string body;
        exec(s.body, scope, body);
        const Value v = apply_filter_chain(*this, s.expr.get(), Value::str(std::move(body)), scope);
        append_out(out, py_str(v));
        return Flow::Normal;
      }
      case SK::Macro: scope->vars[s.text] = make_macro(s, scope); return Flow::Normal;
      case SK::Break: return Flow::Break;
      case SK::Continue: return Flow::Continue;
      case SK::Scope: return exec(s.body, scope, out);
      case SK::With: {
        auto sc = std::make_shared<Scope>();
        sc->parent = scope;
        for (size_t k = 0; k < s.params.size(); ++k) sc->vars[s.params[k]] = eval(*s.defaults[k], scope);
        return exec(s.body, sc, out);
      }
    }
  } catch (PyError& e) {
    set_pos(e, s.pos);
    throw;
  }
  return Flow::Normal;
}

Value Interp::eval(const Expr& e, const ScopeP& scope) {
  try {
    return eval_inner(e, scope);
  } catch (PyError& err) {
    set_pos(err, e.pos);
    throw;
  }
}

namespace {

void eval_args(Interp& in, const Expr& e, const ScopeP& scope, Args& args) {
  const size_t np = e.npos();
  for (size_t k = 1; k < e.a.size(); ++k) {
    if (k - 1 < np)
      args.pos.push_back(in.eval(*e.a[k], scope));
    else
      args.kw.emplace_back(e.kw[k - 1 - np], in.eval(*e.a[k], scope));
  }
}

Value apply_filter_chain(Interp& in, const Expr* head, Value v, const ScopeP& scope) {
  std::vector<const Expr*> chain;
  for (const Expr* f = head; f; f = f->a[0].get()) chain.push_back(f);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    Args args;
    eval_args(in, **it, scope, args);
    v = in.filter((*it)->name, v, args);
  }
  return v;
}

bool compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return py_eq(a, b);
  if (op == "!=") return !py_eq(a, b);
  if (op == "<") return py_lt(a, b);
  if (op == ">") return py_lt(b, a);
  if (op == "<=") return py_lt(a, b) || py_eq(a, b);
  if (op == ">=") return py_lt(b, a) || py_eq(a, b);
  if (op == "in") return py_contains(b, a);
  return !py_contains(b, a);  // notin
}

}  // namespace

Value Interp::eval_inner(const Expr& e, const ScopeP& scope) {
  switch (e.k) {
    case EK::Literal: return e.lit;
    case EK::Name: {
      const Value* v = scope->find(e.name);
      return v ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case EK::ListLit:
    case EK::TupleLit: {
      List l;
      l.reserve(e.a.size());
      for (const auto& x : e.a) l.push_back(eval(*x, scope));
      return Value::make_list(std::move(l), e.k == EK::TupleLit);
    }
    case EK::DictLit: {
      Dict d;
      for (size_t k = 0; k + 1 < e.a.size(); k += 2) {
        Value key = eval(*e.a[k], scope);
        if (key.is_list() && !key.tuple) throw_py("TypeError", "unhashable type: 'list'");
        if (key.is_dict()) throw_py("TypeError", "unhashable type: 'dict'");
        d.set(key, eval(*e.a[k + 1], scope));
      }
      return Value::make_dict(std::move(d));
    }
    case EK::Attr: return getattr(eval(*e.a[0], scope), e.name);
    case EK::Item: {
      Value obj = eval(*e.a[0], scope);
      return getitem(obj, eval(*e.a[1], scope));
    }
    case EK::Slice: {
      Value obj = eval(*e.a[0], scope);
      Value a = e.a[1] ? eval(*e.a[1], scope) : Value::none();
      Value b = e.a[2] ? eval(*e.a[2], scope) : Value::none();
      Value c = e.a[3] ? eval(*e.a[3], scope) : Value::none();
      if (obj.is_undefined()) fail_undefined(obj);
      if (!obj.is_str() && !obj.is_list()) return missing_attr(obj, Value::str("slice"));
      return py_slice(obj, a, b, c);
    }
    case EK::Call: {
      Value fn = eval(*e.a[0], scope);
      Args args;
      eval_args(*this, e, scope, args);
      return call(fn, args);
    }
    case EK::Filter: {
      Value x = eval(*e.a[0], scope);
      Args args;
      eval_args(*this, e, scope, args);
      return filter(e.name, x, args);
    }
    case EK::Test: {
      Value x = eval(*e.a[0], scope);
      Args args;
      eval_args(*this, e, scope, args);
      return Value::boolean(test(e.name, x, args) != e.negated);
    }
    case EK::Neg:
    case EK::Pos: {
      Value x = eval(*e.a[0], scope);
      if (x.is_undefined()) fail_undefined(x);
      const char* op = e.k == EK::Neg ? "-" : "+";
      if (x.kind == Kind::Float) return Value::real(e.k == EK::Neg ? -x.f : x.f);
      if (x.is_integral()) {
        if (e.k == EK::Pos) return Value::integer(x.as_int());
        if (x.as_int() == INT64_MIN) throw_py("OverflowError", "integer overflow");
        return Value::integer(-x.as_int());
      }
      throw_py("TypeError", std::string("bad operand type for unary ") + op + ": '" + type_name(x) + "'");
    }
    case EK::Not: return Value::boolean(!truthy(eval(*e.a[0], scope)));
    case EK::Binary: {
      Value a = eval(*e.a[0], scope);
      Value b = eval(*e.a[1], scope);
      return binary_op(e.name, a, b);
    }
    case EK::Compare: {
      Value left = eval(*e.a[0], scope);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value right = eval(*e.a[k + 1], scope);
        if (!compare(e.ops[k], left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case EK::And: {
      Value a = eval(*e.a[0], scope);
      return truthy(a) ? eval(*e.a[1], scope) : a;
    }
    case EK::Or: {
      Value a = eval(*e.a[0], scope);
      return truthy(a) ? a : eval(*e.a[1], scope);
    }
    case EK::Cond:
      if (truthy(eval(*e.a[1], scope))) return eval(*e.a[0], scope);
      if (e.a[2]) return eval(*e.a[2], scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.pos.line) +
                              " evaluated to false and no else section was defined.");
    case EK::Concat: {
      std::string s;
      for (const auto& x : e.a) {
        s += py_str(eval(*x, scope));
        if (s.size() > k_max_string) throw_py("MemoryError", "string over 64 MiB");
      }
      charge_bytes(s.size());
      return Value::str(std::move(s));
    }
  }
  return Value::none();
}

Value Interp::filter(const std::string& name, const Value& x, Args& args) {
  step();
  return builtin_filter(*this, name, x, args);
}

bool Interp::test(const std::string& name, const Value& x, Args& args) { return builtin_test(*this, name, x, args); }

Value Interp::call(const Value& fn, Args& args) {
  step();
  if (fn.kind == Kind::Func) return fn.fn->fn(args);
  if (fn.is_undefined()) fail_undefined(fn);
  throw_py("TypeError", fmt::format("'{}' object is not callable", type_name(fn)));
}

namespace {
bool is_dict_attr(const std::string& name) {
  static const char* dict_attrs[] = {"items",   "keys",       "values", "get",   "copy",    "pop",
                                     "popitem", "setdefault", "update", "clear", "fromkeys"};
  return std::any_of(std::begin(dict_attrs), std::end(dict_attrs), [&](const char* a) { return name == a; });
}
}  // namespace

Value Interp::getattr(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Kind::Undefined: fail_undefined(obj);
    case Kind::Dict: {
      if (is_dict_attr(name)) return builtin_method(*this, obj, name);
      if (const Value* v = obj.dict->find(std::string_view(name))) return *v;
      return missing_attr(obj, Value::str(name));
    }
    case Kind::Namespace: {
      if (const Value* v = obj.dict->find(std::string_view(name))) return *v;
      return missing_attr(obj, Value::str(name));
    }
    default: {
      Value m = builtin_method(*this, obj, name);
      if (!m.is_undefined()) return m;
      return missing_attr(obj, Value::str(name));
    }
  }
}

Value Interp::getitem(const Value& obj, const Value& key) {
  switch (obj.kind) {
    case Kind::Undefined: fail_undefined(obj);
    case Kind::Dict:
    case Kind::Namespace:
      if (key.is_list() && !key.tuple) return missing_attr(obj, key);  // unhashable → TypeError → undefined
      if (const Value* v = obj.dict->find(key)) return *v;
      break;
    case Kind::List:
    case Kind::Str:
      if (key.is_integral()) {
        int64_t i = key.as_int();
        if (obj.is_list()) {
          const auto n = static_cast<int64_t>(obj.list->size());
          if (i < 0) i += n;
          if (i >= 0 && i < n) return (*obj.list)[static_cast<size_t>(i)];
        } else {
          const bool ascii =
              std::all_of(obj.s.begin(), obj.s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
          if (ascii) {
            const auto n = static_cast<int64_t>(obj.s.size());
            if (i < 0) i += n;
            if (i >= 0 && i < n) return Value::str(std::string(1, obj.s[static_cast<size_t>(i)]));
          } else {
            const std::u32string u = decode_utf8(obj.s);
            const auto n = static_cast<int64_t>(u.size());
            if (i < 0) i += n;
            if (i >= 0 && i < n)
              return Value::str(encode_utf8(std::u32string_view(u).substr(static_cast<size_t>(i), 1)));
          }
        }
        return missing_attr(obj, key);
      }
      break;
    default: break;
  }
  if (key.is_str() && obj.kind != Kind::Namespace) {
    Value m = obj.is_dict() ? (is_dict_attr(key.s) ? builtin_method(*this, obj, key.s) : Value())
                            : builtin_method(*this, obj, key.s);
    if (!m.is_undefined()) return m;
  }
  return missing_attr(obj, key);
}

}  // namespace detail

// ---------------- public API ----------------

namespace {

constexpr const char* k_continue_tag = "CONTINUE_FINAL_MESSAGE_TAG ";

int64_t clock_now(const RenderOptions& o, bool& utc) {
  utc = true;
  if (o.now) return *o.now;
  if (const char* e = std::getenv("SOURCE_DATE_EPOCH"); e && *e) {
    char* end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    if (end && *end == '\0') return v;
  }
  utc = false;
  return static_cast<int64_t>(std::time(nullptr));
}

std::string render_raw(const detail::Program& prog, const nlohmann::ordered_json& messages, const RenderOptions& o,
                       bool add_generation_prompt) {
  using namespace detail;
  bool utc = true;
  const int64_t now = clock_now(o, utc);
  if (!o.kwargs.is_object() && !o.kwargs.is_null()) fail("chat_template_kwargs must be an object");
  Interp in(now, utc, o.max_steps);
  std::string out;
  try {
    auto globals = std::make_shared<Scope>();
    install_globals(in, *globals);
    if (!o.date_string) globals->vars.erase("date_string");
    auto root = std::make_shared<Scope>();
    root->parent = globals;
    root->vars["messages"] = from_json(messages);
    root->vars["tools"] = o.tools.is_null() ? Value::none() : from_json(o.tools);
    root->vars["documents"] = Value::none();
    root->vars["add_generation_prompt"] = Value::boolean(add_generation_prompt);
    root->vars["bos_token"] = Value::str(o.bos_token);
    root->vars["eos_token"] = Value::str(o.eos_token);
    if (o.kwargs.is_object()) {
      for (const auto& [k, v] : o.kwargs.items()) root->vars[k] = from_json(v);
    }
    in.exec(prog.body, root, out);
  } catch (PyError& e) {
    throw TemplateError(e.raised ? TemplateError::Kind::raise_exception : TemplateError::Kind::runtime, e.type,
                        e.message, e.line, e.col);
  }
  return out;
}

}  // namespace

Template Template::parse(std::string source) {
  Template t;
  t.program_ = detail::parse_program(std::move(source));
  return t;
}

const std::string& Template::source() const { return program_->source; }

std::string Template::render(const nlohmann::ordered_json& messages, const RenderOptions& o) const {
  if (!o.continue_final_message) return render_raw(*program_, messages, o, o.add_generation_prompt);
  // transformers' continue_final_message: tag the final message, render, cut at the tag.
  if (o.add_generation_prompt)
    throw TemplateError(TemplateError::Kind::runtime, "ValueError",
                        "continue_final_message and add_generation_prompt are not compatible. Use "
                        "continue_final_message when you want the model to continue the final message, and "
                        "add_generation_prompt when you want to add a header that will prompt it to start a new "
                        "assistant message instead.",
                        0, 0);
  if (!messages.is_array() || messages.empty() || !messages.back().is_object())
    fail("continue_final_message needs a final message object");
  nlohmann::ordered_json msgs = messages;
  auto& last = msgs.back();
  auto it = last.find("content");
  if (it != last.end() && it->is_array()) {
    bool done = false;
    for (auto part = it->rbegin(); part != it->rend(); ++part) {
      if (part->is_object() && part->value("type", "") == "text" && part->contains("text") &&
          (*part)["text"].is_string()) {
        (*part)["text"] = (*part)["text"].get<std::string>() + k_continue_tag;
        done = true;
        break;
      }
    }
    if (!done)
      throw TemplateError(TemplateError::Kind::runtime, "ValueError",
                          "continue_final_message is set but we could not find any text to continue in the final "
                          "message!",
                          0, 0);
  } else if (it != last.end() && it->is_string()) {
    *it = it->get<std::string>() + k_continue_tag;
  } else {
    throw TemplateError(TemplateError::Kind::runtime, "TypeError",
                        "continue_final_message: the final message's content must be a string or a list of text parts",
                        0, 0);
  }
  std::string out = render_raw(*program_, msgs, o, false);
  const std::string tag = k_continue_tag;
  const std::string bare = tag.substr(0, tag.size() - 1);
  const size_t at = out.rfind(bare);
  if (at == std::string::npos)
    throw TemplateError(TemplateError::Kind::runtime, "ValueError",
                        "continue_final_message is set but the final message does not appear in the rendered chat", 0,
                        0);
  if (out.compare(at, tag.size(), tag) == 0) return out.substr(0, at);
  return detail::py_strip(std::string_view(out).substr(0, at), false, true, nullptr);
}

std::string chatml_fallback_source() {
  return "{%- for message in messages -%}\n"
         "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' -}}\n"
         "{%- endfor -%}\n"
         "{%- if add_generation_prompt -%}\n"
         "{{- '<|im_start|>assistant\\n' -}}\n"
         "{%- endif -%}\n";
}

namespace {
// Each as llama-chat.cpp's llm_chat_apply_template writes it (messages' content as strings).
struct Builtin {
  const char* name;
  const char* source;
};
constexpr Builtin k_builtins[] = {
    {"chatml", nullptr},  // chatml_fallback_source()
    {"llama3",
     "{%- for m in messages -%}"
     "{{- '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + (m['content'] | trim) + '<|eot_id|>' -}}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}"},
    // No system role: the system text (trimmed) opens the first user turn.
    {"gemma",
     "{%- set ns = namespace(sys='') -%}"
     "{%- for m in messages -%}"
     "{%- if m['role'] == 'system' -%}{%- set ns.sys = ns.sys + (m['content'] | trim) -%}"
     "{%- else -%}"
     "{%- set role = 'model' if m['role'] == 'assistant' else m['role'] -%}"
     "{{- '<start_of_turn>' + role + '\\n' -}}"
     "{%- if ns.sys and role != 'model' -%}{{- ns.sys + '\\n\\n' -}}{%- set ns.sys = '' -%}{%- endif -%}"
     "{{- (m['content'] | trim) + '<end_of_turn>\\n' -}}"
     "{%- endif -%}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt -%}{{- '<start_of_turn>model\\n' -}}{%- endif -%}"},
    {"mistral-v7",
     "{%- for m in messages -%}"
     "{%- if m['role'] == 'system' -%}{{- '[SYSTEM_PROMPT] ' + m['content'] + '[/SYSTEM_PROMPT]' -}}"
     "{%- elif m['role'] == 'user' -%}{{- '[INST] ' + m['content'] + '[/INST]' -}}"
     "{%- else -%}{{- ' ' + m['content'] + '</s>' -}}{%- endif -%}"
     "{%- endfor -%}"},
    {"mistral-v7-tekken",
     "{%- for m in messages -%}"
     "{%- if m['role'] == 'system' -%}{{- '[SYSTEM_PROMPT]' + m['content'] + '[/SYSTEM_PROMPT]' -}}"
     "{%- elif m['role'] == 'user' -%}{{- '[INST]' + m['content'] + '[/INST]' -}}"
     "{%- else -%}{{- m['content'] + '</s>' -}}{%- endif -%}"
     "{%- endfor -%}"},
    {"phi3",
     "{%- for m in messages -%}{{- '<|' + m['role'] + '|>\\n' + m['content'] + '<|end|>\\n' -}}{%- endfor -%}"
     "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}"},
    {"phi4",
     "{%- for m in messages -%}"
     "{%- set role = m['role'] if m['role'] in ['system', 'user'] else 'assistant' -%}"
     "{{- '<|im_start|>' + role + '<|im_sep|>' + m['content'] + '<|im_end|>' -}}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant<|im_sep|>' -}}{%- endif -%}"},
    {"deepseek3",
     "{%- for m in messages -%}"
     "{%- if m['role'] == 'system' -%}{{- m['content'] + '\\n\\n' -}}"
     "{%- elif m['role'] == 'user' -%}{{- '<\uff5cUser\uff5c>' + m['content'] -}}"
     "{%- elif m['role'] == 'assistant' -%}"
     "{{- '<\uff5cAssistant\uff5c>' + m['content'] + "
     "'<\uff5cend\u2581of\u2581sentence\uff5c>' -}}"
     "{%- endif -%}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt -%}{{- '<\uff5cAssistant\uff5c>' -}}{%- endif -%}"},
    {"zephyr",
     "{%- for m in messages -%}{{- '<|' + m['role'] + '|>\\n' + m['content'] + '<|endoftext|>\\n' -}}{%- endfor -%}"
     "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}"},
};
}  // namespace

std::optional<std::string> builtin_template_source(std::string_view name) {
  for (const Builtin& b : k_builtins)
    if (name == b.name) return b.source ? std::string(b.source) : chatml_fallback_source();
  return std::nullopt;
}

std::vector<std::string> builtin_template_names() {
  std::vector<std::string> out;
  for (const Builtin& b : k_builtins) out.emplace_back(b.name);
  return out;
}

}  // namespace rocky::chat
