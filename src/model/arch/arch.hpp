// The architecture registry: one ArchInfo per architecture, each defined in its own
// arch/<name>.cpp and listed once in arch/registry.cpp. An ArchInfo says what the architecture's
// files hold (biases, q/k norms, rope factors, tied output) and how its graph is built; binding
// (model.cpp) is generic over these flags, and every tensor of the file must be bound (a tensor
// the graph would not read is an error naming it).
//
// An architecture is its file: arch/<name>.cpp holds its ArchInfo — tensor-set flags, its own
// hyper-parameter keys and their reading, its own layer binding where the llama block's does not
// fit, its `rocky info` feature lines — and its graph builder where blocks::build_decoder does not
// fit. Adding one (3 files): one line in gguf/names.hpp's ROCKY_GGUF_ARCHS (the Arch value and its
// GGUF name), arch/<name>.cpp (model/CMakeLists.txt picks up arch/*.cpp), one line in
// arch/registry.cpp.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "model/model.hpp"

namespace rocky::model::arch {

struct ArchInfo {
  Arch arch = Arch::LLAMA;
  graph::RopeMode rope_mode = graph::RopeMode::NORMAL;
  // The tensor set (the generic binding in model.cpp, `rocky synth`'s plan and `rocky info` read
  // these; k_tensor_flags lists them once).
  bool qkv_bias = false;     // blk.N.attn_{q,k,v}.bias required (added after the projections)
  bool qk_norm = false;      // blk.N.attn_{q,k}_norm [head_dim] required: per-head RMSNorm of Q and K before rope
  bool rope_freqs = false;   // rope_freqs.weight [n_rot/2] read when present (Llama 3.1 scaling divisors)
  bool tied_output = false;  // the usual files have no output.weight (LM head = token_embd); both are accepted
  // The forward graph of one ubatch.
  graph::Graph (*build)(const HParams& hp, const Weights& w, const UbatchSpec& u) = nullptr;
  const char* notes = "";   // one line for `rocky info` / docs
  bool post_norms = false;  // blk.N.post_attention_norm / post_ffw_norm [n_embd] required (gemma3)
  // Gated DeltaNet linear-attention layers (ssm.*, full_attention_interval) beside gated
  // full-attention layers, IMROPE sections (qwen35): the context holds recurrent state.
  bool hybrid = false;
  // The architecture's own `<arch>.*` metadata keys (beyond the common ones hparams.cpp reads):
  // read_keys reads them into HParams after the common ones; hparams.cpp's key check lets them
  // through. Empty / null: none.
  std::span<const gguf::Key> own_keys;
  void (*read_keys)(const gguf::GgufFile& f, HParams& h) = nullptr;
  // Binds layer il's tensors other than attn_norm when the llama block's binding does not fit
  // (qwen35); null: the generic binding over the flags above.
  void (*bind_layer)(const gguf::GgufFile& f, const HParams& hp, int il, LayerWeights& L) = nullptr;
  // The architecture's own lines of `rocky info`'s features (after the common ones); null: none.
  std::vector<std::string> (*features)(const HParams& hp) = nullptr;
};

// The tensor-set flags of ArchInfo, listed once: the name, and the feature line `rocky info`
// prints for an architecture that has it (null: the line comes from the loaded weights or the
// architecture's own features instead).
struct TensorFlag {
  bool ArchInfo::*member;
  const char* name;
  const char* feature;
};
inline constexpr TensorFlag k_tensor_flags[] = {
    {&ArchInfo::qkv_bias, "qkv_bias", "q/k/v bias"},
    {&ArchInfo::qk_norm, "qk_norm", "q/k RMSNorm per head"},
    {&ArchInfo::post_norms, "post_norms", "post-attention and post-FFN RMSNorm"},
    {&ArchInfo::rope_freqs, "rope_freqs", nullptr},    // "rope scaling: rope_freqs factors [N]" when bound
    {&ArchInfo::tied_output, "tied_output", nullptr},  // "tied output" / "untied output" as bound
    {&ArchInfo::hybrid, "hybrid", nullptr},            // qwen35's own line
};

// The registry (arch/registry.cpp).
const ArchInfo& arch_info(Arch a);
// "llama, qwen2, qwen3": every registered architecture.
std::string supported_list();

// The features of a loaded model that differ from a plain llama block, for `rocky info`
// ("q/k norm per head", "rope factors (rope_freqs)", "tied output", …); empty when none.
std::string special_features(const HParams& hp, const Weights& w);

}  // namespace rocky::model::arch
