// Byte-level BPE pre-tokenizer: cuts text into words with a chain of regular expressions, the way
// llama.cpp's unicode_regex_split does. Each regex of the chain is applied to every piece the
// previous one produced; the text between two matches stays a piece of its own, so the pieces
// always concatenate back to the input. Regexes are compiled with PCRE2 in UTF + UCP mode (\s, \p{L},
// \p{N} follow Unicode properties). Sources of the patterns: llama.cpp src/llama-vocab.cpp
// (llm_tokenizer_bpe), which takes them from each model's tokenizer.json.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.hpp"

namespace rocky::tok {

// The pattern chain for a pre-tokenizer family.
std::vector<std::string> pretokenizer_patterns(PreType type);

class RegexSplitter {
 public:
  // Compiles every pattern (rocky::Error naming the pattern and offset on a syntax error).
  explicit RegexSplitter(const std::vector<std::string>& patterns);
  ~RegexSplitter();
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;

  // `text` must be valid UTF-8 (callers sanitize first). Returns the pieces, in order; empty text
  // gives no pieces.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rocky::tok
