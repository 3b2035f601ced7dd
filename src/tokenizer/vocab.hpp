// Tokenizer vocabulary read from GGUF metadata (the `tokenizer.ggml.*` keys written by llama.cpp's
// convert scripts). The meaning of every key and every default follows llama.cpp's
// src/llama-vocab.cpp (llama_vocab::impl::load), so that the same file tokenizes the same way:
//
//   tokenizer.ggml.model        "llama" → SentencePiece-style (Spm), "gpt2" → byte-level BPE (Bpe)
//   tokenizer.ggml.pre          BPE pre-tokenizer name ("default", "gpt-2", "llama-bpe", "qwen2", …)
//   tokenizer.ggml.tokens       [n_vocab] strings (empty ones become "[EMPTY_<id>]", as llama.cpp)
//   tokenizer.ggml.scores       [n_vocab] f32, SPM merge priority (higher merges first); default 0
//   tokenizer.ggml.token_type   [n_vocab] i32: 1 normal, 2 unknown, 3 control, 4 user-defined,
//                               5 unused, 6 byte; anything else is "undefined"
//   tokenizer.ggml.merges       BPE only: "left right" strings, rank = index (lower merges first)
//   tokenizer.ggml.{bos,eos,eot,eom,unknown,seperator,padding,mask}_token_id
//   tokenizer.ggml.add_bos_token / add_eos_token / add_space_prefix
//
// Defaults when a key is absent: Spm bos 1, eos 2, unk 0, add_bos, add_space_prefix; Bpe bos = eos
// = 11 (GPT-NeoX; unset when the vocab is smaller), add_bos only for pre-tokenizers that ask for
// it (llama-bpe). A token id outside
// [0, n_vocab) in any id field is a load error naming the file and key — except 4294967295 (-1),
// which means "unset" (stories260K stores it). A missing or unknown model/pre name is an error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/gguf.hpp"

namespace rocky::tok {

using TokenId = int32_t;
inline constexpr TokenId k_null_token = -1;

enum class VocabType { Spm, Bpe };

// BPE pre-tokenizer (regex set) families. Names map as in llama.cpp.
enum class PreType {
  Default,  // "default" or absent: llama.cpp's 4-regex default chain
  Gpt2,     // "gpt-2", "phi-2", "roberta-bpe", …: the GPT-2 regex
  Llama3,   // "llama3", "llama-v3", "llama-bpe", "falcon3": Llama 3 regex, merges skipped for whole
            // words already in the vocab
  Qwen2,    // "qwen2", "megrez", "stablelm2": Llama 3 regex with single digits
};

// Token attribute bits (llama.cpp's llama_token_attr values).
namespace attr {
inline constexpr uint32_t k_undefined = 0;
inline constexpr uint32_t k_unknown = 1u << 0;
inline constexpr uint32_t k_unused = 1u << 1;
inline constexpr uint32_t k_normal = 1u << 2;
inline constexpr uint32_t k_control = 1u << 3;
inline constexpr uint32_t k_user_defined = 1u << 4;
inline constexpr uint32_t k_byte = 1u << 5;
}  // namespace attr

struct TokenData {
  std::string text;  // as stored (SPM: spaces as U+2581 "▁"; BPE: bytes through the GPT-2 byte map)
  float score = 0;   // SPM merge score
  uint32_t attr = attr::k_normal;
};

class Vocab {
 public:
  // Reads the tokenizer metadata of `f`. Throws rocky::Error (naming file and key) on a bad value.
  static Vocab from_gguf(const gguf::GgufFile& f);

  VocabType type() const { return type_; }
  PreType pre_type() const { return pre_type_; }
  const std::string& pre_name() const { return pre_name_; }
  size_t size() const { return tokens_.size(); }
  const TokenData& token(TokenId id) const { return tokens_[static_cast<size_t>(id)]; }
  bool valid(TokenId id) const { return id >= 0 && static_cast<size_t>(id) < tokens_.size(); }
  uint32_t attr_of(TokenId id) const { return valid(id) ? token(id).attr : attr::k_undefined; }

  // Exact text → id (k_null_token when absent).
  TokenId find(std::string_view text) const;
  // BPE merge rank of (left, right), -1 when the pair is not a merge.
  int32_t merge_rank(std::string_view left, std::string_view right) const;
  // SPM byte fallback: "<0xNN>", else the one-byte token, else unk (k_null_token if none).
  TokenId byte_token(uint8_t b) const;
  // The byte an SPM byte token ("<0xNN>") stands for.
  uint8_t token_byte(TokenId id) const;

  TokenId bos() const { return bos_; }
  TokenId eos() const { return eos_; }
  TokenId eot() const { return eot_; }
  TokenId eom() const { return eom_; }
  TokenId unk() const { return unk_; }
  TokenId sep() const { return sep_; }
  TokenId pad() const { return pad_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  bool ignore_merges() const { return ignore_merges_; }
  bool clean_spaces() const { return clean_spaces_; }
  // End-of-generation: eos, eot, eom and the end-like control tokens llama.cpp recognises by text.
  bool is_eog(TokenId id) const;
  const std::vector<TokenId>& eog_ids() const { return eog_; }

  // CONTROL, USER_DEFINED and UNKNOWN tokens with non-empty text, longest text first (ties: lower
  // id first) — the order in which the special-token partition looks for them.
  const std::vector<TokenId>& special_tokens() const { return specials_; }

 private:
  VocabType type_ = VocabType::Spm;
  PreType pre_type_ = PreType::Default;
  std::string pre_name_;
  std::vector<TokenData> tokens_;
  std::unordered_map<std::string, TokenId> text_to_id_;
  std::unordered_map<std::string, int32_t> merges_;  // key: merge_key(left, right)
  TokenId bos_ = k_null_token, eos_ = k_null_token, eot_ = k_null_token, eom_ = k_null_token;
  TokenId unk_ = k_null_token, sep_ = k_null_token, pad_ = k_null_token, mask_ = k_null_token;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
  bool ignore_merges_ = false, clean_spaces_ = false;
  std::vector<TokenId> eog_;
  std::vector<TokenId> specials_;
};

}  // namespace rocky::tok
