// A loaded model: the mapped GGUF file, its hyper-parameters and named weight views, and the
// builder of the forward graph of one ubatch.
//
// Tensor names are llama.cpp's GGUF names ("blk.N.attn_q.weight", …; gguf/names.hpp). Binding
// (generic over the architecture registry's flags, arch/arch.hpp) checks every tensor the
// architecture needs: presence, shape (GGUF order, ne0 = row length) and type (a type rocky's
// kernels compute, dtype_info(t).computable); and that the file holds no tensor the graph would
// not read. Errors name the file and the tensor.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.hpp"
#include "graph/graph.hpp"
#include "model/hparams.hpp"

namespace rocky::model {

struct LayerWeights {
  const gguf::TensorInfo* attn_norm = nullptr;       // f32 [n_embd]
  const gguf::TensorInfo* wq = nullptr;              // [n_embd, n_embd_q]
  const gguf::TensorInfo* wk = nullptr;              // [n_embd, n_embd_kv]
  const gguf::TensorInfo* wv = nullptr;              // [n_embd, n_embd_kv]
  const gguf::TensorInfo* bq = nullptr;              // qwen2: f32 [n_embd_q]
  const gguf::TensorInfo* bk = nullptr;              // qwen2: f32 [n_embd_kv]
  const gguf::TensorInfo* bv = nullptr;              // qwen2: f32 [n_embd_kv]
  const gguf::TensorInfo* q_norm = nullptr;          // qwen3: f32 [head_dim] (shared by the heads)
  const gguf::TensorInfo* k_norm = nullptr;          // qwen3: f32 [head_dim]
  const gguf::TensorInfo* wo = nullptr;              // [n_embd_q, n_embd]
  const gguf::TensorInfo* ffn_norm = nullptr;        // f32 [n_embd]
  const gguf::TensorInfo* ffn_gate = nullptr;        // [n_embd, n_ff]
  const gguf::TensorInfo* ffn_up = nullptr;          // [n_embd, n_ff]
  const gguf::TensorInfo* ffn_down = nullptr;        // [n_ff, n_embd]
  const gguf::TensorInfo* post_attn_norm = nullptr;  // gemma3: f32 [n_embd]
  const gguf::TensorInfo* post_ffn_norm = nullptr;   // gemma3: f32 [n_embd]
  // qwen35 Gated DeltaNet layers (ffn_norm is the file's post_attention_norm there and in the
  // full-attention layers; the latter's attn_q is [n_embd, 2·n_embd_q]: per head query | gate).
  const gguf::TensorInfo* wqkv = nullptr;         // [n_embd, conv channels]
  const gguf::TensorInfo* wgate = nullptr;        // [n_embd, ssm_d_inner] (z)
  const gguf::TensorInfo* ssm_conv1d = nullptr;   // f32 [conv_kernel, conv channels]
  const gguf::TensorInfo* ssm_a = nullptr;        // f32 [H_v] (−exp(A_log))
  const gguf::TensorInfo* ssm_alpha = nullptr;    // [n_embd, H_v]
  const gguf::TensorInfo* ssm_beta = nullptr;     // [n_embd, H_v]
  const gguf::TensorInfo* ssm_dt_bias = nullptr;  // f32 [H_v]
  const gguf::TensorInfo* ssm_norm = nullptr;     // f32 [d_v]
  const gguf::TensorInfo* ssm_out = nullptr;      // [ssm_d_inner, n_embd]
};

struct Weights {
  const gguf::TensorInfo* tok_embd = nullptr;     // [n_embd, n_vocab]
  const gguf::TensorInfo* output_norm = nullptr;  // f32 [n_embd]
  const gguf::TensorInfo* output = nullptr;       // [n_embd, n_vocab]; token_embd when tied
  bool tied_output = false;
  const gguf::TensorInfo* rope_freqs = nullptr;  // llama 3.1+: f32 [n_rot/2] frequency divisors
  std::vector<LayerWeights> layers;
};

// Which logits a ubatch produces.
enum class Logits {
  LAST,  // the last token only: [n_vocab, 1]
  ALL,   // every token: [n_vocab, N]
  NONE,  // none (graph.output = -1): an early prefill ubatch that only fills the KV cache
  EMBD,  // every token's hidden state after output_norm, no LM head: [n_embd, N] (embeddings)
};

// What one ubatch computes.
struct UbatchSpec {
  int32_t n_tokens = 0;  // tokens in this ubatch (N)
  int32_t n_past = 0;    // positions already in the KV cache
  int32_t n_ctx = 0;     // KV cache capacity (positions)
  Logits logits = Logits::LAST;
  int32_t n_out = 1;  // LAST: the logits of the last n_out tokens ([n_vocab, n_out]; a batched step)
  // Cells per sequence of the sliding-window layers' KV ring (graph::KvShape::n_ring; 0: they hold
  // n_ctx). Model::swa_ring gives it for a context.
  int32_t n_ring = 0;
};

class Model {
 public:
  // Opens and binds `path`. Throws rocky::Error (unsupported arch/type, missing tensor, bad shape).
  static std::unique_ptr<Model> load(const std::string& path);

  const gguf::GgufFile& file() const { return file_; }
  const HParams& hparams() const { return hp_; }
  // UbatchSpec::n_ring for a context of n_ctx positions per sequence run in ubatches of at most
  // n_ubatch tokens per sequence: window + n_ubatch cells for the sliding-window layers, or 0 (they
  // hold n_ctx) without a window, with swa_full (--swa-full) or when the ring would not be smaller.
  int32_t swa_ring(int32_t n_ctx, int32_t n_ubatch, bool swa_full) const {
    if (swa_full || hp_.n_swa <= 0 || n_ubatch <= 0) return 0;
    const int64_t r = int64_t{hp_.n_swa} + n_ubatch;
    return r < n_ctx ? static_cast<int32_t>(r) : 0;
  }
  const Weights& weights() const { return w_; }

  // The forward graph of one ubatch (arch-specific builder). Output: logits [n_vocab, n_out] with
  // n_out = n_tokens (ALL), 1 (LAST), or no output node (NONE). rocky::Error when the ubatch does
  // not fit in n_ctx.
  graph::Graph build_graph(const UbatchSpec& u) const;

 private:
  explicit Model(gguf::GgufFile f) : file_(std::move(f)) {}
  gguf::GgufFile file_;
  HParams hp_;
  Weights w_;
};

// Binding helper used by the arch files: the tensor `name` with the expected 1-D/2-D shape
// (ne1 = 0 for 1-D), or an error naming file and tensor. `optional` returns nullptr when absent.
const gguf::TensorInfo* bind_tensor(const gguf::GgufFile& f, const std::string& name, int64_t ne0, int64_t ne1,
                                    bool optional = false);

}  // namespace rocky::model
