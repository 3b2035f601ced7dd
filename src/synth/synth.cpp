#include "synth/synth.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "gguf/gguf.hpp"
#include "gguf/names.hpp"
#include "quant/quant.hpp"
#include "synth/stream_writer.hpp"
#include "synth/weights.hpp"

namespace rocky::synth {
namespace {

constexpr uint32_t k_quantization_version = 2;  // GGML_QNT_VERSION

bool is_quantized(FileType ft) {
  return ft == FileType::Q8_0 || ft == FileType::Q6_K || ft == FileType::Q4_K_M || ft == FileType::Q5_K_M;
}

}  // namespace

void set_synth_metadata(gguf::Writer& w, const Preset& p, uint32_t n_layer, FileType ft, uint64_t seed,
                        const GeneratedVocab& v) {
  const std::string a(arch_name(p.arch));
  auto key = [&](gguf::Key k) { return gguf::arch_key(a, k); };
  using gguf::Key;
  w.set_string(gguf::k_general_architecture, a);
  w.set_string(gguf::k_general_type, "model");
  w.set_string(gguf::k_general_name, p.display);
  w.set_u32(key(Key::BLOCK_COUNT), n_layer);
  w.set_u32(key(Key::CONTEXT_LENGTH), p.n_ctx);
  w.set_u32(key(Key::EMBEDDING_LENGTH), p.n_embd);
  w.set_u32(key(Key::FEED_FORWARD_LENGTH), p.n_ff);
  w.set_u32(key(Key::HEAD_COUNT), p.n_head);
  w.set_u32(key(Key::HEAD_COUNT_KV), p.n_head_kv);
  if (p.key_length != 0) {  // qwen3: head_dim · n_head ≠ n_embd
    w.set_u32(key(Key::KEY_LENGTH), p.key_length);
    w.set_u32(key(Key::VALUE_LENGTH), p.key_length);
  }
  w.set_f32(key(Key::ROPE_FREQ_BASE), p.rope_base);
  w.set_f32(key(Key::RMS_EPS), p.rms_eps);
  if (p.sliding_window != 0) {  // gemma3
    w.set_u32(key(Key::SLIDING_WINDOW), p.sliding_window);
    w.set_f32(key(Key::ROPE_FREQ_BASE_SWA), p.rope_base_swa);
  }
  if (p.rope_linear > 0) {
    w.set_string(key(Key::ROPE_SCALING_TYPE), "linear");
    w.set_f32(key(Key::ROPE_SCALING_FACTOR), p.rope_linear);
  }
  if (p.hybrid()) {  // qwen35, as llama.cpp's converter writes it
    w.set_u32(key(Key::SSM_CONV_KERNEL), p.ssm_conv);
    w.set_u32(key(Key::SSM_STATE_SIZE), p.ssm_d_k);
    w.set_u32(key(Key::SSM_GROUP_COUNT), p.ssm_k_heads);
    w.set_u32(key(Key::SSM_TIME_STEP_RANK), p.ssm_v_heads);
    w.set_u32(key(Key::SSM_INNER_SIZE), p.ssm_v_heads * p.ssm_d_v);
    w.set_u32(key(Key::FULL_ATTENTION_INTERVAL), p.full_attn_interval);
    w.set_u32(key(Key::ROPE_DIMENSION_COUNT), p.rope_dim);
    const std::vector<int32_t> sections = {11, 11, 10, 0};
    w.set_i32_array(key(Key::ROPE_DIMENSION_SECTIONS), sections);
  }
  if (p.arch == Arch::LLAMA) {
    w.set_u32(key(Key::VOCAB_SIZE), p.n_vocab);
    w.set_u32(key(Key::ROPE_DIMENSION_COUNT), p.head_dim());
  }
  w.set_u32(gguf::k_general_file_type, llama_ftype(ft));
  if (is_quantized(ft)) w.set_u32(gguf::k_general_quantization_version, k_quantization_version);
  w.set_string("rocky.synth.preset", p.name);
  w.set_u64("rocky.synth.seed", seed);

  w.set_string("tokenizer.ggml.model", v.model);
  w.set_string("tokenizer.ggml.pre", v.pre);
  std::vector<std::string_view> toks(v.tokens.begin(), v.tokens.end());
  w.set_string_array("tokenizer.ggml.tokens", toks);
  w.set_i32_array("tokenizer.ggml.token_type", v.types);
  if (!v.scores.empty()) w.set_f32_array("tokenizer.ggml.scores", v.scores);
  if (!v.merges.empty()) {
    std::vector<std::string_view> merges(v.merges.begin(), v.merges.end());
    w.set_string_array("tokenizer.ggml.merges", merges);
  }
  if (v.bos >= 0) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
  if (v.eos >= 0) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
  if (v.unk >= 0) w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk));
  if (v.pad >= 0) w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad));
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  if (!v.add_space_prefix) w.set_bool("tokenizer.ggml.add_space_prefix", false);
  if (!v.chat_template.empty()) w.set_string("tokenizer.chat_template", v.chat_template);
  if (p.fim_keys) {
    auto id_of = [&](std::string_view text) {
      for (size_t i = 0; i < v.tokens.size(); ++i)
        if (v.tokens[i] == text) return static_cast<uint32_t>(i);
      fail("preset {}: the vocab has no token {}", p.name, text);
    };
    w.set_u32("tokenizer.ggml.fim_pre_token_id", id_of("<|fim_prefix|>"));
    w.set_u32("tokenizer.ggml.fim_suf_token_id", id_of("<|fim_suffix|>"));
    w.set_u32("tokenizer.ggml.fim_mid_token_id", id_of("<|fim_middle|>"));
    w.set_u32("tokenizer.ggml.fim_pad_token_id", id_of("<|fim_pad|>"));
    w.set_u32("tokenizer.ggml.fim_rep_token_id", id_of("<|repo_name|>"));
    w.set_u32("tokenizer.ggml.fim_sep_token_id", id_of("<|file_sep|>"));
  }
  if (p.pooling >= 0) w.set_u32(a + ".pooling_type", static_cast<uint32_t>(p.pooling));
}

