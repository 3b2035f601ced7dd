// llama (Llama 2 / TinyStories / Llama 3.x): pre-norm decoder, normal (adjacent-pair) rope, no
// biases; rope_freqs.weight divisors when present (Llama 3.1/3.2 rope scaling); untied output, or
// tied to token_embd.weight when output.weight is absent (Llama 3.2 1B/3B), as llama.cpp does.
#include "model/arch/arch.hpp"
#include "model/blocks.hpp"

namespace rocky::model::arch {

// Registered in arch/registry.cpp (extern: the registry refers to it).
extern const ArchInfo k_llama{
    Arch::LLAMA,           graph::RopeMode::NORMAL,
    /*qkv_bias=*/false,    /*qk_norm=*/false,
    /*rope_freqs=*/true,   /*tied_output=*/false,
    blocks::build_decoder, "pre-norm SwiGLU decoder, normal rope, optional rope_freqs factors"};

}  // namespace rocky::model::arch
