// Model loading, binding and graph dispatch (see model.hpp).
#include "model/model.hpp"

#include <unordered_set>

#include "core/error.hpp"
#include "model/arch/arch.hpp"

namespace rocky::model {

using gguf::Tensor;
using gguf::tensor_name;

const gguf::TensorInfo* bind_tensor(const gguf::GgufFile& f, const std::string& name, int64_t ne0, int64_t ne1,
                                    bool optional) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) {
    if (optional) return nullptr;
    fail("{}: missing tensor '{}' (required by architecture {})", f.path(), name, f.architecture());
  }
  const bool is_1d = ne1 == 0;
  const uint64_t want1 = is_1d ? 1 : static_cast<uint64_t>(ne1);
  if (t->ne[0] != static_cast<uint64_t>(ne0) || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1) {
    fail("{}: tensor '{}' has shape [{}, {}, {}, {}], expected [{}, {}]", f.path(), name, t->ne[0], t->ne[1], t->ne[2],
         t->ne[3], ne0, want1);
  }
  const DTypeInfo& ti = dtype_info(t->type);
  if (!ti.computable) {
    fail("{}: tensor '{}' has type {}, which rocky cannot compute yet", f.path(), name, ti.name);
  }
  if (is_1d && t->type != DType::F32) {
    fail("{}: tensor '{}' has type {}, expected f32 (norm weights and biases)", f.path(), name, ti.name);
  }
  return t;
}

namespace {

// Binds the tensors of a llama-style decoder with the architecture's optional parts (or its own
// layer binding, ArchInfo::bind_layer).
void bind_weights(const gguf::GgufFile& f, const HParams& hp, const arch::ArchInfo& a, Weights& w) {
  auto global = [&](Tensor t, int64_t ne0, int64_t ne1, bool optional = false) {
    return bind_tensor(f, tensor_name(t), ne0, ne1, optional);
  };
  w.tok_embd = global(Tensor::TOKEN_EMBD, hp.n_embd, hp.n_vocab);
  w.output_norm = global(Tensor::OUTPUT_NORM, hp.n_embd, 0);
  // llama.cpp falls back to token_embd when output.weight is absent, for every architecture here.
  w.output = global(Tensor::OUTPUT, hp.n_embd, hp.n_vocab, /*optional=*/true);
  w.tied_output = w.output == nullptr;
  if (w.tied_output) w.output = w.tok_embd;
  if (a.rope_freqs) w.rope_freqs = global(Tensor::ROPE_FREQS, hp.n_rot / 2, 0, /*optional=*/true);
  for (int il = 0; il < hp.n_layer; ++il) {
    auto layer = [&](Tensor t, int64_t ne0, int64_t ne1, const char* suffix = "weight") {
      return bind_tensor(f, tensor_name(t, il, suffix), ne0, ne1);
    };
    LayerWeights L;
    L.attn_norm = layer(Tensor::ATTN_NORM, hp.n_embd, 0);
    if (a.bind_layer != nullptr) {
      a.bind_layer(f, hp, il, L);
      w.layers.push_back(L);
      continue;
    }
    L.wq = layer(Tensor::ATTN_Q, hp.n_embd, hp.n_embd_q());
    L.wk = layer(Tensor::ATTN_K, hp.n_embd, hp.n_embd_kv());
    L.wv = layer(Tensor::ATTN_V, hp.n_embd, hp.n_embd_kv());
    L.wo = layer(Tensor::ATTN_OUTPUT, hp.n_embd_q(), hp.n_embd);
    if (a.qkv_bias) {
      L.bq = layer(Tensor::ATTN_Q, hp.n_embd_q(), 0, "bias");
      L.bk = layer(Tensor::ATTN_K, hp.n_embd_kv(), 0, "bias");
      L.bv = layer(Tensor::ATTN_V, hp.n_embd_kv(), 0, "bias");
    }
    if (a.qk_norm) {
      L.q_norm = layer(Tensor::ATTN_Q_NORM, hp.head_dim, 0);
      L.k_norm = layer(Tensor::ATTN_K_NORM, hp.head_dim, 0);
    }
    L.ffn_norm = layer(Tensor::FFN_NORM, hp.n_embd, 0);
    L.ffn_gate = layer(Tensor::FFN_GATE, hp.n_embd, hp.n_ff);
    L.ffn_up = layer(Tensor::FFN_UP, hp.n_embd, hp.n_ff);
    L.ffn_down = layer(Tensor::FFN_DOWN, hp.n_ff, hp.n_embd);
    if (a.post_norms) {
      L.post_attn_norm = layer(Tensor::ATTN_POST_NORM, hp.n_embd, 0);
      L.post_ffn_norm = layer(Tensor::FFN_POST_NORM, hp.n_embd, 0);
    }
    w.layers.push_back(L);
  }
}

// Tensors a file may hold that no graph reads and that cannot change the result: old llama files'
// precomputed rope tables (blk.N.attn_rot_embd; llama.cpp skips them too).
bool known_harmless(std::string_view name) {
  // A reranker's classification head: outside the forward graph, applied by `rocky serve
  // --reranking` to the pooled hidden state (server/embedding.hpp), and refused there if absent.
  if (name == "cls.weight" || name == "cls.bias" || name == "cls.output.weight" || name == "cls.output.bias")
    return true;
  const auto t = gguf::parse_tensor_name(name);
  return t && t->tensor == Tensor::ATTN_ROT_EMBD;
}

// Nothing that changes the math is ignored: every tensor of the file is bound.
void check_all_bound(const gguf::GgufFile& f, const Weights& w) {
  std::unordered_set<const gguf::TensorInfo*> bound = {w.tok_embd, w.output_norm, w.output, w.rope_freqs};
  for (const LayerWeights& L : w.layers) {
    for (const gguf::TensorInfo* t : {L.attn_norm,
                                      L.wq,
                                      L.wk,
                                      L.wv,
                                      L.bq,
                                      L.bk,
                                      L.bv,
                                      L.q_norm,
                                      L.k_norm,
                                      L.wo,
                                      L.ffn_norm,
                                      L.ffn_gate,
                                      L.ffn_up,
                                      L.ffn_down,
                                      L.post_attn_norm,
                                      L.post_ffn_norm,
                                      L.wqkv,
                                      L.wgate,
                                      L.ssm_conv1d,
                                      L.ssm_a,
                                      L.ssm_alpha,
                                      L.ssm_beta,
                                      L.ssm_dt_bias,
                                      L.ssm_norm,
                                      L.ssm_out}) {
      bound.insert(t);
    }
  }
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (bound.count(&t) || known_harmless(t.name)) continue;
    fail(
        "{}: tensor '{}' is not read by rocky's {} graph; it may change the math, so the model is refused rather "
        "than run with it ignored",
        f.path(), t.name, f.architecture());
  }
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path) {
  std::unique_ptr<Model> m(new Model(gguf::GgufFile::open(path)));
  m->hp_ = read_hparams(m->file_);
  bind_weights(m->file_, m->hp_, arch::arch_info(m->hp_.arch), m->w_);
  check_all_bound(m->file_, m->w_);
  return m;
}

