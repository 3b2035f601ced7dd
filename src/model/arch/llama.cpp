// llama (Llama 2 / TinyStories): pre-norm decoder, normal (adjacent-pair) rope, no biases, untied
// output (falls back to token_embd.weight when output.weight is absent, as llama.cpp does).
#include "model/arch/arch.hpp"
#include "model/blocks.hpp"

namespace rocky::model::arch {

void bind_llama(const gguf::GgufFile& f, const HParams& hp, Weights& w) {
  w.tok_embd = bind_tensor(f, "token_embd.weight", hp.n_embd, hp.n_vocab);
  w.output_norm = bind_tensor(f, "output_norm.weight", hp.n_embd, 0);
  w.output = bind_tensor(f, "output.weight", hp.n_embd, hp.n_vocab, /*optional=*/true);
  w.tied_output = w.output == nullptr;
  if (w.tied_output) w.output = w.tok_embd;
  for (int il = 0; il < hp.n_layer; ++il) w.layers.push_back(bind_common_layer(f, hp, il));
}

graph::Graph build_llama(const HParams& hp, const Weights& w, const UbatchSpec& u) {
  graph::Graph g;
  blocks::Ctx c{g, hp, u.n_tokens};
  blocks::decoder_stack(c, w, u.logits);
  return g;
}

}  // namespace rocky::model::arch
