// GrammarBuilder and Grammar (see grammar.hpp).
#include "grammar/grammar.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <functional>

#include "core/error.hpp"

namespace rocky::grammar {

int ByteSet::count() const {
  return std::popcount(w[0]) + std::popcount(w[1]) + std::popcount(w[2]) + std::popcount(w[3]);
}

namespace {

std::string content_key(const std::vector<Alt>& alts) {
  std::string k;
  for (const Alt& a : alts) {
    for (const Element& e : a) k += fmt::format("{}{},", e.kind == Element::Bytes ? 'b' : 'r', e.value);
    k += '|';
  }
  return k;
}

// One UTF-8 byte-range sequence: bytes i match [lo[i], hi[i]].
struct Utf8Seq {
  int n = 0;
  uint8_t lo[4]{}, hi[4]{};
};

int encode(uint32_t cp, uint8_t* out) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

// Splits [lo, hi] (no surrogates inside) into byte-range sequences whose cross product is exactly
// the UTF-8 encodings of the range (the classic utf8-ranges construction).
void utf8_split(uint32_t lo, uint32_t hi, std::vector<Utf8Seq>& out) {
  if (lo > hi) return;
  for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= max && hi > max) {
      utf8_split(lo, max, out);
      utf8_split(max + 1, hi, out);
      return;
    }
  }
  if (hi > 0x7F) {
    for (int i = 1; i < 4; ++i) {
      const uint32_t m = (1u << (6 * i)) - 1;
      if ((lo & ~m) != (hi & ~m)) {
        if ((lo & m) != 0) {
          utf8_split(lo, lo | m, out);
          utf8_split((lo | m) + 1, hi, out);
          return;
        }
        if ((hi & m) != m) {
          utf8_split(lo, (hi & ~m) - 1, out);
          utf8_split(hi & ~m, hi, out);
          return;
        }
      }
    }
  }
  Utf8Seq s;
  uint8_t a[4], b[4];
  s.n = encode(lo, a);
  encode(hi, b);
  for (int i = 0; i < s.n; ++i) {
    s.lo[i] = a[i];
    s.hi[i] = b[i];
  }
  out.push_back(s);
}

}  // namespace

uint32_t GrammarBuilder::named(const std::string& name, const std::string& where) {
  auto it = by_name_.find(name);
  if (it != by_name_.end()) return it->second;
  const auto id = static_cast<uint32_t>(rules_.size());
  rules_.emplace_back();
  names_.push_back(name);
  first_use_.push_back(where);
  defined_.push_back(false);
  by_name_.emplace(name, id);
  check_budget();
  return id;
}

void GrammarBuilder::define(uint32_t rule, std::vector<Alt> alts) {
  for (const Alt& a : alts) n_elements_ += a.size() + 1;
  rules_[rule] = std::move(alts);
  defined_[rule] = true;
  check_budget();
}

uint32_t GrammarBuilder::anon(const std::string& base, std::vector<Alt> alts) {
  std::string key = content_key(alts);
  auto it = anon_by_content_.find(key);
  if (it != anon_by_content_.end()) return it->second;
  std::string name = fmt::format("{}_{}", base, rules_.size());
  const auto id = static_cast<uint32_t>(rules_.size());
  rules_.emplace_back();
  names_.push_back(name);
  first_use_.emplace_back();
  defined_.push_back(false);
  by_name_.emplace(name, id);
  define(id, std::move(alts));
  anon_by_content_.emplace(std::move(key), id);
  return id;
}

void GrammarBuilder::check_budget() const {
  if (rules_.size() > k_max_rules)
    fail("grammar too large: more than {} rules (the compile limit; simplify the grammar or schema)", k_max_rules);
  if (n_elements_ > k_max_elements)
    fail(
        "grammar too large: more than {} elements after expanding repetitions (the compile limit; lower the "
        "repetition counts or string lengths)",
        k_max_elements);
}

