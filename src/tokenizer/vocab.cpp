// Vocabulary loading from GGUF metadata; semantics and defaults as llama.cpp's llama_vocab::impl::load.
#include "tokenizer/vocab.hpp"

#include <algorithm>
#include <optional>

#include "core/error.hpp"

namespace rocky::tok {
namespace {

std::string merge_key(std::string_view left, std::string_view right) {
  // Length-prefixed so that no two different pairs share a key.
  std::string k;
  k.reserve(4 + left.size() + right.size());
  const auto n = static_cast<uint32_t>(left.size());
  k.push_back(static_cast<char>(n & 0xff));
  k.push_back(static_cast<char>((n >> 8) & 0xff));
  k.push_back(static_cast<char>((n >> 16) & 0xff));
  k.push_back(static_cast<char>((n >> 24) & 0xff));
  k.append(left);
  k.append(right);
  return k;
}

uint32_t attr_from_type(int64_t t) {
  switch (t) {
    case 1: return attr::k_normal;
    case 2: return attr::k_unknown;
    case 3: return attr::k_control;
    case 4: return attr::k_user_defined;
    case 5: return attr::k_unused;
    case 6: return attr::k_byte;
    default: return attr::k_undefined;
  }
}

struct PreInfo {
  PreType type;
  bool ignore_merges = false;
  bool add_bos = false;
  bool clean_spaces = true;
};

std::optional<PreInfo> pre_info(std::string_view name) {
  if (name.empty() || name == "default") return PreInfo{PreType::Default};
  if (name == "llama3" || name == "llama-v3" || name == "llama-bpe" || name == "falcon3")
    return PreInfo{PreType::Llama3, true, true, true};
  if (name == "qwen2" || name == "deepseek-r1-qwen") return PreInfo{PreType::Qwen2, false, false, false};
  if (name == "megrez" || name == "stablelm2") return PreInfo{PreType::Qwen2};
  if (name == "dbrx" || name == "smaug-bpe") return PreInfo{PreType::Llama3};
  if (name == "gpt-2" || name == "phi-2" || name == "roberta-bpe" || name == "mpt" || name == "olmo" ||
      name == "jais" || name == "jina-es" || name == "jina-de" || name == "jina-v1-en" || name == "gigachat" ||
      name == "jina-v2-es" || name == "jina-v2-de" || name == "jina-v2-code")
    return PreInfo{PreType::Gpt2};
  return std::nullopt;
}

}  // namespace

Vocab Vocab::from_gguf(const gguf::GgufFile& f) {
  Vocab v;
  const std::string& path = f.path();

  auto model = f.get_string("tokenizer.ggml.model");
  if (!model) fail("{}: missing key 'tokenizer.ggml.model' (no tokenizer in this file)", path);
  if (*model == "llama") {
    v.type_ = VocabType::Spm;
    v.bos_ = 1;
    v.eos_ = 2;
    v.unk_ = 0;
    v.add_bos_ = true;
    v.add_space_prefix_ = true;
    v.clean_spaces_ = false;
  } else if (*model == "gpt2") {
    v.type_ = VocabType::Bpe;
    v.bos_ = 11;
    v.eos_ = 11;
    auto pre = f.get_string("tokenizer.ggml.pre");
    v.pre_name_ = pre ? std::string(*pre) : std::string("default");
    auto info = pre_info(v.pre_name_);
    if (!info) {
      fail(
          "{}: key 'tokenizer.ggml.pre' = '{}': unsupported pre-tokenizer (rocky knows default, gpt-2, "
          "llama-bpe/llama3, qwen2 and their aliases)",
          path, v.pre_name_);
    }
    v.pre_type_ = info->type;
    v.ignore_merges_ = info->ignore_merges;
    v.add_bos_ = info->add_bos;
    v.clean_spaces_ = info->clean_spaces;
  } else {
    fail("{}: key 'tokenizer.ggml.model' = '{}': unsupported tokenizer (rocky knows 'llama' and 'gpt2')", path, *model);
  }
  if (auto b = f.get_bool("tokenizer.ggml.add_space_prefix")) v.add_space_prefix_ = *b;

  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) fail("{}: missing key 'tokenizer.ggml.tokens'", path);
  const size_t n = tokens->size();
  if (n == 0) fail("{}: key 'tokenizer.ggml.tokens' is empty", path);
  if (n > static_cast<size_t>(INT32_MAX)) fail("{}: key 'tokenizer.ggml.tokens' has {} entries (too many)", path, n);
  auto scores = f.get_f32_array("tokenizer.ggml.scores");
  if (scores && scores->size() != n) {
    fail("{}: key 'tokenizer.ggml.scores' has {} entries, tokenizer.ggml.tokens has {}", path, scores->size(), n);
  }
  auto types = f.get_int_array("tokenizer.ggml.token_type");
  if (types && types->size() != n) {
    fail("{}: key 'tokenizer.ggml.token_type' has {} entries, tokenizer.ggml.tokens has {}", path, types->size(), n);
  }

