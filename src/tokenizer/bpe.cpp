// Byte-level BPE (tokenizer.ggml.model = "gpt2") tokenization of one text fragment:
// llama.cpp's llm_tokenizer_bpe_session behaviour.
#include <vector>

#include "tokenizer/merge.hpp"
#include "tokenizer/pretokenize.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/unicode.hpp"

namespace rocky::tok {

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
    split_symbols(w, sym);
    if (sym.empty()) continue;
    // Lowest merge rank first.
    merge_symbols(w, sym, [&](std::string_view l, std::string_view r) -> std::optional<double> {
      const int32_t rank = vocab_.merge_rank(l, r);
      if (rank < 0) return std::nullopt;
      return -static_cast<double>(rank);
    });

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