Element GrammarBuilder::bytes(const ByteSet& s) {
  std::string key(reinterpret_cast<const char*>(s.w.data()), sizeof(s.w));
  auto it = set_index_.find(key);
  if (it != set_index_.end()) return {Element::Bytes, it->second};
  const auto id = static_cast<uint32_t>(sets_.size());
  sets_.push_back(s);
  set_index_.emplace(std::move(key), id);
  return {Element::Bytes, id};
}

Element GrammarBuilder::char_class(std::vector<CodepointRange> ranges, bool negated) {
  // Normalise: sorted, merged, clipped to Unicode, surrogates removed.
  for (auto& r : ranges) {
    if (r.lo > r.hi) std::swap(r.lo, r.hi);
    r.hi = std::min<uint32_t>(r.hi, 0x10FFFF);
  }
  std::erase_if(ranges, [](const CodepointRange& r) { return r.lo > 0x10FFFF; });
  std::sort(ranges.begin(), ranges.end(), [](auto& a, auto& b) { return a.lo < b.lo; });
  std::vector<CodepointRange> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1)
      merged.back().hi = std::max(merged.back().hi, r.hi);
    else
      merged.push_back(r);
  }
  if (negated) {
    std::vector<CodepointRange> inv;
    uint32_t next = 0;
    for (const auto& r : merged) {
      if (r.lo > next) inv.push_back({next, r.lo - 1});
      next = r.hi + 1;
    }
    if (next <= 0x10FFFF) inv.push_back({next, 0x10FFFF});
    merged = std::move(inv);
  }
  std::vector<CodepointRange> clean;
  for (const auto& r : merged) {
    if (r.hi < 0xD800 || r.lo > 0xDFFF) {
      clean.push_back(r);
      continue;
    }
    if (r.lo < 0xD800) clean.push_back({r.lo, 0xD7FF});
    if (r.hi > 0xDFFF) clean.push_back({0xE000, r.hi});
  }
  std::vector<Utf8Seq> seqs;
  for (const auto& r : clean) utf8_split(r.lo, r.hi, seqs);
  ByteSet ascii;
  std::vector<Alt> alts;
  for (const auto& s : seqs) {
    if (s.n == 1) {
      ascii.set_range(s.lo[0], s.hi[0]);
      continue;
    }
    Alt a;
    for (int i = 0; i < s.n; ++i) {
      ByteSet b;
      b.set_range(s.lo[i], s.hi[i]);
      a.push_back(bytes(b));
    }
    alts.push_back(std::move(a));
  }
  if (alts.empty()) return bytes(ascii);  // one byte (possibly an empty set: matches nothing)
  if (!ascii.empty()) alts.insert(alts.begin(), Alt{bytes(ascii)});
  return ref(anon("char", std::move(alts)));
}

void GrammarBuilder::literal(const std::string& s, Alt& alt) {
  for (char c : s) {
    ByteSet b;
    b.set(static_cast<uint8_t>(c));
    alt.push_back(bytes(b));
  }
}

uint32_t GrammarBuilder::star_rule(const Element& e, const std::string& base) {
  // One star rule per repeated element (equal elements share it).
  const uint64_t key = (uint64_t{e.kind} << 32) | e.value;
  auto it = star_of_.find(key);
  if (it != star_of_.end()) return it->second;
  const uint32_t star = named(fmt::format("{}_star_{}", base, rules_.size()));
  define(star, {Alt{e, ref(star)}, Alt{}});
  star_of_.emplace(key, star);
  return star;
}