  v.tokens_.resize(n);
  v.text_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    TokenData& t = v.tokens_[i];
    t.text = std::string((*tokens)[i]);
    if (t.text.empty()) t.text = "[EMPTY_" + std::to_string(i) + "]";
    t.score = scores ? (*scores)[i] : 0.0f;
    t.attr = types ? attr_from_type((*types)[i]) : attr::k_normal;
    // Duplicate texts: the last id wins, as in llama.cpp (token_to_id[word] = i).
    v.text_to_id_[t.text] = static_cast<TokenId>(i);
  }

  // A byte-level BPE vocabulary labelled "llama" (SentencePiece) would tokenize every word to the
  // unknown id: SPM needs '▁' pieces (or <0xXX> byte tokens to fall back on). Refuse it.
  if (v.type_ == VocabType::Spm) {
    size_t spm_pieces = 0, bpe_pieces = 0;
    for (const TokenData& t : v.tokens_) {
      if ((t.attr & attr::k_byte) || t.text.find("\xE2\x96\x81") != std::string::npos) ++spm_pieces;  // U+2581 ▁
      if (t.text.find("\xC4\xA0") != std::string::npos) ++bpe_pieces;  // U+0120 Ġ, byte-level BPE's space
    }
    if (spm_pieces == 0 && (bpe_pieces > 0 || f.get_string_array("tokenizer.ggml.merges"))) {
      fail(
          "{}: key 'tokenizer.ggml.model' = 'llama' (SentencePiece) but the vocabulary has no '\xE2\x96\x81' "
          "pieces and no byte tokens; it looks like a byte-level BPE vocabulary ({} of {} tokens hold 'Ġ'{}): "
          "the file's tokenizer label is wrong (expected 'gpt2')",
          path, bpe_pieces, n, f.get_string_array("tokenizer.ggml.merges") ? ", and it has tokenizer.ggml.merges" : "");
    }
  }

  if (v.type_ == VocabType::Bpe) {
    auto merges = f.get_string_array("tokenizer.ggml.merges");
    if (!merges) fail("{}: missing key 'tokenizer.ggml.merges' (required by a gpt2 tokenizer)", path);
    v.merges_.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      std::string_view m = (*merges)[i];
      // Split at the first space after the first byte (a merge's left part may itself be a space).
      const size_t pos = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
      if (pos == std::string_view::npos) {
        fail("{}: key 'tokenizer.ggml.merges' entry {} ('{}') is not 'left right'", path, i, m);
      }
      v.merges_.emplace(merge_key(m.substr(0, pos), m.substr(pos + 1)),
                        static_cast<int32_t>(std::min<size_t>(i, INT32_MAX)));
    }
  }

  struct IdKey {
    const char* key;
    TokenId* dst;
  };
  const IdKey id_keys[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos_},     {"tokenizer.ggml.eos_token_id", &v.eos_},
      {"tokenizer.ggml.eot_token_id", &v.eot_},     {"tokenizer.ggml.eom_token_id", &v.eom_},
      {"tokenizer.ggml.unknown_token_id", &v.unk_}, {"tokenizer.ggml.seperator_token_id", &v.sep_},
      {"tokenizer.ggml.padding_token_id", &v.pad_}, {"tokenizer.ggml.mask_token_id", &v.mask_},
  };
  for (const auto& k : id_keys) {
    const gguf::Value* val = f.find(k.key);
    if (!val) continue;
    if (!val->is_integer()) fail("{}: key '{}' is not an integer token id", path, k.key);
    auto id = val->as_int();
    // 4294967295 as u32 (or -1 as a signed type) means "unset".
    if (id && (*id == 4294967295LL || *id == -1)) {
      *k.dst = k_null_token;
      continue;
    }
    if (!id || *id < 0 || static_cast<uint64_t>(*id) >= n) {
      fail("{}: key '{}' = {} is outside the vocabulary (n_vocab {}; 4294967295 would mean unset)", path, k.key,
           id ? fmt::format("{}", *id) : std::string("(huge)"), n);
    }
    *k.dst = static_cast<TokenId>(*id);
  }
  if (auto b = f.get_bool("tokenizer.ggml.add_bos_token")) v.add_bos_ = *b;
  if (auto b = f.get_bool("tokenizer.ggml.add_eos_token")) v.add_eos_ = *b;
  // Defaults that point outside a small vocab (the GPT-NeoX bos 11 of a tiny test vocab) are unset.
  for (TokenId* p : {&v.bos_, &v.eos_, &v.unk_}) {
    if (*p != k_null_token && !v.valid(*p)) *p = k_null_token;
  }

  // End-of-turn and friends, recognised by text when the metadata does not name them (llama.cpp
  // does the same and forces such tokens to CONTROL so that they are matched as specials).
  auto force_control = [&](TokenId id) {
    if (!(v.tokens_[static_cast<size_t>(id)].attr & attr::k_control))
      v.tokens_[static_cast<size_t>(id)].attr = attr::k_control;
  };
  if (v.eot_ == k_null_token) {
    for (const char* t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
                          "<\xef\xbd\x9c"
                          "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"}) {
      TokenId id = v.find(t);
      if (id != k_null_token) {
        v.eot_ = id;
        force_control(id);
        break;
      }
    }
  }
  if (v.eom_ == k_null_token) {
    TokenId id = v.find("<|eom_id|>");
    if (id != k_null_token) {
      v.eom_ = id;
      force_control(id);
    }
  }
  for (TokenId id : {v.eos_, v.eot_, v.eom_}) {
    if (id != k_null_token && std::find(v.eog_.begin(), v.eog_.end(), id) == v.eog_.end()) v.eog_.push_back(id);
  }
  for (const char* t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|endoftext|>",
                        "<end_of_turn>", "<EOT>", "<|eom_id|>"}) {
    TokenId id = v.find(t);
    if (id != k_null_token && (v.attr_of(id) & attr::k_control) &&
        std::find(v.eog_.begin(), v.eog_.end(), id) == v.eog_.end()) {
      v.eog_.push_back(id);
    }
  }

  for (size_t i = 0; i < n; ++i) {
    const TokenData& t = v.tokens_[i];
    if ((t.attr & (attr::k_control | attr::k_user_defined | attr::k_unknown)) && !t.text.empty()) {
      v.specials_.push_back(static_cast<TokenId>(i));
    }
  }
  std::stable_sort(v.specials_.begin(), v.specials_.end(),
                   [&](TokenId a, TokenId b) { return v.token(a).text.size() > v.token(b).text.size(); });
  return v;
}

