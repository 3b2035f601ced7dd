// libFuzzer target for the tokenizers. Input: one flags byte, then the text (any bytes, invalid UTF-8
// included). Properties: no crash, no hang, no sanitizer report; every id is inside the vocab; the
// streaming decoder gives the same bytes as detokenize; and for valid UTF-8 text, the byte-level BPE
// (qwen2) vocab gives the text back exactly: detokenize(tokenize(x)) == x.
// Vocabs: ../shared/reference/vocab/ggml-vocab-{qwen2-rebuilt,llama-spm}.gguf (ROCKY_SHARED_DIR).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.hpp"
#include "tokenizer/unicode.hpp"

namespace {

const rocky::tok::Tokenizer& load(const char* rel) {
  // Loaded once per process; leaked on purpose (libFuzzer never returns from its loop).
  auto* t =
      new rocky::tok::Tokenizer(rocky::tok::Tokenizer::load(std::string(ROCKY_SHARED_DIR) + "/reference/vocab/" + rel));
  return *t;
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "tokenizer_fuzz: property violated: %s\n", what);
  std::abort();
}

void check(const rocky::tok::Tokenizer& tok, std::string_view text, bool add_special, bool parse_special,
           bool want_round_trip) {
  const auto ids = tok.tokenize(text, add_special, parse_special);
  for (auto id : ids) {
    if (!tok.vocab().valid(id)) die("id outside the vocab");
  }
  const std::string back = tok.detokenize(ids);
  rocky::tok::StreamDecoder dec(tok);
  std::string streamed;
  for (auto id : ids) streamed += dec.push(id);
  streamed += dec.flush();
  if (streamed != back) die("streaming decoder differs from detokenize");
  if (want_round_trip && back != text) die("detokenize(tokenize(x)) != x on the byte-level vocab");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rocky::tok::Tokenizer& bpe = load("ggml-vocab-qwen2-rebuilt.gguf");
  static const rocky::tok::Tokenizer& spm = load("ggml-vocab-llama-spm.gguf");
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool valid = rocky::tok::utf8_valid(text);
  check(bpe, text, flags & 1, flags & 2, valid);
  check(spm, text, flags & 4, flags & 8, false);
  return 0;
}
