#include "synth/presets.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/error.hpp"

namespace rocky::synth {

std::string_view arch_name(Arch a) { return a == Arch::Qwen2 ? "qwen2" : "llama"; }

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
  return p;
}

// Numbers and sources: see presets.hpp.
constexpr std::array k_presets = {
    make("qwen2.5-1.5b", "Qwen2.5-1.5B (rocky synth)", Arch::Qwen2, 1536, 8960, 28, 12, 2, 151936, 32768, 1e6f,
         1e-6f, true),
    make("qwen2.5-3b", "Qwen2.5-3B (rocky synth)", Arch::Qwen2, 2048, 11008, 36, 16, 2, 151936, 32768, 1e6f, 1e-6f,
         true),
    make("qwen2.5-7b", "Qwen2.5-7B (rocky synth)", Arch::Qwen2, 3584, 18944, 28, 28, 4, 152064, 32768, 1e6f, 1e-6f,
         false),
    make("tinyllama-1.1b", "TinyLlama-1.1B (rocky synth)", Arch::Llama, 2048, 5632, 22, 32, 4, 32000, 2048, 1e4f,
         1e-5f, false),
    // Test shapes: head_dim 64, n_ff not a multiple of 256 (fallback types), small vocabs.
    make("qwen2-test", "qwen2 test shape (rocky synth)", Arch::Qwen2, 256, 320, 4, 4, 2, 1024, 4096, 1e6f, 1e-6f,
         true, true),
    make("llama-test", "llama test shape (rocky synth)", Arch::Llama, 256, 320, 4, 4, 2, 1000, 2048, 1e4f, 1e-5f,
         false, true),
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
