// qwen35 (Qwen3.5 dense hybrid): llama.cpp src/models/qwen35.cpp and delta-net-base.cpp; the layout
// is described in ../shared/reference/README.md ("How synth-qwen35 lays out Qwen3.5").
//   x = token_embd[tokens]
//   per layer il: n = norm(x)·attn_norm
//     recurrent layer ((il + 1) % full_attention_interval ≠ 0), Gated DeltaNet:
//       c = silu(causal_conv1d(attn_qkv·n))          (conv state: the last K−1 inputs)
//       o = gated_delta(c; a = ssm_alpha·n + ssm_dt.bias, b = ssm_beta·n, A = ssm_a)   (state S)
//       y = ssm_out · (norm_heads(o)·ssm_norm · silu(attn_gate·n))
//     full-attention layer: [q | gate] per head = attn_q·n; q, k per-head RMSNorm, NeoX rope on
//       rope.dimension_count dims (IMROPE with text positions), causal GQA attention,
//       y = attn_output · (attn · sigmoid(gate))
//     h = x + y;  x = h + down(silu(gate·m) * up·m),  m = norm(h)·post_attention_norm
//   logits = output · norm(x)·output_norm   (tied to token_embd unless output.weight)
// Every norm is used as stored (the converter already added HF's 1, except ssm_norm, stored as is).
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "model/arch/arch.hpp"
#include "model/blocks.hpp"

