// TokenTrie, CompiledGrammar and Matcher (see matcher.hpp).
#include "grammar/matcher.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <unordered_set>

#include "core/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::grammar {

std::shared_ptr<const TokenTrie> TokenTrie::build(const tok::Tokenizer& tok) {
  const tok::Vocab& v = tok.vocab();
  std::vector<std::string> pieces(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const auto id = static_cast<tok::TokenId>(i);
    const uint32_t a = v.attr_of(id);
    if (a & (tok::attr::k_control | tok::attr::k_unused | tok::attr::k_unknown)) continue;
    if (a == tok::attr::k_undefined) continue;
    pieces[i] = tok.token_to_piece(id, false);
  }
  return from_pieces(std::move(pieces), v.eog_ids());
}

std::shared_ptr<const TokenTrie> TokenTrie::from_pieces(std::vector<std::string> pieces, std::vector<int32_t> eog) {
  auto t = std::make_shared<TokenTrie>();
  t->pieces_ = std::move(pieces);
  for (int32_t e : eog)
    if (e >= 0 && static_cast<size_t>(e) < t->pieces_.size()) {
      t->pieces_[static_cast<size_t>(e)].clear();  // never text
      t->eog_.push_back(e);
    }
  t->build_nodes();
  return t;
}

bool TokenTrie::is_eog(int32_t id) const { return std::find(eog_.begin(), eog_.end(), id) != eog_.end(); }

void TokenTrie::build_nodes() {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < pieces_.size(); ++i)
    if (!pieces_[i].empty()) ids.push_back(static_cast<int32_t>(i));
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    const std::string& x = pieces_[static_cast<size_t>(a)];
    const std::string& y = pieces_[static_cast<size_t>(b)];
    return x != y ? x < y : a < b;
  });
  byte_ = {0};
  depth_ = {0};
  std::vector<uint32_t> path = {0};
  std::vector<uint32_t> tok_node;
  const std::string* prev = nullptr;
  for (int32_t id : ids) {
    const std::string& p = pieces_[static_cast<size_t>(id)];
    size_t common = 0;
    if (prev)
      while (common < p.size() && common < prev->size() && (*prev)[common] == p[common]) ++common;
    path.resize(common + 1);
    for (size_t d = common; d < p.size(); ++d) {
      byte_.push_back(static_cast<uint8_t>(p[d]));
      depth_.push_back(static_cast<uint32_t>(d + 1));
      path.push_back(static_cast<uint32_t>(byte_.size() - 1));
    }
    tok_node.push_back(path.back());
    toks_.push_back(id);
    max_depth_ = std::max<uint32_t>(max_depth_, static_cast<uint32_t>(p.size()));
    prev = &p;
  }
  const size_t n = byte_.size();
  tok_begin_.assign(n + 1, 0);
  for (uint32_t nd : tok_node) ++tok_begin_[nd + 1];
  for (size_t i = 0; i < n; ++i) tok_begin_[i + 1] += tok_begin_[i];
  size_.assign(n, 0);
  std::vector<uint32_t> open;
  for (size_t m = 0; m < n; ++m) {
    while (!open.empty() && depth_[open.back()] >= depth_[m]) {
      size_[open.back()] = static_cast<uint32_t>(m - open.back());
      open.pop_back();
    }
    open.push_back(static_cast<uint32_t>(m));
  }
  for (uint32_t o : open) size_[o] = static_cast<uint32_t>(n - o);
}

CompiledGrammar::CompiledGrammar(Grammar g, std::shared_ptr<const TokenTrie> trie, bool derive_counted)
    : g_(std::move(g)), trie_(std::move(trie)), derive_counted_(derive_counted) {
  const auto t0 = std::chrono::steady_clock::now();
  stacks_.push_back({0, 0});  // k_accept
  stacks_.push_back({0, 0});  // k_boundary
  std::vector<uint32_t> none;
  intern_state(none);  // state 0: dead
  walk_states_.resize(trie_->max_depth_ + 2);
  std::vector<uint32_t> init;
  for (uint32_t a : g_.alts[g_.root]) expand(a, k_accept, init);
  initial_ = intern_state(init);
  mask(initial_);
  compile_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (compile_ms_ > k_compile_budget_ms)
    fail("grammar: compiling against the vocabulary took {:.0f} ms, over the limit of {:.0f} ms", compile_ms_,
         k_compile_budget_ms);
}

