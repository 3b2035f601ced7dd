// JSON Schema → GBNF (see json_schema.hpp).
#include "grammar/json_schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/error.hpp"
#include "grammar/json_regex.hpp"

namespace rocky::grammar {
namespace {

using json = nlohmann::json;

// Primitive rules: name → body (rules they use are added with them, see Converter::prim).
struct Prim {
  const char* name;
  const char* body;
  std::vector<const char*> deps;
};
const std::vector<Prim>& prims() {
  static const std::vector<Prim> p = {
      {"space", R"(| " ")", {}},
      {"boolean", R"(("true" | "false") space)", {"space"}},
      {"null", R"("null" space)", {"space"}},
      {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))", {}},
      {"string", R"("\"" char* "\"" space)", {"char", "space"}},
      {"integral-part", R"([0] | [1-9] [0-9]{0,15})", {}},
      {"decimal-part", R"([0-9]{1,16})", {}},
      {"number",
       R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? [0-9]{1,2})? space)",
       {"integral-part", "decimal-part", "space"}},
      {"integer", R"(("-"? integral-part) space)", {"integral-part", "space"}},
      {"value",
       R"(object | array | string | number | boolean | null)",
       {"object", "array", "string", "number", "boolean", "null"}},
      {"object",
       R"("{" space ( string ":" space value ("," space string ":" space value){0,7} )? "}" space)",
       {"string", "value", "space"}},
      {"array", R"("[" space ( value ("," space value){0,7} )? "]" space)", {"value", "space"}},
      {"uuid",
       R"("\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"" space)",
       {"space"}},
      {"date-year",
       R"([0-9] [0-9] [0-9] [1-9] | [0-9] [0-9] [1-9] [0-9] | [0-9] [1-9] [0-9] [0-9] | [1-9] [0-9] [0-9] [0-9])",
       {}},
      {"leap-yy", R"([02468] [48] | [2468] "0" | [13579] [26])", {}},
      {"date-md",
       R"(("01" | "03" | "05" | "07" | "08" | "10" | "12") "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("04" | "06" | "09" | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8]))",
       {}},
      {"date",
       R"(date-year "-" date-md | ([0-9] [0-9] leap-yy | leap-yy "00") "-02-29")",
       {"date-year", "date-md", "leap-yy"}},
      {"time",
       R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))",
       {}},
      {"date-time", R"(date "T" time)", {"date", "time"}},
      {"date-string", R"("\"" date "\"" space)", {"date", "space"}},
      {"time-string", R"("\"" time "\"" space)", {"time", "space"}},
      {"date-time-string", R"("\"" date-time "\"" space)", {"date-time", "space"}},
      {"email-string", R"("\"" [a-zA-Z0-9._%+-]+ "@" [a-zA-Z0-9-]+ ("." [a-zA-Z0-9-]+)* "\"" space)", {"space"}},
  };
  return p;
}

const std::unordered_set<std::string>& annotations() {
  static const std::unordered_set<std::string> a = {
      "$schema",  "$id",       "id",         "title",   "description",     "default",          "examples",   "$comment",
      "readOnly", "writeOnly", "deprecated", "$anchor", "contentEncoding", "contentMediaType", "$vocabulary"};
  return a;
}
const std::unordered_set<std::string>& unsupported() {
  static const std::unordered_set<std::string> u = {"multipleOf",
                                                    "uniqueItems",
                                                    "patternProperties",
                                                    "propertyNames",
                                                    "minProperties",
                                                    "maxProperties",
                                                    "dependencies",
                                                    "dependentRequired",
                                                    "dependentSchemas",
                                                    "if",
                                                    "then",
                                                    "else",
                                                    "not",
                                                    "contains",
                                                    "minContains",
                                                    "maxContains",
                                                    "unevaluatedProperties",
                                                    "unevaluatedItems",
                                                    "additionalItems",
                                                    "$dynamicRef",
                                                    "$dynamicAnchor",
                                                    "$recursiveRef",
                                                    "$recursiveAnchor",
                                                    "contentSchema"};
  return u;
}

// A GBNF literal for the bytes of s (json_regex.cpp).
std::string lit(std::string_view s) { return gbnf_literal(s); }

