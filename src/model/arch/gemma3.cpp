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
#include <fmt/format.h>

#include <cmath>

#include "core/error.hpp"
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

// The sliding window and the local layers' rope base (no GGUF key for the pattern: llama.cpp's
// fixed 6 for gemma3, 5 local : 1 global).
constexpr gguf::Key k_own_keys[] = {gguf::Key::SLIDING_WINDOW, gguf::Key::ROPE_FREQ_BASE_SWA};

void read_gemma3_keys(const gguf::GgufFile& f, HParams& h) {
  const std::string kw = gguf::arch_key(h.arch_str, gguf::Key::SLIDING_WINDOW);
  const std::string kb = gguf::arch_key(h.arch_str, gguf::Key::ROPE_FREQ_BASE_SWA);
  if (f.has(kw)) {
    const auto v = f.get_uint(kw);
    if (!v || *v > (1u << 30)) fail("{}: metadata key '{}' is not a non-negative integer", f.path(), kw);
    h.n_swa = static_cast<int32_t>(*v);
  }
  h.swa_pattern = h.n_swa > 0 ? 6 : 0;  // llama.cpp's gemma3 rule (no GGUF key)
  if (f.has(kb)) {
    const auto v = f.get_float(kb);
    if (!v || !(*v > 0) || !std::isfinite(*v)) fail("{}: metadata key '{}' must be a positive number", f.path(), kb);
    h.rope_freq_base_swa = static_cast<float>(*v);
  }
}

std::vector<std::string> gemma3_features(const HParams& hp) {
  std::vector<std::string> out = {fmt::format("embeddings ×√n_embd ({:.4g})", std::sqrt(static_cast<float>(hp.n_embd))),
                                  "GELU-tanh FFN (GeGLU)"};
  if (hp.n_swa > 0) {
    int local = 0;
    for (int il = 0; il < hp.n_layer; ++il) local += hp.is_swa_layer(il) ? 1 : 0;
    out.push_back(fmt::format("sliding window {} on {} of {} layers (pattern {}: rope base {:g} local, {:g} global)",
                              hp.n_swa, local, hp.n_layer, hp.swa_pattern, hp.rope_freq_base_swa, hp.rope_freq_base));
  }
  return out;
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
  a.own_keys = k_own_keys;
  a.read_keys = read_gemma3_keys;
  a.features = gemma3_features;
  a.build = build_gemma3;
  a.notes = "embeddings ×√n_embd, q/k norms, post-attention/FFN norms, GELU-tanh FFN, sliding window 5 of 6 layers";
  return a;
}();

}  // namespace rocky::model::arch
