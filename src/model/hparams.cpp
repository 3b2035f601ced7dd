// Hyper-parameters from GGUF metadata (see hparams.hpp).
#include "model/hparams.hpp"

#include <algorithm>
#include <cmath>
#include <span>

#include "core/error.hpp"
#include "gguf/summary.hpp"
#include "model/arch/arch.hpp"

namespace rocky::model {
namespace {

using gguf::Key;

enum class Kind { INT, FLOAT, STRING, ANY };

// How rocky treats an `<arch>.*` key: read (the graph honours it), harmless (the value cannot
// change the math; checked against `harmless` where a value matters), or refused.
struct KeyRule {
  Key key;
  Kind kind;
  bool honoured;
  // For keys that are harmless only at one value (e.g. expert_count 0): the value; NaN = any value.
  double harmless_value;
};

constexpr double k_any = NAN;
constexpr double k_refuse = -12345.0;  // no value is harmless

constexpr KeyRule k_rules[] = {
    {Key::BLOCK_COUNT, Kind::INT, true, k_any},
    {Key::CONTEXT_LENGTH, Kind::INT, true, k_any},
    {Key::EMBEDDING_LENGTH, Kind::INT, true, k_any},
    {Key::FEED_FORWARD_LENGTH, Kind::INT, true, k_any},
    {Key::VOCAB_SIZE, Kind::INT, true, k_any},
    {Key::HEAD_COUNT, Kind::INT, true, k_any},
    {Key::HEAD_COUNT_KV, Kind::INT, true, k_any},
    {Key::KEY_LENGTH, Kind::INT, true, k_any},
    {Key::VALUE_LENGTH, Kind::INT, true, k_any},
    {Key::RMS_EPS, Kind::FLOAT, true, k_any},
    {Key::ROPE_DIMENSION_COUNT, Kind::INT, true, k_any},
    {Key::ROPE_FREQ_BASE, Kind::FLOAT, true, k_any},
    {Key::ROPE_SCALING_TYPE, Kind::STRING, true, k_any},  // none / linear; others refused below
    {Key::ROPE_SCALING_FACTOR, Kind::FLOAT, true, k_any},
    {Key::ROPE_SCALE_LINEAR, Kind::FLOAT, true, k_any},
    // How `rocky serve --embedding` pools the hidden states (server/embedding.hpp); not the graph's.
    {Key::POOLING_TYPE, Kind::INT, true, k_any},
    // Used only by YaRN / LongRoPE scaling (refused through rope.scaling.type) or purely informative.
    {Key::ROPE_SCALING_ORIG_CTX, Kind::INT, false, k_any},
    {Key::ROPE_SCALING_FINETUNED, Kind::ANY, false, k_any},
    // Harmless at their neutral value only.
    {Key::ROPE_SCALING_ATTN_FACTOR, Kind::FLOAT, false, 1.0},
    {Key::ROPE_SCALING_YARN_LOG_MUL, Kind::FLOAT, false, 0.0},
    {Key::ATTN_CAUSAL, Kind::ANY, false, 1.0},
    {Key::EXPERT_COUNT, Kind::INT, false, 0.0},
    {Key::EXPERT_USED_COUNT, Kind::INT, false, 0.0},
    {Key::EXPERT_SHARED_COUNT, Kind::INT, false, 0.0},
    {Key::ATTN_LOGIT_SOFTCAP, Kind::FLOAT, false, 0.0},
    {Key::FINAL_LOGIT_SOFTCAP, Kind::FLOAT, false, 0.0},
    {Key::SLIDING_WINDOW, Kind::INT, false, 0.0},
    {Key::LOGIT_SCALE, Kind::FLOAT, false, 1.0},
    {Key::EMBEDDING_SCALE, Kind::FLOAT, false, 1.0},
    {Key::RESIDUAL_SCALE, Kind::FLOAT, false, 1.0},
    {Key::ATTN_CLAMP_KQV, Kind::FLOAT, false, 0.0},
    // Change the math whatever their value (rocky's graphs have no such feature).
    {Key::LAYERNORM_EPS, Kind::ANY, false, k_refuse},
    {Key::ATTN_SCALE, Kind::ANY, false, k_refuse},
    {Key::SLIDING_WINDOW_PATTERN, Kind::ANY, false, k_refuse},
    {Key::ROPE_DIMENSION_SECTIONS, Kind::ANY, false, k_refuse},
    {Key::ROPE_FREQ_BASE_SWA, Kind::ANY, false, k_refuse},
    {Key::EXPERT_FEED_FORWARD_LENGTH, Kind::ANY, false, k_refuse},
    {Key::LEADING_DENSE_BLOCK_COUNT, Kind::ANY, false, k_refuse},
    {Key::ATTN_Q_LORA_RANK, Kind::ANY, false, k_refuse},
    {Key::ATTN_KV_LORA_RANK, Kind::ANY, false, k_refuse},
    {Key::FULL_ATTENTION_INTERVAL, Kind::ANY, false, k_refuse},
    {Key::SSM_CONV_KERNEL, Kind::ANY, false, k_refuse},
    {Key::SSM_INNER_SIZE, Kind::ANY, false, k_refuse},
    {Key::SSM_STATE_SIZE, Kind::ANY, false, k_refuse},
    {Key::SSM_TIME_STEP_RANK, Kind::ANY, false, k_refuse},
    {Key::SSM_GROUP_COUNT, Kind::ANY, false, k_refuse},
};

const KeyRule* rule_of(Key k) {
  for (const KeyRule& r : k_rules)
    if (r.key == k) return &r;
  return nullptr;
}

std::optional<double> numeric(const gguf::Value& v) {
  if (v.is_float()) return v.f;
  if (v.type == gguf::ValueType::BOOL) return v.u ? 1.0 : 0.0;
  if (auto i = v.as_int()) return static_cast<double>(*i);
  return std::nullopt;
}

// Every `<arch>.*` key is honoured, or harmless at its value; rocky::Error naming the key otherwise.
void check_keys(const gguf::GgufFile& f, const std::string& arch, std::span<const Key> own) {
  const std::string prefix = arch + ".";
  for (const auto& [key_, value] : f.metadata()) {
    const std::string_view key = key_;
    if (key.substr(0, prefix.size()) != prefix) continue;
    const std::string_view suffix = key.substr(prefix.size());
    const auto k = gguf::parse_key_suffix(suffix);
    const KeyRule* r = k ? rule_of(*k) : nullptr;
    if (r == nullptr) {
      fail(
          "{}: metadata key '{}' is not one rocky knows for architecture {}; it may change the math, so the "
          "model is refused rather than run with it ignored",
          f.path(), key, arch);
    }
    const bool type_ok = r->kind == Kind::ANY || (r->kind == Kind::INT && value.is_integer()) ||
                         (r->kind == Kind::FLOAT && (value.is_float() || value.is_integer())) ||
                         (r->kind == Kind::STRING && value.type == gguf::ValueType::STRING);
    if (!type_ok) {
      fail("{}: metadata key '{}' has type {}, expected {}", f.path(), key, gguf::value_type_name(value.type),
           r->kind == Kind::INT     ? "an integer"
           : r->kind == Kind::FLOAT ? "a number"
                                    : "a string");
    }
    if (r->honoured || std::isnan(r->harmless_value)) continue;
    if (std::find(own.begin(), own.end(), *k) != own.end()) continue;  // the architecture reads it
    const auto v = numeric(value);
    if (r->harmless_value == k_refuse || !v || *v != r->harmless_value) {
      fail(
          "{}: metadata key '{}' = {} changes the math and rocky does not implement it for architecture {} "
          "(refused rather than ignored)",
          f.path(), key, gguf::format_value(value), arch);
    }
  }
}

}  // namespace

int32_t checked_dim(const gguf::GgufFile& f, const std::string& key, std::optional<uint64_t> v, bool required,
                    int32_t dflt) {
  if (!v) {
    if (f.has(key)) fail("{}: metadata key '{}' is not a non-negative integer", f.path(), key);
    if (required) fail("{}: missing required metadata key '{}'", f.path(), key);
    return dflt;
  }
  if (*v == 0 || *v > (1u << 30)) fail("{}: metadata key '{}' has impossible value {}", f.path(), key, *v);
  return static_cast<int32_t>(*v);
}

HParams read_hparams(const gguf::GgufFile& f) {
  HParams h;
  h.arch_str = std::string(f.architecture());
  const auto arch = gguf::parse_arch(h.arch_str);
  if (!arch) {
    fail("{}: unsupported architecture '{}' (general.architecture); rocky supports: {}", f.path(), h.arch_str,
         arch::supported_list());
  }
  h.arch = *arch;
  const arch::ArchInfo& ai = arch::arch_info(h.arch);
  h.rope_mode = ai.rope_mode;
  check_keys(f, h.arch_str, ai.own_keys);
  const gguf::ArchSummary s = gguf::arch_summary(f);
  auto key = [&](Key k) { return gguf::arch_key(h.arch_str, k); };
  const std::string a = h.arch_str + ".";
  h.n_layer = checked_dim(f, key(Key::BLOCK_COUNT), s.n_layer, true, 0);
  h.n_embd = checked_dim(f, key(Key::EMBEDDING_LENGTH), s.n_embd, true, 0);
  h.n_ff = checked_dim(f, key(Key::FEED_FORWARD_LENGTH), s.n_ff, true, 0);
  h.n_head = checked_dim(f, key(Key::HEAD_COUNT), s.n_head, true, 0);
  h.n_head_kv = checked_dim(f, key(Key::HEAD_COUNT_KV), s.n_head_kv, false, h.n_head);
  if (h.n_head % h.n_head_kv != 0) {
    fail("{}: {}attention.head_count ({}) is not a multiple of head_count_kv ({})", f.path(), a, h.n_head, h.n_head_kv);
  }
  const bool has_key_length = s.head_dim_from == "key_length";
  if (h.n_embd % h.n_head != 0 && !has_key_length) {
    fail("{}: {}embedding_length ({}) is not a multiple of head_count ({})", f.path(), a, h.n_embd, h.n_head);
  }
  h.head_dim =
      checked_dim(f, key(Key::KEY_LENGTH), has_key_length ? s.head_dim : std::nullopt, false, h.n_embd / h.n_head);
  int32_t vdim = checked_dim(f, key(Key::VALUE_LENGTH), s.value_length, false, h.head_dim);
  if (vdim != h.head_dim) {
    fail("{}: {}attention.value_length ({}) != key_length ({}) is not supported", f.path(), a, vdim, h.head_dim);
  }
  h.n_rot = checked_dim(f, key(Key::ROPE_DIMENSION_COUNT), s.rope_dim, false, h.head_dim);
  if (h.n_rot > h.head_dim || h.n_rot % 2 != 0) {
    fail("{}: {}rope.dimension_count ({}) must be even and at most head_dim ({})", f.path(), a, h.n_rot, h.head_dim);
  }
  h.rope_freq_base = static_cast<float>(s.rope_base.value_or(10000.0));
  if (!(h.rope_freq_base > 0)) fail("{}: {}rope.freq_base must be positive", f.path(), a);
  const std::string scaling = s.rope_scaling_type.value_or("");
  if (!scaling.empty() && scaling != "none" && scaling != "linear") {
    fail("{}: {}rope.scaling.type '{}' is not supported (none, linear)", f.path(), a, scaling);
  }
  // llama.cpp: rope.scaling.factor (or the older rope.scale_linear) gives freq_scale = 1 / factor;
  // with rope.scaling.type none the factor is not applied.
  double factor = s.rope_scaling_factor.value_or(s.rope_scale_linear.value_or(0.0));
  if (factor < 0 || !std::isfinite(factor)) fail("{}: {}rope.scaling.factor must be positive", f.path(), a);
  if (scaling == "none") factor = 0.0;
  h.rope_freq_scale = factor == 0.0 ? 1.0f : static_cast<float>(1.0 / factor);
  if (!s.rms_eps) fail("{}: missing required metadata key '{}attention.layer_norm_rms_epsilon'", f.path(), a);
  if (!(*s.rms_eps > 0) || !std::isfinite(*s.rms_eps)) {
    fail("{}: {}attention.layer_norm_rms_epsilon must be positive", f.path(), a);
  }
  h.rms_eps = static_cast<float>(*s.rms_eps);
  h.n_ctx_train = checked_dim(f, key(Key::CONTEXT_LENGTH), s.n_ctx_train, false, 2048);
  const std::string embd = gguf::tensor_name(gguf::Tensor::TOKEN_EMBD);
  const gguf::TensorInfo* emb = f.find_tensor(embd);
  if (emb == nullptr) fail("{}: missing tensor '{}'", f.path(), embd);
  if (emb->ne[0] != static_cast<uint64_t>(h.n_embd) || emb->ne[1] == 0 || emb->ne[1] > (1u << 30)) {
    fail("{}: tensor '{}' has shape [{}, {}], expected [{}, n_vocab]", f.path(), embd, emb->ne[0], emb->ne[1],
         h.n_embd);
  }
  h.n_vocab = static_cast<int32_t>(emb->ne[1]);
  if (auto vs = f.get_uint(key(Key::VOCAB_SIZE)); vs && *vs != emb->ne[1]) {
    fail("{}: {}vocab_size ({}) != {} rows ({})", f.path(), a, *vs, embd, emb->ne[1]);
  }
  if (ai.read_keys != nullptr) ai.read_keys(f, h);
  return h;
}

}  // namespace rocky::model