std::string pointer_escape(const std::string& k) {
  std::string o;
  for (char c : k) {
    if (c == '~')
      o += "~0";
    else if (c == '/')
      o += "~1";
    else
      o += c;
  }
  return o;
}

int digits(uint64_t v) { return v < 10 ? 1 : 1 + digits(v / 10); }
uint64_t pow10(int n) {
  uint64_t r = 1;
  for (int i = 0; i < n; ++i) r *= 10;
  return r;
}

// Digit strings of equal length: every number in [lo, hi] as a GBNF expression.
std::string same_len(const std::string& lo, const std::string& hi) {
  if (lo == hi) return lit(lo);
  if (lo.size() == 1) return fmt::format("[{}-{}]", lo[0], hi[0]);
  const std::string lr = lo.substr(1), hr = hi.substr(1);
  const size_t k = lr.size();
  if (lo[0] == hi[0]) return fmt::format("\"{}\" ({})", lo[0], same_len(lr, hr));
  std::vector<std::string> alts;
  char mid_lo = static_cast<char>(lo[0] + 1), mid_hi = static_cast<char>(hi[0] - 1);
  if (lr == std::string(k, '0'))
    mid_lo = lo[0];
  else
    alts.push_back(fmt::format("\"{}\" ({})", lo[0], same_len(lr, std::string(k, '9'))));
  const bool hi_full = hr == std::string(k, '9');
  if (hi_full) mid_hi = hi[0];
  if (mid_lo <= mid_hi) alts.push_back(fmt::format("[{}-{}] [0-9]{{{}}}", mid_lo, mid_hi, k));
  if (!hi_full) alts.push_back(fmt::format("\"{}\" ({})", hi[0], same_len(std::string(k, '0'), hr)));
  std::string o;
  for (size_t i = 0; i < alts.size(); ++i) o += (i ? " | " : "") + alts[i];
  return o;
}

// Non-negative integers in [a, b] (no b: unbounded, up to 16 digits), no leading zeros.
std::string uint_range(uint64_t a, std::optional<uint64_t> b) {
  std::vector<std::string> alts;
  const int na = digits(a), nb = b ? digits(*b) : na;
  for (int n = na; n <= nb; ++n) {
    const uint64_t lo = std::max(a, n == 1 ? uint64_t{0} : pow10(n - 1));
    const uint64_t hi = b ? std::min(*b, pow10(n) - 1) : pow10(n) - 1;
    if (lo <= hi) alts.push_back(same_len(std::to_string(lo), std::to_string(hi)));
  }
  if (!b && na < 16) alts.push_back(fmt::format("[1-9] [0-9]{{{},15}}", na));
  std::string o;
  for (size_t i = 0; i < alts.size(); ++i) o += (i ? " | " : "") + std::string("(") + alts[i] + ")";
  return o;
}

// Integers in [lo, hi] (either side open), "" when empty.
std::string int_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi) return "";
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {  // negatives -m, m in [mlo, mhi]
    const uint64_t mlo = (hi && *hi < 0) ? static_cast<uint64_t>(-*hi) : 1;
    std::optional<uint64_t> mhi;
    if (lo) mhi = static_cast<uint64_t>(-*lo);
    alts.push_back("\"-\" (" + uint_range(mlo, mhi) + ")");
  }
  if (!hi || *hi >= 0) {
    const uint64_t a = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> b;
    if (hi) b = static_cast<uint64_t>(*hi);
    alts.push_back("(" + uint_range(a, b) + ")");
  }
  std::string o;
  for (size_t i = 0; i < alts.size(); ++i) o += (i ? " | " : "") + alts[i];
  return o;
}

class Converter {
 public:
  explicit Converter(const json& root) : root_(root) {}

  std::string run(const std::string& prefix) {
    const std::string e = expr(root_, "", "root");
    if (e != "root") rules_["root"] = e;
    std::string o;
    o.reserve(4096);
    for (const auto& [name, body] : rules_) o += prefix + name + " ::= " + rename(body, prefix) + "\n";
    return o;
  }

