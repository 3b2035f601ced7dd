// The chat-template parser: jinja2's grammar (jinja2/parser.py) over lexer.hpp's tokens, producing
// the trees of ast.hpp.
#include <algorithm>
#include <cstring>
#include <string_view>

#include "chat/ast.hpp"
#include "chat/lexer.hpp"
#include "chat/template.hpp"

namespace rocky::chat::detail {
namespace {

constexpr int k_max_depth = 200;  // nesting of expressions / statements (Python's recursion limit analogue)

// ---------------- parser ----------------

class Parser {
 public:
  Parser(std::vector<Token> toks, const Source& where) : t_(std::move(toks)), where_(where) {}

  Body parse_all() {
    Body b = subparse({});
    if (cur().t != TT::Eof) fail_here("unexpected tag");
    return b;
  }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& look(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  Pos here() const { return where_.pos(cur().off); }
  [[noreturn]] void fail_here(const std::string& msg) const { syntax(here(), msg); }
  bool is_op(const char* op) const { return cur().t == TT::Op && cur().s == op; }
  bool is_name(const char* n) const { return cur().t == TT::Name && cur().s == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    ++i_;
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    ++i_;
    return true;
  }
  std::string describe(const Token& t) const {
    switch (t.t) {
      case TT::Data: return "template data";
      case TT::VarBegin: return "'{{'";
      case TT::VarEnd: return "end of print statement";
      case TT::BlockBegin: return "'{%'";
      case TT::BlockEnd: return "end of statement block";
      case TT::Name: return "'" + t.s + "'";
      case TT::Str: return "string";
      case TT::Int: return "integer";
      case TT::Float: return "float";
      case TT::Op: return "'" + t.s + "'";
      case TT::Eof: return "end of template";
    }
    return "token";
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail_here(std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().t != TT::Name) fail_here("expected a name, got " + describe(cur()));
    return t_[i_++].s;
  }
  void expect(TT t, const char* what) {
    if (cur().t != t) fail_here(std::string("expected ") + what + ", got " + describe(cur()));
    ++i_;
  }

  struct Depth {
    explicit Depth(Parser& p) : p_(p) {
      if (++p_.depth_ > k_max_depth) p_.fail_here("template nesting too deep (more than 200 levels)");
    }
    ~Depth() { --p_.depth_; }
    Parser& p_;
  };

  ExprP node(EK k, Pos p) {
    auto e = std::make_unique<Expr>();
    e->k = k;
    e->pos = p;
    return e;
  }

  // Parses statements until a block tag whose first name is in `ends` (left unconsumed, after {%).
  Body subparse(const std::vector<std::string>& ends) {
    Depth d(*this);
    Body body;
    while (cur().t != TT::Eof) {
      const Token& tk = cur();
      if (tk.t == TT::Data) {
        auto s = std::make_unique<Stmt>();
        s->k = SK::Text;
        s->pos = where_.pos(tk.off);
        s->text = tk.s;
        body.push_back(std::move(s));
        ++i_;
      } else if (tk.t == TT::VarBegin) {
        auto s = std::make_unique<Stmt>();
        s->k = SK::Print;
        s->pos = where_.pos(tk.off);
        ++i_;
        s->expr = parse_tuple(true, {});
        expect(TT::VarEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (tk.t == TT::BlockBegin) {
        ++i_;
        if (cur().t == TT::Name && std::find(ends.begin(), ends.end(), cur().s) != ends.end()) return body;
        body.push_back(parse_statement());
      } else {
        fail_here("unexpected " + describe(tk));
      }
    }
    if (!ends.empty()) {
      std::string list;
      for (const auto& e : ends) list += (list.empty() ? "'" : " or '") + e + "'";
      fail_here("unexpected end of template; expected " + list);
    }
    return body;
  }

  void end_block() { expect(TT::BlockEnd, "end of statement block"); }

  StmtP parse_statement() {
    if (cur().t != TT::Name) fail_here("tag name expected");
    const Pos p = here();
    const std::string tag = cur().s;
    auto s = std::make_unique<Stmt>();
    s->pos = p;
    if (tag == "for") {
      ++i_;
      s->k = SK::For;
      s->targets = parse_targets("in");
      if (!skip_name("in")) fail_here("expected 'in', got " + describe(cur()));
      s->expr = parse_tuple(false, {"recursive"});
      if (skip_name("if")) s->cond = parse_expression(true);
      if (is_name("recursive")) fail_here("recursive for loops are not supported");
      end_block();
      ++loops_;
      s->body = subparse({"endfor", "else"});
      --loops_;
      if (skip_name("else")) {
        end_block();
        s->else_body = subparse({"endfor"});
      }
      ++i_;  // endfor
      end_block();
      return s;
    }
    if (tag == "if") {
      ++i_;
      s->k = SK::If;
      while (true) {
        ExprP c = parse_tuple(false, {});
        end_block();
        Body b = subparse({"elif", "else", "endif"});
        s->branches.emplace_back(std::move(c), std::move(b));
        if (skip_name("elif")) continue;
        if (skip_name("else")) {
          end_block();
          s->else_body = subparse({"endif"});
        }
        ++i_;  // endif
        end_block();
        return s;
      }
    }
    if (tag == "set") {
      ++i_;
      if (cur().t == TT::Name && look().t == TT::Op && look().s == ".") {
        s->k = SK::Set;
        s->ns_target = true;
        s->targets.push_back(expect_name());
        ++i_;
        s->targets.push_back(expect_name());
        expect_op("=");
        s->expr = parse_tuple(true, {});
        end_block();
        return s;
      }
      s->targets = parse_targets("=");
      if (skip_op("=")) {
        s->k = SK::Set;
        s->expr = parse_tuple(true, {});
        end_block();
        return s;
      }
      if (s->targets.size() != 1) fail_here("expected '='");
      s->k = SK::SetBlock;
      if (is_op("|")) s->expr = parse_filter_chain(nullptr);
      end_block();
      s->body = subparse({"endset"});
      ++i_;
      end_block();
      return s;
    }
    if (tag == "macro") {
      ++i_;
      s->k = SK::Macro;
      s->text = expect_name();
      expect_op("(");
      while (!skip_op(")")) {
        if (!s->params.empty()) expect_op(",");
        if (skip_op(")")) break;
        s->params.push_back(expect_name());
        if (skip_op("="))
          s->defaults.push_back(parse_expression(true));
        else
          s->defaults.push_back(nullptr);
      }
      end_block();
      const int saved = loops_;
      loops_ = 0;
      s->body = subparse({"endmacro"});
      loops_ = saved;
      ++i_;
      if (cur().t == TT::Name) ++i_;
      end_block();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loops_ == 0) fail_here("'" + tag + "' outside of a loop");
      ++i_;
      s->k = tag == "break" ? SK::Break : SK::Continue;
      end_block();
      return s;
    }
    if (tag == "filter") {
      ++i_;
      s->k = SK::FilterBlock;
      s->expr = parse_filter_chain(nullptr, true);
      end_block();
      s->body = subparse({"endfilter"});
      ++i_;
      end_block();
      return s;
    }
    if (tag == "generation" || tag == "block") {
      ++i_;
      s->k = SK::Scope;
      const std::string end = "end" + tag;
      if (tag == "block") {
        expect_name();
        while (is_name("scoped") || is_name("required")) ++i_;
      }
      end_block();
      s->body = subparse({end});
      ++i_;
      if (tag == "block" && cur().t == TT::Name) ++i_;
      end_block();
      return s;
    }
    if (tag == "with") {
      ++i_;
      s->k = SK::With;
      while (cur().t != TT::BlockEnd) {
        if (!s->params.empty()) expect_op(",");
        s->params.push_back(expect_name());
        expect_op("=");
        s->defaults.push_back(parse_expression(true));
      }
      end_block();
      s->body = subparse({"endwith"});
      ++i_;
      end_block();
      return s;
    }
    if (tag == "include" || tag == "import" || tag == "from" || tag == "extends" || tag == "call" ||
        tag == "autoescape" || tag == "do" || tag == "trans")
      fail_here("'{% " + tag + " %}' is not supported in chat templates");
    fail_here("Encountered unknown tag '" + tag + "'.");
  }

  // Assignment targets: `a` or `a, b` or `(a, b)`.
  std::vector<std::string> parse_targets(const char* end) {
    std::vector<std::string> names;
    const bool paren = skip_op("(");
    while (true) {
      names.push_back(expect_name());
      if (!skip_op(",")) break;
      if (is_name(end) || is_op(")")) break;
    }
    if (paren) expect_op(")");
    return names;
  }

  ExprP parse_tuple(bool with_condexpr, const std::vector<std::string>& extra_end, bool explicit_paren = false) {
    const Pos p = here();
    std::vector<ExprP> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (tuple_end(extra_end)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_paren) fail_here("expected an expression, got " + describe(cur()));
    }
    auto e = node(EK::TupleLit, p);
    e->a = std::move(items);
    return e;
  }

  bool tuple_end(const std::vector<std::string>& extra_end) const {
    const Token& t = cur();
    if (t.t == TT::VarEnd || t.t == TT::BlockEnd || t.t == TT::Eof) return true;
    if (t.t == TT::Op && (t.s == ")" || t.s == "]" || t.s == "}")) return true;
    if (t.t == TT::Name && std::find(extra_end.begin(), extra_end.end(), t.s) != extra_end.end()) return true;
    return false;
  }

  ExprP parse_expression(bool with_condexpr) {
    Depth d(*this);
    if (!with_condexpr) return parse_or();
    ExprP e = parse_or();
    while (is_name("if")) {
      const Pos p = here();
      ++i_;
      ExprP c = parse_or();
      ExprP other;
      if (skip_name("else")) other = parse_expression(true);
      auto n = node(EK::Cond, p);
      n->a.push_back(std::move(e));
      n->a.push_back(std::move(c));
      n->a.push_back(std::move(other));
      e = std::move(n);
    }
    return e;
  }

  ExprP bin(EK k, ExprP l, ExprP r, Pos p, std::string op = {}) {
    auto n = node(k, p);
    n->name = std::move(op);
    n->a.push_back(std::move(l));
    n->a.push_back(std::move(r));
    return n;
  }

  ExprP parse_or() {
    ExprP l = parse_and();
    while (is_name("or")) {
      const Pos p = here();
      ++i_;
      l = bin(EK::Or, std::move(l), parse_and(), p);
    }
    return l;
  }
  ExprP parse_and() {
    ExprP l = parse_not();
    while (is_name("and")) {
      const Pos p = here();
      ++i_;
      l = bin(EK::And, std::move(l), parse_not(), p);
    }
    return l;
  }
  ExprP parse_not() {
    if (is_name("not")) {
      Depth d(*this);
      const Pos p = here();
      ++i_;
      auto n = node(EK::Not, p);
      n->a.push_back(parse_not());
      return n;
    }
    return parse_compare();
  }
  ExprP parse_compare() {
    const Pos p = here();
    ExprP first = parse_math1();
    ExprP cmp;
    while (true) {
      std::string op;
      if (cur().t == TT::Op && (cur().s == "==" || cur().s == "!=" || cur().s == "<" || cur().s == ">" ||
                                cur().s == "<=" || cur().s == ">=")) {
        op = cur().s;
        ++i_;
      } else if (is_name("in")) {
        op = "in";
        ++i_;
      } else if (is_name("not") && look().t == TT::Name && look().s == "in") {
        op = "notin";
        i_ += 2;
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(EK::Compare, p);
        cmp->a.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->a.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  ExprP parse_math1() {
    ExprP l = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Pos p = here();
      std::string op = t_[i_++].s;
      l = bin(EK::Binary, std::move(l), parse_concat(), p, op);
    }
    return l;
  }
  ExprP parse_concat() {
    const Pos p = here();
    ExprP first = parse_math2();
    if (!is_op("~")) return first;
    auto n = node(EK::Concat, p);
    n->a.push_back(std::move(first));
    while (skip_op("~")) n->a.push_back(parse_math2());
    return n;
  }
  ExprP parse_math2() {
    ExprP l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Pos p = here();
      std::string op = t_[i_++].s;
      l = bin(EK::Binary, std::move(l), parse_pow(), p, op);
    }
    return l;
  }
  ExprP parse_pow() {
    ExprP l = parse_unary(true);
    while (is_op("**")) {
      const Pos p = here();
      ++i_;
      l = bin(EK::Binary, std::move(l), parse_unary(true), p, "**");
    }
    return l;
  }
  ExprP parse_unary(bool with_filter) {
    Depth d(*this);
    const Pos p = here();
    ExprP e;
    if (is_op("-") || is_op("+")) {
      const bool neg = is_op("-");
      ++i_;
      e = node(neg ? EK::Neg : EK::Pos, p);
      e->a.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprP parse_primary() {
    Depth d(*this);
    const Token& t = cur();
    const Pos p = here();
    if (t.t == TT::Name) {
      ++i_;
      auto e = node(EK::Literal, p);
      if (t.s == "true" || t.s == "True") {
        e->lit = Value::boolean(true);
      } else if (t.s == "false" || t.s == "False") {
        e->lit = Value::boolean(false);
      } else if (t.s == "none" || t.s == "None") {
        e->lit = Value::none();
      } else {
        e->k = EK::Name;
        e->name = t.s;
      }
      return e;
    }
    if (t.t == TT::Str) {
      std::string s;
      while (cur().t == TT::Str) s += t_[i_++].s;
      auto e = node(EK::Literal, p);
      e->lit = Value::str(std::move(s));
      return e;
    }
    if (t.t == TT::Int || t.t == TT::Float) {
      auto e = node(EK::Literal, p);
      e->lit = t.t == TT::Int ? Value::integer(t.i) : Value::real(t.f);
      ++i_;
      return e;
    }
    if (skip_op("(")) {
      ExprP e = parse_tuple(true, {}, true);
      expect_op(")");
      return e;
    }
    if (skip_op("[")) {
      auto e = node(EK::ListLit, p);
      while (!is_op("]")) {
        if (!e->a.empty()) expect_op(",");
        if (is_op("]")) break;
        e->a.push_back(parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (skip_op("{")) {
      auto e = node(EK::DictLit, p);
      while (!is_op("}")) {
        if (!e->a.empty()) expect_op(",");
        if (is_op("}")) break;
        e->a.push_back(parse_expression(true));
        expect_op(":");
        e->a.push_back(parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    fail_here("unexpected " + describe(t));
  }

  ExprP parse_postfix(ExprP e) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprP parse_filter_expr(ExprP e) {
    while (true) {
      if (is_op("|")) {
        e = parse_filter_chain(std::move(e));
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprP parse_subscript(ExprP obj) {
    Depth d(*this);
    const Pos p = here();
    if (skip_op(".")) {
      if (cur().t == TT::Name) {
        auto e = node(EK::Attr, p);
        e->name = t_[i_++].s;
        e->a.push_back(std::move(obj));
        return e;
      }
      if (cur().t == TT::Int) {
        auto e = node(EK::Item, p);
        e->a.push_back(std::move(obj));
        auto k = node(EK::Literal, here());
        k->lit = Value::integer(t_[i_++].i);
        e->a.push_back(std::move(k));
        return e;
      }
      fail_here("expected name or number after '.'");
    }
    expect_op("[");
    std::vector<ExprP> args;
    bool slice = false;
    ExprP sa[3];
    // one subscript (a tuple of several is a tuple key)
    auto parse_subscribed = [&]() -> ExprP {
      const Pos sp = here();
      ExprP start;
      if (!is_op(":")) {
        start = parse_expression(true);
        if (!is_op(":")) return start;
      }
      ++i_;  // ':'
      auto e = node(EK::Slice, sp);
      e->a.push_back(nullptr);  // object, filled by the caller
      e->a.push_back(std::move(start));
      ExprP stop, step;
      if (!is_op("]") && !is_op(",") && !is_op(":")) stop = parse_expression(true);
      if (skip_op(":")) {
        if (!is_op("]") && !is_op(",")) step = parse_expression(true);
      }
      e->a.push_back(std::move(stop));
      e->a.push_back(std::move(step));
      return e;
    };
    (void)sa;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      if (is_op("]")) break;
      args.push_back(parse_subscribed());
      if (args.back()->k == EK::Slice) slice = true;
    }
    expect_op("]");
    if (args.size() == 1 && args[0]->k == EK::Slice) {
      args[0]->a[0] = std::move(obj);
      args[0]->pos = p;
      return std::move(args[0]);
    }
    if (slice) syntax(p, "tuples of slices are not supported");
    if (args.empty()) syntax(p, "expected an expression in '[]'");
    auto e = node(EK::Item, p);
    e->a.push_back(std::move(obj));
    if (args.size() == 1) {
      e->a.push_back(std::move(args[0]));
    } else {
      auto t = node(EK::TupleLit, p);
      t->a = std::move(args);
      e->a.push_back(std::move(t));
    }
    return e;
  }

  // Call arguments into e->a (after a[0]) and e->kw.
  void parse_call_args(Expr& e) {
    expect_op("(");
    std::vector<ExprP> pos;
    std::vector<std::pair<std::string, ExprP>> kws;
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail_here("*args / **kwargs in calls are not supported");
      if (cur().t == TT::Name && look().t == TT::Op && look().s == "=") {
        std::string k = t_[i_].s;
        i_ += 2;
        kws.emplace_back(std::move(k), parse_expression(true));
      } else {
        if (!kws.empty()) fail_here("positional argument after keyword argument");
        pos.push_back(parse_expression(true));
      }
    }
    expect_op(")");
    for (auto& x : pos) e.a.push_back(std::move(x));
    for (auto& [k, x] : kws) {
      e.kw.push_back(k);
      e.a.push_back(std::move(x));
    }
  }

  ExprP parse_call(ExprP fn) {
    Depth d(*this);
    auto e = node(EK::Call, here());
    e->a.push_back(std::move(fn));
    parse_call_args(*e);
    return e;
  }

  // `| name(args) | name2 ...` (one filter unless `chain`; a filter block reads the whole chain)
  ExprP parse_filter_chain(ExprP operand, bool block = false) {
    Depth d(*this);
    bool first = true;
    while (first ? (block || is_op("|")) : is_op("|")) {
      if (!(first && block)) expect_op("|");
      first = false;
      const Pos p = here();
      std::string name = expect_name();
      while (skip_op(".")) {  // appended in two steps: GCC 12's -Wrestrict misreads "." + string&& here
        name += '.';
        name += expect_name();
      }
      if (const int fs = filter_support(name); fs != 1)
        syntax(p, fs == 2 ? "filter '" + name + "' is not supported in chat templates"
                          : "No filter named '" + name + "'.");
      auto e = node(EK::Filter, p);
      e->name = name;
      e->a.push_back(std::move(operand));
      if (is_op("(")) parse_call_args(*e);
      operand = std::move(e);
      if (!block) break;
    }
    return operand;
  }

  ExprP parse_test(ExprP operand) {
    Depth d(*this);
    const Pos p = here();
    ++i_;  // is
    const bool negated = skip_name("not");
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    if (const int ts = test_support(name); ts != 1)
      syntax(p, ts == 2 ? "test '" + name + "' is not supported in chat templates" : "No test named '" + name + "'.");
    auto e = node(EK::Test, p);
    e->name = name;
    e->negated = negated;
    e->a.push_back(std::move(operand));
    const Token& t = cur();
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((t.t == TT::Name || t.t == TT::Str || t.t == TT::Int || t.t == TT::Float || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail_here("You cannot chain multiple tests with is");
      e->a.push_back(parse_postfix(parse_primary()));
    }
    return e;
  }

  std::vector<Token> t_;
  const Source& where_;
  size_t i_ = 0;
  int depth_ = 0;
  int loops_ = 0;
};

}  // namespace

std::shared_ptr<Program> parse_program(std::string source) {
  auto prog = std::make_shared<Program>();
  prog->source = source;
  // jinja2's lexer: \r\n and \r become \n; keep_trailing_newline=False drops one final newline.
  std::string norm;
  norm.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      norm.push_back('\n');
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      norm.push_back(source[k]);
    }
  }
  if (!norm.empty() && norm.back() == '\n') norm.pop_back();
  const Source where(norm);
  Parser ps(lex(norm, where), where);
  prog->body = ps.parse_all();
  return prog;
}

}  // namespace rocky::chat::detail
