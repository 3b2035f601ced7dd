// Shared graph block helpers (see blocks.hpp). Mirrors llama.cpp's llm_build_llama / qwen2 graphs:
//   x = token_embd[tokens]
//   per layer: h = x + wo·attn(rope(wq·norm(x)), rope(wk·norm(x)), wv·norm(x))
//              x = h + down(silu(gate·norm(h)) * up·norm(h))
//   logits = output · norm(x)
#include "model/blocks.hpp"

#include <algorithm>
#include <cmath>

namespace rocky::model::blocks {

using graph::Node;
using graph::Op;

std::string blk(int il, const char* what) { return "blk." + std::to_string(il) + "." + what; }

static int64_t cols(const graph::Graph& g, int32_t id) { return g.nodes[static_cast<size_t>(id)].ne1; }
static int64_t rows(const graph::Graph& g, int32_t id) { return g.nodes[static_cast<size_t>(id)].ne0; }

int32_t inp_embd(Ctx& c, const gguf::TensorInfo* tok_embd) {
  Node n;
  n.op = Op::GET_ROWS;
  n.name = "inp_embd";
  n.ne0 = c.hp.n_embd;
  n.ne1 = c.n_tokens;
  n.weight = tok_embd;
  return c.g.add(std::move(n));
}

int32_t rms_norm(Ctx& c, int32_t x, const gguf::TensorInfo* w, std::string name) {
  Node n;
  n.op = Op::RMS_NORM;
  n.name = std::move(name);
  n.ne0 = rows(c.g, x);
  n.ne1 = cols(c.g, x);
  n.src[0] = x;
  n.weight = w;
  n.eps = c.hp.rms_eps;
  return c.g.add(std::move(n));
}

int32_t matmul(Ctx& c, int32_t x, const gguf::TensorInfo* w, int64_t m, std::string name) {
  Node n;
  n.op = Op::MATMUL;
  n.name = std::move(name);
  n.ne0 = m;
  n.ne1 = cols(c.g, x);
  n.src[0] = x;
  n.weight = w;
  return c.g.add(std::move(n));
}

int32_t add_bias(Ctx& c, int32_t x, const gguf::TensorInfo* b, std::string name) {
  Node n;
  n.op = Op::ADD_BIAS;
  n.name = std::move(name);
  n.ne0 = rows(c.g, x);
  n.ne1 = cols(c.g, x);
  n.src[0] = x;
  n.weight = b;
  return c.g.add(std::move(n));
}

int32_t add(Ctx& c, int32_t a, int32_t b, std::string name) {
  Node n;
  n.op = Op::ADD;
  n.name = std::move(name);
  n.ne0 = rows(c.g, a);
  n.ne1 = cols(c.g, a);
  n.src[0] = a;
  n.src[1] = b;
  return c.g.add(std::move(n));
}

int32_t scale(Ctx& c, int32_t x, float s, std::string name) {
  Node n;
  n.op = Op::SCALE;
  n.name = std::move(name);
  n.ne0 = rows(c.g, x);
  n.ne1 = cols(c.g, x);
  n.src[0] = x;
  n.scale = s;
  return c.g.add(std::move(n));
}

int32_t rope(Ctx& c, int32_t x, int32_t n_head, std::string name) {
  Node n;
  n.op = Op::ROPE;
  n.name = std::move(name);
  n.ne0 = rows(c.g, x);
  n.ne1 = cols(c.g, x);
  n.src[0] = x;
  n.rope.mode = c.hp.rope_mode;
  n.rope.head_dim = c.hp.head_dim;
  n.rope.n_head = n_head;
  n.rope.n_rot = c.hp.n_rot;
  n.rope.freq_base = c.rope_base != 0 ? c.rope_base : c.hp.rope_freq_base;
  n.rope.freq_scale = c.rope_scale != 0 ? c.rope_scale : c.hp.rope_freq_scale;
  n.weight = c.rope_freqs;
  return c.g.add(std::move(n));
}

int32_t kv_store(Ctx& c, int il, int32_t x, int kv, std::string name) {
  Node n;
  n.op = Op::KV_STORE;
  n.name = std::move(name);
  n.ne0 = 0;
  n.ne1 = 0;
  n.src[0] = x;
  n.layer = il;
  n.kv = kv;
  return c.g.add(std::move(n));
}

int32_t rms_norm_heads(Ctx& c, int32_t x, const gguf::TensorInfo* w, int32_t n_head, const std::string& name) {
  const int64_t hd = c.hp.head_dim, n = cols(c.g, x);
  const int32_t heads = c.g.view(x, hd, n_head * n, name + "_heads");
  const int32_t normed = rms_norm(c, heads, w, name + "_normed");
  return c.g.view(normed, hd * n_head, n, name + "_normed_cols");
}

int32_t self_attention(Ctx& c, int il, int32_t x, const LayerWeights& L) {
  const HParams& hp = c.hp;
  int32_t q = matmul(c, x, L.wq, hp.n_embd_q(), blk(il, "attn_q"));
  if (L.bq != nullptr) q = add_bias(c, q, L.bq, blk(il, "attn_q_b"));
  int32_t k = matmul(c, x, L.wk, hp.n_embd_kv(), blk(il, "attn_k"));
  if (L.bk != nullptr) k = add_bias(c, k, L.bk, blk(il, "attn_k_b"));
  int32_t v = matmul(c, x, L.wv, hp.n_embd_kv(), blk(il, "attn_v"));
  if (L.bv != nullptr) v = add_bias(c, v, L.bv, blk(il, "attn_v_b"));
  if (L.q_norm != nullptr) q = rms_norm_heads(c, q, L.q_norm, hp.n_head, blk(il, "Qcur"));
  if (L.k_norm != nullptr) k = rms_norm_heads(c, k, L.k_norm, hp.n_head_kv, blk(il, "Kcur"));
  q = rope(c, q, hp.n_head, blk(il, "Qcur"));
  k = rope(c, k, hp.n_head_kv, blk(il, "Kcur"));
  int32_t ks = kv_store(c, il, k, 0, blk(il, "k_cache_store"));
  int32_t vs = kv_store(c, il, v, 1, blk(il, "v_cache_store"));
  Node a;
  a.op = Op::ATTENTION;
  a.name = blk(il, "kqv_out");
  a.ne0 = hp.n_embd_q();
  a.ne1 = c.n_tokens;
  a.src = {q, ks, vs};
  a.layer = il;
  a.attn.head_dim = hp.head_dim;
  a.attn.n_head = hp.n_head;
  a.attn.n_head_kv = hp.n_head_kv;
  a.attn.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hp.head_dim)));
  a.attn.window = c.window;
  int32_t att = c.g.add(std::move(a));
  return matmul(c, att, L.wo, hp.n_embd, blk(il, "attn_out"));
}