  // `body` with every rule reference prefixed (literals, classes and {m,n} counts left alone).
  std::string rename(const std::string& body, const std::string& prefix) const {
    if (prefix.empty()) return body;
    std::string o;
    auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; };
    for (size_t i = 0; i < body.size();) {
      const char c = body[i];
      if (c == '"' || c == '[' || c == '{') {
        const char close = c == '"' ? '"' : c == '[' ? ']' : '}';
        size_t j = i + 1;
        while (j < body.size() && body[j] != close) j += body[j] == '\\' ? 2 : 1;
        o.append(body, i, j + 1 - i);
        i = j + 1;
      } else if (word(c)) {
        size_t j = i;
        while (j < body.size() && word(body[j])) ++j;
        const std::string w = body.substr(i, j - i);
        o += rules_.count(w) ? prefix + w : w;
        i = j;
      } else {
        o += c;
        ++i;
      }
    }
    return o;
  }

  std::string object_any() {
    prim("object");
    rules_["root"] = "object";
    std::string o;
    for (const auto& [name, body] : rules_) o += name + " ::= " + body + "\n";
    return o;
  }

 private:
  template <typename... Args>
  [[noreturn]] static void err(const std::string& ptr, fmt::format_string<Args...> f, Args&&... args) {
    throw Error(
        fmt::format("json schema at {}: {}", ptr.empty() ? "/" : ptr, fmt::format(f, std::forward<Args>(args)...)));
  }

  std::string prim(const std::string& name) {
    if (rules_.count(name)) return name;
    for (const Prim& p : prims())
      if (name == p.name) {
        rules_[name] = p.body;
        for (const char* d : p.deps) prim(d);
        return name;
      }
    throw Error("internal: unknown primitive " + name);
  }

  // Adds a rule (or reuses one with the same body) and returns its name.
  std::string add(const std::string& hint, const std::string& body) {
    auto it = by_body_.find(body);
    if (it != by_body_.end()) return it->second;
    std::string base;
    for (char c : hint) base += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    if (base.empty() || base == "root") base = "r";
    std::string name = base;
    for (int k = 1; rules_.count(name) || reserved_.count(name); ++k) name = fmt::format("{}-{}", base, k);
    rules_[name] = body;
    by_body_.emplace(body, name);
    return name;
  }
  std::string reserve(const std::string& hint) {
    std::string base;
    for (char c : hint) base += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    if (base.empty()) base = "ref";
    std::string name = base;
    for (int k = 1; rules_.count(name) || reserved_.count(name); ++k) name = fmt::format("{}-{}", base, k);
    reserved_.insert(name);
    return name;
  }

  const json& resolve_ref(const std::string& ref, const std::string& ptr) const {
    if (ref.empty() || ref[0] != '#') err(ptr, "$ref '{}' is not local (only '#…' references are supported)", ref);
    const json* cur = &root_;
    std::string path = ref.substr(1);
    if (path.empty()) return root_;
    if (path[0] != '/') err(ptr, "$ref '{}' is not a JSON pointer", ref);
    size_t i = 1;
    while (true) {
      const size_t j = path.find('/', i);
      std::string tok = path.substr(i, j == std::string::npos ? std::string::npos : j - i);
      std::string t;
      for (size_t k = 0; k < tok.size(); ++k) {
        if (tok[k] == '~' && k + 1 < tok.size() && (tok[k + 1] == '0' || tok[k + 1] == '1')) {
          t += tok[k + 1] == '0' ? '~' : '/';
          ++k;
        } else {
          t += tok[k];
        }
      }
      if (cur->is_object() && cur->contains(t)) {
        cur = &(*cur)[t];
      } else if (cur->is_array() && !t.empty() && std::all_of(t.begin(), t.end(), ::isdigit) &&
                 std::stoul(t) < cur->size()) {
        cur = &(*cur)[std::stoul(t)];
      } else {
        err(ptr, "$ref '{}' does not resolve", ref);
      }
      if (j == std::string::npos) break;
      i = j + 1;
    }
    return *cur;
  }

  // Follows $ref chains (for merging).
  json deref(const json& s, const std::string& ptr, int depth = 0) const {
    if (depth > 64) err(ptr, "$ref chain too long (a reference cycle?)");
    if (s.is_object() && s.contains("$ref") && s["$ref"].is_string())
      return deref(resolve_ref(s["$ref"].get<std::string>(), ptr), ptr, depth + 1);
    return s;
  }

  static json merge(json a, const json& b) {
    if (b.is_boolean()) return b.get<bool>() ? a : b;
    if (!a.is_object()) return a;
    for (auto it = b.begin(); it != b.end(); ++it) {
      const std::string& k = it.key();
      if (k == "properties" && a.contains("properties") && a["properties"].is_object() && it->is_object()) {
        for (auto p = it->begin(); p != it->end(); ++p) {
          if (a["properties"].contains(p.key()))
            a["properties"][p.key()] = json{{"allOf", json::array({a["properties"][p.key()], *p})}};
          else
            a["properties"][p.key()] = *p;
        }
      } else if (k == "required" && a.contains("required") && a["required"].is_array() && it->is_array()) {
        for (const auto& r : *it)
          if (std::find(a["required"].begin(), a["required"].end(), r) == a["required"].end())
            a["required"].push_back(r);
      } else {
        a[k] = *it;
      }
    }
    return a;
  }

  void check_keywords(const json& s, const std::string& ptr) {
    for (auto it = s.begin(); it != s.end(); ++it)
      if (unsupported().count(it.key())) err(ptr, "unsupported keyword '{}'", it.key());
  }

  std::string expr(const json& s, const std::string& ptr, const std::string& hint) {
    if (++depth_ > 200) err(ptr, "schema nested too deeply");
    struct Guard {
      int& d;
      ~Guard() { --d; }
    } guard{depth_};
    if (s.is_boolean()) {
      if (!s.get<bool>()) err(ptr, "the schema 'false' admits no value");
      return prim("value");
    }
    if (!s.is_object()) err(ptr, "a schema must be an object or a boolean, not {}", s.type_name());
    check_keywords(s, ptr);

    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) err(ptr + "/$ref", "must be a string");
      const std::string ref = s["$ref"].get<std::string>();
      auto it = ref_rules_.find(ref);
      if (it != ref_rules_.end()) return it->second;
      const json& target = resolve_ref(ref, ptr);
      const size_t slash = ref.rfind('/');
      const std::string name = reserve(slash == std::string::npos ? "ref" : ref.substr(slash + 1));
      ref_rules_[ref] = name;
      const std::string body = expr(target, ref.substr(1), name);
      rules_[name] = body;
      return name;
    }
    if (s.contains("allOf")) {
      const json& all = s["allOf"];
      if (!all.is_array() || all.empty()) err(ptr + "/allOf", "must be a non-empty array");
      json rest = s;
      rest.erase("allOf");
      json m = rest;
      for (size_t i = 0; i < all.size(); ++i) m = merge(m, deref(all[i], ptr + fmt::format("/allOf/{}", i)));
      if (m.is_boolean()) return expr(m, ptr, hint);
      return expr(m, ptr + "/allOf", hint);
    }
    for (const char* kw : {"anyOf", "oneOf"}) {
      if (!s.contains(kw)) continue;
      const json& alts = s[kw];
      if (!alts.is_array() || alts.empty()) err(ptr + "/" + kw, "must be a non-empty array");
      json rest = s;
      rest.erase(kw);
      bool rest_constrains = false;
      for (auto it = rest.begin(); it != rest.end(); ++it)
        if (!annotations().count(it.key())) rest_constrains = true;
      std::string body;
      for (size_t i = 0; i < alts.size(); ++i) {
        const std::string p = ptr + fmt::format("/{}/{}", kw, i);
        const std::string e = rest_constrains ? expr(merge(rest, deref(alts[i], p)), p, hint)
                                              : expr(alts[i], p, hint + "-" + std::to_string(i));
        body += (i ? " | " : "") + e;
      }
      return add(hint, body);
    }
    if (s.contains("const")) {
      prim("space");
      return add(hint, lit(s["const"].dump()) + " space");
    }
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) err(ptr + "/enum", "must be a non-empty array");
      std::string body = "(";
      for (size_t i = 0; i < e.size(); ++i) body += (i ? " | " : "") + lit(e[i].dump());
      prim("space");
      return add(hint, body + ") space");
    }

    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const auto& x : t) {
          if (!x.is_string()) err(ptr + "/type", "must hold type names");
          types.push_back(x.get<std::string>());
        }
      } else {
        err(ptr + "/type", "must be a type name or a non-empty list of them");
      }
    } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) {
      types.push_back("array");
    } else if (s.contains("pattern") || s.contains("format") || s.contains("minLength") || s.contains("maxLength")) {
      types.push_back("string");
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
               s.contains("exclusiveMaximum")) {
      types.push_back("number");
    } else {
      return prim("value");
    }
    if (types.size() > 1) {
      std::string body;
      for (size_t i = 0; i < types.size(); ++i) body += (i ? " | " : "") + typed(s, types[i], ptr, hint);
      return add(hint, body);
    }
    return typed(s, types[0], ptr, hint);
  }

  std::string typed(const json& s, const std::string& type, const std::string& ptr, const std::string& hint) {
    if (type == "object") return object(s, ptr, hint);
    if (type == "array") return array(s, ptr, hint);
    if (type == "string") return string(s, ptr, hint);
    if (type == "integer" || type == "number") return number(s, type == "integer", ptr, hint);
    if (type == "boolean") return prim("boolean");
    if (type == "null") return prim("null");
    err(ptr + "/type", "unknown type '{}'", type);
  }

  // Any JSON string content (between the quotes) other than the given keys.
  std::string not_keys(const std::vector<std::string>& keys) {
    struct Node {
      std::map<unsigned char, int> next;
      bool end = false;
    };
    std::vector<Node> t(1);
    for (const std::string& k : keys) {
      const std::string enc = json(k).dump();
      int n = 0;
      for (size_t i = 1; i + 1 < enc.size(); ++i) {
        const auto c = static_cast<unsigned char>(enc[i]);
        auto it = t[static_cast<size_t>(n)].next.find(c);
        if (it == t[static_cast<size_t>(n)].next.end()) {
          t.emplace_back();
          const int m = static_cast<int>(t.size() - 1);
          t[static_cast<size_t>(n)].next[c] = m;
          n = m;
        } else {
          n = it->second;
        }
      }
      t[static_cast<size_t>(n)].end = true;
    }
    prim("char");
    std::function<std::string(int)> gen = [&](int n) -> std::string {
      const Node& nd = t[static_cast<size_t>(n)];
      std::vector<std::string> alts;
      std::string cls = "[^\"\\\\\\x7F\\x00-\\x1F";
      bool non_ascii = false;
      for (const auto& [c, m] : nd.next) {
        alts.push_back(lit(std::string(1, static_cast<char>(c))) + " " + gen(m));
        if (c >= 0x80)
          non_ascii = true;
        else if (c == ']' || c == '\\' || c == '^' || c == '-')
          cls += std::string("\\") + static_cast<char>(c);
        else
          cls += static_cast<char>(c);
      }
      if (non_ascii) cls += "\\x80-\\U0010FFFF";
      alts.push_back(cls + "] char*");
      if (!nd.end) alts.push_back("\"\"");
      std::string o = "(";
      for (size_t i = 0; i < alts.size(); ++i) o += (i ? " | " : "") + alts[i];
      return o + ")";
    };
    return gen(0);
  }

  std::string object(const json& s, const std::string& ptr, const std::string& hint) {
    json props = json::object();
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) err(ptr + "/properties", "must be an object");
      props = s["properties"];
    }
    std::vector<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) err(ptr + "/required", "must be an array of names");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) err(ptr + "/required", "must be an array of names");
        if (std::find(required.begin(), required.end(), r.get<std::string>()) == required.end())
          required.push_back(r.get<std::string>());
      }
    }
    std::optional<std::string> additional;
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (a.is_boolean()) {
        if (a.get<bool>()) additional = prim("value");
      } else {
        additional = expr(a, ptr + "/additionalProperties", hint + "-additional");
      }
    } else if (!s.contains("properties") && required.empty()) {
      additional = prim("value");  // a bare {"type": "object"}: any object
    }
    prim("space");
    auto kv = [&](const std::string& name, const std::string& value_rule) {
      return add(hint + "-" + name + "-kv", lit(json(name).dump()) + " space \":\" space " + value_rule);
    };
    std::vector<std::string> names;
    std::vector<std::string> req_kvs, opt_kvs;
    for (const std::string& r : required) {
      names.push_back(r);
      const std::string p = ptr + "/properties/" + pointer_escape(r);
      const std::string v = props.contains(r) ? expr(props[r], p, hint + "-" + r) : prim("value");
      req_kvs.push_back(kv(r, v));
    }
    for (auto it = props.begin(); it != props.end(); ++it) {
      if (std::find(required.begin(), required.end(), it.key()) != required.end()) continue;
      names.push_back(it.key());
      opt_kvs.push_back(
          kv(it.key(), expr(*it, ptr + "/properties/" + pointer_escape(it.key()), hint + "-" + it.key())));
    }
    if (additional) {
      const std::string key = add(hint + "-additional-key", "\"\\\"\" " + not_keys(names) + " \"\\\"\" space");
      const std::string akv = add(hint + "-additional-kv", key + " \":\" space " + *additional);
      opt_kvs.push_back(add(hint + "-additional-kvs", akv + " (\",\" space " + akv + ")*"));
    }
    // Optional ones in order, each present or not: opt_i ::= kv_i ("," space opt_{i+1})? | opt_{i+1}.
    std::string tail;
    for (size_t i = opt_kvs.size(); i-- > 0;) {
      if (tail.empty())
        tail = opt_kvs[i];
      else
        tail = add(hint + "-rest", opt_kvs[i] + " (\",\" space " + tail + ")? | " + tail);
    }
    std::string body = "\"{\" space";
    for (size_t i = 0; i < req_kvs.size(); ++i) body += (i ? " \",\" space " : " ") + req_kvs[i];
    if (!tail.empty()) body += req_kvs.empty() ? " (" + tail + ")?" : " (\",\" space " + tail + ")?";
    body += " \"}\" space";
    return add(hint, body);
  }

  static int get_count(const json& s, const char* k, const std::string& ptr) {
    if (!s.contains(k)) return -1;
    const json& v = s[k];
    if (!v.is_number_integer() && !(v.is_number_float() && v.get<double>() == std::floor(v.get<double>())))
      err(ptr + "/" + k, "must be a non-negative integer");
    const double d = v.get<double>();
    if (d < 0) err(ptr + "/" + k, "must be a non-negative integer");
    return d > 1e6 ? 1000000 : static_cast<int>(d);
  }

  std::string array(const json& s, const std::string& ptr, const std::string& hint) {
    prim("space");
    int mn = std::max(0, get_count(s, "minItems", ptr));
    int mx = get_count(s, "maxItems", ptr);
    if (mx >= 0 && mx < mn) err(ptr, "maxItems {} is below minItems {}", mx, mn);
    const json* prefix = nullptr;
    std::string prefix_kw;
    if (s.contains("prefixItems")) {
      prefix = &s["prefixItems"];
      prefix_kw = "prefixItems";
    } else if (s.contains("items") && s["items"].is_array()) {
      prefix = &s["items"];
      prefix_kw = "items";
    }
    std::string item_rule;
    bool items_false = false;
    if (s.contains("items") && !s["items"].is_array()) {
      if (s["items"].is_boolean() && !s["items"].get<bool>())
        items_false = true;
      else
        item_rule = expr(s["items"], ptr + "/items", hint + "-item");
    } else {
      item_rule = prim("value");
    }
    if (prefix) {
      if (!prefix->is_array()) err(ptr + "/" + prefix_kw, "must be an array of schemas");
      std::vector<std::string> parts;
      for (size_t i = 0; i < prefix->size(); ++i)
        parts.push_back(expr((*prefix)[i], ptr + fmt::format("/{}/{}", prefix_kw, i), hint + "-" + std::to_string(i)));
      const int n = static_cast<int>(parts.size());
      if (mx >= 0 && mx < n) err(ptr, "maxItems {} is below the {} prefixItems", mx, n);
      while (static_cast<int>(parts.size()) < mn) {
        if (items_false) err(ptr, "minItems {} needs more items than prefixItems allows", mn);
        parts.push_back(item_rule);
      }
      std::string body = "\"[\" space";
      for (size_t i = 0; i < parts.size(); ++i) body += (i ? " \",\" space " : " ") + parts[i];
      return add(hint, body + " \"]\" space");
    }
    if (items_false || mx == 0) return add(hint, "\"[\" space \"]\" space");
    if (mx < 0 || mx > mn + k_max_array_span) mx = mn + k_max_array_span;
    std::string more;
    const int lo = std::max(0, mn - 1);
    if (mx < 0)
      more = fmt::format("(\",\" space {}){{{},}}", item_rule, lo);
    else
      more = fmt::format("(\",\" space {}){{{},{}}}", item_rule, lo, mx - 1);
    std::string body = "\"[\" space ";
    if (mn == 0)
      body += "(" + item_rule + " " + more + ")?";
    else
      body += item_rule + " " + more;
    return add(hint, body + " \"]\" space");
  }

  std::string regex(const std::string& re, const std::string& ptr);
  static void regex_lengths(const std::string& re, const std::string& ptr, bool& anchored, int& mn, int& mx);

  std::string string(const json& s, const std::string& ptr, const std::string& hint) {
    prim("space");
    if (s.contains("format")) {
      if (!s["format"].is_string()) err(ptr + "/format", "must be a string");
      const std::string f = s["format"].get<std::string>();
      if (f == "date") return prim("date-string");
      if (f == "time") return prim("time-string");
      if (f == "date-time") return prim("date-time-string");
      if (f == "uuid") return prim("uuid");
      if (f == "email") return prim("email-string");
      err(ptr + "/format", "unsupported format '{}' (supported: date, time, date-time, uuid, email)", f);
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) err(ptr + "/pattern", "must be a string");
      std::string re = s["pattern"].get<std::string>();
      if (s.contains("minLength") || s.contains("maxLength")) {
        // Lengths combine with a pattern that repeats one item: ^X+$ / ^X*$ becomes ^X{min,max}$.
        const int mn = std::max(0, get_count(s, "minLength", ptr));
        int mx = get_count(s, "maxLength", ptr);
        if (mx < 0 || mx > mn + k_max_string_span) mx = mn + k_max_string_span;
        const bool simple =
            re.size() >= 4 && re.front() == '^' && re.back() == '$' &&
            (re[re.size() - 2] == '+' || re[re.size() - 2] == '*') &&
            ((re[1] == '[' && re.find(']') == re.size() - 3 && re.find('[', 2) == std::string::npos) || re.size() == 4);
        bool anchored = false;
        int pmin = 0, pmax = -1;
        regex_lengths(re, ptr + "/pattern", anchored, pmin, pmax);
        const int omx = get_count(s, "maxLength", ptr);
        // A pattern whose own lengths lie inside the bounds needs nothing more.
        if (anchored && pmin >= mn && pmax >= 0 && (omx < 0 || pmax <= omx))
          return add(hint, "\"\\\"\" " + regex(re, ptr + "/pattern") + " \"\\\"\" space");
        if (!simple)
          err(ptr,
              "pattern together with minLength/maxLength is supported only when the pattern's lengths lie "
              "inside them or the pattern is ^X+$ / ^X*$ repeating one item");
        const int lo = std::max(mn, re[re.size() - 2] == '+' ? 1 : 0);
        if (mx < lo) err(ptr, "maxLength {} is below the pattern's minimum length {}", mx, lo);
        re = re.substr(0, re.size() - 2) + fmt::format("{{{},{}}}$", lo, mx);
      }
      return add(hint, "\"\\\"\" " + regex(re, ptr + "/pattern") + " \"\\\"\" space");
    }
    const int mn = std::max(0, get_count(s, "minLength", ptr));
    int mx = get_count(s, "maxLength", ptr);
    if (mx >= 0 && mx < mn) err(ptr, "maxLength {} is below minLength {}", mx, mn);
    if (mn == 0 && mx < 0) return prim("string");
    if (mn > 100000) err(ptr + "/minLength", "over the limit of 100000");
    prim("char");
    if (mx < 0 || mx > mn + k_max_string_span) mx = mn + k_max_string_span;
    return add(hint, fmt::format("\"\\\"\" char{{{},{}}} \"\\\"\" space", mn, mx));
  }

  std::string number(const json& s, bool integer, const std::string& ptr, const std::string& hint) {
    prim("space");
    std::optional<double> lo, hi;
    bool lo_ex = false, hi_ex = false;
    auto num = [&](const char* k) -> std::optional<double> {
      if (!s.contains(k)) return std::nullopt;
      if (s[k].is_boolean()) err(ptr + "/" + k, "a boolean {} (draft 4) is not supported; use a number", k);
      if (!s[k].is_number()) err(ptr + "/" + k, "must be a number");
      return s[k].get<double>();
    };
    if (auto v = num("minimum")) lo = v;
    if (auto v = num("exclusiveMinimum"); v && (!lo || *v >= *lo)) {
      lo = v;
      lo_ex = true;
    }
    if (auto v = num("maximum")) hi = v;
    if (auto v = num("exclusiveMaximum"); v && (!hi || *v <= *hi)) {
      hi = v;
      hi_ex = true;
    }
    // The grammar writes at most 16 integer digits (|x| < 1e16): a bound beyond that binds nothing.
    if (lo && *lo <= -1e16) lo.reset();
    if (hi && *hi >= 1e16) hi.reset();
    if (!lo && !hi) return prim(integer ? "integer" : "number");
    // Integers inside the bounds.
    std::optional<int64_t> ilo, ihi;
    if (lo) ilo = static_cast<int64_t>(lo_ex ? std::floor(*lo) + 1 : std::ceil(*lo));
    if (hi) ihi = static_cast<int64_t>(hi_ex ? std::ceil(*hi) - 1 : std::floor(*hi));
    std::vector<std::string> alts;
    const std::string ints = int_range(ilo, ihi);
    if (!ints.empty()) alts.push_back(ints);
    if (!integer) {
      // Fractions: i.f in [i, i+1) for i ≥ 0; -i.f in (-(i+1), -i] for the negatives.
      std::optional<int64_t> plo, phi;  // non-negative integer parts
      plo = std::max<int64_t>(0, lo ? static_cast<int64_t>(lo_ex ? std::floor(*lo) + 1 : std::ceil(*lo)) : 0);
      if (hi) phi = static_cast<int64_t>(std::floor(*hi)) - 1;
      if (!phi || *phi >= *plo) alts.push_back("(" + int_range(plo, phi) + ") \".\" [0-9]{1,16}");
      // negatives: i ≥ 0 with -(i+1) ≥ lo and -i ≤ hi (strictly when exclusive)
      std::optional<int64_t> nlo, nhi;
      nlo = hi ? std::max<int64_t>(0, static_cast<int64_t>(hi_ex ? std::floor(-*hi) + 1 : std::ceil(-*hi))) : 0;
      if (lo) nhi = static_cast<int64_t>(std::floor(-*lo)) - 1;
      if (!nhi || *nhi >= *nlo) alts.push_back("\"-\" (" + int_range(nlo, nhi) + ") \".\" [0-9]{1,16}");
    }
    if (alts.empty()) err(ptr, "the bounds admit no value this converter can write");
    std::string body = "(";
    for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
    return add(hint, body + ") space");
  }

  const json& root_;
  std::map<std::string, std::string> rules_;
  std::unordered_map<std::string, std::string> by_body_;
  std::unordered_map<std::string, std::string> ref_rules_;
  std::set<std::string> reserved_;
  int depth_ = 0;
};

std::string Converter::regex(const std::string& re, const std::string& ptr) { return pattern_to_gbnf(re, ptr).expr; }

void Converter::regex_lengths(const std::string& re, const std::string& ptr, bool& anchored, int& mn, int& mx) {
  const PatternGbnf r = pattern_to_gbnf(re, ptr);
  anchored = r.anchored;
  mn = r.min_len;
  mx = r.max_len;
}

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::json& schema, const std::string& prefix) {
  return Converter(schema).run(prefix);
}

std::string json_object_gbnf() { return Converter(nlohmann::json::object()).object_any(); }

}  // namespace rocky::grammar
