// Token-level matching of a Grammar against a model's vocabulary, with a mask of the allowed tokens
// per step that costs microseconds on a 151,936-token vocabulary.
//
// How (the XGrammar idea, in rocky's own form):
//   - The vocabulary's token bytes form a trie (TokenTrie, built once per tokenizer) stored in
//     preorder, so a subtree is a contiguous node range and a walk that prunes a dead prefix skips
//     the whole range at once. Tokens that share a prefix are checked once for it.
//   - The parser is a pushdown recognizer over bytes (llama.cpp's stack expansion: every stack's top
//     is a byte set). Stacks are interned as (position, parent) nodes; a parser state is an interned
//     set of stacks and byte transitions between states are memoised, so re-walking known states is
//     one table load per byte.
//   - A stack's top frames up to the first return position that must still consume a byte (the
//     "key") decide most tokens on their own: tokens that stay inside the key are accepted or
//     rejected whatever lies below, and that answer (a bitset) is computed once per key and cached.
//     Only tokens that run past the key's end ("boundary" trie nodes, e.g. the bytes after a string's
//     closing quote) are re-checked against the real stack below, by walking just those subtrees.
//   - A bounded repetition e{m,n} has a parser position per level, so each level would be a key of
//     its own, each a walk of the whole trie (a string's maxLength of 255: 255 walks). Instead the
//     unbounded e* is walked once, counting the copies of e each token starts, and the level that
//     allows u more copies takes the tokens that start at most u (Grammar::counted_star). This
//     holds where a copy of e ends unambiguously (checked during that walk; otherwise the level is
//     walked as it is). Every level, the last one included (it ends in a reference to the empty
//     rule so that its position stays on the stack), and every key inside a copy of e (inside a
//     multi-byte character too) takes its tokens from the star walk of that position.
//   - The final mask per parser state is cached, so a state that repeats (inside a string, in a list
//     of numbers) costs a hash lookup.
//
// Special tokens: control tokens (and unused / undefined ones) are never allowed; the
// end-of-generation ids are allowed exactly when the grammar is in an accepting state. Byte-fallback
// tokens (<0xNN>) match their byte; tokens holding part of a UTF-8 sequence match as far as their
// bytes go, since the grammar itself is over bytes.
//
// Not thread-safe: one Matcher (and its CompiledGrammar) per request.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.hpp"

namespace rocky::tok {
class Tokenizer;
}

namespace rocky::grammar {

// Limits a compiled grammar enforces (rocky::Error when exceeded; README states them).
inline constexpr size_t k_max_states = 60000;           // parser states (memoised transitions: 1 KiB each)
inline constexpr size_t k_max_stack_nodes = 4000000;    // interned stack nodes
inline constexpr size_t k_max_stacks_per_state = 4096;  // alternatives alive at once (ambiguity)
inline constexpr double k_compile_budget_ms = 5000.0;   // time to build the grammar and its first mask

class TokenTrie {
 public:
  // The vocabulary of `tok`: text tokens by their bytes (llama_token_to_piece without specials);
  // control, unused and undefined tokens are left out; eog ids from the vocab.
  static std::shared_ptr<const TokenTrie> build(const tok::Tokenizer& tok);
  // From explicit pieces (index = token id; an empty piece is never allowed) and eog ids.
  static std::shared_ptr<const TokenTrie> from_pieces(std::vector<std::string> pieces, std::vector<int32_t> eog);

  size_t n_vocab() const { return pieces_.size(); }
  size_t n_words() const { return (pieces_.size() + 63) / 64; }
  size_t n_nodes() const { return byte_.size(); }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& eog() const { return eog_; }
  bool is_eog(int32_t id) const;

  // Preorder nodes; node 0 is the root (no byte). Node n's subtree is [n, n + size[n]).
  std::vector<uint8_t> byte_;
  std::vector<uint32_t> depth_;
  std::vector<uint32_t> size_;
  std::vector<uint32_t> tok_begin_;  // tokens ending at node n: toks_[tok_begin_[n] .. tok_begin_[n+1])
  std::vector<int32_t> toks_;
  uint32_t max_depth_ = 0;

 private:
  void build_nodes();
  std::vector<std::string> pieces_;
  std::vector<int32_t> eog_;
};

// A Grammar bound to a vocabulary, with the caches every step shares.
class CompiledGrammar {
 public:
  // derive_counted = false walks every level of a bounded repetition on its own (for tests: the
  // derived token sets must equal those).
  CompiledGrammar(Grammar g, std::shared_ptr<const TokenTrie> trie, bool derive_counted = true);

  uint32_t initial_state() const { return initial_; }
  // The state after one more byte (0: no stack survives).
  uint32_t step(uint32_t state, uint8_t b);
  bool accepting(uint32_t state) const { return states_[state].has_accept; }
  // Allowed tokens in `state`: bit t of word t/64. Valid until the next mask() call.
  const std::vector<uint64_t>& mask(uint32_t state);
  // Whether mask(state) is a cache lookup (no walk of the vocabulary).
  bool mask_cached(uint32_t state) const { return mask_slot_.count(state) != 0; }

