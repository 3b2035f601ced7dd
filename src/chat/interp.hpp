// The tree-walking renderer of chat templates and its builtins (internal to src/chat).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/ast.hpp"
#include "chat/value.hpp"

namespace rocky::chat::detail {

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using ScopeP = std::shared_ptr<Scope>;

// Resource limits (with k_max_string, k_max_nesting and the Budget of value.hpp).
constexpr int k_max_call_depth = 200;     // nested macro calls (Python's recursion limit)
constexpr int64_t k_max_range = 100'000;  // jinja2.sandbox.MAX_RANGE

enum class Flow : uint8_t { Normal, Break, Continue };

class Interp {
 public:
  Interp(int64_t now_epoch, bool utc, int64_t max_steps) : now_(now_epoch), utc_(utc) {
    budget_.max = max_steps;
    saved_ = t_budget;
    t_budget = &budget_;
  }
  ~Interp();
  Interp(const Interp&) = delete;
  Interp& operator=(const Interp&) = delete;

  Flow exec(const Body& body, const ScopeP& scope, std::string& out);
  Value eval(const Expr& e, const ScopeP& scope);

  Value call(const Value& fn, Args& args);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  Value filter(const std::string& name, const Value& x, Args& args);
  bool test(const std::string& name, const Value& x, Args& args);
  void step();
  Value make_namespace(Dict d);

  int64_t now() const { return now_; }
  bool utc() const { return utc_; }

 private:
  Flow exec_stmt(const Stmt& s, const ScopeP& scope, std::string& out);
  Value eval_inner(const Expr& e, const ScopeP& scope);
  Value make_macro(const Stmt& s, const ScopeP& scope);

  int64_t now_;
  bool utc_;
  Budget budget_;
  Budget* saved_ = nullptr;
  int depth_ = 0;
  std::vector<std::shared_ptr<Dict>> namespaces_;  // cleared at the end (breaks ns.x = ns cycles)
};

// builtins.cpp
Value builtin_filter(Interp& in, const std::string& name, const Value& x, Args& args);
bool builtin_test(Interp& in, const std::string& name, const Value& x, Args& args);
// A method of a str/dict/list value as a bound callable; Undefined when the type has no such
// attribute. Python methods this subset does not implement raise (never a silent Undefined).
Value builtin_method(Interp& in, const Value& obj, const std::string& name);
void install_globals(Interp& in, Scope& globals);
Value binary_op(const std::string& op, const Value& a, const Value& b);
Value py_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Argument helper: positional index `i` or keyword `name`, else `def`.
const Value* arg(const Args& a, size_t i, const char* name);
void check_args(const Args& a, const char* fn, size_t max_pos, std::initializer_list<const char*> names);

}  // namespace rocky::chat::detail