uint32_t CompiledGrammar::stack(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto it = stack_index_.find(key);
  if (it != stack_index_.end()) return it->second;
  if (stacks_.size() >= k_max_stack_nodes)
    fail("grammar: more than {} parser stack nodes (the nesting is too deep for the limit)", k_max_stack_nodes);
  const auto id = static_cast<uint32_t>(stacks_.size());
  stacks_.push_back({pos, parent});
  stack_index_.emplace(key, id);
  return id;
}

void CompiledGrammar::expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out) {
  const Element& e = g_.elems[pos];
  switch (e.kind) {
    case Element::End:
      if (parent <= k_boundary) {
        out.push_back(parent);
      } else {
        const StackNode nd = stacks_[parent];
        expand(nd.pos, nd.parent, out);
      }
      return;
    case Element::Bytes:
      if (out.size() >= 4 * k_max_stacks_per_state)
        fail("grammar: a parser state holds more than {} stacks (the grammar is too ambiguous)",
             k_max_stacks_per_state);
      out.push_back(stack(pos, parent));
      return;
    case Element::Ref: {
      const uint32_t cont = pos + 1;
      const uint32_t np = g_.elems[cont].kind == Element::End ? parent : stack(cont, parent);
      for (uint32_t a : g_.alts[e.value]) expand(a, np, out);
      return;
    }
  }
}

uint32_t CompiledGrammar::intern_state(std::vector<uint32_t>& s) {
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  std::string key(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(uint32_t));
  auto it = state_index_.find(key);
  if (it != state_index_.end()) return it->second;
  if (s.size() > k_max_stacks_per_state)
    fail("grammar: a parser state holds more than {} stacks (the grammar is too ambiguous)", k_max_stacks_per_state);
  if (states_.size() >= k_max_states)
    fail("grammar: more than {} parser states (the grammar is too large or too ambiguous for the limit)", k_max_states);
  const auto id = static_cast<uint32_t>(states_.size());
  State st;
  st.stacks = s;
  for (uint32_t x : s) {
    st.has_accept = st.has_accept || x == k_accept;
    st.has_boundary = st.has_boundary || x == k_boundary;
  }
  boundary_flag_.push_back(st.has_boundary ? 1 : 0);
  states_.push_back(std::move(st));
  trans_.resize(states_.size() * 256, id == 0 ? 0 : -1);
  if (id == 0) std::fill(trans_.begin(), trans_.end(), 0);
  state_index_.emplace(std::move(key), id);
  return id;
}

uint32_t CompiledGrammar::step(uint32_t state, uint8_t b) {
  const int32_t t = trans_[size_t{state} * 256 + b];
  if (t >= 0) return static_cast<uint32_t>(t);
  std::vector<uint32_t> next;
  const std::vector<uint32_t> cur = states_[state].stacks;
  for (uint32_t s : cur) {
    if (s <= k_boundary) continue;
    const StackNode nd = stacks_[s];
    if (g_.sets[g_.elems[nd.pos].value].has(b)) expand(nd.pos + 1, nd.parent, next);
  }
  const uint32_t r = intern_state(next);
  trans_[size_t{state} * 256 + b] = static_cast<int32_t>(r);
  return r;
}

