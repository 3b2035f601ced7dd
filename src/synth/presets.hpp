// Model presets for `rocky synth`: the exact hyper-parameters of real models, so that synthetic
// files have real tensor shapes and metadata (only the weights and the vocab are made up).
//
// Sources (Hugging Face config.json of each model; the GGUF key each field becomes is given):
//   qwen2.5-1.5b   Qwen/Qwen2.5-1.5B-Instruct: hidden_size 1536, intermediate_size 8960,
//                  num_hidden_layers 28, num_attention_heads 12, num_key_value_heads 2,
//                  vocab_size 151936, max_position_embeddings 32768, rope_theta 1e6,
//                  rms_norm_eps 1e-6, tie_word_embeddings true.
//   qwen2.5-3b     Qwen/Qwen2.5-3B-Instruct: 2048, 11008, 36 layers, 16 / 2 heads, vocab 151936,
//                  ctx 32768, rope_theta 1e6, eps 1e-6, tied (also ../shared/anchors.md).
//   qwen2.5-7b     Qwen/Qwen2.5-7B-Instruct: 3584, 18944, 28 layers, 28 / 4 heads, vocab 152064,
//                  ctx 32768, rope_theta 1e6, eps 1e-6, tie_word_embeddings false (output.weight).
//   tinyllama-1.1b TinyLlama/TinyLlama-1.1B-Chat-v1.0 (LlamaForCausalLM): 2048, 5632, 22 layers,
//                  32 / 4 heads, vocab 32000 (Llama 2 SentencePiece), max_position_embeddings 2048,
//                  rope_theta 1e4, rms_norm_eps 1e-5, tie_word_embeddings false.
//   qwen2.5-0.5b   Qwen/Qwen2.5-0.5B-Instruct: 896, 4864, 24 layers, 14 / 2 heads, vocab 151936,
//                  ctx 32768, rope_theta 1e6, eps 1e-6, tied. Rows of 896 are not multiples of 256:
//                  Q4_K_M falls back to q5_0 / q8_0 as the real files do.
//   qwen3-1.7b     Qwen/Qwen3-1.7B (Qwen3ForCausalLM): 2048, 6144, 28 layers, 16 / 8 heads, head_dim
//                  128, vocab 151936, max_position_embeddings 40960, rope_theta 1e6, eps 1e-6, tied.
//   qwen3-4b       Qwen/Qwen3-4B: 2560, 9728, 36 layers, 32 / 8 heads, head_dim 128 (32 · 128 = 4096
//                  ≠ 2560), vocab 151936, ctx 40960, rope_theta 1e6, eps 1e-6, tied.
//   llama-3.2-1b   meta-llama/Llama-3.2-1B-Instruct: 2048, 8192, 16 layers, 32 / 8 heads (head_dim
//                  64), vocab 128256, ctx 131072, rope_theta 500000, eps 1e-5, tied; rope_scaling
//                  llama3 (factor 32, low_freq_factor 1, high_freq_factor 4,
//                  original_max_position_embeddings 8192) → rope_freqs.weight [32].
//   llama-3.2-3b   meta-llama/Llama-3.2-3B-Instruct: 3072, 8192, 28 layers, 24 / 8 heads (head_dim
//                  128), vocab 128256, ctx 131072, rope_theta 500000, eps 1e-5, tied, rope_scaling as
//                  1B → rope_freqs.weight [64].
//   gemma-3-1b     google/gemma-3-1b-it (Gemma3ForCausalLM): hidden_size 1152, intermediate_size 6912,
//                  26 layers, 4 / 1 heads, head_dim 256, vocab 262144 (Gemma 3 SentencePiece),
//                  max_position_embeddings 32768, rope_theta 1e6, rope_local_base_freq 1e4,
//                  sliding_window 512 (5 local : 1 global), rms_norm_eps 1e-6, tied, no rope scaling.
//                  Rows of 1152 are not multiples of 256: Q4_K_M falls back to q5_0 / q8_0.
//   gemma-3-4b     google/gemma-3-4b-it text_config: 2560, 10240, 34 layers, 8 / 4 heads, head_dim
//                  256, sliding_window 1024, rope_theta 1e6 with linear rope scaling factor 8 (global
//                  layers), rope_local_base_freq 1e4, max_position_embeddings 131072, eps 1e-6, tied;
//                  the tokenizer's 262,144 tokens (the checkpoint pads its embedding to 262,208).
//   qwen3.5 (Qwen3_5ForConditionalGeneration text_config; GGUF arch qwen35, llama.cpp's
//   converter layout, ../shared/reference/README.md): every 4th layer full attention
//   (full_attention_interval 4) with head_dim 256, partial_rotary_factor 0.25 (rope dim 64),
//   mrope_section [11, 11, 10] (dimension_sections [11, 11, 10, 0]), rope_theta 1e7; the others
//   Gated DeltaNet with linear_key_head_dim = linear_value_head_dim = 128, conv kernel 4;
//   vocab 248320, max_position_embeddings 262144, rms_norm_eps 1e-6, tied.
//   qwen3.5-0.8b   Qwen/Qwen3.5-0.8B: hidden 1024, intermediate 3584, 24 layers, 8 / 2 heads,
//                  linear 16 key / 16 value heads.
//   qwen3.5-2b     Qwen/Qwen3.5-2B: hidden 2048, 24 layers, 8 / 2 heads (public model cards);
//                  intermediate 6144 and linear 16 / 16 heads not confirmed from its config.json.
//   qwen3.5-4b     Qwen/Qwen3.5-4B: hidden 2560, intermediate 9216, 32 layers, 16 / 4 heads,
//                  linear 16 key / 32 value heads.
//   The vocab is generated as Qwen2's kind (pre "qwen2"; real files say "qwen35").
// Test presets (not real models; small, for CI): qwen2-test, llama-test, qwen35-test. Their n_ff is not a
// multiple of 256, so the quantizer's fallback types (q5_0, q8_0) are exercised too.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gguf/names.hpp"

