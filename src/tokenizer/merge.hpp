// The symbol-merge loop shared by the SPM and byte-level BPE tokenizers (llama.cpp's
// llm_tokenizer_spm_session / llm_tokenizer_bpe_session): a text is split into UTF-8 characters
// held in a doubly linked list, and adjacent pairs are merged best-first through a priority queue
// until no pair qualifies. The two tokenizers differ only in how a pair is scored (SPM: the merged
// token's score, higher first; BPE: the merge rank, lower first) and in the fallback for a
// symbol without a token.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "tokenizer/unicode.hpp"

namespace rocky::tok {

struct Symbol {
  int prev;
  int next;
  size_t start;  // byte offset in the text
  size_t n;      // bytes; 0 once merged into its left neighbour
};

// One symbol per UTF-8 character of `text` (a truncated sequence at the end is one symbol).
inline void split_symbols(std::string_view text, std::vector<Symbol>& sym) {
  sym.clear();
  for (size_t off = 0; off < text.size();) {
    const size_t len = std::min(utf8_len_from_lead(static_cast<uint8_t>(text[off])), text.size() - off);
    const int idx = static_cast<int>(sym.size());
    sym.push_back(Symbol{idx - 1, off + len == text.size() ? -1 : idx + 1, off, len});
    off += len;
  }
}

// Merges adjacent symbols best-first. pair_priority(left_piece, right_piece) returns the pair's
// priority (higher merges first; ties → the leftmost pair) or nullopt when the pair cannot merge.
template <typename PairPriority>
void merge_symbols(std::string_view text, std::vector<Symbol>& sym, PairPriority pair_priority) {
  struct Bigram {
    int left;
    int right;
    double priority;
    size_t size;  // bytes of left + right when queued
  };
  struct Order {  // priority_queue pops the "largest"
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
    }
  };
  std::priority_queue<Bigram, std::vector<Bigram>, Order> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = sym[static_cast<size_t>(left)];
    const Symbol& r = sym[static_cast<size_t>(right)];
    const std::optional<double> p = pair_priority(text.substr(l.start, l.n), text.substr(r.start, r.n));
    if (p) queue.push(Bigram{left, right, *p, l.n + r.n});
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[static_cast<size_t>(b.left)];
    Symbol& r = sym[static_cast<size_t>(b.right)];
    // Stale when either side was merged since (adjacent symbols only grow to the right).
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
}

}  // namespace rocky::tok