void CompiledGrammar::walk(uint32_t node, uint32_t state, std::vector<uint64_t>& bits,
                           std::vector<uint32_t>* boundary) {
  const TokenTrie& t = *trie_;
  const uint32_t base = t.depth_[node];
  walk_states_[0] = state;
  const uint32_t end = node + t.size_[node];
  for (uint32_t m = node + 1; m < end;) {
    const uint32_t d = t.depth_[m] - base;
    const uint32_t from = walk_states_[d - 1];
    const int32_t known = trans_[size_t{from} * 256 + t.byte_[m]];  // the memoised transition, if any
    const uint32_t s = known >= 0 ? static_cast<uint32_t>(known) : step(from, t.byte_[m]);
    if (s == 0) {
      m += t.size_[m];
      continue;
    }
    walk_states_[d] = s;
    for (uint32_t k = t.tok_begin_[m]; k < t.tok_begin_[m + 1]; ++k) {
      const auto id = static_cast<uint32_t>(t.toks_[k]);
      bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
    if (boundary && boundary_flag_[s] && t.size_[m] > 1) boundary->push_back(m);
    ++m;
  }
}

const CompiledGrammar::KeyInfo& CompiledGrammar::key_info(uint32_t key) {
  auto it = keys_.find(key);
  if (it != keys_.end()) return it->second;
  KeyInfo ki;
  ++n_trie_walks_;
  ki.accept.assign(trie_->n_words(), 0);
  std::vector<uint32_t> one = {key};
  const uint32_t s0 = intern_state(one);
  walk(0, s0, ki.accept, &ki.boundary_nodes);
  return keys_.emplace(key, std::move(ki)).first->second;
}

CompiledGrammar::CountedInfo& CompiledGrammar::counted_info(uint32_t star_key, uint32_t spos, uint32_t below) {
  auto it = counted_.find(star_key);
  if (it != counted_.end()) return it->second;
  CountedInfo ci;
  const TokenTrie& t = *trie_;
  // S0: right after a complete copy of e (the next copy or what follows the repetition); es: its
  // stacks that start a copy; E / other: the bytes each can take first.
  std::vector<uint32_t> es, s0v;
  expand(spos - 1, below, es);
  std::sort(es.begin(), es.end());
  es.erase(std::unique(es.begin(), es.end()), es.end());
  expand(spos, below, s0v);
  const uint32_t s0 = intern_state(s0v);
  ByteSet e_bytes, other;
  for (uint32_t x : states_[s0].stacks) {
    if (x <= k_boundary) continue;
    const ByteSet& bs = g_.sets[g_.elems[stacks_[x].pos].value];
    ByteSet& to = std::binary_search(es.begin(), es.end(), x) ? e_bytes : other;
    for (int w = 0; w < 4; ++w) to.w[w] |= bs.w[w];
  }
  bool ok = true;
  for (int w = 0; w < 4; ++w) ok = ok && (e_bytes.w[w] & other.w[w]) == 0;
  std::vector<std::pair<uint32_t, int32_t>> acc;
  std::vector<std::pair<uint32_t, uint32_t>> bnd;
  if (ok) {
    ++n_trie_walks_;
    std::vector<uint32_t> one = {star_key};
    walk_states_[0] = intern_state(one);
    std::vector<uint32_t> cnt(walk_states_.size(), 0);
    cnt[0] = 1;                    // the copy the key is in
    std::vector<uint8_t> checked;  // per state: 1 clean, 2 holds a copy's start outside S0 (ambiguous)
    for (uint32_t m = 1; m < t.n_nodes() && ok;) {
      const uint32_t d = t.depth_[m];
      const uint32_t from = walk_states_[d - 1];
      const int32_t known = trans_[size_t{from} * 256 + t.byte_[m]];
      const uint32_t s = known >= 0 ? static_cast<uint32_t>(known) : step(from, t.byte_[m]);
      if (s == 0) {
        m += t.size_[m];
        continue;
      }
      if (s != s0) {
        if (checked.size() <= s) checked.resize(states_.size(), 0);
        if (checked[s] == 0) {
          checked[s] = 1;
          for (uint32_t x : states_[s].stacks)
            if (std::binary_search(es.begin(), es.end(), x)) checked[s] = 2;
        }
        if (checked[s] == 2) ok = false;
      }
      const uint32_t c = cnt[d - 1] + (from == s0 && e_bytes.has(t.byte_[m]) ? 1 : 0);
      walk_states_[d] = s;
      cnt[d] = c;
      for (uint32_t k = t.tok_begin_[m]; k < t.tok_begin_[m + 1]; ++k) acc.emplace_back(c, t.toks_[k]);
      if (boundary_flag_[s] && t.size_[m] > 1) bnd.emplace_back(c, m);
      ++m;
    }
  }
  ci.ok = ok;
  if (ok) {
    std::stable_sort(acc.begin(), acc.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::stable_sort(bnd.begin(), bnd.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [c, id] : acc) {
      ci.acc_count.push_back(c);
      ci.acc_tok.push_back(id);
    }
    for (const auto& [c, n] : bnd) {
      ci.bnd_count.push_back(c);
      ci.bnd_node.push_back(n);
      for (uint32_t m = n + 1; m < n + t.size_[n]; m += t.size_[m]) ci.bnd_child[t.byte_[m]].emplace_back(c, m);
    }
    ci.max_count = std::max(acc.empty() ? 0 : acc.back().first, bnd.empty() ? 0 : bnd.back().first);
  }
  return counted_.emplace(star_key, std::move(ci)).first->second;
}

CompiledGrammar::CountedLevel CompiledGrammar::counted_level(const std::vector<uint32_t>& chain, size_t at,
                                                             uint32_t bottom) {
  // The key with its level's frame swapped for the star's, and the frames below it.
  uint32_t below = bottom;
  for (size_t i = chain.size(); i-- > at + 1;) below = stack(chain[i], below);
  const uint32_t spos = g_.counted_star[chain[at]];
  uint32_t star_key = stack(spos, below);
  for (size_t i = at; i-- > 0;) star_key = stack(chain[i], star_key);
  CountedInfo& ci = counted_info(star_key, spos, below);
  if (!ci.ok) return {};
  // Copies allowed: the one the key is in and the level's `left` more; the key completes after
  // 1 + need copies at least.
  const uint32_t left = g_.counted_left[chain[at]];
  CountedLevel lv;
  lv.info = &ci;
  lv.u = left >= ci.max_count ? ci.max_count : std::min(left + 1, ci.max_count);
  lv.need = g_.counted_need[chain[at]] + 1;
  return lv;
}

const std::vector<uint64_t>& CompiledGrammar::anchor(CountedInfo& ci, uint32_t a) {
  auto it = ci.anchors.find(a);
  if (it != ci.anchors.end()) return it->second;
  // From the nearest anchor below (adding the tokens in between) or above (taking them away),
  // whichever moves fewer tokens: a string's levels are visited from the most characters left down.
  auto idx = [&](uint32_t c) {
    return static_cast<size_t>(std::upper_bound(ci.acc_count.begin(), ci.acc_count.end(), c) - ci.acc_count.begin());
  };
  const size_t ia = idx(a);
  auto hi = ci.anchors.upper_bound(a);
  auto lo = hi == ci.anchors.begin() ? ci.anchors.end() : std::prev(hi);
  const size_t i_lo = lo == ci.anchors.end() ? 0 : idx(lo->first);
  std::vector<uint64_t> bits;
  if (hi != ci.anchors.end() && idx(hi->first) - ia < ia - i_lo) {
    bits = hi->second;
    for (size_t k = ia, e = idx(hi->first); k < e; ++k) {
      const auto id = static_cast<uint32_t>(ci.acc_tok[k]);
      bits[id >> 6] &= ~(uint64_t{1} << (id & 63));
    }
  } else {
    if (lo != ci.anchors.end())
      bits = lo->second;
    else
      bits.assign(trie_->n_words(), 0);
    for (size_t k = i_lo; k < ia; ++k) {
      const auto id = static_cast<uint32_t>(ci.acc_tok[k]);
      bits[id >> 6] |= uint64_t{1} << (id & 63);
    }
  }
  return ci.anchors.emplace(a, std::move(bits)).first->second;
}

uint64_t CompiledGrammar::cache_bytes() const {
  uint64_t b = 0;
  for (const auto& m : masks_) b += m.size() * 8;
  for (const auto& [k, ki] : keys_) b += ki.accept.size() * 8 + ki.boundary_nodes.size() * 4;
  for (const auto& [k, ci] : counted_) {
    b += (ci.acc_count.size() + ci.bnd_count.size() + ci.acc_tok.size() + ci.bnd_node.size()) * 4;
    for (const auto& c : ci.bnd_child) b += c.size() * 8;
    for (const auto& [a, bits] : ci.anchors) b += bits.size() * 8;
  }
  for (const State& st : states_) b += st.stacks.size() * 4 + sizeof(State);
  b += trans_.size() * 4 + stacks_.size() * sizeof(StackNode) + level_bits_.size() * 8;
  return b;
}

const std::vector<uint64_t>& CompiledGrammar::mask(uint32_t state) {
  auto it = mask_slot_.find(state);
  if (it != mask_slot_.end()) return masks_[it->second];
  // At most 256 masks are kept; then the cache starts over in the same storage (freed and newly
  // allocated bitsets would fault their pages in again: tens of microseconds a mask).
  if (mask_slot_.size() >= 256) {
    mask_slot_.clear();
    n_masks_ = 0;
  }
  const uint32_t slot = n_masks_++;
  if (slot == masks_.size())
    masks_.emplace_back(trie_->n_words(), 0);
  else
    std::fill(masks_[slot].begin(), masks_[slot].end(), 0);
  std::vector<uint64_t>& bits = masks_[slot];
  const std::vector<uint32_t> stacks = states_[state].stacks;
  std::vector<uint32_t> chain;
  for (uint32_t s : stacks) {
    if (s == k_accept) {
      for (int32_t e : trie_->eog()) bits[static_cast<size_t>(e) >> 6] |= uint64_t{1} << (e & 63);
      continue;
    }
    if (s == k_boundary) continue;
    // The key: the top frames down to the first return position that must consume a byte.
    chain.clear();
    chain.push_back(stacks_[s].pos);
    uint32_t p = stacks_[s].parent;
    uint32_t bottom = k_accept, below = k_accept;
    while (p != k_accept) {
      const StackNode nd = stacks_[p];
      chain.push_back(nd.pos);
      p = nd.parent;
      if (!g_.nullable_rest[nd.pos]) {
        bottom = k_boundary;
        below = p;
        break;
      }
    }
    uint32_t key = bottom;
    for (size_t i = chain.size(); i-- > 0;) key = stack(chain[i], key);
    CountedLevel lv;
    if (derive_counted_ && keys_.find(key) == keys_.end())
      for (size_t i = 1; i < chain.size(); ++i)
        if (g_.counted_star[chain[i]] != 0) {
          lv = counted_level(chain, i, bottom);
          break;
        }
    const uint32_t* bnd_begin = nullptr;
    const uint32_t* bnd_end = nullptr;
    const CountedInfo* bnd_ci = nullptr;
    const size_t n_level =
        lv.info ? static_cast<size_t>(std::upper_bound(lv.info->acc_count.begin(), lv.info->acc_count.end(), lv.u) -
                                      lv.info->acc_count.begin())
                : 0;
    if (lv.info && n_level <= 2 * bits.size()) {
      // Few tokens (a character class's rarer alternatives): set them, no bitset kept per level.
      const CountedInfo& ci = *lv.info;
      for (size_t k = 0; k < n_level; ++k) {
        const auto id = static_cast<uint32_t>(ci.acc_tok[k]);
        bits[id >> 6] |= uint64_t{1} << (id & 63);
      }
    }
    if (lv.info) {
      CountedInfo& ci = *lv.info;
      const uint32_t a = lv.u <= k_anchor_step || lv.u == ci.max_count
                             ? lv.u
                             : std::min(ci.max_count, (lv.u + k_anchor_step - 1) / k_anchor_step * k_anchor_step);
      const std::vector<uint64_t>* level = nullptr;
      if (n_level > 2 * bits.size()) level = &anchor(ci, a);
      if (level && a != lv.u) {
        const std::vector<uint64_t>& base = *level;
        level_bits_ = base;
        const auto i0 = std::upper_bound(ci.acc_count.begin(), ci.acc_count.end(), lv.u) - ci.acc_count.begin();
        const auto i1 = std::upper_bound(ci.acc_count.begin(), ci.acc_count.end(), a) - ci.acc_count.begin();
        for (auto k = i0; k < i1; ++k) {
          const auto id = static_cast<uint32_t>(ci.acc_tok[static_cast<size_t>(k)]);
          level_bits_[id >> 6] &= ~(uint64_t{1} << (id & 63));
        }
        level = &level_bits_;
      }
      if (level)
        for (size_t w = 0; w < bits.size(); ++w) bits[w] |= (*level)[w];
      const auto b0 = std::lower_bound(ci.bnd_count.begin(), ci.bnd_count.end(), lv.need) - ci.bnd_count.begin();
      const auto b1 = std::upper_bound(ci.bnd_count.begin(), ci.bnd_count.end(), lv.u) - ci.bnd_count.begin();
      bnd_begin = ci.bnd_node.data() + b0;
      bnd_end = ci.bnd_node.data() + std::max(b0, b1);
      bnd_ci = &ci;
    } else {
      const KeyInfo& ki = key_info(key);
      for (size_t w = 0; w < bits.size(); ++w) bits[w] |= ki.accept[w];
      bnd_begin = ki.boundary_nodes.data();
      bnd_end = bnd_begin + ki.boundary_nodes.size();
    }
    if (bottom != k_boundary || bnd_begin == bnd_end || below == k_accept) continue;
    // Tokens that run past the key: continue them on the real stack below it.
    std::vector<uint32_t> after;
    expand(stacks_[below].pos, stacks_[below].parent, after);
    const uint32_t ps = intern_state(after);
    if (bnd_ci) {
      // By the byte after the boundary: only the children the stack below takes, in the count range.
      const TokenTrie& t = *trie_;
      for (unsigned b = 0; b < 256; ++b) {
        const auto& kids = bnd_ci->bnd_child[b];
        if (kids.empty()) continue;
        const uint32_t s1 = step(ps, static_cast<uint8_t>(b));
        if (s1 == 0) continue;
        auto k = std::lower_bound(kids.begin(), kids.end(), std::pair<uint32_t, uint32_t>{lv.need, 0});
        for (; k != kids.end() && k->first <= lv.u; ++k) {
          const uint32_t m = k->second;
          for (uint32_t j = t.tok_begin_[m]; j < t.tok_begin_[m + 1]; ++j) {
            const auto id = static_cast<uint32_t>(t.toks_[j]);
            bits[id >> 6] |= uint64_t{1} << (id & 63);
          }
          walk(m, s1, bits, nullptr);
        }
      }
      continue;
    }
    for (const uint32_t* n = bnd_begin; n != bnd_end; ++n) walk(*n, ps, bits, nullptr);
  }
  mask_slot_.emplace(state, slot);
  return bits;
}

bool Matcher::allowed(int32_t token) {
  if (finished_ || token < 0 || static_cast<size_t>(token) >= g_->trie().n_vocab()) return false;
  if (g_->trie().is_eog(token)) return g_->accepting(state_);
  const std::string& p = g_->trie().piece(token);
  if (p.empty()) return false;
  uint32_t s = state_;
  for (char c : p) {
    s = g_->step(s, static_cast<uint8_t>(c));
    if (s == 0) return false;
  }
  return true;
}

bool Matcher::accept(int32_t token) {
  if (finished_ || token < 0 || static_cast<size_t>(token) >= g_->trie().n_vocab()) return false;
  if (g_->trie().is_eog(token)) {
    if (!g_->accepting(state_)) return false;
    finished_ = true;
    return true;
  }
  const std::string& p = g_->trie().piece(token);
  if (p.empty()) return false;
  return accept_bytes(p);
}

bool Matcher::accept_bytes(std::string_view bytes) {
  if (finished_) return false;
  uint32_t s = state_;
  for (char c : bytes) {
    s = g_->step(s, static_cast<uint8_t>(c));
    if (s == 0) return false;
  }
  state_ = s;
  return true;
}

}  // namespace rocky::grammar