graph::Graph Model::build_graph(const UbatchSpec& u) const {
  if (u.n_tokens <= 0) fail("build_graph: empty ubatch");
  if (u.n_past < 0 || u.n_past + u.n_tokens > u.n_ctx) {
    fail("context full: {} cached + {} new tokens exceed the context size {} (raise -c)", u.n_past, u.n_tokens,
         u.n_ctx);
  }
  graph::Graph g = arch::arch_info(hp_.arch).build(hp_, w_, u);
  g.n_tokens = u.n_tokens;
  g.n_past = u.n_past;
  g.kv = graph::KvShape{hp_.n_layer, hp_.n_embd_kv(), u.n_ctx};
  if (u.n_ring > 0 && u.n_ring < u.n_ctx) {  // the sliding-window layers' KV as a ring (graph.hpp KvShape)
    g.kv.ring.assign(static_cast<size_t>(hp_.n_layer), 0);
    for (const graph::Node& n : g.nodes)
      if (n.op == graph::Op::ATTENTION && n.attn.window > 0 && n.layer >= 0 && n.layer < hp_.n_layer) {
        if (u.n_ring < n.attn.window + 1)
          fail("build_graph: a KV ring of {} cells is shorter than the sliding window {}", u.n_ring, n.attn.window);
        g.kv.ring[static_cast<size_t>(n.layer)] = 1;
      }
    g.kv.n_ring = u.n_ring;
  }
  if (arch::arch_info(hp_.arch).hybrid) {  // the recurrent layers' state (graph.hpp KvShape)
    g.kv.conv_state = int64_t(hp_.ssm_conv_kernel - 1) * hp_.ssm_conv_channels();
    g.kv.ssm_state = int64_t(hp_.ssm_dt_rank) * hp_.ssm_d_state * hp_.ssm_head_v_dim();
  }
  return g;
}

}  // namespace rocky::model
