// The architecture registry: one ArchInfo per architecture, each defined in its own
// arch/<name>.cpp and listed once in arch/registry.cpp. An ArchInfo says what the architecture's
// files hold (biases, q/k norms, rope factors, tied output) and how its graph is built; binding
// (model.cpp) is generic over these flags, and every tensor of the file must be bound (a tensor
// the graph would not read is an error naming it).
//
// Adding an architecture (3 files): one line in gguf/names.hpp's ROCKY_GGUF_ARCHS (the Arch value
// and its GGUF name), arch/<name>.cpp with its ArchInfo (and a graph builder when blocks::
// build_decoder does not fit; model/CMakeLists.txt picks up arch/*.cpp), one line in
// arch/registry.cpp.
#pragma once

#include <string>

#include "graph/graph.hpp"
#include "model/model.hpp"

namespace rocky::model::arch {

struct ArchInfo {
  Arch arch = Arch::LLAMA;
  graph::RopeMode rope_mode = graph::RopeMode::NORMAL;
  bool qkv_bias = false;     // blk.N.attn_{q,k,v}.bias required (added after the projections)
  bool qk_norm = false;      // blk.N.attn_{q,k}_norm [head_dim] required: per-head RMSNorm of Q and K before rope
  bool rope_freqs = false;   // rope_freqs.weight [n_rot/2] read when present (Llama 3.1 scaling divisors)
  bool tied_output = false;  // the usual files have no output.weight (LM head = token_embd); both are accepted
  // The forward graph of one ubatch.
  graph::Graph (*build)(const HParams& hp, const Weights& w, const UbatchSpec& u) = nullptr;
  const char* notes = "";   // one line for `rocky info` / docs
  bool post_norms = false;  // blk.N.post_attention_norm / post_ffw_norm [n_embd] required (gemma3)
  bool swa = false;         // honours attention.sliding_window and rope.freq_base_swa (gemma3)
  // Gated DeltaNet linear-attention layers (ssm.*, full_attention_interval) beside gated
  // full-attention layers, IMROPE sections (qwen35).
  bool hybrid = false;
};

// The registry (arch/registry.cpp).
const ArchInfo& arch_info(Arch a);
// "llama, qwen2, qwen3": every registered architecture.
std::string supported_list();

// The features of a loaded model that differ from a plain llama block, for `rocky info`
// ("q/k norm per head", "rope factors (rope_freqs)", "tied output", …); empty when none.
std::string special_features(const HParams& hp, const Weights& w);

}  // namespace rocky::model::arch