TokenId Vocab::find(std::string_view text) const {
  auto it = text_to_id_.find(std::string(text));
  return it == text_to_id_.end() ? k_null_token : it->second;
}

int32_t Vocab::merge_rank(std::string_view left, std::string_view right) const {
  auto it = merges_.find(merge_key(left, right));
  return it == merges_.end() ? -1 : it->second;
}

TokenId Vocab::byte_token(uint8_t b) const {
  static const char* hex = "0123456789ABCDEF";
  const char buf[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
  TokenId id = find(std::string_view(buf, 6));
  if (id != k_null_token) return id;
  const char one[1] = {static_cast<char>(b)};
  id = find(std::string_view(one, 1));
  if (id != k_null_token) return id;
  return unk_;
}

uint8_t Vocab::token_byte(TokenId id) const {
  const std::string& t = token(id).text;
  // "<0xNN>" → NN; anything else (a one-byte token used as fallback) → its first byte.
  if (t.size() == 6 && t[0] == '<' && t[1] == '0' && t[2] == 'x' && t[5] == '>') {
    auto hexval = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    int hi = hexval(t[3]), lo = hexval(t[4]);
    if (hi >= 0 && lo >= 0) return static_cast<uint8_t>(hi * 16 + lo);
  }
  return t.empty() ? 0 : static_cast<uint8_t>(t[0]);
}

bool Vocab::is_eog(TokenId id) const {
  return id != k_null_token && std::find(eog_.begin(), eog_.end(), id) != eog_.end();
}

}  // namespace rocky::tok
