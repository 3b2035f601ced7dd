// The one table of GGUF names rocky uses: architectures, `<arch>.*` metadata keys and tensor names.
// model/ (binding, hparams), synth/ (writing files) and summary (rocky info) all spell names
// through it; no other file holds a tensor-name or hparams-key string literal.
//
// Spellings are llama.cpp's (src/llama-arch.cpp: LLM_ARCH_NAMES, LLM_KV_NAMES, LLM_TENSOR_NAMES;
// gguf-py/gguf/constants.py). A per-layer tensor is "blk.<il>.<base>.<suffix>", the others
// "<base>.<suffix>", suffix "weight" or "bias".
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace rocky::gguf {

// The architectures rocky computes (general.architecture): one line each, X(ENUM, "name").
#define ROCKY_GGUF_ARCHS(X) \
  X(LLAMA, "llama")         \
  X(QWEN2, "qwen2")         \
  X(QWEN3, "qwen3")         \
  X(GEMMA3, "gemma3")       \
  X(QWEN35, "qwen35")

#define ROCKY_GGUF_ARCH_ENUM(e, name) e,
enum class Arch : uint8_t { ROCKY_GGUF_ARCHS(ROCKY_GGUF_ARCH_ENUM) };
#undef ROCKY_GGUF_ARCH_ENUM
std::string_view arch_name(Arch a);                     // "llama", "qwen2", "qwen3"
std::optional<Arch> parse_arch(std::string_view name);  // nullopt when rocky does not compute it
std::span<const Arch> all_archs();

// llama.cpp's rope type for an architecture name (llama_model_rope_type): "norm", "neox", or
// "unknown" for names outside its common table. Not stored in GGUF; derived from the name.
std::string_view rope_type_of(std::string_view arch);

// `<arch>.*` hyper-parameter keys.
enum class Key : uint8_t {
  BLOCK_COUNT,                 // block_count
  CONTEXT_LENGTH,              // context_length
  EMBEDDING_LENGTH,            // embedding_length
  FEED_FORWARD_LENGTH,         // feed_forward_length
  VOCAB_SIZE,                  // vocab_size
  HEAD_COUNT,                  // attention.head_count
  HEAD_COUNT_KV,               // attention.head_count_kv
  KEY_LENGTH,                  // attention.key_length
  VALUE_LENGTH,                // attention.value_length
  RMS_EPS,                     // attention.layer_norm_rms_epsilon
  LAYERNORM_EPS,               // attention.layer_norm_epsilon
  ATTN_SCALE,                  // attention.scale
  SLIDING_WINDOW,              // attention.sliding_window
  SLIDING_WINDOW_PATTERN,      // attention.sliding_window_pattern
  ATTN_LOGIT_SOFTCAP,          // attn_logit_softcapping
  FINAL_LOGIT_SOFTCAP,         // final_logit_softcapping
  ROPE_DIMENSION_COUNT,        // rope.dimension_count
  ROPE_DIMENSION_SECTIONS,     // rope.dimension_sections
  ROPE_FREQ_BASE,              // rope.freq_base
  ROPE_FREQ_BASE_SWA,          // rope.freq_base_swa
  ROPE_SCALE_LINEAR,           // rope.scale_linear (older files)
  ROPE_SCALING_TYPE,           // rope.scaling.type
  ROPE_SCALING_FACTOR,         // rope.scaling.factor
  ROPE_SCALING_ATTN_FACTOR,    // rope.scaling.attn_factor
  ROPE_SCALING_ORIG_CTX,       // rope.scaling.original_context_length
  ROPE_SCALING_FINETUNED,      // rope.scaling.finetuned
  ROPE_SCALING_YARN_LOG_MUL,   // rope.scaling.yarn_log_multiplier
  EXPERT_COUNT,                // expert_count
  EXPERT_USED_COUNT,           // expert_used_count
  EXPERT_FEED_FORWARD_LENGTH,  // expert_feed_forward_length
  EXPERT_SHARED_COUNT,         // expert_shared_count
  LEADING_DENSE_BLOCK_COUNT,   // leading_dense_block_count
  EMBEDDING_SCALE,             // embedding_scale
  RESIDUAL_SCALE,              // residual_scale
  LOGIT_SCALE,                 // logit_scale
  ATTN_CLAMP_KQV,              // attention.clamp_kqv
  ATTN_CAUSAL,                 // attention.causal
  ATTN_Q_LORA_RANK,            // attention.q_lora_rank
  ATTN_KV_LORA_RANK,           // attention.kv_lora_rank
  FULL_ATTENTION_INTERVAL,     // full_attention_interval
  SSM_CONV_KERNEL,             // ssm.conv_kernel
  SSM_INNER_SIZE,              // ssm.inner_size
  SSM_STATE_SIZE,              // ssm.state_size
  SSM_TIME_STEP_RANK,          // ssm.time_step_rank
  SSM_GROUP_COUNT,             // ssm.group_count
  POOLING_TYPE,                // pooling_type (embedding models: llama.cpp's llama_pooling_type)
  COUNT_
};
std::string_view key_suffix(Key k);                  // "attention.head_count", …
std::string arch_key(std::string_view arch, Key k);  // "<arch>." + suffix
// The Key whose suffix is `suffix` (the part after "<arch>."), nullopt for names not in the table.
std::optional<Key> parse_key_suffix(std::string_view suffix);

inline constexpr std::string_view k_general_architecture = "general.architecture";
inline constexpr std::string_view k_general_name = "general.name";
inline constexpr std::string_view k_general_type = "general.type";
inline constexpr std::string_view k_general_file_type = "general.file_type";
inline constexpr std::string_view k_general_quantization_version = "general.quantization_version";

// Tensors.
enum class Tensor : uint8_t {
  TOKEN_EMBD,      // token_embd              [n_embd, n_vocab]
  OUTPUT_NORM,     // output_norm             [n_embd]
  OUTPUT,          // output                  [n_embd, n_vocab] (absent when tied to token_embd)
  ROPE_FREQS,      // rope_freqs              [n_rot/2] per-frequency divisors (Llama 3.1 scaling)
  ATTN_NORM,       // blk.N.attn_norm         [n_embd]
  ATTN_Q,          // blk.N.attn_q            [n_embd, n_embd_q]
  ATTN_K,          // blk.N.attn_k            [n_embd, n_embd_kv]
  ATTN_V,          // blk.N.attn_v            [n_embd, n_embd_kv]
  ATTN_OUTPUT,     // blk.N.attn_output       [n_embd_q, n_embd]
  ATTN_Q_NORM,     // blk.N.attn_q_norm       [head_dim] (per head)
  ATTN_K_NORM,     // blk.N.attn_k_norm       [head_dim]
  FFN_NORM,        // blk.N.ffn_norm          [n_embd]
  FFN_GATE,        // blk.N.ffn_gate          [n_embd, n_ff]
  FFN_UP,          // blk.N.ffn_up            [n_embd, n_ff]
  FFN_DOWN,        // blk.N.ffn_down          [n_ff, n_embd]
  ATTN_ROT_EMBD,   // blk.N.attn_rot_embd   old llama files' precomputed rope table (never read)
  ATTN_POST_NORM,  // blk.N.post_attention_norm [n_embd] (gemma3: norm of the attention output)
  FFN_POST_NORM,   // blk.N.post_ffw_norm     [n_embd] (gemma3: norm of the FFN output)
  // qwen35 (Gated DeltaNet linear-attention layers)
  ATTN_QKV,    // blk.N.attn_qkv          [n_embd, 2·H_k·d_k + H_v·d_v] (conv channels q | k | v)
  ATTN_GATE,   // blk.N.attn_gate         [n_embd, H_v·d_v] (z, the output gate)
  SSM_CONV1D,  // blk.N.ssm_conv1d        [conv_kernel, channels] f32 (depthwise causal conv)
  SSM_A,       // blk.N.ssm_a             [H_v] f32, −exp(A_log) (no suffix)
  SSM_ALPHA,   // blk.N.ssm_alpha         [n_embd, H_v] (decay input)
  SSM_BETA,    // blk.N.ssm_beta          [n_embd, H_v] (β logits)
  SSM_DT,      // blk.N.ssm_dt.bias       [H_v] f32
  SSM_NORM,    // blk.N.ssm_norm          [d_v] f32 (per-head RMSNorm, shared)
  SSM_OUT,     // blk.N.ssm_out           [H_v·d_v, n_embd]
  COUNT_
};
std::string_view tensor_base(Tensor t);  // "token_embd", "attn_q", …
bool tensor_per_layer(Tensor t);         // blk.N.* tensors
// "token_embd.weight", "blk.3.attn_q.bias", … (il ignored for global tensors, required ≥ 0 for
// per-layer ones).
std::string tensor_name(Tensor t, int il = -1, std::string_view suffix = "weight");

// A parsed tensor name: the Tensor, its layer (-1 for global ones) and its suffix; nullopt for a
// name outside the table.
struct TensorName {
  Tensor tensor;
  int layer = -1;
  std::string suffix;
};
std::optional<TensorName> parse_tensor_name(std::string_view name);
// Layer of a "blk.<i>.…" name (any base), -1 for other names.
int64_t layer_of(std::string_view name);
// "blk.3.attn_q" → "attn_q" (names without a layer prefix are returned whole).
std::string_view strip_layer(std::string_view name);

}  // namespace rocky::gguf
