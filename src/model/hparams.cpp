// Hyper-parameters from GGUF metadata (see hparams.hpp).
#include "model/hparams.hpp"

#include <cmath>

#include "core/error.hpp"

namespace rocky::model {
namespace {

int32_t req_int(const gguf::GgufFile& f, const std::string& key) {
  auto v = f.get_uint(key);
  if (!v) fail("{}: missing required metadata key '{}'", f.path(), key);
  if (*v == 0 || *v > (1u << 30)) fail("{}: metadata key '{}' has impossible value {}", f.path(), key, *v);
  return static_cast<int32_t>(*v);
}

int32_t opt_int(const gguf::GgufFile& f, const std::string& key, int32_t dflt) {
  auto v = f.get_uint(key);
  if (!v) return dflt;
  if (*v == 0 || *v > (1u << 30)) fail("{}: metadata key '{}' has impossible value {}", f.path(), key, *v);
  return static_cast<int32_t>(*v);
}

}  // namespace

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::LLAMA: return "llama";
    case Arch::QWEN2: return "qwen2";
  }
  return "?";
}

HParams read_hparams(const gguf::GgufFile& f) {
  HParams h;
  h.arch_str = std::string(f.architecture());
  if (h.arch_str == "llama") {
    h.arch = Arch::LLAMA;
    h.rope_mode = graph::RopeMode::NORMAL;
  } else if (h.arch_str == "qwen2") {
    h.arch = Arch::QWEN2;
    h.rope_mode = graph::RopeMode::NEOX;
  } else {
    fail("{}: unsupported architecture '{}' (general.architecture); rocky supports: llama, qwen2",
         f.path(), h.arch_str);
  }
  const std::string a = h.arch_str + ".";
  h.n_layer = req_int(f, a + "block_count");
  h.n_embd = req_int(f, a + "embedding_length");
  h.n_ff = req_int(f, a + "feed_forward_length");
  h.n_head = req_int(f, a + "attention.head_count");
  h.n_head_kv = opt_int(f, a + "attention.head_count_kv", h.n_head);
  if (h.n_head % h.n_head_kv != 0) {
    fail("{}: {}attention.head_count ({}) is not a multiple of head_count_kv ({})", f.path(), a, h.n_head,
         h.n_head_kv);
  }
  if (h.n_embd % h.n_head != 0 && !f.has(a + "attention.key_length")) {
    fail("{}: {}embedding_length ({}) is not a multiple of head_count ({})", f.path(), a, h.n_embd, h.n_head);
  }
  h.head_dim = opt_int(f, a + "attention.key_length", h.n_embd / h.n_head);
  int32_t vdim = opt_int(f, a + "attention.value_length", h.head_dim);
  if (vdim != h.head_dim) {
    fail("{}: {}attention.value_length ({}) != key_length ({}) is not supported", f.path(), a, vdim, h.head_dim);
  }
  h.n_rot = opt_int(f, a + "rope.dimension_count", h.head_dim);
  if (h.n_rot > h.head_dim || h.n_rot % 2 != 0) {
    fail("{}: {}rope.dimension_count ({}) must be even and at most head_dim ({})", f.path(), a, h.n_rot,
         h.head_dim);
  }
  h.rope_freq_base = static_cast<float>(f.get_float(a + "rope.freq_base").value_or(10000.0));
  if (!(h.rope_freq_base > 0)) fail("{}: {}rope.freq_base must be positive", f.path(), a);
  if (auto st = f.get_string(a + "rope.scaling.type"); st && *st != "none" && *st != "linear") {
    fail("{}: {}rope.scaling.type '{}' is not supported (none, linear)", f.path(), a, *st);
  }
  double factor = f.get_float(a + "rope.scaling.factor").value_or(0.0);
  if (factor < 0 || !std::isfinite(factor)) fail("{}: {}rope.scaling.factor must be positive", f.path(), a);
  h.rope_freq_scale = factor == 0.0 ? 1.0f : static_cast<float>(1.0 / factor);
  auto eps = f.get_float(a + "attention.layer_norm_rms_epsilon");
  if (!eps) fail("{}: missing required metadata key '{}attention.layer_norm_rms_epsilon'", f.path(), a);
  if (!(*eps > 0) || !std::isfinite(*eps)) fail("{}: {}attention.layer_norm_rms_epsilon must be positive", f.path(), a);
  h.rms_eps = static_cast<float>(*eps);
  h.n_ctx_train = opt_int(f, a + "context_length", 2048);
  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  if (emb == nullptr) fail("{}: missing tensor 'token_embd.weight'", f.path());
  if (emb->ne[0] != static_cast<uint64_t>(h.n_embd) || emb->ne[1] == 0 || emb->ne[1] > (1u << 30)) {
    fail("{}: tensor 'token_embd.weight' has shape [{}, {}], expected [{}, n_vocab]", f.path(), emb->ne[0],
         emb->ne[1], h.n_embd);
  }
  h.n_vocab = static_cast<int32_t>(emb->ne[1]);
  if (auto vs = f.get_uint(a + "vocab_size"); vs && *vs != emb->ne[1]) {
    fail("{}: {}vocab_size ({}) != token_embd.weight rows ({})", f.path(), a, *vs, emb->ne[1]);
  }
  return h;
}

}  // namespace rocky::model
