#include "tokenizer/tokenizer.hpp"

#include "tokenizer/pretokenize.hpp"
#include "tokenizer/unicode.hpp"

namespace rocky::tok {
namespace {

struct Fragment {
  TokenId id;  // k_null_token: raw text [off, off + len)
  size_t off;
  size_t len;
};

// Cuts special tokens out of `text` (llama.cpp's tokenizer_st_partition): for each special token in
// order (longest first), every raw fragment is split at the token's non-overlapping occurrences,
// left to right.
std::vector<Fragment> partition(const Vocab& v, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back(Fragment{k_null_token, 0, text.size()});
  std::vector<Fragment> next;
  for (TokenId sid : v.special_tokens()) {
    const TokenData& t = v.token(sid);
    if (!parse_special && (t.attr & (attr::k_control | attr::k_unknown))) continue;
    const std::string_view st(t.text);
    bool any = false;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.id != k_null_token || f.len < st.size()) {
        next.push_back(f);
        continue;
      }
      const std::string_view body = text.substr(f.off, f.len);
      size_t pos = 0;
      while (pos < body.size()) {
        const size_t m = body.find(st, pos);
        if (m == std::string_view::npos) break;
        any = true;
        if (m > pos) next.push_back(Fragment{k_null_token, f.off + pos, m - pos});
        next.push_back(Fragment{sid, 0, 0});
        pos = m + st.size();
      }
      if (pos < body.size()) next.push_back(Fragment{k_null_token, f.off + pos, body.size() - pos});
    }
    if (any) frags.swap(next);
  }
  return frags;
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
  if (vocab_.type() == VocabType::Bpe) {
    splitter_ = std::make_unique<RegexSplitter>(pretokenizer_patterns(vocab_.pre_type()));
  }
}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::from_gguf(const gguf::GgufFile& f) { return Tokenizer(Vocab::from_gguf(f)); }

Tokenizer Tokenizer::load(const std::string& gguf_path) { return from_gguf(gguf::GgufFile::open(gguf_path)); }

std::vector<TokenId> Tokenizer::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<TokenId> out;
  const std::vector<Fragment> frags = partition(vocab_, text, parse_special);
  const bool bos = add_special && vocab_.add_bos() && vocab_.bos() != k_null_token;
  const bool eos = add_special && vocab_.add_eos() && vocab_.eos() != k_null_token;
  if (bos) out.push_back(vocab_.bos());
  if (vocab_.type() == VocabType::Spm) {
    bool prev_special = true;  // the first fragment gets the space prefix too
    std::string buf;
    for (const Fragment& f : frags) {
      if (f.id != k_null_token) {
        out.push_back(f.id);
        prev_special = true;
        continue;
      }
      buf.clear();
      if (vocab_.add_space_prefix() && prev_special) buf.push_back(' ');
      buf.append(text.substr(f.off, f.len));
      // Spaces are spelled U+2581 "▁" in SPM vocabularies.
      std::string escaped;
      escaped.reserve(buf.size() + buf.size() / 2);
      for (char c : buf) {
        if (c == ' ')
          escaped.append("\xE2\x96\x81");
        else
          escaped.push_back(c);
      }
      tokenize_spm(escaped, out);
      prev_special = false;
    }
  } else {
    for (const Fragment& f : frags) {
      if (f.id != k_null_token)
        out.push_back(f.id);
      else
        tokenize_bpe(text.substr(f.off, f.len), out);
    }
  }
  if (eos) out.push_back(vocab_.eos());
  return out;
}

std::string Tokenizer::token_to_piece(TokenId id, bool special) const {
  if (!vocab_.valid(id)) return {};
  const TokenData& t = vocab_.token(id);
  if (t.attr & (attr::k_control | attr::k_unknown)) return special ? t.text : std::string();
  if (t.attr & attr::k_user_defined) return t.text;
  if (vocab_.type() == VocabType::Spm) {
    if (t.attr & attr::k_normal) {
      std::string r;
      r.reserve(t.text.size());
      const std::string_view s(t.text);
      for (size_t i = 0; i < s.size();) {
        if (s.compare(i, 3, "\xE2\x96\x81") == 0) {
          r.push_back(' ');
          i += 3;
        } else {
          r.push_back(s[i++]);
        }
      }
      return r;
    }
    if (t.attr & attr::k_byte) return std::string(1, static_cast<char>(vocab_.token_byte(id)));
    return {};
  }
  if (t.attr & attr::k_normal) return bpe_decode_text(t.text);
  return {};
}

std::string Tokenizer::detokenize(std::span<const TokenId> ids, bool remove_special, bool unparse_special) const {
  bool strip_space = vocab_.add_space_prefix();
  if (remove_special && vocab_.add_bos() && !ids.empty() && ids.front() == vocab_.bos()) {
    strip_space = false;
    ids = ids.subspan(1);
  }
  if (remove_special && vocab_.add_eos() && !ids.empty() && ids.back() == vocab_.eos()) {
    ids = ids.first(ids.size() - 1);
  }
  std::string text;
  for (TokenId id : ids) {
    std::string piece = token_to_piece(id, unparse_special);
    if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip_space = false;
    text += piece;
  }
  if (!vocab_.clean_spaces() || text.empty()) return text;

  // clean_up_tokenization_spaces, as llama.cpp: three passes over the bytes.
  std::string a;
  a.push_back(text[0]);
  for (size_t i = 1; i < text.size(); ++i) {  // " ?", " !", " .", " ," → drop the space
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) a.pop_back();
    a.push_back(x);
  }
  std::string b;
  b.push_back(a[0]);
  for (size_t i = 1; i < a.size(); ++i) {  // " ' " → "'"
    const char x = a[i];
    if (x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
      b.pop_back();
      b.push_back(x);
      ++i;  // skip the next space
      continue;
    }
    b.push_back(x);
  }
  std::string c;
  c.push_back(b[0]);
  for (size_t i = 1; i < b.size(); ++i) {  // " 's", " 'm", " 're", " 've" → drop the space
    const char x = b[i];
    if (b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
      const char x1 = b[i + 1];
      if (x1 == 's' || x1 == 'm') {
        c.pop_back();
      } else if (i + 2 < b.size()) {
        const char x2 = b[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) c.pop_back();
      }
    }
    c.push_back(x);
  }
  return c;
}

std::vector<std::string> Tokenizer::pretokenize(std::string_view text) const {
  std::vector<std::string> out;
  if (!splitter_) return out;
  const std::string clean = utf8_sanitize(text);
  for (auto p : splitter_->split(clean)) out.emplace_back(p);
  return out;
}

std::string StreamDecoder::push(TokenId id) {
  std::string piece = tok_->token_to_piece(id, special_);
  if (first_ && tok_->vocab().add_space_prefix() && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
  first_ = false;
  pending_ += piece;
  const size_t n = utf8_complete_prefix(pending_);
  std::string ready = pending_.substr(0, n);
  pending_.erase(0, n);
  return ready;
}

std::string StreamDecoder::flush() {
  std::string r;
  r.swap(pending_);
  return r;
}

}  // namespace rocky::tok
