// Model loading, binding and graph dispatch (see model.hpp).
#include "model/model.hpp"

#include "core/error.hpp"
#include "model/arch/arch.hpp"

namespace rocky::model {

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
    fail("{}: tensor '{}' has shape [{}, {}, {}, {}], expected [{}, {}]", f.path(), name, t->ne[0], t->ne[1],
         t->ne[2], t->ne[3], ne0, want1);
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

namespace arch {

LayerWeights bind_common_layer(const gguf::GgufFile& f, const HParams& hp, int il) {
  const std::string p = "blk." + std::to_string(il) + ".";
  LayerWeights L;
  L.attn_norm = bind_tensor(f, p + "attn_norm.weight", hp.n_embd, 0);
  L.wq = bind_tensor(f, p + "attn_q.weight", hp.n_embd, hp.n_embd_q());
  L.wk = bind_tensor(f, p + "attn_k.weight", hp.n_embd, hp.n_embd_kv());
  L.wv = bind_tensor(f, p + "attn_v.weight", hp.n_embd, hp.n_embd_kv());
  L.wo = bind_tensor(f, p + "attn_output.weight", hp.n_embd_q(), hp.n_embd);
  L.ffn_norm = bind_tensor(f, p + "ffn_norm.weight", hp.n_embd, 0);
  L.ffn_gate = bind_tensor(f, p + "ffn_gate.weight", hp.n_embd, hp.n_ff);
  L.ffn_up = bind_tensor(f, p + "ffn_up.weight", hp.n_embd, hp.n_ff);
  L.ffn_down = bind_tensor(f, p + "ffn_down.weight", hp.n_ff, hp.n_embd);
  return L;
}

}  // namespace arch

std::unique_ptr<Model> Model::load(const std::string& path) {
  std::unique_ptr<Model> m(new Model(gguf::GgufFile::open(path)));
  m->hp_ = read_hparams(m->file_);
  switch (m->hp_.arch) {
    case Arch::LLAMA: arch::bind_llama(m->file_, m->hp_, m->w_); break;
    case Arch::QWEN2: arch::bind_qwen2(m->file_, m->hp_, m->w_); break;
  }
  return m;
}

graph::Graph Model::build_graph(const UbatchSpec& u) const {
  if (u.n_tokens <= 0) fail("build_graph: empty ubatch");
  if (u.n_past < 0 || u.n_past + u.n_tokens > u.n_ctx) {
    fail("context full: {} cached + {} new tokens exceed the context size {} (raise -c)", u.n_past,
         u.n_tokens, u.n_ctx);
  }
  graph::Graph g;
  switch (hp_.arch) {
    case Arch::LLAMA: g = arch::build_llama(hp_, w_, u); break;
    case Arch::QWEN2: g = arch::build_qwen2(hp_, w_, u); break;
  }
  g.n_tokens = u.n_tokens;
  g.n_past = u.n_past;
  g.kv = graph::KvShape{hp_.n_layer, hp_.n_embd_kv(), u.n_ctx};
  return g;
}

}  // namespace rocky::model