Element GrammarBuilder::repeat(const Element& e, int min, int max, const std::string& base) {
  if (max >= 0 && max < min) fail("repetition {{{},{}}}: the maximum is below the minimum", min, max);
  if (min > 100000 || max > 100000) fail("repetition count {} over the limit of 100000", std::max(min, max));
  // The optional tail first: unbounded → star ::= e star | ""; bounded k → opt_k ::= e opt_{k-1} | "".
  Alt seq;
  for (int i = 0; i < min; ++i) seq.push_back(e);
  if (max < 0) {
    seq.push_back(ref(star_rule(e, base)));
  } else {
    // A rule e repeated up to k more times gets its star too: the matcher derives the levels' token
    // sets from the star's (Grammar::counted_star). Single byte sets are cheap levels already.
    const bool count = e.kind == Element::Ref && max - min >= 2;
    const uint32_t star = count ? star_rule(e, base) : 0;  // a rule e repeated: see Grammar::counted_star
    // The last level (no copy may follow) ends in a reference to the empty rule: it leaves a parse
    // position after its copy of e on the stack, so that level is counted too (else a key ending
    // inside that copy, e.g. inside a multi-byte character, is walked on its own).
    const uint32_t none = count ? anon("empty", {Alt{}}) : 0;
    uint32_t prev = 0;
    bool have = false;
    for (int k = 1; k <= max - min; ++k) {
      std::vector<Alt> alts;
      alts.push_back(have ? Alt{e, ref(prev)} : count ? Alt{e, ref(none)} : Alt{e});
      alts.emplace_back();
      prev = anon(base + "_opt", std::move(alts));
      if (count) counted_.push_back({prev, 1, 0, static_cast<uint32_t>(k - 1), star});
      have = true;
    }
    if (have) seq.push_back(ref(prev));
  }
  if (seq.size() == 1) return seq[0];
  n_elements_ += seq.size();
  check_budget();
  const size_t n_seq = seq.size();
  const uint32_t rep = anon(base + "_rep", {std::move(seq)});
  // The positions after each of the m copies: the rest of the copies counted from the star's walk.
  if (e.kind == Element::Ref && (max < 0 || max >= 2)) {
    const uint32_t star = star_rule(e, base);
    for (int i = 1; i <= min && static_cast<size_t>(i) < n_seq; ++i)
      counted_.push_back({rep, static_cast<uint32_t>(i), static_cast<uint32_t>(min - i),
                          max < 0 ? Grammar::k_unbounded : static_cast<uint32_t>(max - i), star});
  }
  return ref(rep);
}

