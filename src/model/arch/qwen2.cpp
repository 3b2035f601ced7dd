// qwen2 (Qwen2 / Qwen2.5): the llama block plus q/k/v biases, NeoX rope (rotate x[i] with
// x[i + n_rot/2]), tied embeddings (output = token_embd.weight unless output.weight is present).
#include "model/arch/arch.hpp"
#include "model/blocks.hpp"

namespace rocky::model::arch {

void bind_qwen2(const gguf::GgufFile& f, const HParams& hp, Weights& w) {
  w.tok_embd = bind_tensor(f, "token_embd.weight", hp.n_embd, hp.n_vocab);
  w.output_norm = bind_tensor(f, "output_norm.weight", hp.n_embd, 0);
  w.output = bind_tensor(f, "output.weight", hp.n_embd, hp.n_vocab, /*optional=*/true);
  w.tied_output = w.output == nullptr;
  if (w.tied_output) w.output = w.tok_embd;
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerWeights L = bind_common_layer(f, hp, il);
    const std::string p = "blk." + std::to_string(il) + ".";
    L.bq = bind_tensor(f, p + "attn_q.bias", hp.n_embd_q(), 0);
    L.bk = bind_tensor(f, p + "attn_k.bias", hp.n_embd_kv(), 0);
    L.bv = bind_tensor(f, p + "attn_v.bias", hp.n_embd_kv(), 0);
    w.layers.push_back(L);
  }
}

graph::Graph build_qwen2(const HParams& hp, const Weights& w, const UbatchSpec& u) {
  graph::Graph g;
  blocks::Ctx c{g, hp, u.n_tokens};
  blocks::decoder_stack(c, w, u.logits);
  return g;
}

}  // namespace rocky::model::arch
