// SentencePiece-style (tokenizer.ggml.model = "llama") tokenization of one text fragment:
// llama.cpp's llm_tokenizer_spm_session behaviour.
#include <queue>
#include <vector>

#include "tokenizer/tokenizer.hpp"
#include "tokenizer/unicode.hpp"

namespace rocky::tok {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t start;  // byte offset in the fragment
  size_t n;      // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t size;  // bytes of left + right when queued
};

struct BigramOrder {
  // priority_queue pops the "largest": highest score first, then the leftmost pair.
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void Tokenizer::tokenize_spm(std::string_view text, std::vector<TokenId>& out) const {
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    size_t len = std::min(utf8_len_from_lead(static_cast<uint8_t>(text[off])), text.size() - off);
    const int idx = static_cast<int>(sym.size());
    sym.push_back(Symbol{idx - 1, off + len == text.size() ? -1 : idx + 1, off, len});
    off += len;
  }
  if (sym.empty()) return;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = sym[static_cast<size_t>(left)];
    const Symbol& r = sym[static_cast<size_t>(right)];
    const TokenId id = vocab_.find(text.substr(l.start, l.n + r.n));
    if (id == k_null_token) return;
    queue.push(Bigram{left, right, vocab_.token(id).score, l.n + r.n});
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[static_cast<size_t>(b.left)];
    Symbol& r = sym[static_cast<size_t>(b.right)];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  for (int i = 0; i != -1; i = sym[static_cast<size_t>(i)].next) {
    const Symbol& s = sym[static_cast<size_t>(i)];
    const std::string_view piece = text.substr(s.start, s.n);
    const TokenId id = vocab_.find(piece);
    if (id != k_null_token) {
      out.push_back(id);
      continue;
    }
    // No token for this symbol (merges only ever form tokens, so it is a single character):
    // spell it with byte tokens.
    for (char c : piece) {
      const TokenId bt = vocab_.byte_token(static_cast<uint8_t>(c));
      if (bt != k_null_token) out.push_back(bt);
    }
  }
}

}  // namespace rocky::tok
