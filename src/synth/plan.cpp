#include "synth/plan.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/error.hpp"

namespace rocky::synth {

using gguf::Tensor;
using gguf::tensor_name;

FileType parse_file_type(std::string_view s) {
  std::string l(s);
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (l == "f32") return FileType::F32;
  if (l == "f16") return FileType::F16;
  if (l == "bf16") return FileType::BF16;
  if (l == "q8_0") return FileType::Q8_0;
  if (l == "q6_k") return FileType::Q6_K;
  if (l == "q4_k_m") return FileType::Q4_K_M;
  if (l == "q5_k_m") return FileType::Q5_K_M;
  fail("unknown type '{}' (known: f32, f16, bf16, q8_0, q6_k, q4_k_m, q5_k_m)", s);
}

std::string_view file_type_name(FileType t) {
  switch (t) {
    case FileType::F32: return "F32";
    case FileType::F16: return "F16";
    case FileType::BF16: return "BF16";
    case FileType::Q8_0: return "Q8_0";
    case FileType::Q6_K: return "Q6_K";
    case FileType::Q4_K_M: return "Q4_K_M";
    case FileType::Q5_K_M: return "Q5_K_M";
  }
  return "?";
}

uint32_t llama_ftype(FileType t) {
  switch (t) {
    case FileType::F32: return 0;      // LLAMA_FTYPE_ALL_F32
    case FileType::F16: return 1;      // LLAMA_FTYPE_MOSTLY_F16
    case FileType::BF16: return 32;    // LLAMA_FTYPE_MOSTLY_BF16
    case FileType::Q8_0: return 7;     // LLAMA_FTYPE_MOSTLY_Q8_0
    case FileType::Q6_K: return 18;    // LLAMA_FTYPE_MOSTLY_Q6_K
    case FileType::Q4_K_M: return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    case FileType::Q5_K_M: return 17;  // LLAMA_FTYPE_MOSTLY_Q5_K_M
  }
  return 0;
}

bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

namespace {
bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf;
}
}  // namespace

DType tensor_type(FileType ft, std::string_view name, uint32_t n_dims, uint64_t ne0, int64_t n_layer, bool has_output) {
  if (n_dims < 2 || !ends_with(name, "weight")) return DType::F32;
  // llama.cpp keeps the recurrent layers' conv1d in f32.
  if (const auto tn = gguf::parse_tensor_name(name); tn && tn->tensor == Tensor::SSM_CONV1D) return DType::F32;
  DType t = DType::F32;
  switch (ft) {
    case FileType::F32: return DType::F32;
    case FileType::F16: return DType::F16;
    case FileType::BF16: return DType::BF16;
    case FileType::Q8_0: t = DType::Q8_0; break;
    case FileType::Q6_K: t = DType::Q6_K; break;
    case FileType::Q4_K_M:
    case FileType::Q5_K_M: {  // the same mix, q4_K → q5_K as the base type (llama_tensor_get_type)
      t = ft == FileType::Q4_K_M ? DType::Q4_K : DType::Q5_K;
      const bool lm_head =
          name == tensor_name(Tensor::OUTPUT) || (!has_output && name == tensor_name(Tensor::TOKEN_EMBD));
      const auto tn = gguf::parse_tensor_name(name);
      if (lm_head) {
        t = DType::Q6_K;
      } else if (tn &&
                 (tn->tensor == Tensor::ATTN_V || tn->tensor == Tensor::ATTN_QKV || tn->tensor == Tensor::FFN_DOWN)) {
        // (llama.cpp counts attn_qkv with attn_v: one of them per qwen35 layer, so the counter is the layer)
        const int64_t i = layer_of(name);
        if (i >= 0 && use_more_bits(i, n_layer)) t = DType::Q6_K;
      }
      break;
    }
  }
  if (ne0 % 256 != 0) {  // no room for k-quant super-blocks: llama.cpp's fallback types
    if (t == DType::Q4_K) t = DType::Q5_0;
    if (t == DType::Q5_K) t = DType::Q5_1;
    if (t == DType::Q6_K) t = DType::Q8_0;
  }
  if (ne0 % dtype_info(t).block_elems != 0)
    fail("tensor '{}': row length {} is not a multiple of {}'s block size {}", name, ne0, dtype_name(t),
         dtype_info(t).block_elems);
  return t;
}

