// qwen2 (Qwen2 / Qwen2.5): the llama block plus q/k/v biases, NeoX rope (rotate x[i] with
// x[i + n_rot/2]), tied embeddings (output = token_embd.weight unless output.weight is present).
#include "model/arch/arch.hpp"
#include "model/blocks.hpp"

namespace rocky::model::arch {

// Registered in arch/registry.cpp (extern: the registry refers to it).
extern const ArchInfo k_qwen2{
    Arch::QWEN2,          graph::RopeMode::NEOX, /*qkv_bias=*/true,     /*qk_norm=*/false,
    /*rope_freqs=*/false, /*tied_output=*/true,  blocks::build_decoder, "llama block + q/k/v biases, neox rope"};

}  // namespace rocky::model::arch
