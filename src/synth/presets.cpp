#include "synth/presets.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/error.hpp"
#include "model/arch/arch.hpp"

namespace rocky::synth {

bool Preset::has_qkv_bias() const { return model::arch::arch_info(arch).qkv_bias; }
bool Preset::has_qk_norm() const { return model::arch::arch_info(arch).qk_norm; }
bool Preset::has_post_norms() const { return model::arch::arch_info(arch).post_norms; }

namespace {

constexpr Preset make(std::string_view name, std::string_view display, Arch arch, uint32_t n_embd, uint32_t n_ff,
                      uint32_t n_layer, uint32_t n_head, uint32_t n_head_kv, uint32_t n_vocab, uint32_t n_ctx,
                      float rope_base, float rms_eps, bool tied, bool test_only = false) {
  Preset p;
  p.name = name;
  p.display = display;
  p.arch = arch;
  p.n_embd = n_embd;
  p.n_ff = n_ff;
  p.n_layer = n_layer;
  p.n_head = n_head;
  p.n_head_kv = n_head_kv;
  p.n_vocab = n_vocab;
  p.n_ctx = n_ctx;
  p.rope_base = rope_base;
  p.rms_eps = rms_eps;
  p.tied = tied;
  p.test_only = test_only;
  p.vocab = arch == Arch::LLAMA ? VocabKind::SPM_LLAMA2 : VocabKind::BPE_QWEN2;
  return p;
}

constexpr Preset qwen3(Preset p, uint32_t key_length) {
  p.key_length = key_length;
  return p;
}

constexpr Preset coder(Preset p) {
  p.fim_keys = true;
  return p;
}

constexpr Preset retrieval(Preset p, int32_t pooling, uint32_t n_cls_out) {
  p.pooling = pooling;
  p.n_cls_out = n_cls_out;
  return p;
}

// Llama 3.2: the Llama 3 BPE vocab and Llama 3.1 rope scaling (factor 32, low 1, high 4, 8192).
constexpr Preset llama3(Preset p) {
  p.vocab = VocabKind::BPE_LLAMA3;
  p.rope_factor = 32;
  p.rope_low_freq = 1;
  p.rope_high_freq = 4;
  p.rope_orig_ctx = 8192;
  return p;
}

// Gemma 3: head_dim 256, sliding window, local rope base 1e4, the Gemma 3 SPM vocab.
constexpr Preset gemma3(Preset p, uint32_t window, float rope_linear) {
  p.key_length = 256;
  p.vocab = VocabKind::SPM_GEMMA3;
  p.sliding_window = window;
  p.rope_base_swa = 1e4f;
  p.rope_linear = rope_linear;
  return p;
}

// Qwen3.5: head_dim 256, rope dim 64, rope base 1e7, DeltaNet dims 128, conv 4, interval 4.
constexpr Preset qwen35(Preset p, uint32_t k_heads, uint32_t v_heads) {
  p.key_length = 256;
  p.rope_dim = 64;
  p.full_attn_interval = 4;
  p.ssm_k_heads = k_heads;
  p.ssm_v_heads = v_heads;
  p.ssm_d_k = 128;
  p.ssm_d_v = 128;
  p.ssm_conv = 4;
  return p;
}

// Numbers and sources: see presets.hpp.
constexpr std::array k_presets = {
    make("qwen2.5-1.5b", "Qwen2.5-1.5B (rocky synth)", Arch::QWEN2, 1536, 8960, 28, 12, 2, 151936, 32768, 1e6f, 1e-6f,
         true),
    make("qwen2.5-3b", "Qwen2.5-3B (rocky synth)", Arch::QWEN2, 2048, 11008, 36, 16, 2, 151936, 32768, 1e6f, 1e-6f,
         true),
    make("qwen2.5-7b", "Qwen2.5-7B (rocky synth)", Arch::QWEN2, 3584, 18944, 28, 28, 4, 152064, 32768, 1e6f, 1e-6f,
         false),
    make("tinyllama-1.1b", "TinyLlama-1.1B (rocky synth)", Arch::LLAMA, 2048, 5632, 22, 32, 4, 32000, 2048, 1e4f, 1e-5f,
         false),
    make("qwen2.5-0.5b", "Qwen2.5-0.5B (rocky synth)", Arch::QWEN2, 896, 4864, 24, 14, 2, 151936, 32768, 1e6f, 1e-6f,
         true),
    qwen3(make("qwen3-1.7b", "Qwen3-1.7B (rocky synth)", Arch::QWEN3, 2048, 6144, 28, 16, 8, 151936, 40960, 1e6f, 1e-6f,
               true),
          128),
    qwen3(make("qwen3-4b", "Qwen3-4B (rocky synth)", Arch::QWEN3, 2560, 9728, 36, 32, 8, 151936, 40960, 1e6f, 1e-6f,
               true),
          128),
    llama3(make("llama-3.2-1b", "Llama-3.2-1B (rocky synth)", Arch::LLAMA, 2048, 8192, 16, 32, 8, 128256, 131072, 5e5f,
                1e-5f, true)),
    llama3(make("llama-3.2-3b", "Llama-3.2-3B (rocky synth)", Arch::LLAMA, 3072, 8192, 28, 24, 8, 128256, 131072, 5e5f,
                1e-5f, true)),
    gemma3(make("gemma-3-1b", "Gemma-3-1B (rocky synth)", Arch::GEMMA3, 1152, 6912, 26, 4, 1, 262144, 32768, 1e6f,
                1e-6f, true),
           512, 0),
    gemma3(make("gemma-3-4b", "Gemma-3-4B (rocky synth)", Arch::GEMMA3, 2560, 10240, 34, 8, 4, 262144, 131072, 1e6f,
                1e-6f, true),
           1024, 8),
    qwen35(make("qwen3.5-0.8b", "Qwen3.5-0.8B (rocky synth)", Arch::QWEN35, 1024, 3584, 24, 8, 2, 248320, 262144, 1e7f,
                1e-6f, true),
           16, 16),
    qwen35(make("qwen3.5-2b", "Qwen3.5-2B (rocky synth)", Arch::QWEN35, 2048, 6144, 24, 8, 2, 248320, 262144, 1e7f,
                1e-6f, true),
           16, 16),
    qwen35(make("qwen3.5-4b", "Qwen3.5-4B (rocky synth)", Arch::QWEN35, 2560, 9216, 32, 16, 4, 248320, 262144, 1e7f,
                1e-6f, true),
           16, 32),
    // Test shapes: head_dim 64, n_ff not a multiple of 256 (fallback types), small vocabs.
    make("qwen2-test", "qwen2 test shape (rocky synth)", Arch::QWEN2, 256, 320, 4, 4, 2, 1024, 4096, 1e6f, 1e-6f, true,
         true),
    make("llama-test", "llama test shape (rocky synth)", Arch::LLAMA, 256, 320, 4, 4, 2, 1000, 2048, 1e4f, 1e-5f, false,
         true),
    // Retrieval and code-completion test shapes (qwen2-test's sizes): FIM keys (Qwen2.5-Coder),
    // last-token pooling (Qwen3-Embedding), a one-output classification head (Qwen3-Reranker).
    coder(make("qwen2.5-coder-test", "qwen2.5-coder test shape (rocky synth)", Arch::QWEN2, 256, 320, 4, 4, 2, 1024,
               4096, 1e6f, 1e-6f, true, true)),
    retrieval(qwen3(make("qwen3-embedding-test", "qwen3-embedding test shape (rocky synth)", Arch::QWEN3, 256, 320, 4,
                         4, 2, 1024, 4096, 1e6f, 1e-6f, true, true),
                    64),
              3, 0),
    retrieval(qwen3(make("qwen3-reranker-test", "qwen3-reranker test shape (rocky synth)", Arch::QWEN3, 256, 320, 4, 4,
                         2, 1024, 4096, 1e6f, 1e-6f, true, true),
                    64),
              4, 1),
    // Two qwen35 layer patterns (6 Gated DeltaNet + 2 gated attention layers) at small widths.
    qwen35(make("qwen35-test", "qwen35 test shape (rocky synth)", Arch::QWEN35, 256, 320, 8, 4, 2, 1024, 4096, 1e7f,
                1e-6f, true, true),
           2, 4),
};

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return r;
}

}  // namespace

std::span<const Preset> presets() { return k_presets; }

const Preset& find_preset(std::string_view name) {
  const std::string n = lower(name);
  for (const Preset& p : k_presets)
    if (p.name == n) return p;
  std::string known;
  for (const Preset& p : k_presets) known += (known.empty() ? "" : ", ") + std::string(p.name);
  fail("unknown preset '{}' (known: {})", name, known);
}

}  // namespace rocky::synth
