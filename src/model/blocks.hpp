// Shared graph block helpers for the decoder-only architectures (llama-style pre-norm blocks).
// Each helper appends named nodes to a graph and returns the id of its last node. Names follow
// llama.cpp's cb() names: "blk.N.attn_norm", "blk.N.Qcur", …, "result_norm", "result_output".
#pragma once

#include <string>

#include "graph/graph.hpp"
#include "model/model.hpp"

namespace rocky::model::blocks {

struct Ctx {
  graph::Graph& g;
  const HParams& hp;
  int32_t n_tokens;
  const gguf::TensorInfo* rope_freqs = nullptr;  // the ROPE nodes' frequency divisors (Weights::rope_freqs)
  // Per-layer overrides set by a builder before self_attention (gemma3's local layers): rope
  // base and scale (0: the hparams'), attention sliding window (0: none).
  float rope_base = 0, rope_scale = 0;
  int32_t window = 0;
  int32_t n_out = 1;  // Logits::LAST: the last n_out tokens' logits (UbatchSpec::n_out)
};

std::string blk(int il, const char* what);  // "blk.<il>.<what>"

int32_t inp_embd(Ctx& c, const gguf::TensorInfo* tok_embd);                        // GET_ROWS
int32_t rms_norm(Ctx& c, int32_t x, const gguf::TensorInfo* w, std::string name);  // RMS_NORM
int32_t matmul(Ctx& c, int32_t x, const gguf::TensorInfo* w, int64_t m, std::string name);
int32_t add_bias(Ctx& c, int32_t x, const gguf::TensorInfo* b, std::string name);
int32_t add(Ctx& c, int32_t a, int32_t b, std::string name);
int32_t scale(Ctx& c, int32_t x, float s, std::string name);  // SCALE

// ROPE of x [head_dim·n_head, N] with the hparams' rope (and Ctx's overrides); KV_STORE of x
// into layer il's K (kv = 0) or V (kv = 1) cache.
int32_t rope(Ctx& c, int32_t x, int32_t n_head, std::string name);
int32_t kv_store(Ctx& c, int il, int32_t x, int kv, std::string name);

// RMSNorm of each head of x [head_dim·n_head, N] with the shared weight w [head_dim]: a view to
// [head_dim, n_head·N], a per-column RMS_NORM, a view back (no backend special case).
int32_t rms_norm_heads(Ctx& c, int32_t x, const gguf::TensorInfo* w, int32_t n_head, const std::string& name);

// Self-attention of layer il on the normed input x [n_embd, N]: q/k/v projections (+ biases when
// the layer has them), per-head q/k RMSNorm (when it has q_norm/k_norm), rope on Q and K (with the
// rope_freqs divisors when set), KV store, causal GQA attention, output projection.
int32_t self_attention(Ctx& c, int il, int32_t x, const LayerWeights& L);
// SwiGLU feed-forward: down(silu(gate(x)) * up(x)).
int32_t ffn_swiglu(Ctx& c, int il, int32_t x, const LayerWeights& L);
// GeGLU feed-forward (gemma): down(gelu_tanh(gate(x)) * up(x)).
int32_t ffn_geglu(Ctx& c, int il, int32_t x, const LayerWeights& L);
// The logits of x [n_embd, N] (the last column only with Logits::LAST): result_last (TAKE_COLS),
// result_norm, result_output; nothing with Logits::NONE.
void output_head(Ctx& c, const Weights& w, int32_t x, Logits logits);
// The pre-norm decoder stack shared by llama and qwen2, then result_norm and result_output. With
// Logits::LAST the last token's column is taken (TAKE_COLS "result_last") before the final norm;
// with Logits::NONE the graph ends at the last layer's output and has no output node.
void decoder_stack(Ctx& c, const Weights& w, Logits logits);
// The whole graph of one ubatch of the pre-norm decoder (decoder_stack): the builder of llama,
// qwen2 and qwen3, whose differences are all in the weights bound (biases, q/k norms, rope_freqs).
graph::Graph build_decoder(const HParams& hp, const Weights& w, const UbatchSpec& u);

}  // namespace rocky::model::blocks
