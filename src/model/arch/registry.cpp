// The architecture registry (see arch.hpp): one line per architecture.
#include <array>
#include <cmath>

#include "core/error.hpp"
#include "model/arch/arch.hpp"

namespace rocky::model::arch {

// One line per architecture: the ArchInfo its arch/<name>.cpp defines.
extern const ArchInfo k_llama, k_qwen2, k_qwen3, k_gemma3, k_qwen35;

namespace {

const std::array k_registry = {&k_llama, &k_qwen2, &k_qwen3, &k_gemma3, &k_qwen35};

}  // namespace

const ArchInfo& arch_info(Arch a) {
  for (const ArchInfo* i : k_registry)
    if (i->arch == a) return *i;
  fail("architecture {} has no registry entry (model/arch/registry.cpp)", gguf::arch_name(a));
}

std::string supported_list() {
  std::string s;
  for (const ArchInfo* i : k_registry) {
    if (!s.empty()) s += ", ";
    s += gguf::arch_name(i->arch);
  }
  return s;
}

std::string special_features(const HParams& hp, const Weights& w) {
  const ArchInfo& a = arch_info(hp.arch);
  std::string s;
  auto add = [&](const std::string& f) { s += (s.empty() ? "" : ", ") + f; };
  add(std::string("rope ") + (hp.rope_mode == graph::RopeMode::NEOX ? "neox" : "normal"));
  if (a.qkv_bias) add("q/k/v bias");
  if (a.qk_norm) add("q/k RMSNorm per head");
  if (hp.n_embd_q() != hp.n_embd) add(fmt::format("head_dim·n_head = {} ≠ n_embd {}", hp.n_embd_q(), hp.n_embd));
  if (hp.n_head_kv != hp.n_head) add(fmt::format("GQA {}:{}", hp.n_head, hp.n_head_kv));
  if (w.rope_freqs != nullptr) add(fmt::format("rope scaling: rope_freqs factors [{}]", w.rope_freqs->n_elements));
  if (hp.rope_freq_scale != 1.0f)
    add(fmt::format("rope scaling: linear, factor {}{}", 1.0f / hp.rope_freq_scale,
                    hp.n_swa > 0 ? " (global layers)" : ""));
  if (hp.arch == Arch::GEMMA3)
    add(fmt::format("embeddings ×√n_embd ({:.4g})", std::sqrt(static_cast<float>(hp.n_embd))));
  if (a.post_norms) add("post-attention and post-FFN RMSNorm");
  if (hp.arch == Arch::GEMMA3) add("GELU-tanh FFN (GeGLU)");
  if (hp.n_swa > 0) {
    int local = 0;
    for (int il = 0; il < hp.n_layer; ++il) local += hp.is_swa_layer(il) ? 1 : 0;
    add(fmt::format("sliding window {} on {} of {} layers (pattern {}: rope base {:g} local, {:g} global)", hp.n_swa,
                    local, hp.n_layer, hp.swa_pattern, hp.rope_freq_base_swa, hp.rope_freq_base));
  }
  if (a.hybrid) {
    int rec = 0;
    for (int il = 0; il < hp.n_layer; ++il) rec += hp.is_recurrent_layer(il) ? 1 : 0;
    add(
        fmt::format("Gated DeltaNet linear attention on {} of {} layers ({} k / {} v heads, dims {} / {}, conv {}), "
                    "gated full attention every {}th with partial rope {} of {}",
                    rec, hp.n_layer, hp.ssm_n_group, hp.ssm_dt_rank, hp.ssm_d_state, hp.ssm_head_v_dim(),
                    hp.ssm_conv_kernel, hp.full_attn_interval, hp.n_rot, hp.head_dim));
  }
  add(w.tied_output ? "tied output (token_embd)" : "untied output");
  return s;
}

}  // namespace rocky::model::arch