namespace rocky::model::arch {
namespace {

using blocks::blk;
using graph::Node;
using graph::Op;

int32_t take_rows(blocks::Ctx& c, int32_t x, int64_t first, int64_t n, std::string name) {
  Node t;
  t.op = Op::TAKE_ROWS;
  t.name = std::move(name);
  t.ne0 = n;
  t.ne1 = c.g.nodes[static_cast<size_t>(x)].ne1;
  t.first_row = first;
  t.src[0] = x;
  return c.g.add(std::move(t));
}

int32_t binary(blocks::Ctx& c, Op op, int32_t a, int32_t b, std::string name) {
  const Node& s = c.g.nodes[static_cast<size_t>(a)];
  Node n;
  n.op = op;
  n.name = std::move(name);
  n.ne0 = s.ne0;
  n.ne1 = s.ne1;
  n.src = {a, b, -1};
  return c.g.add(std::move(n));
}

// Gated DeltaNet: the linear-attention block of layer il on the normed input x [n_embd, N].
int32_t linear_attention(blocks::Ctx& c, int il, int32_t x, const LayerWeights& L) {
  const HParams& hp = c.hp;
  const int64_t N = c.n_tokens, hv = hp.ssm_dt_rank, dv = hp.ssm_head_v_dim();
  const int32_t qkv = blocks::matmul(c, x, L.wqkv, hp.ssm_conv_channels(), blk(il, "attn_qkv"));
  const int32_t z = blocks::matmul(c, x, L.wgate, hp.ssm_d_inner, blk(il, "z"));
  const int32_t beta = blocks::matmul(c, x, L.ssm_beta, hv, blk(il, "beta"));
  int32_t alpha = blocks::matmul(c, x, L.ssm_alpha, hv, blk(il, "alpha"));
  alpha = blocks::add_bias(c, alpha, L.ssm_dt_bias, blk(il, "alpha_biased"));
  Node cv;
  cv.op = Op::SSM_CONV;
  cv.name = blk(il, "conv_output_silu");
  cv.ne0 = hp.ssm_conv_channels();
  cv.ne1 = N;
  cv.src[0] = qkv;
  cv.weight = L.ssm_conv1d;
  cv.layer = il;
  const int32_t conv = c.g.add(std::move(cv));
  Node d;
  d.op = Op::GATED_DELTA;
  d.name = blk(il, "attn_output");
  d.ne0 = hp.ssm_d_inner;
  d.ne1 = N;
  d.src = {conv, alpha, beta};
  d.weight = L.ssm_a;
  d.layer = il;
  d.ssm = graph::SsmParams{hp.ssm_n_group, hp.ssm_dt_rank, hp.ssm_d_state, hp.ssm_head_v_dim(), hp.rms_eps};
  const int32_t o = c.g.add(std::move(d));
  const int32_t heads = c.g.view(o, dv, hv * N, blk(il, "attn_output_heads"));
  const int32_t normed = blocks::rms_norm(c, heads, L.ssm_norm, blk(il, "delta_norm"));
  const int32_t cols = c.g.view(normed, dv * hv, N, blk(il, "delta_norm_cols"));
  Node sm;  // silu(z) · normed
  sm.op = Op::SILU_MUL;
  sm.name = blk(il, "final_output");
  sm.ne0 = hp.ssm_d_inner;
  sm.ne1 = N;
  sm.src = {z, cols, -1};
  const int32_t gated = c.g.add(std::move(sm));
  return blocks::matmul(c, gated, L.ssm_out, hp.n_embd, blk(il, "linear_attn_out"));
}

// Gated full attention of layer il on the normed input x [n_embd, N].
int32_t gated_attention(blocks::Ctx& c, int il, int32_t x, const LayerWeights& L) {
  const HParams& hp = c.hp;
  const int64_t N = c.n_tokens, hd = hp.head_dim, nh = hp.n_head;
  const int32_t qg = blocks::matmul(c, x, L.wq, 2 * hp.n_embd_q(), blk(il, "attn_q"));
  const int32_t qg_heads = c.g.view(qg, 2 * hd, nh * N, blk(il, "attn_q_heads"));
  int32_t q = take_rows(c, qg_heads, 0, hd, blk(il, "Qcur_heads"));
  q = blocks::rms_norm(c, q, L.q_norm, blk(il, "Qcur_normed"));
  q = c.g.view(q, hd * nh, N, blk(il, "Qcur_normed_cols"));
  const int32_t gate_heads = take_rows(c, qg_heads, hd, hd, blk(il, "gate_heads"));
  const int32_t gate = c.g.view(gate_heads, hd * nh, N, blk(il, "gate"));
  int32_t k = blocks::matmul(c, x, L.wk, hp.n_embd_kv(), blk(il, "attn_k"));
  k = blocks::rms_norm_heads(c, k, L.k_norm, hp.n_head_kv, blk(il, "Kcur"));
  const int32_t v = blocks::matmul(c, x, L.wv, hp.n_embd_kv(), blk(il, "attn_v"));
  q = blocks::rope(c, q, hp.n_head, blk(il, "Qcur"));
  k = blocks::rope(c, k, hp.n_head_kv, blk(il, "Kcur"));
  const int32_t ks = blocks::kv_store(c, il, k, 0, blk(il, "k_cache_store"));
  const int32_t vs = blocks::kv_store(c, il, v, 1, blk(il, "v_cache_store"));
  Node a;
  a.op = Op::ATTENTION;
  a.name = blk(il, "kqv_out");
  a.ne0 = hp.n_embd_q();
  a.ne1 = N;
  a.src = {q, ks, vs};
  a.layer = il;
  a.attn.head_dim = hp.head_dim;
  a.attn.n_head = hp.n_head;
  a.attn.n_head_kv = hp.n_head_kv;
  a.attn.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hp.head_dim)));
  const int32_t att = c.g.add(std::move(a));
  const int32_t gated = binary(c, Op::SIGMOID_MUL, att, gate, blk(il, "attn_gated"));
  return blocks::matmul(c, gated, L.wo, hp.n_embd, blk(il, "attn_out"));
}

graph::Graph build_qwen35(const HParams& hp, const Weights& w, const UbatchSpec& u) {
  graph::Graph g;
  blocks::Ctx c{g, hp, u.n_tokens};
  int32_t x = blocks::inp_embd(c, w.tok_embd);
  for (int il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& L = w.layers[static_cast<size_t>(il)];
    int32_t cur = blocks::rms_norm(c, x, L.attn_norm, blk(il, "attn_norm"));
    cur = hp.is_recurrent_layer(il) ? linear_attention(c, il, cur, L) : gated_attention(c, il, cur, L);
    const int32_t h = blocks::add(c, cur, x, blk(il, "ffn_inp"));
    cur = blocks::rms_norm(c, h, L.ffn_norm, blk(il, "attn_post_norm"));
    cur = blocks::ffn_swiglu(c, il, cur, L);
    x = blocks::add(c, cur, h, blk(il, "l_out"));
  }
  blocks::output_head(c, w, x, u.logits);
  return g;
}

// The Gated DeltaNet shapes, the attention interval and the IMROPE sections.
constexpr gguf::Key k_own_keys[] = {gguf::Key::FULL_ATTENTION_INTERVAL, gguf::Key::SSM_CONV_KERNEL,
                                    gguf::Key::SSM_INNER_SIZE,          gguf::Key::SSM_STATE_SIZE,
                                    gguf::Key::SSM_TIME_STEP_RANK,      gguf::Key::SSM_GROUP_COUNT,
                                    gguf::Key::ROPE_DIMENSION_SECTIONS};

