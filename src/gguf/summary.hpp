// Summaries of a GGUF file for people (`rocky info`): totals, the architecture's main
// hyperparameters read from the `<arch>.*` keys, and short printable forms of metadata values.
//
// Key names follow llama.cpp's gguf conventions (gguf-py/gguf/constants.py): <arch>.block_count,
// <arch>.embedding_length, <arch>.attention.head_count(_kv), <arch>.attention.key_length,
// <arch>.feed_forward_length, <arch>.context_length, <arch>.rope.freq_base,
// <arch>.rope.dimension_count, <arch>.vocab_size (all spelled through gguf/names.hpp; model/'s
// read_hparams validates this same summary, so there is one reader of these keys). The rope type is not stored in GGUF: llama.cpp
// derives it from the architecture (llama_model_rope_type); a small table here does the same for
// the common architectures and says "unknown" otherwise. Nothing here throws on odd metadata types:
// a key of an unexpected type is reported as absent (the raw value still shows in the metadata).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "gguf/gguf.hpp"

namespace rocky::gguf {

struct Totals {
  uint64_t n_tensors = 0;
  uint64_t n_params = 0;                            // sum of element counts
  uint64_t n_bytes = 0;                             // sum of tensor data bytes
  double bits_per_weight = 0;                       // 8 · n_bytes / n_params (0 without tensors)
  std::map<std::string, uint64_t> tensors_by_type;  // type name → number of tensors
  std::map<std::string, uint64_t> params_by_type;   // type name → elements
};

struct ArchSummary {
  std::string arch;  // general.architecture ("" when absent)
  std::optional<uint64_t> n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx_train, rope_dim;
  std::optional<uint64_t> value_length;  // <arch>.attention.value_length
  std::optional<double> rope_base, rms_eps, rope_scaling_factor, rope_scale_linear;
  std::optional<std::string> rope_scaling_type;  // <arch>.rope.scaling.type
  std::string rope_type;                         // "norm", "neox" or "unknown"
  std::string head_dim_from;                     // "key_length" or "n_embd/n_head"
  std::string n_vocab_from;                      // "tokenizer.ggml.tokens", "<arch>.vocab_size", or a tensor name
};

Totals totals(const GgufFile& f);
ArchSummary arch_summary(const GgufFile& f);

// One-line text of a value: numbers as written, strings quoted with control/non-printable bytes
// escaped (strings over 160 bytes are cut, with their length); arrays show their element type and count and at most `max_elems` first elements.
std::string format_value(const Value& v, size_t max_elems = 8);
// A string quoted and escaped for one line ("\n", "\x1b", ...).
std::string quote(std::string_view s);
// 1234567 → "1,234,567".
std::string group_digits(uint64_t n);

}  // namespace rocky::gguf
