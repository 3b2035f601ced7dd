#include "synth/vocab_gen.hpp"

#include <array>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/error.hpp"
#include "synth/rng.hpp"

namespace rocky::synth {
namespace {

// llama_token_type values (llama.cpp include/llama.h).
constexpr int32_t k_normal = 1, k_unknown = 2, k_control = 3, k_user_defined = 4, k_unused = 5, k_byte = 6;

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Letter frequencies (rough English, per mille) used to pick word characters, so the generated
// pieces look like word fragments and real text merges into multi-character tokens.
constexpr std::string_view k_letters = "etaoinshrdlcumwfgypbvkjxqz";
constexpr std::array<uint32_t, 26> k_letter_weight = {127, 91, 82, 75, 70, 67, 63, 61, 60, 43, 40, 28, 28,
                                                      24,  24, 22, 20, 20, 19, 15, 10, 8,  2,  2,  1,  1};

// Draws a "word character" as a byte: mostly lowercase letters, sometimes uppercase, digits or
// punctuation.
uint8_t draw_char(SplitMix64& r) {
  const uint64_t u = r.next() % 1000;
  if (u < 860) {
    uint64_t w = r.next() % 1000, acc = 0;
    for (size_t k = 0; k < 26; ++k) {
      acc += k_letter_weight[k];
      if (w < acc) return static_cast<uint8_t>(k_letters[k]);
    }
    return 'e';
  }
  if (u < 940) return static_cast<uint8_t>('A' + r.next() % 26);
  if (u < 970) return static_cast<uint8_t>('0' + r.next() % 10);
  static constexpr std::string_view k_punct = ".,;:!?'\"()-_/";
  return static_cast<uint8_t>(k_punct[r.next() % k_punct.size()]);
}

// Builds `count` new pieces, each the concatenation of two existing ones (so BPE merges and SPM
// bigram merges can reach it). `unit(b)` spells byte b; `space` is the word-start marker. The
// left part is a fresh character (with or without the word-start marker) or an earlier piece; the
// right part is mostly a single character. Pieces longer than 16 bytes, right parts that start a
// word, and duplicates are rejected.
template <typename OnPiece>
void grow_pieces(std::vector<std::string>& tokens, std::unordered_set<std::string>& seen, size_t first_piece,
                 size_t count, const std::array<std::string, 256>& unit, const std::string& space, OnPiece on_piece) {
  SplitMix64 r(0x726f636b79766f63ull);  // fixed: the vocab does not depend on --seed
  size_t made = 0;
  while (made < count) {
    const size_t n_pieces = tokens.size() - first_piece;
    std::string left, right;
    const uint64_t u = r.next() % 100;
    if (u < 30 || n_pieces == 0) {
      // Two draws, sequenced: the character first, then the word-start coin (the order of the
      // operands of one `+` is unspecified, and compilers differ by target).
      const uint8_t c = draw_char(r);
      left = (r.next() % 2 ? space : std::string()) + unit[c];
    } else {
      // Prefer recent pieces a little (longer words grow from their prefixes).
      const size_t span = (r.next() % 2) ? n_pieces : std::min<size_t>(n_pieces, 4096);
      left = tokens[tokens.size() - 1 - r.next() % span];
    }
    if (r.next() % 100 < 85 || n_pieces == 0) {
      right = unit[draw_char(r)];
    } else {
      right = tokens[first_piece + r.next() % n_pieces];
      if (right.rfind(space, 0) == 0) continue;
    }
    std::string piece = left + right;
    if (piece.size() > 16 || seen.count(piece)) continue;
    // Both parts must already be tokens (a fresh "space + char" left part may not be yet).
    if (!seen.count(left)) {
      seen.insert(left);
      on_piece(std::string(), std::string(), left);
      tokens.push_back(left);
      if (++made == count) break;
    }
    seen.insert(piece);
    on_piece(left, right, piece);
    tokens.push_back(std::move(piece));
    ++made;
  }
}

// Byte-level BPE: the 256 byte tokens, `n_text` − 256 merged tokens, then `added`, then
// "[PAD<id>]" fillers up to n_vocab.
GeneratedVocab make_bpe_tokens(size_t n_vocab, size_t n_text, std::string_view pre,
                               const std::vector<std::pair<std::string, int32_t>>& added) {
  GeneratedVocab v;
  v.model = "gpt2";
  v.pre = std::string(pre);
  std::array<std::string, 256> unit;
  for (int b = 0; b < 256; ++b) append_utf8(unit[static_cast<size_t>(b)], gpt2_byte_to_cp(static_cast<uint8_t>(b)));
  std::unordered_set<std::string> seen;
  v.tokens.reserve(n_vocab);
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(unit[static_cast<size_t>(b)]);
    seen.insert(unit[static_cast<size_t>(b)]);
  }
  v.merges.reserve(n_text - 256);
  grow_pieces(v.tokens, seen, 256, n_text - 256, unit, unit[' '],
              [&](const std::string& l, const std::string& r, const std::string& piece) {
                // A fresh "Ġx" left part is itself made by merging "Ġ" and "x".
                if (l.empty()) {
                  v.merges.push_back(unit[' '] + " " + piece.substr(unit[' '].size()));
                } else {
                  v.merges.push_back(l + " " + r);
                }
              });
  v.types.assign(n_text, k_normal);
  for (const auto& [text, type] : added) {
    v.tokens.push_back(text);
    v.types.push_back(type);
  }
  while (v.tokens.size() < n_vocab) {
    v.tokens.push_back("[PAD" + std::to_string(v.tokens.size()) + "]");
    v.types.push_back(k_unused);
  }
  return v;
}

GeneratedVocab make_bpe(const Preset& p) {
  static constexpr std::array<std::pair<std::string_view, int32_t>, 22> k_added = {{
      {"<|endoftext|>", k_control},        {"<|im_start|>", k_control},        {"<|im_end|>", k_control},
      {"<|object_ref_start|>", k_control}, {"<|object_ref_end|>", k_control},  {"<|box_start|>", k_control},
      {"<|box_end|>", k_control},          {"<|quad_start|>", k_control},      {"<|quad_end|>", k_control},
      {"<|vision_start|>", k_control},     {"<|vision_end|>", k_control},      {"<|vision_pad|>", k_control},
      {"<|image_pad|>", k_control},        {"<|video_pad|>", k_control},       {"<tool_call>", k_user_defined},
      {"</tool_call>", k_user_defined},    {"<|fim_prefix|>", k_user_defined}, {"<|fim_middle|>", k_user_defined},
      {"<|fim_suffix|>", k_user_defined},  {"<|fim_pad|>", k_user_defined},    {"<|repo_name|>", k_user_defined},
      {"<|file_sep|>", k_user_defined},
  }};
  const size_t n_vocab = p.n_vocab;
  const size_t n_text = std::min<size_t>(151643, n_vocab - k_added.size());
  std::vector<std::pair<std::string, int32_t>> added;
  for (const auto& [text, type] : k_added) added.emplace_back(std::string(text), type);
  GeneratedVocab v = make_bpe_tokens(n_vocab, n_text, "qwen2", added);
  v.bos = static_cast<int32_t>(n_text);      // <|endoftext|>
  v.eos = static_cast<int32_t>(n_text + 2);  // <|im_end|>
  v.pad = static_cast<int32_t>(n_text);
  v.add_bos = false;
  v.chat_template =
      "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
      "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  return v;
}

// Llama 3: 128,000 ranked tokens (fewer when n_vocab is cut), then the 256 special tokens in Meta's
// order (all CONTROL): <|begin_of_text|>, <|end_of_text|>, <|reserved_special_token_0|>,
// <|reserved_special_token_1|>, <|finetune_right_pad_id|>, <|reserved_special_token_2|>,
// <|start_header_id|>, <|end_header_id|>, <|eom_id|>, <|eot_id|>, <|python_tag|>, then
// <|reserved_special_token_3|> … <|reserved_special_token_247|>. BOS <|begin_of_text|> added;
// EOS <|eot_id|> (the Instruct models' end of turn).
GeneratedVocab make_bpe_llama3(const Preset& p) {
  std::vector<std::pair<std::string, int32_t>> added;
  for (const char* t : {"<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                        "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
                        "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"}) {
    added.emplace_back(t, k_control);
  }
  for (int k = 3; added.size() < 256; ++k)
    added.emplace_back(fmt::format("<|reserved_special_token_{}|>", k), k_control);
  const size_t n_vocab = p.n_vocab;
  const size_t n_text = std::min<size_t>(128000, n_vocab - added.size());
  GeneratedVocab v = make_bpe_tokens(n_vocab, n_text, "llama-bpe", added);
  v.bos = static_cast<int32_t>(n_text);      // <|begin_of_text|>
  v.eos = static_cast<int32_t>(n_text + 9);  // <|eot_id|>
  v.add_bos = true;
  v.chat_template =
      "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
      "'<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
  return v;
}

GeneratedVocab make_spm(const Preset& p) {
  GeneratedVocab v;
  v.model = "llama";
  v.pre = "default";
  const size_t n_vocab = p.n_vocab;
  std::unordered_set<std::string> seen;
  auto add = [&](std::string text, int32_t type) {
    seen.insert(text);
    v.tokens.push_back(std::move(text));
    v.types.push_back(type);
  };
  add("<unk>", k_unknown);
  add("<s>", k_control);
  add("</s>", k_control);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), k_byte);
  // Characters: "▁" and the printable ASCII characters (not the space, which SPM spells "▁").
  const std::string space = "\xe2\x96\x81";
  std::array<std::string, 256> unit;
  for (int b = 0; b < 256; ++b) unit[static_cast<size_t>(b)] = std::string(1, static_cast<char>(b));
  unit[' '] = space;
  const size_t first_piece = v.tokens.size();
  add(space, k_normal);
  for (int c = 33; c < 127; ++c) add(unit[static_cast<size_t>(c)], k_normal);
  if (v.tokens.size() > n_vocab) fail("preset {}: vocab size {} is too small for an SPM vocab", p.name, n_vocab);
  grow_pieces(v.tokens, seen, first_piece, n_vocab - v.tokens.size(), unit, space,
              [&](const std::string&, const std::string&, const std::string&) {});
  v.types.resize(v.tokens.size(), k_normal);
  v.scores.resize(v.tokens.size(), 0.0f);
  for (size_t i = first_piece; i < v.tokens.size(); ++i) v.scores[i] = -static_cast<float>(i - first_piece);
  v.bos = 1;
  v.eos = 2;
  v.unk = 0;
  v.pad = 2;
  v.add_bos = true;
  return v;
}