// qwen35: the Gated DeltaNet shapes and the IMROPE sections. Text tokens get the positions
// (p, p, p, 0) (llama.cpp), so a rotated pair whose section is t, h or w turns by p — plain NeoX
// rope — and a pair in the fourth section would not turn at all; rocky implements the former only
// and refuses sections that put a rotated pair in the fourth.
void read_qwen35_keys(const gguf::GgufFile& f, HParams& h) {
  auto key = [&](gguf::Key k) { return gguf::arch_key(h.arch_str, k); };
  auto req = [&](gguf::Key k) { return checked_dim(f, key(k), f.get_uint(key(k)), true, 0); };
  h.full_attn_interval = req(gguf::Key::FULL_ATTENTION_INTERVAL);
  h.ssm_conv_kernel = req(gguf::Key::SSM_CONV_KERNEL);
  h.ssm_d_state = req(gguf::Key::SSM_STATE_SIZE);
  h.ssm_n_group = req(gguf::Key::SSM_GROUP_COUNT);
  h.ssm_dt_rank = req(gguf::Key::SSM_TIME_STEP_RANK);
  h.ssm_d_inner = req(gguf::Key::SSM_INNER_SIZE);
  if (h.ssm_d_inner % h.ssm_dt_rank != 0) {
    fail("{}: '{}' ({}) is not a multiple of '{}' ({})", f.path(), key(gguf::Key::SSM_INNER_SIZE), h.ssm_d_inner,
         key(gguf::Key::SSM_TIME_STEP_RANK), h.ssm_dt_rank);
  }
  if (h.ssm_dt_rank % h.ssm_n_group != 0) {
    fail("{}: '{}' ({}) is not a multiple of '{}' ({})", f.path(), key(gguf::Key::SSM_TIME_STEP_RANK), h.ssm_dt_rank,
         key(gguf::Key::SSM_GROUP_COUNT), h.ssm_n_group);
  }
  if (h.ssm_conv_kernel < 2 || h.ssm_conv_kernel > 16) {
    fail("{}: '{}' = {} is outside the supported 2..16", f.path(), key(gguf::Key::SSM_CONV_KERNEL), h.ssm_conv_kernel);
  }
  if (h.ssm_d_state > 256 || h.ssm_head_v_dim() > 256) {
    fail("{}: linear-attention head dims {} / {} exceed the supported 256", f.path(), h.ssm_d_state,
         h.ssm_head_v_dim());
  }
  const std::string ks = key(gguf::Key::ROPE_DIMENSION_SECTIONS);
  if (const gguf::Value* v = f.find(ks)) {
    if (v->type != gguf::ValueType::ARRAY || v->count != 4 ||
        (v->elem_type != gguf::ValueType::I32 && v->elem_type != gguf::ValueType::U32)) {
      fail("{}: metadata key '{}' must be an array of 4 integers", f.path(), ks);
    }
    int32_t sec[4];
    std::memcpy(sec, v->raw, sizeof(sec));
    const int64_t dims = int64_t(sec[0]) + sec[1] + sec[2] + sec[3];
    for (int32_t i = 0; i < h.n_rot / 2; ++i) {
      // ggml's IMROPE: sector = i mod Σsections; t when sector % 3 == 0 and sector < 3·s0, h when
      // % 3 == 1 and < 3·s1, w when % 3 == 2 and < 3·s2, else the fourth section.
      const int64_t sector = dims > 0 ? i % dims : 0;
      const bool thw = (sector % 3 == 0 && sector < 3 * int64_t(sec[0])) ||
                       (sector % 3 == 1 && sector < 3 * int64_t(sec[1])) ||
                       (sector % 3 == 2 && sector < 3 * int64_t(sec[2]));
      if (!thw || sec[0] < 0 || sec[1] < 0 || sec[2] < 0 || sec[3] < 0) {
        fail(
            "{}: '{}' = [{}, {}, {}, {}] puts rotated pair {} of {} outside the t/h/w sections; rocky implements "
            "text positions only for sections that cover every rotated pair",
            f.path(), ks, sec[0], sec[1], sec[2], sec[3], i, h.n_rot / 2);
      }
    }
  }
}

