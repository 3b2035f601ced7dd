// qwen3 (Qwen3 dense): the llama block with NeoX rope, no q/k/v biases, and an RMSNorm of every
// query and key head (attn_q_norm / attn_k_norm [head_dim], shared by the heads) before rope,
// through graph views (blocks::rms_norm_heads); head_dim (attention.key_length) · n_head may
// differ from n_embd (Qwen3-4B: 128 · 32 = 4096 vs 2560). Tied embeddings unless output.weight.
// llama.cpp: src/models/qwen3.cpp.
#include "model/arch/arch.hpp"
#include "model/blocks.hpp"

namespace rocky::model::arch {

// Registered in arch/registry.cpp (extern: the registry refers to it).
extern const ArchInfo k_qwen3{Arch::QWEN3,           graph::RopeMode::NEOX,
                              /*qkv_bias=*/false,    /*qk_norm=*/true,
                              /*rope_freqs=*/false,  /*tied_output=*/true,
                              blocks::build_decoder, "llama block + per-head q/k RMSNorm, neox rope, no biases"};

}  // namespace rocky::model::arch