  const Grammar& grammar() const { return g_; }
  const TokenTrie& trie() const { return *trie_; }
  double compile_ms() const { return compile_ms_; }
  size_t n_states() const { return states_.size(); }
  // Walks of the whole vocabulary trie so far (one per new key or counted repetition's star).
  size_t n_trie_walks() const { return n_trie_walks_; }
  // Bytes held by the caches (masks, key walks, counted-repetition sets, states): what keeping this
  // compiled grammar for a later request costs.
  uint64_t cache_bytes() const;

 private:
  static constexpr uint32_t k_accept = 0;    // the empty stack at the bottom: the root is complete
  static constexpr uint32_t k_boundary = 1;  // the bottom of a key: the key's frames are complete
  struct StackNode {
    uint32_t pos, parent;
  };
  struct State {
    std::vector<uint32_t> stacks;  // sorted ids
    bool has_accept = false, has_boundary = false;
  };
  struct KeyInfo {
    std::vector<uint64_t> accept;          // tokens decided inside the key
    std::vector<uint32_t> boundary_nodes;  // trie nodes where the key is complete and bytes follow
  };

  // The walk of a star key (the unbounded form of a counted repetition level), with the copies of
  // e each token starts (ascending). A level that allows u copies takes the tokens with count ≤ u:
  // its token set is made from an anchor level (every level up to k_anchor_step, then every
  // k_anchor_step-th, and max_count, from which on all levels are the same) less the tokens in
  // between, in a scratch set, so a level costs a copy and a few tokens, not a bitset kept per level.
  // A level of at most two tokens per bitset word (a character class's rarer alternatives) sets its
  // tokens directly and keeps no anchors (their pages would cost more than the bits).
  static constexpr uint32_t k_anchor_step = 16;
  struct CountedInfo {
    bool ok = false;
    uint32_t max_count = 0;
    std::vector<uint32_t> acc_count, bnd_count;
    std::vector<int32_t> acc_tok;
    std::vector<uint32_t> bnd_node;
    // The children of the boundary nodes by their byte, each (count, child) ascending: where many
    // nodes complete the key (a minLength level), only those whose next byte the stack below takes
    // are walked.
    std::array<std::vector<std::pair<uint32_t, uint32_t>>, 256> bnd_child;
    std::map<uint32_t, std::vector<uint64_t>> anchors;
  };
  struct CountedLevel {
    CountedInfo* info = nullptr;  // null: not a counted level (or its copies end ambiguously)
    uint32_t u = 0, need = 0;     // copies allowed; copies before the key may complete
  };

  uint32_t stack(uint32_t pos, uint32_t parent);
  CountedInfo& counted_info(uint32_t star_key, uint32_t spos, uint32_t below);
  CountedLevel counted_level(const std::vector<uint32_t>& chain, size_t at, uint32_t bottom);
  const std::vector<uint64_t>& anchor(CountedInfo& ci, uint32_t a);
  void expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out);
  uint32_t intern_state(std::vector<uint32_t>& stacks);
  const KeyInfo& key_info(uint32_t key);
  void walk(uint32_t node, uint32_t state, std::vector<uint64_t>& bits, std::vector<uint32_t>* boundary);

  Grammar g_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<StackNode> stacks_;
  std::unordered_map<uint64_t, uint32_t> stack_index_;
  std::vector<State> states_;
  std::unordered_map<std::string, uint32_t> state_index_;
  std::vector<int32_t> trans_;          // [state][256], -1 = not computed
  std::vector<uint8_t> boundary_flag_;  // [state]: State::has_boundary, packed for the trie walks
  std::unordered_map<uint32_t, KeyInfo> keys_;
  std::unordered_map<uint32_t, CountedInfo> counted_;  // by star key
  bool derive_counted_ = true;
  size_t n_trie_walks_ = 0;
  std::unordered_map<uint32_t, uint32_t> mask_slot_;  // state → masks_ index
  std::vector<std::vector<uint64_t>> masks_;          // slots; the first n_masks_ are in use
  uint32_t n_masks_ = 0;
  std::vector<uint32_t> walk_states_;
  std::vector<uint32_t> scratch_;
  std::vector<uint64_t> level_bits_;
  uint32_t initial_ = 0;
  double compile_ms_ = 0;
};

// One generation's position in a grammar.
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<CompiledGrammar> g) : g_(std::move(g)), state_(g_->initial_state()) {}

  // The tokens allowed now (see CompiledGrammar::mask).
  const std::vector<uint64_t>& mask() { return g_->mask(state_); }
  bool mask_cached() const { return g_->mask_cached(state_); }
  bool allowed(int32_t token);
  // Advances by `token`; false (and no change) when the grammar does not allow it. An
  // end-of-generation token is allowed only in an accepting state and ends the match.
  bool accept(int32_t token);
  // Advances by raw bytes (false and no change when they do not match).
  bool accept_bytes(std::string_view bytes);
  bool accepting() const { return !finished_ && g_->accepting(state_); }
  bool finished() const { return finished_; }
  void reset() {
    state_ = g_->initial_state();
    finished_ = false;
  }
  CompiledGrammar& compiled() { return *g_; }

 private:
  std::shared_ptr<CompiledGrammar> g_;
  uint32_t state_;
  bool finished_ = false;
};

}  // namespace rocky::grammar
