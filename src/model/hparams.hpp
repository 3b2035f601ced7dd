// Model hyper-parameters read from a GGUF file's `<arch>.*` metadata keys.
//
// The one hparams reader: the values come from gguf::arch_summary (the lenient reader `rocky info`
// prints, over the key table of gguf/names.hpp); read_hparams validates them and adds what only
// the model needs. Defaults where llama.cpp has them: head_count_kv = head_count,
// rope.dimension_count = head_dim, rope.freq_base = 10000, rope scale factor 1 (freq_scale = 1 /
// rope.scaling.factor for linear scaling), attention.key_length = n_embd / n_head.
// Nothing that changes the math is ignored: every `<arch>.*` key must be one the architecture
// honours or one known to be harmless (check_keys); anything else is an error naming the key.
// Errors: a missing required key or an impossible value throws rocky::Error naming the file and key.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gguf/gguf.hpp"
#include "gguf/names.hpp"
#include "graph/graph.hpp"

namespace rocky::model {

using gguf::Arch;
inline std::string_view arch_name(Arch a) { return gguf::arch_name(a); }

struct HParams {
  Arch arch = Arch::LLAMA;
  std::string arch_str;                                 // general.architecture as in the file
  int32_t n_layer = 0;                                  // <arch>.block_count
  int32_t n_embd = 0;                                   // <arch>.embedding_length
  int32_t n_ff = 0;                                     // <arch>.feed_forward_length
  int32_t n_head = 0;                                   // <arch>.attention.head_count
  int32_t n_head_kv = 0;                                // <arch>.attention.head_count_kv (default n_head)
  int32_t head_dim = 0;                                 // <arch>.attention.key_length (default n_embd / n_head)
  int32_t n_rot = 0;                                    // <arch>.rope.dimension_count (default head_dim)
  float rope_freq_base = 10000.0f;                      // <arch>.rope.freq_base
  float rope_freq_scale = 1.0f;                         // 1 / <arch>.rope.scaling.factor (linear scaling only)
  graph::RopeMode rope_mode = graph::RopeMode::NORMAL;  // from the architecture registry
  float rms_eps = 1e-5f;                                // <arch>.attention.layer_norm_rms_epsilon
  int32_t n_ctx_train = 0;                              // <arch>.context_length
  int32_t n_vocab = 0;  // token_embd.weight ne1 (checked against <arch>.vocab_size if present)
  // Sliding-window attention (gemma3: read by its arch file): layer il is local when
  // n_swa > 0 and il % swa_pattern < swa_pattern − 1 (gemma3: pattern 6, 5 local : 1 global);
  // local layers use rope_freq_base_swa (<arch>.rope.freq_base_swa, default 10000) and no rope
  // scaling.
  int32_t n_swa = 0;  // <arch>.attention.sliding_window (0: none)
  int32_t swa_pattern = 0;
  float rope_freq_base_swa = 10000.0f;
  bool is_swa_layer(int il) const { return n_swa > 0 && swa_pattern > 0 && il % swa_pattern < swa_pattern - 1; }

  // Hybrid linear attention (ArchInfo::hybrid, qwen35: read by its arch file): layer il is a Gated
  // DeltaNet layer when (il + 1) % full_attn_interval ≠ 0, a gated full-attention layer otherwise.
  int32_t full_attn_interval = 0;  // <arch>.full_attention_interval (0: every layer is attention)
  int32_t ssm_conv_kernel = 0;     // <arch>.ssm.conv_kernel (taps of the causal conv1d)
  int32_t ssm_d_state = 0;         // <arch>.ssm.state_size: key (and query) head dim d_k
  int32_t ssm_n_group = 0;         // <arch>.ssm.group_count: key heads H_k
  int32_t ssm_dt_rank = 0;         // <arch>.ssm.time_step_rank: value heads H_v
  int32_t ssm_d_inner = 0;         // <arch>.ssm.inner_size: H_v · d_v
  bool is_recurrent_layer(int il) const { return full_attn_interval > 0 && (il + 1) % full_attn_interval != 0; }
  int32_t ssm_head_v_dim() const { return ssm_dt_rank > 0 ? ssm_d_inner / ssm_dt_rank : 0; }
  int32_t ssm_conv_channels() const { return 2 * ssm_n_group * ssm_d_state + ssm_d_inner; }

  int32_t n_embd_kv() const { return head_dim * n_head_kv; }  // K/V features per token
  int32_t n_embd_q() const { return head_dim * n_head; }
};

// A positive integer key (≤ 2^30): `v` is its value as read (nullopt when absent or not a
// non-negative integer); absent and not `required` gives `dflt`. rocky::Error naming the key
// otherwise. For the architectures' own keys (ArchInfo::read_keys).
int32_t checked_dim(const gguf::GgufFile& f, const std::string& key, std::optional<uint64_t> v, bool required,
                    int32_t dflt);

// Reads and validates the hyper-parameters. Unsupported architectures throw rocky::Error naming
// the architecture and the supported list; so does a `<arch>.*` key rocky would ignore.
HParams read_hparams(const gguf::GgufFile& f);

}  // namespace rocky::model