Preset synth_preset(const SynthOptions& o) {
  Preset p = find_preset(o.preset);
  if (o.vocab) {
    if (*o.vocab < 512 || *o.vocab > (1u << 24)) fail("--vocab {}: must be in 512..{}", *o.vocab, 1u << 24);
    p.n_vocab = *o.vocab;
  }
  return p;
}

WriteSummary synth_model(const SynthOptions& o) {
  const Preset p = synth_preset(o);
  const uint32_t n_layer = o.layers.value_or(p.n_layer);
  if (n_layer < 1 || n_layer > 1024) fail("--layers {}: must be in 1..1024", n_layer);
  const std::vector<PlannedTensor> plan = tensor_plan(p, n_layer, o.type);
  const GeneratedVocab vocab = generate_vocab(p);
  gguf::Writer w;
  set_synth_metadata(w, p, n_layer, o.type, o.seed, vocab);

  std::vector<StreamTensor> st;
  std::vector<InitSpec> spec;
  std::vector<uint64_t> hash;
  std::vector<uint8_t> computed;  // rows that are not random (rope_freqs)
  const std::vector<float> rope_factors = rope_freq_factors(p);
  WriteSummary s;
  for (const PlannedTensor& t : plan) {
    computed.push_back(t.role == Role::RopeFreqs);
    st.push_back(StreamTensor{t.name, t.type, t.n_dims, t.ne});
    spec.push_back(init_spec(p, n_layer, t.role));
    hash.push_back(name_hash(t.name));
    s.n_params += t.n_elements();
    s.tensor_bytes += t.n_bytes();
  }
  s.n_tensors = plan.size();
  auto encode = [&](size_t k, uint64_t r0, uint64_t r1, uint8_t* dst) {
    const uint64_t n = st[k].ne[0], rb = row_bytes(st[k].type, n);
    std::vector<float> row(n);
    for (uint64_t r = r0; r < r1; ++r) {
      if (computed[k]) {
        if (rope_factors.size() != n) fail("synth: rope_freqs has {} values, the plan {}", rope_factors.size(), n);
        std::copy(rope_factors.begin(), rope_factors.end(), row.begin());
      } else {
        fill_row(o.seed, hash[k], r, spec[k], row.data(), n);
      }
      quant::quantize_row(st[k].type, row.data(), dst + (r - r0) * rb, static_cast<int64_t>(n));
    }
  };
  StreamOptions so{o.threads, o.progress, fmt::format("synth {} {}", p.name, file_type_name(o.type))};
  s.file_bytes = write_streaming(o.out, w, st, encode, so);
  return s;
}

WriteSummary quantize_model(const QuantizeOptions& o) {
  const auto in = gguf::GgufFile::open(o.in);
  const std::string arch(in.architecture());
  const auto n_layer = in.get_uint(gguf::arch_key(arch, gguf::Key::BLOCK_COUNT));
  if (!n_layer) fail("{}: missing key '{}'", o.in, gguf::arch_key(arch, gguf::Key::BLOCK_COUNT));
  bool has_output = false;
  for (const auto& t : in.tensors()) {
    if (t.type != DType::F32 && t.type != DType::F16 && t.type != DType::BF16)
      fail("{}: tensor '{}' is already {}: rocky quantize needs an F32, F16 or BF16 model", o.in, t.name,
           dtype_name(t.type));
    if (t.name == gguf::tensor_name(gguf::Tensor::OUTPUT)) has_output = true;
  }
  gguf::Writer w;
  for (const auto& [key, value] : in.metadata()) w.set(key, value);
  w.set_u32(gguf::k_general_file_type, llama_ftype(o.type));
  if (is_quantized(o.type)) w.set_u32(gguf::k_general_quantization_version, k_quantization_version);

  std::vector<StreamTensor> st;
  WriteSummary s;
  for (const auto& t : in.tensors()) {
    StreamTensor x{t.name, DType::F32, t.n_dims, t.ne};
    x.type = tensor_type(o.type, t.name, t.n_dims, t.ne[0], static_cast<int64_t>(*n_layer), has_output);
    s.n_params += t.n_elements;
    s.tensor_bytes += x.n_bytes();
    st.push_back(std::move(x));
  }
  s.n_tensors = st.size();
  const auto& src = in.tensors();
  auto encode = [&](size_t k, uint64_t r0, uint64_t r1, uint8_t* dst) {
    const gguf::TensorInfo& t = src[k];
    const uint64_t n = t.ne[0], in_rb = row_bytes(t.type, n), out_rb = row_bytes(st[k].type, n);
    std::vector<float> row(n);
    for (uint64_t r = r0; r < r1; ++r) {
      quant::dequantize_row(t.type, t.data + r * in_rb, row.data(), static_cast<int64_t>(n));
      quant::quantize_row(st[k].type, row.data(), dst + (r - r0) * out_rb, static_cast<int64_t>(n));
    }
  };
  StreamOptions so{o.threads, o.progress, fmt::format("quantize {}", file_type_name(o.type))};
  s.file_bytes = write_streaming(o.out, w, st, encode, so);
  return s;
}

}  // namespace rocky::synth
