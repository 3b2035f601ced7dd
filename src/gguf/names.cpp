// The GGUF name tables (see names.hpp).
#include "gguf/names.hpp"

#include <array>
#include <charconv>

namespace rocky::gguf {
namespace {

#define ROCKY_GGUF_ARCH_VALUE(e, name) Arch::e,
constexpr Arch k_archs[] = {ROCKY_GGUF_ARCHS(ROCKY_GGUF_ARCH_VALUE)};
#undef ROCKY_GGUF_ARCH_VALUE

// llama.cpp's llama_model_rope_type for common architectures.
constexpr std::array<std::string_view, 9> k_rope_norm = {"llama",    "llama4",    "deci",    "baichuan", "command-r",
                                                         "deepseek", "deepseek2", "granite", "internlm2"};
constexpr std::array<std::string_view, 16> k_rope_neox = {
    "qwen",   "qwen2",  "qwen2moe", "qwen3",   "qwen3moe", "phi2",  "phi3",       "gemma",
    "gemma2", "gemma3", "falcon",   "gptneox", "stablelm", "olmo2", "starcoder2", "nemotron"};

constexpr std::array<std::string_view, static_cast<size_t>(Key::COUNT_)> k_keys = {
    "block_count",
    "context_length",
    "embedding_length",
    "feed_forward_length",
    "vocab_size",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.layer_norm_rms_epsilon",
    "attention.layer_norm_epsilon",
    "attention.scale",
    "attention.sliding_window",
    "attention.sliding_window_pattern",
    "attn_logit_softcapping",
    "final_logit_softcapping",
    "rope.dimension_count",
    "rope.dimension_sections",
    "rope.freq_base",
    "rope.freq_base_swa",
    "rope.scale_linear",
    "rope.scaling.type",
    "rope.scaling.factor",
    "rope.scaling.attn_factor",
    "rope.scaling.original_context_length",
    "rope.scaling.finetuned",
    "rope.scaling.yarn_log_multiplier",
    "expert_count",
    "expert_used_count",
    "expert_feed_forward_length",
    "expert_shared_count",
    "leading_dense_block_count",
    "embedding_scale",
    "residual_scale",
    "logit_scale",
    "attention.clamp_kqv",
    "attention.causal",
    "attention.q_lora_rank",
    "attention.kv_lora_rank",
    "full_attention_interval",
    "ssm.conv_kernel",
    "ssm.inner_size",
    "ssm.state_size",
    "ssm.time_step_rank",
    "ssm.group_count",
    "pooling_type",
};

struct TensorEntry {
  std::string_view base;
  bool per_layer;
};
constexpr std::array<TensorEntry, static_cast<size_t>(Tensor::COUNT_)> k_tensors = {{
    {"token_embd", false},
    {"output_norm", false},
    {"output", false},
    {"rope_freqs", false},
    {"attn_norm", true},
    {"attn_q", true},
    {"attn_k", true},
    {"attn_v", true},
    {"attn_output", true},
    {"attn_q_norm", true},
    {"attn_k_norm", true},
    {"ffn_norm", true},
    {"ffn_gate", true},
    {"ffn_up", true},
    {"ffn_down", true},
    {"attn_rot_embd", true},
    {"post_attention_norm", true},
    {"post_ffw_norm", true},
    {"attn_qkv", true},
    {"attn_gate", true},
    {"ssm_conv1d", true},
    {"ssm_a", true},
    {"ssm_alpha", true},
    {"ssm_beta", true},
    {"ssm_dt", true},
    {"ssm_norm", true},
    {"ssm_out", true},
}};

}  // namespace

std::string_view arch_name(Arch a) {
#define ROCKY_GGUF_ARCH_CASE(e, name) \
  case Arch::e: return name;
  switch (a) { ROCKY_GGUF_ARCHS(ROCKY_GGUF_ARCH_CASE) }
#undef ROCKY_GGUF_ARCH_CASE
  return "?";
}

std::optional<Arch> parse_arch(std::string_view name) {
  for (Arch a : k_archs)
    if (arch_name(a) == name) return a;
  return std::nullopt;
}

std::span<const Arch> all_archs() { return k_archs; }

std::string_view rope_type_of(std::string_view arch) {
  if (arch == "qwen35" || arch == "qwen35moe" || arch == "qwen3vl") return "imrope";
  for (std::string_view n : k_rope_norm)
    if (arch == n) return "norm";
  for (std::string_view n : k_rope_neox)
    if (arch == n) return "neox";
  return "unknown";
}

std::string_view key_suffix(Key k) { return k_keys[static_cast<size_t>(k)]; }

std::string arch_key(std::string_view arch, Key k) {
  std::string s(arch);
  s += '.';
  s += key_suffix(k);
  return s;
}

std::optional<Key> parse_key_suffix(std::string_view suffix) {
  for (size_t i = 0; i < k_keys.size(); ++i)
    if (k_keys[i] == suffix) return static_cast<Key>(i);
  return std::nullopt;
}

std::string_view tensor_base(Tensor t) { return k_tensors[static_cast<size_t>(t)].base; }
bool tensor_per_layer(Tensor t) { return k_tensors[static_cast<size_t>(t)].per_layer; }

std::string tensor_name(Tensor t, int il, std::string_view suffix) {
  std::string s;
  if (tensor_per_layer(t)) s = "blk." + std::to_string(il < 0 ? 0 : il) + ".";
  s += tensor_base(t);
  if (!suffix.empty()) {
    s += '.';
    s += suffix;
  }
  return s;
}

int64_t layer_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  std::string_view rest = name.substr(4);
  int64_t v = -1;
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
  if (ec != std::errc() || p == rest.data() || p == rest.data() + rest.size() || *p != '.') return -1;
  return v;
}

std::string_view strip_layer(std::string_view name) {
  if (layer_of(name) < 0) return name;
  return name.substr(name.find('.', 4) + 1);
}

std::optional<TensorName> parse_tensor_name(std::string_view name) {
  const int64_t il = layer_of(name);
  std::string_view rest = strip_layer(name);
  // a per-layer tensor may have no suffix (qwen35's "blk.N.ssm_a").
  const size_t dot = rest.rfind('.');
  if (dot == std::string_view::npos && il < 0) return std::nullopt;
  const std::string_view base = dot == std::string_view::npos ? rest : rest.substr(0, dot);
  const std::string_view suffix = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
  for (size_t i = 0; i < k_tensors.size(); ++i) {
    if (k_tensors[i].base == base && k_tensors[i].per_layer == (il >= 0)) {
      return TensorName{static_cast<Tensor>(i), static_cast<int>(il), std::string(suffix)};
    }
  }
  return std::nullopt;
}

}  // namespace rocky::gguf