namespace rocky::synth {

using gguf::Arch;
using gguf::arch_name;  // GGUF general.architecture: "qwen2", "llama", "qwen3"

// The tokenizer a preset's file carries (vocab_gen.hpp).
enum class VocabKind {
  SPM_LLAMA2,  // SentencePiece (tokenizer.ggml.model "llama")
  BPE_QWEN2,   // byte-level BPE, pre "qwen2", Qwen's added tokens
  BPE_LLAMA3,  // byte-level BPE, pre "llama-bpe", Llama 3's 256 special tokens
  SPM_GEMMA3,  // SentencePiece (model "llama"), Gemma 3's special tokens and turn markers, no space prefix
};

struct Preset {
  std::string_view name;     // e.g. "qwen2.5-3b"
  std::string_view display;  // general.name, e.g. "Qwen2.5-3B (rocky synth)"
  Arch arch = Arch::QWEN2;
  uint32_t n_embd = 0;      // hidden size (<arch>.embedding_length)
  uint32_t n_ff = 0;        // FFN inner size (<arch>.feed_forward_length)
  uint32_t n_layer = 0;     // <arch>.block_count
  uint32_t n_head = 0;      // <arch>.attention.head_count
  uint32_t n_head_kv = 0;   // <arch>.attention.head_count_kv
  uint32_t n_vocab = 0;     // rows of token_embd / output (tokenizer.ggml.tokens count)
  uint32_t n_ctx = 0;       // <arch>.context_length
  float rope_base = 0;      // <arch>.rope.freq_base
  float rms_eps = 0;        // <arch>.attention.layer_norm_rms_epsilon
  bool tied = false;        // true: no output.weight, the LM head is token_embd
  bool test_only = false;   // a small made-up shape for tests
  uint32_t key_length = 0;  // <arch>.attention.key_length (head_dim); 0: n_embd / n_head
  VocabKind vocab = VocabKind::BPE_QWEN2;
  // Llama 3.1 rope scaling (written as rope_freqs.weight, as llama.cpp's converter does); factor
  // 0 = none.
  float rope_factor = 0, rope_low_freq = 1, rope_high_freq = 4;
  uint32_t rope_orig_ctx = 8192;
  // gemma3: attention.sliding_window (0: none), rope.freq_base_swa, linear rope scaling factor
  // (rope.scaling.type linear + rope.scaling.factor; 0: none).
  uint32_t sliding_window = 0;
  float rope_base_swa = 0;
  float rope_linear = 0;
  // qwen35: Gated DeltaNet layers (full_attn_interval > 0: layer il is recurrent when
  // (il + 1) % interval ≠ 0), key heads × d_k, value heads × d_v, conv kernel; the attention
  // layers' rope dims (rope.dimension_count; 0 = head_dim).
  uint32_t full_attn_interval = 0;
  uint32_t ssm_k_heads = 0, ssm_v_heads = 0, ssm_d_k = 0, ssm_d_v = 0, ssm_conv = 0;
  uint32_t rope_dim = 0;
  // Retrieval and code presets: tokenizer.ggml.fim_*_token_id of the vocab's FIM tokens (Qwen2.5-
  // Coder's), <arch>.pooling_type (-1: not written; 3 last = Qwen3-Embedding, 4 rank =
  // Qwen3-Reranker), and a reranker's classification head cls.output.weight [n_embd, n_cls_out].
  bool fim_keys = false;
  int32_t pooling = -1;
  uint32_t n_cls_out = 0;

  uint32_t head_dim() const { return key_length ? key_length : n_embd / n_head; }
  uint32_t n_embd_q() const { return head_dim() * n_head; }
  uint32_t n_embd_kv() const { return head_dim() * n_head_kv; }
  // The architecture's tensor set (model/arch/<name>.cpp's ArchInfo flags, read there).
  bool has_qkv_bias() const;
  bool has_qk_norm() const;
  bool has_post_norms() const;
  bool has_rope_freqs() const { return rope_factor > 0; }
  bool hybrid() const { return full_attn_interval > 0; }
  bool is_recurrent_layer(uint32_t il) const { return hybrid() && (il + 1) % full_attn_interval != 0; }
  uint32_t ssm_conv_channels() const { return 2 * ssm_k_heads * ssm_d_k + ssm_v_heads * ssm_d_v; }
};

// All presets, real ones first.
std::span<const Preset> presets();
// The preset called `name` (case-insensitive); rocky::Error listing the known names otherwise.
const Preset& find_preset(std::string_view name);

}  // namespace rocky::synth