Grammar GrammarBuilder::finish(const std::string& root_name) {
  const size_t n = rules_.size();
  for (size_t r = 0; r < n; ++r)
    if (!defined_[r])
      fail("undefined rule '{}'{}", names_[r], first_use_[r].empty() ? "" : " (used at " + first_use_[r] + ")");
  auto root_it = by_name_.find(root_name);
  if (root_it == by_name_.end()) fail("the grammar has no '{}' rule", root_name);
  const uint32_t root = root_it->second;

  // Productive rules (can derive a finite string); drop alternatives that cannot.
  std::vector<uint8_t> productive(n, 0);
  auto elem_ok = [&](const Element& e) {
    return e.kind == Element::Bytes ? !sets_[e.value].empty() : productive[e.value] != 0;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (productive[r]) continue;
      for (const Alt& a : rules_[r])
        if (std::all_of(a.begin(), a.end(), elem_ok)) {
          productive[r] = 1;
          changed = true;
          break;
        }
    }
  }
  if (!productive[root]) fail("the grammar admits no string: rule '{}' can never complete", root_name);
  for (size_t r = 0; r < n; ++r)
    std::erase_if(rules_[r], [&](const Alt& a) { return !std::all_of(a.begin(), a.end(), elem_ok); });

  // Nullable rules.
  std::vector<uint8_t> nullable(n, 0);
  auto elem_null = [&](const Element& e) { return e.kind == Element::Ref && nullable[e.value]; };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const Alt& a : rules_[r])
        if (std::all_of(a.begin(), a.end(), elem_null)) {
          nullable[r] = 1;
          changed = true;
          break;
        }
    }
  }

  // Left recursion: r → s when s can be the first thing r expands to.
  std::vector<std::vector<uint32_t>> left(n);
  for (size_t r = 0; r < n; ++r)
    for (const Alt& a : rules_[r])
      for (const Element& e : a) {
        if (e.kind == Element::Ref) left[r].push_back(e.value);
        if (!elem_null(e)) break;
      }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<uint32_t> path;
  std::function<void(uint32_t)> dfs = [&](uint32_t r) {
    color[r] = 1;
    path.push_back(r);
    for (uint32_t s : left[r]) {
      if (color[s] == 1) {
        std::string cycle;
        auto it = std::find(path.begin(), path.end(), s);
        for (; it != path.end(); ++it) cycle += names_[*it] + " -> ";
        cycle += names_[s];
        fail("rule '{}' is left-recursive ({}): it can expand to itself before matching any character", names_[s],
             cycle);
      }
      if (color[s] == 0) dfs(s);
    }
    path.pop_back();
    color[r] = 2;
  };
  for (size_t r = 0; r < n; ++r)
    if (color[r] == 0) dfs(static_cast<uint32_t>(r));

  Grammar g;
  g.root = root;
  g.sets = sets_;
  g.rule_names = names_;
  g.alts.resize(n);
  for (size_t r = 0; r < n; ++r)
    for (const Alt& a : rules_[r]) {
      g.alts[r].push_back(static_cast<uint32_t>(g.elems.size()));
      g.elems.insert(g.elems.end(), a.begin(), a.end());
      g.elems.push_back({Element::End, 0});
    }
  g.nullable_rest.assign(g.elems.size(), 0);
  for (size_t i = g.elems.size(); i-- > 0;) {
    const Element& e = g.elems[i];
    if (e.kind == Element::End)
      g.nullable_rest[i] = 1;
    else
      g.nullable_rest[i] = elem_null(e) && g.nullable_rest[i + 1];
  }
  // Counted positions, where the lowering is still as repeat() made it (alternatives can be dropped).
  g.counted_star.assign(g.elems.size(), 0);
  g.counted_need.assign(g.elems.size(), 0);
  g.counted_left.assign(g.elems.size(), 0);
  for (const Counted& c : counted_) {
    if (g.alts[c.rule].empty() || g.alts[c.star].empty()) continue;
    const uint32_t pos = g.alts[c.rule][0] + c.index;
    const uint32_t spos = g.alts[c.star][0] + 1;
    if (pos == 0 || g.elems[pos].kind == Element::End || g.elems[spos] != Element{Element::Ref, c.star} ||
        g.elems[pos - 1] != g.elems[spos - 1] || (c.need == 0) != (g.nullable_rest[pos] != 0))
      continue;
    g.counted_star[pos] = spos;
    g.counted_need[pos] = c.need;
    g.counted_left[pos] = c.left;
  }
  if (g.elems.size() > k_max_elements) check_budget();
  return g;
}

std::string Grammar::dump() const {
  std::string o;
  for (size_t r = 0; r < alts.size(); ++r) {
    o += rule_names[r] + " ::=";
    for (size_t k = 0; k < alts[r].size(); ++k) {
      if (k) o += " |";
      for (uint32_t p = alts[r][k]; elems[p].kind != Element::End; ++p) {
        const Element& e = elems[p];
        if (e.kind == Element::Ref) {
          o += " " + rule_names[e.value];
          continue;
        }
        const ByteSet& s = sets[e.value];
        if (s.count() == 1) {
          for (unsigned b = 0; b < 256; ++b)
            if (s.has(static_cast<uint8_t>(b)))
              o += (b >= 0x20 && b < 0x7f && b != '"' && b != '\\') ? fmt::format(" \"{}\"", static_cast<char>(b))
                                                                    : fmt::format(" [\\x{:02X}]", b);
          continue;
        }
        o += " [";
        for (unsigned b = 0; b < 256;) {
          if (!s.has(static_cast<uint8_t>(b))) {
            ++b;
            continue;
          }
          unsigned e2 = b;
          while (e2 + 1 < 256 && s.has(static_cast<uint8_t>(e2 + 1))) ++e2;
          o += e2 == b ? fmt::format("\\x{:02X}", b) : fmt::format("\\x{:02X}-\\x{:02X}", b, e2);
          b = e2 + 1;
        }
        o += "]";
      }
    }
    o += "\n";
  }
  return o;
}

}  // namespace rocky::grammar
