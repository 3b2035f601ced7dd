// Byte-level BPE (tokenizer.ggml.model = "gpt2") tokenization of one text fragment:
// llama.cpp's llm_tokenizer_bpe_session behaviour.
#include <queue>
#include <vector>

#include "tokenizer/pretokenize.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/unicode.hpp"

namespace rocky::tok {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t start;  // byte offset in the mapped word
  size_t n;      // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  int32_t rank;
  size_t size;
};

struct BigramOrder {
  // priority_queue pops the "largest": lowest rank first, then the leftmost pair.
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void Tokenizer::tokenize_bpe(std::string_view text, std::vector<TokenId>& out) const {
  const std::string clean = utf8_sanitize(text);
  std::vector<Symbol> sym;
  for (std::string_view raw_word : splitter_->split(clean)) {
    const std::string word = bpe_encode_bytes(raw_word);
    const std::string_view w(word);
    if (vocab_.ignore_merges()) {
      const TokenId id = vocab_.find(w);
      if (id != k_null_token) {
        out.push_back(id);
        continue;
      }
    }
    sym.clear();
    for (size_t off = 0; off < w.size();) {
      size_t len = std::min(utf8_len_from_lead(static_cast<uint8_t>(w[off])), w.size() - off);
      const int idx = static_cast<int>(sym.size());
      sym.push_back(Symbol{idx - 1, off + len == w.size() ? -1 : idx + 1, off, len});
      off += len;
    }
    if (sym.empty()) continue;

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto try_add = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      const Symbol& l = sym[static_cast<size_t>(left)];
      const Symbol& r = sym[static_cast<size_t>(right)];
      const int32_t rank = vocab_.merge_rank(w.substr(l.start, l.n), w.substr(r.start, r.n));
      if (rank < 0) return;
      queue.push(Bigram{left, right, rank, l.n + r.n});
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

    for (int i = 0; i != -1; i = sym[static_cast<size_t>(i)].next) {
      const Symbol& s = sym[static_cast<size_t>(i)];
      const std::string_view piece = w.substr(s.start, s.n);
      const TokenId id = vocab_.find(piece);
      if (id != k_null_token) {
        out.push_back(id);
        continue;
      }
      // A merge result missing from the vocab (a broken vocab): fall back to one token per
      // character, dropping characters that have none.
      for (size_t off = 0; off < piece.size();) {
        size_t len = std::min(utf8_len_from_lead(static_cast<uint8_t>(piece[off])), piece.size() - off);
        const TokenId cid = vocab_.find(piece.substr(off, len));
        if (cid != k_null_token) out.push_back(cid);
        off += len;
      }
    }
  }
}

}  // namespace rocky::tok
