#include "tokenizer/pretokenize.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.hpp"

namespace rocky::tok {

std::vector<std::string> pretokenizer_patterns(PreType type) {
  // Contractions are spelled out case-insensitively instead of (?i:…), as llama.cpp does.
  static const char* k_gpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
  switch (type) {
    case PreType::Gpt2: return {k_gpt2};
    case PreType::Llama3:
      return {
          "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
          "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    case PreType::Qwen2:
      return {
          "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
          "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    case PreType::Default: break;
  }
  // llama.cpp's default chain (pre "default" or absent).
  return {"[\\p{P}\\$\\+<=>\\^~\\|]+", k_gpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
}

struct RegexSplitter::Impl {
  std::vector<pcre2_code*> codes;
  ~Impl() {
    for (auto* c : codes) pcre2_code_free(c);
  }
};

RegexSplitter::RegexSplitter(const std::vector<std::string>& patterns) : impl_(std::make_unique<Impl>()) {
  for (const auto& p : patterns) {
    int err = 0;
    PCRE2_SIZE off = 0;
    pcre2_code* c =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
    if (!c) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      fail("pre-tokenizer regex '{}': {} at offset {}", p, reinterpret_cast<const char*>(msg), off);
    }
    pcre2_jit_compile(c, PCRE2_JIT_COMPLETE);  // best effort; the interpreter is used if JIT is unavailable
    impl_->codes.push_back(c);
  }
}

RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;

namespace {

// Splits one piece with one regex: matches and the gaps between them, in order.
void split_one(pcre2_code* code, pcre2_match_data* md, std::string_view piece, std::vector<std::string_view>& out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  const size_t n = piece.size();
  size_t pos = 0;   // where the next match search starts
  size_t done = 0;  // everything before this is already emitted
  while (pos < n) {
    int rc = pcre2_match(code, subject, n, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      fail("pre-tokenizer: regex match failed: {}", reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t s = ov[0], e = ov[1];
    if (e <= s) {  // empty match (none of the shipped patterns can make one): step one character
      size_t step = 1;
      while (s + step < n && (static_cast<uint8_t>(piece[s + step]) & 0xC0) == 0x80) ++step;
      pos = s + step;
      continue;
    }
    if (s > done) out.push_back(piece.substr(done, s - done));
    out.push_back(piece.substr(s, e - s));
    done = pos = e;
  }
  if (done < n) out.push_back(piece.substr(done));
}

}  // namespace

std::vector<std::string_view> RegexSplitter::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  if (!md) throw std::bad_alloc();
  try {
    for (auto* code : impl_->codes) {
      std::vector<std::string_view> next;
      next.reserve(pieces.size() * 2);
      for (auto p : pieces) split_one(code, md, p, next);
      pieces.swap(next);
    }
  } catch (...) {
    pcre2_match_data_free(md);
    throw;
  }
  pcre2_match_data_free(md);
  return pieces;
}

}  // namespace rocky::tok