// qwen35: a Gated DeltaNet layer or a gated full-attention layer, both with the SiLU FFN
// after post_attention_norm (bound as ffn_norm).
void bind_qwen35_layer(const gguf::GgufFile& f, const HParams& hp, int il, LayerWeights& L) {
  auto layer = [&](gguf::Tensor t, int64_t ne0, int64_t ne1, const char* suffix = "weight") {
    return bind_tensor(f, gguf::tensor_name(t, il, suffix), ne0, ne1);
  };
  if (hp.is_recurrent_layer(il)) {
    const int64_t hv = hp.ssm_dt_rank;
    L.wqkv = layer(gguf::Tensor::ATTN_QKV, hp.n_embd, hp.ssm_conv_channels());
    L.wgate = layer(gguf::Tensor::ATTN_GATE, hp.n_embd, hp.ssm_d_inner);
    L.ssm_conv1d = layer(gguf::Tensor::SSM_CONV1D, hp.ssm_conv_kernel, hp.ssm_conv_channels());
    if (L.ssm_conv1d->type != DType::F32) fail("{}: tensor '{}' must be f32", f.path(), L.ssm_conv1d->name);
    L.ssm_a = layer(gguf::Tensor::SSM_A, hv, 0, "");
    L.ssm_alpha = layer(gguf::Tensor::SSM_ALPHA, hp.n_embd, hv);
    L.ssm_beta = layer(gguf::Tensor::SSM_BETA, hp.n_embd, hv);
    L.ssm_dt_bias = layer(gguf::Tensor::SSM_DT, hv, 0, "bias");
    L.ssm_norm = layer(gguf::Tensor::SSM_NORM, hp.ssm_head_v_dim(), 0);
    L.ssm_out = layer(gguf::Tensor::SSM_OUT, hp.ssm_d_inner, hp.n_embd);
  } else {
    L.wq = layer(gguf::Tensor::ATTN_Q, hp.n_embd, 2 * int64_t(hp.n_embd_q()));
    L.wk = layer(gguf::Tensor::ATTN_K, hp.n_embd, hp.n_embd_kv());
    L.wv = layer(gguf::Tensor::ATTN_V, hp.n_embd, hp.n_embd_kv());
    L.wo = layer(gguf::Tensor::ATTN_OUTPUT, hp.n_embd_q(), hp.n_embd);
    L.q_norm = layer(gguf::Tensor::ATTN_Q_NORM, hp.head_dim, 0);
    L.k_norm = layer(gguf::Tensor::ATTN_K_NORM, hp.head_dim, 0);
  }
  L.ffn_norm = layer(gguf::Tensor::ATTN_POST_NORM, hp.n_embd, 0);
  L.ffn_gate = layer(gguf::Tensor::FFN_GATE, hp.n_embd, hp.n_ff);
  L.ffn_up = layer(gguf::Tensor::FFN_UP, hp.n_embd, hp.n_ff);
  L.ffn_down = layer(gguf::Tensor::FFN_DOWN, hp.n_ff, hp.n_embd);
}

std::vector<std::string> qwen35_features(const HParams& hp) {
  int rec = 0;
  for (int il = 0; il < hp.n_layer; ++il) rec += hp.is_recurrent_layer(il) ? 1 : 0;
  return {
      fmt::format("Gated DeltaNet linear attention on {} of {} layers ({} k / {} v heads, dims {} / {}, conv {}), "
                  "gated full attention every {}th with partial rope {} of {}",
                  rec, hp.n_layer, hp.ssm_n_group, hp.ssm_dt_rank, hp.ssm_d_state, hp.ssm_head_v_dim(),
                  hp.ssm_conv_kernel, hp.full_attn_interval, hp.n_rot, hp.head_dim)};
}

}  // namespace

// Registered in arch/registry.cpp (extern: the registry refers to it).
extern const ArchInfo k_qwen35 = [] {
  ArchInfo a;
  a.arch = Arch::QWEN35;
  a.rope_mode = graph::RopeMode::NEOX;
  a.qk_norm = true;
  a.tied_output = true;
  a.hybrid = true;
  a.own_keys = k_own_keys;
  a.read_keys = read_qwen35_keys;
  a.bind_layer = bind_qwen35_layer;
  a.features = qwen35_features;
  a.build = build_qwen35;
  a.notes =
      "hybrid: Gated DeltaNet linear attention (conv1d + gated delta rule) on 3 of 4 layers, gated full "
      "attention with q/k norms and partial rope on every 4th";
  return a;
}();

}  // namespace rocky::model::arch
