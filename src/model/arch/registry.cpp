// The architecture registry (see arch.hpp): one line per architecture.
#include <array>

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
  for (const TensorFlag& f : k_tensor_flags)
    if (a.*f.member && f.feature != nullptr) add(f.feature);
  if (hp.n_embd_q() != hp.n_embd) add(fmt::format("head_dim·n_head = {} ≠ n_embd {}", hp.n_embd_q(), hp.n_embd));
  if (hp.n_head_kv != hp.n_head) add(fmt::format("GQA {}:{}", hp.n_head, hp.n_head_kv));
  if (w.rope_freqs != nullptr) add(fmt::format("rope scaling: rope_freqs factors [{}]", w.rope_freqs->n_elements));
  if (hp.rope_freq_scale != 1.0f)
    add(fmt::format("rope scaling: linear, factor {}{}", 1.0f / hp.rope_freq_scale,
                    hp.n_swa > 0 ? " (global layers)" : ""));
  if (a.features != nullptr)
    for (const std::string& f : a.features(hp)) add(f);
  add(w.tied_output ? "tied output (token_embd)" : "untied output");
  return s;
}

}  // namespace rocky::model::arch