GeneratedVocab make_spm_gemma3(const Preset& p) {
  GeneratedVocab v;
  v.model = "llama";
  v.pre = "default";
  const size_t n_vocab = p.n_vocab;
  std::unordered_set<std::string> seen;
  auto add = [&](std::string text, int32_t type) {
    seen.insert(text);
    v.tokens.push_back(std::move(text));
    v.types.push_back(type);
  };
  add("<pad>", k_control);
  add("<eos>", k_control);
  add("<bos>", k_control);
  add("<unk>", k_unknown);
  add("<mask>", k_user_defined);
  for (int k = 0; v.tokens.size() < 106; ++k) add(fmt::format("<unused{}>", k), k_unused);
  add("<start_of_turn>", k_control);
  add("<end_of_turn>", k_control);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), k_byte);
  const std::string space = "\xe2\x96\x81";
  std::array<std::string, 256> unit;
  for (int b = 0; b < 256; ++b) unit[static_cast<size_t>(b)] = std::string(1, static_cast<char>(b));
  unit[' '] = space;
  const size_t first_piece = v.tokens.size();
  add(space, k_normal);
  for (int c = 33; c < 127; ++c) add(unit[static_cast<size_t>(c)], k_normal);
  add("\n", k_normal);
  if (v.tokens.size() > n_vocab) fail("preset {}: vocab size {} is too small for the Gemma 3 vocab", p.name, n_vocab);
  grow_pieces(v.tokens, seen, first_piece, n_vocab - v.tokens.size(), unit, space,
              [&](const std::string&, const std::string&, const std::string&) {});
  v.types.resize(v.tokens.size(), k_normal);
  v.scores.resize(v.tokens.size(), 0.0f);
  for (size_t i = first_piece; i < v.tokens.size(); ++i) v.scores[i] = -static_cast<float>(i - first_piece);
  v.bos = 2;
  v.eos = 107;
  v.unk = 3;
  v.pad = 0;
  v.add_bos = true;
  v.add_space_prefix = false;
  v.chat_template =
      "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'assistant' %}{% set role = 'model' %}"
      "{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] + "
      "'<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}";
  return v;
}

}  // namespace

uint32_t gpt2_byte_to_cp(uint8_t b) {
  auto printable = [](uint32_t c) { return (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174); };
  if (printable(b)) return b;
  uint32_t n = 0;
  for (uint32_t c = 0; c < b; ++c)
    if (!printable(c)) ++n;
  return 256 + n;
}

GeneratedVocab generate_vocab(const Preset& p) {
  if (p.n_vocab < 512) fail("preset {}: vocab size {} is too small (need at least 512)", p.name, p.n_vocab);
  switch (p.vocab) {
    case VocabKind::BPE_QWEN2: return make_bpe(p);
    case VocabKind::BPE_LLAMA3: return make_bpe_llama3(p);
    case VocabKind::SPM_GEMMA3: return make_spm_gemma3(p);
    case VocabKind::SPM_LLAMA2: break;
  }
  return make_spm(p);
}

}  // namespace rocky::synth
