// SentencePiece-style (tokenizer.ggml.model = "llama") tokenization of one text fragment:
// llama.cpp's llm_tokenizer_spm_session behaviour.
#include <vector>

#include "tokenizer/merge.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/unicode.hpp"

namespace rocky::tok {

void Tokenizer::tokenize_spm(std::string_view text, std::vector<TokenId>& out) const {
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  split_symbols(text, sym);
  if (sym.empty()) return;
  // Highest score of the merged token first; a pair merges only when the merged piece is a token.
  merge_symbols(text, sym, [&](std::string_view l, std::string_view r) -> std::optional<double> {
    const TokenId id = vocab_.find(std::string_view(l.data(), l.size() + r.size()));
    if (id == k_null_token) return std::nullopt;
    return static_cast<double>(vocab_.token(id).score);
  });

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
