// Python's arithmetic and comparison operators and slicing for the chat-template language
// (64-bit integers: an overflow raises OverflowError rather than wrapping).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <optional>

#include "chat/builtins.hpp"
#include "chat/interp.hpp"

namespace rocky::chat::detail {

void overflow() { throw_py("OverflowError", "integer overflow (chat templates use 64-bit integers)"); }

namespace {

[[noreturn]] void unsupported_operands(const std::string& op, const Value& a, const Value& b) {
  throw_py("TypeError",
           "unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

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
}  // namespace rocky::chat::detail
