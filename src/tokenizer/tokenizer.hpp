// Text ↔ token ids, exactly as llama.cpp's llama_tokenize / llama_token_to_piece / llama_detokenize
// do for the same GGUF file (reference: llama.cpp src/llama-vocab.cpp; the behaviour is re-derived
// here, the code is rocky's own).
//
// tokenize(text, add_special, parse_special):
//   1. Special-token partition: the special tokens (Vocab::special_tokens(), longest first) are
//      cut out of the text as whole tokens, leftmost occurrence first. USER_DEFINED tokens are always
//      cut; CONTROL and UNKNOWN tokens only when `parse_special` (llama-tokenize's default: on).
//   2. Each remaining text fragment is tokenized on its own:
//      SPM:  a space is prepended when the vocab adds a space prefix and the fragment is the first
//            one or follows a special token; spaces become U+2581; symbols (UTF-8 characters) are
//            merged pairwise, highest vocab score first (ties: leftmost); a symbol with no token is
//            spelled as byte tokens <0xNN>.
//      BPE:  invalid UTF-8 bytes become U+FFFD; the pre-tokenizer regex chain cuts words; each word
//            is mapped through the GPT-2 byte map and merged by merge rank (lowest first, ties:
//            leftmost). Llama-3 style vocabs take a word that is itself a token without merging.
//   3. With `add_special`, BOS / EOS are added as the vocab's add_bos / add_eos say (skipped when
//      that id is unset; llama.cpp asserts instead).
// Ids are int32 in [0, n_vocab). No input makes it crash or loop: every byte sequence tokenizes.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.hpp"

namespace rocky::tok {

class RegexSplitter;

class Tokenizer {
 public:
  explicit Tokenizer(Vocab vocab);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  // Loads the vocab of a GGUF file (see Vocab::from_gguf for errors).
  static Tokenizer from_gguf(const gguf::GgufFile& f);
  static Tokenizer load(const std::string& gguf_path);

  const Vocab& vocab() const { return vocab_; }

  std::vector<TokenId> tokenize(std::string_view text, bool add_special = true, bool parse_special = true) const;

  // The bytes one token stands for (llama_token_to_piece): SPM "▁" → ' ', byte tokens → their byte,
  // BPE text → bytes through the byte map. CONTROL/UNKNOWN tokens give their text when `special`,
  // else nothing; USER_DEFINED tokens always give their text; UNUSED/UNDEFINED give nothing.
  // A piece may be an incomplete UTF-8 sequence. An id outside the vocab gives nothing.
  std::string token_to_piece(TokenId id, bool special = true) const;

  // The text of a token sequence (llama_detokenize): pieces concatenated; the space an SPM vocab
  // prefixed is removed from the first piece; `remove_special` drops a leading BOS / trailing EOS
  // that the vocab adds; BPE vocabs with clean_spaces undo the " ," " ." " 's" spacing.
  std::string detokenize(std::span<const TokenId> ids, bool remove_special = false, bool unparse_special = true) const;

  // Pre-tokenizer only (BPE): the words the regex chain cuts `text` into (after UTF-8 sanitizing),
  // as raw bytes — for tests and debugging. Empty for SPM vocabs.
  std::vector<std::string> pretokenize(std::string_view text) const;

 private:
  void tokenize_spm(std::string_view text, std::vector<TokenId>& out) const;
  void tokenize_bpe(std::string_view text, std::vector<TokenId>& out) const;

  Vocab vocab_;
  std::unique_ptr<RegexSplitter> splitter_;  // BPE only
};

// Streaming detokenizer: push ids one by one and get the text that is complete so far. Bytes of a
// UTF-8 sequence split across tokens are held back until the sequence is complete; flush() returns
// whatever is left (possibly an invalid tail). SPM's leading space is removed from the first piece,
// as in Tokenizer::detokenize.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool special = true) : tok_(&tok), special_(special) {}
  std::string push(TokenId id);
  std::string flush();

 private:
  const Tokenizer* tok_;
  bool special_;
  bool first_ = true;
  std::string pending_;
};

}  // namespace rocky::tok