namespace {
// gate = W_gate·x, up = W_up·x, then op(gate, up) (SILU_MUL or GELU_MUL) and W_down.
int32_t ffn_gated(Ctx& c, int il, int32_t x, const LayerWeights& L, Op op, const char* name) {
  int32_t gate = matmul(c, x, L.ffn_gate, c.hp.n_ff, blk(il, "ffn_gate"));
  int32_t up = matmul(c, x, L.ffn_up, c.hp.n_ff, blk(il, "ffn_up"));
  Node n;
  n.op = op;
  n.name = blk(il, name);
  n.ne0 = c.hp.n_ff;
  n.ne1 = cols(c.g, gate);
  n.src[0] = gate;
  n.src[1] = up;
  int32_t s = c.g.add(std::move(n));
  return matmul(c, s, L.ffn_down, c.hp.n_embd, blk(il, "ffn_out"));
}
}  // namespace

int32_t ffn_swiglu(Ctx& c, int il, int32_t x, const LayerWeights& L) {
  return ffn_gated(c, il, x, L, Op::SILU_MUL, "ffn_swiglu");
}

int32_t ffn_geglu(Ctx& c, int il, int32_t x, const LayerWeights& L) {
  return ffn_gated(c, il, x, L, Op::GELU_MUL, "ffn_geglu");
}

void output_head(Ctx& c, const Weights& w, int32_t x, Logits logits) {
  if (logits == Logits::NONE) return;
  const int32_t n_out = std::clamp(c.n_out, 1, c.n_tokens);
  if (logits == Logits::LAST && c.n_tokens > n_out) {
    Node t;
    t.op = Op::TAKE_COLS;
    t.name = "result_last";
    t.ne0 = c.hp.n_embd;
    t.ne1 = n_out;
    t.first_col = c.n_tokens - n_out;
    t.src[0] = x;
    x = c.g.add(std::move(t));
  }
  x = rms_norm(c, x, w.output_norm, "result_norm");
  if (logits == Logits::EMBD) {
    c.g.output = x;
    return;
  }
  c.g.output = matmul(c, x, w.output, c.hp.n_vocab, "result_output");
}

void decoder_stack(Ctx& c, const Weights& w, Logits logits) {
  c.rope_freqs = w.rope_freqs;
  int32_t x = inp_embd(c, w.tok_embd);
  for (int il = 0; il < c.hp.n_layer; ++il) {
    const LayerWeights& L = w.layers[static_cast<size_t>(il)];
    int32_t cur = rms_norm(c, x, L.attn_norm, blk(il, "attn_norm"));
    cur = self_attention(c, il, cur, L);
    int32_t h = add(c, cur, x, blk(il, "ffn_inp"));
    cur = rms_norm(c, h, L.ffn_norm, blk(il, "ffn_norm"));
    cur = ffn_swiglu(c, il, cur, L);
    x = add(c, cur, h, blk(il, "l_out"));
  }
  output_head(c, w, x, logits);
}

graph::Graph build_decoder(const HParams& hp, const Weights& w, const UbatchSpec& u) {
  graph::Graph g;
  Ctx c{g, hp, u.n_tokens};
  c.n_out = u.n_out;
  decoder_stack(c, w, u.logits);
  return g;
}

}  // namespace rocky::model::blocks