std::vector<PlannedTensor> tensor_plan(const Preset& p, uint32_t n_layer, FileType ft) {
  std::vector<PlannedTensor> out;
  const bool has_output = !p.tied;
  auto add = [&](std::string name, Role role, int64_t layer, uint64_t ne0, uint64_t ne1) {
    PlannedTensor t;
    t.name = std::move(name);
    t.role = role;
    t.layer = layer;
    t.n_dims = ne1 == 0 ? 1 : 2;
    t.ne = {ne0, ne1 == 0 ? 1 : ne1, 1, 1};
    t.type = tensor_type(ft, t.name, t.n_dims, ne0, n_layer, has_output);
    out.push_back(std::move(t));
  };
  const uint64_t e = p.n_embd, eq = p.n_embd_q(), ekv = p.n_embd_kv(), ff = p.n_ff, hd = p.head_dim();
  add(tensor_name(Tensor::TOKEN_EMBD), Role::Embedding, -1, e, p.n_vocab);
  if (p.has_rope_freqs()) add(tensor_name(Tensor::ROPE_FREQS), Role::RopeFreqs, -1, hd / 2, 0);
  for (uint32_t i = 0; i < n_layer; ++i) {
    const int il = static_cast<int>(i);
    const int64_t l = i;
    auto name = [&](Tensor t, const char* suffix = "weight") { return tensor_name(t, il, suffix); };
    add(name(Tensor::ATTN_NORM), Role::Norm, l, e, 0);
    if (p.hybrid()) {  // qwen35: a Gated DeltaNet layer or a gated full-attention layer
      if (p.is_recurrent_layer(uint32_t(l))) {
        const uint64_t hv = p.ssm_v_heads, inner = uint64_t(p.ssm_v_heads) * p.ssm_d_v;
        add(name(Tensor::ATTN_QKV), Role::AttnQkv, l, e, p.ssm_conv_channels());
        add(name(Tensor::ATTN_GATE), Role::AttnGate, l, e, inner);
        add(name(Tensor::SSM_CONV1D), Role::SsmConv, l, p.ssm_conv, p.ssm_conv_channels());
        add(name(Tensor::SSM_A, ""), Role::SsmA, l, hv, 0);
        add(name(Tensor::SSM_ALPHA), Role::SsmAlpha, l, e, hv);
        add(name(Tensor::SSM_BETA), Role::SsmAlpha, l, e, hv);
        add(name(Tensor::SSM_DT, "bias"), Role::SsmDtBias, l, hv, 0);
        add(name(Tensor::SSM_NORM), Role::Norm, l, p.ssm_d_v, 0);
        add(name(Tensor::SSM_OUT), Role::SsmOut, l, inner, e);
      } else {
        add(name(Tensor::ATTN_Q), Role::AttnQ, l, e, 2 * eq);
        add(name(Tensor::ATTN_K), Role::AttnK, l, e, ekv);
        add(name(Tensor::ATTN_V), Role::AttnV, l, e, ekv);
        add(name(Tensor::ATTN_Q_NORM), Role::Norm, l, hd, 0);
        add(name(Tensor::ATTN_K_NORM), Role::Norm, l, hd, 0);
        add(name(Tensor::ATTN_OUTPUT), Role::AttnOut, l, eq, e);
      }
      add(name(Tensor::ATTN_POST_NORM), Role::Norm, l, e, 0);  // qwen35's pre-FFN norm
      add(name(Tensor::FFN_GATE), Role::FfnGate, l, e, ff);
      add(name(Tensor::FFN_UP), Role::FfnUp, l, e, ff);
      add(name(Tensor::FFN_DOWN), Role::FfnDown, l, ff, e);
      continue;
    }
    add(name(Tensor::ATTN_Q), Role::AttnQ, l, e, eq);
    if (p.has_qkv_bias()) add(name(Tensor::ATTN_Q, "bias"), Role::BiasQ, l, eq, 0);
    add(name(Tensor::ATTN_K), Role::AttnK, l, e, ekv);
    if (p.has_qkv_bias()) add(name(Tensor::ATTN_K, "bias"), Role::BiasK, l, ekv, 0);
    add(name(Tensor::ATTN_V), Role::AttnV, l, e, ekv);
    if (p.has_qkv_bias()) add(name(Tensor::ATTN_V, "bias"), Role::BiasV, l, ekv, 0);
    if (p.has_qk_norm()) {
      add(name(Tensor::ATTN_Q_NORM), Role::Norm, l, hd, 0);
      add(name(Tensor::ATTN_K_NORM), Role::Norm, l, hd, 0);
    }
    add(name(Tensor::ATTN_OUTPUT), Role::AttnOut, l, eq, e);
    if (p.has_post_norms()) add(name(Tensor::ATTN_POST_NORM), Role::Norm, l, e, 0);
    add(name(Tensor::FFN_NORM), Role::Norm, l, e, 0);
    add(name(Tensor::FFN_GATE), Role::FfnGate, l, e, ff);
    add(name(Tensor::FFN_UP), Role::FfnUp, l, e, ff);
    add(name(Tensor::FFN_DOWN), Role::FfnDown, l, ff, e);
    if (p.has_post_norms()) add(name(Tensor::FFN_POST_NORM), Role::Norm, l, e, 0);
  }
  add(tensor_name(Tensor::OUTPUT_NORM), Role::Norm, -1, e, 0);
  if (has_output) add(tensor_name(Tensor::OUTPUT), Role::Output, -1, e, p.n_vocab);
  if (p.n_cls_out > 0) add("cls.output.weight", Role::Output, -1, e, p.n_cls_out);
  return out;
}

}  // namespace rocky::synth
