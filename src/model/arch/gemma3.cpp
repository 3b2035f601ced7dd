// gemma3 (Gemma 3 text): llama.cpp src/models/gemma3.cpp.
//   x = token_embd[tokens] · √n_embd
//   per layer il: a = wo · attn(rope_il(qnorm(wq·n)), rope_il(knorm(wk·n)), wv·n),  n = norm(x)·attn_norm
//                 h = x + norm(a)·post_attention_norm
//                 f = down(gelu_tanh(gate·m) * up·m),  m = norm(h)·ffn_norm
//                 x = h + norm(f)·post_ffw_norm
//   logits = output · norm(x)·output_norm   (tied to token_embd unless output.weight)
// Every norm weight is used as stored (llama.cpp's converter already added Gemma's 1). Layer il is
// local (sliding window attention.sliding_window, rope base rope.freq_base_swa, no rope scaling)
// when il % 6 < 5 — llama.cpp's fixed pattern for gemma3 — and global (rope.freq_base, linear
// rope scaling when the file has it: Gemma-3-4B factor 8) otherwise. Without a sliding window in
// the file every layer is global. Query scale 1/√head_dim (llama.cpp's rule for every size but
// 27B, whose files rocky cannot tell apart; not a GGUF key). NeoX rope.
#include <cmath>

#include "model/arch/arch.hpp"
#include "model/blocks.hpp"

namespace rocky::model::arch {
namespace {

graph::Graph build_gemma3(const HParams& hp, const Weights& w, const UbatchSpec& u) {
  using graph::Node;
  using graph::Op;
  graph::Graph g;
  blocks::Ctx c{g, hp, u.n_tokens};
  c.n_out = u.n_out;
  int32_t x = blocks::inp_embd(c, w.tok_embd);
  x = blocks::scale(c, x, std::sqrt(static_cast<float>(hp.n_embd)), "inp_scaled");
  for (int il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& L = w.layers[static_cast<size_t>(il)];
    const bool local = hp.is_swa_layer(il);
    c.rope_base = local ? hp.rope_freq_base_swa : hp.rope_freq_base;
    c.rope_scale = local ? 1.0f : hp.rope_freq_scale;
    c.window = local ? hp.n_swa : 0;
    int32_t cur = blocks::rms_norm(c, x, L.attn_norm, blocks::blk(il, "attn_norm"));
    cur = blocks::self_attention(c, il, cur, L);
    cur = blocks::rms_norm(c, cur, L.post_attn_norm, blocks::blk(il, "attn_post_norm"));
    const int32_t h = blocks::add(c, cur, x, blocks::blk(il, "sa_out"));
    cur = blocks::rms_norm(c, h, L.ffn_norm, blocks::blk(il, "ffn_norm"));
    cur = blocks::ffn_geglu(c, il, cur, L);
    cur = blocks::rms_norm(c, cur, L.post_ffn_norm, blocks::blk(il, "ffn_post_norm"));
    x = blocks::add(c, cur, h, blocks::blk(il, "l_out"));
  }
  blocks::output_head(c, w, x, u.logits);
  return g;
}

}  // namespace

// Registered in arch/registry.cpp (extern: the registry refers to it).
extern const ArchInfo k_gemma3 = [] {
  ArchInfo a;
  a.arch = Arch::GEMMA3;
  a.rope_mode = graph::RopeMode::NEOX;
  a.qk_norm = true;
  a.tied_output = true;
  a.post_norms = true;
  a.swa = true;
  a.build = build_gemma3;
  a.notes = "embeddings ×√n_embd, q/k norms, post-attention/FFN norms, GELU-tanh FFN, sliding window 5 of 6 layers";
  return a;
}();

}  // namespace rocky::model::arch
