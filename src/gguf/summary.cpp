// Summaries of a GGUF file for `rocky info`. See summary.hpp.
#include "gguf/summary.hpp"

#include <fmt/format.h>

#include <array>
#include <string_view>

namespace rocky::gguf {
namespace {

std::optional<uint64_t> uint_key(const GgufFile& f, const std::string& key) {
  const Value* v = f.find(key);
  if (!v || !v->is_integer()) return std::nullopt;
  auto i = v->as_int();
  if (i && *i >= 0) return static_cast<uint64_t>(*i);
  if (!i && (v->type == ValueType::U64)) return v->u;
  return std::nullopt;
}

std::optional<double> float_key(const GgufFile& f, const std::string& key) {
  const Value* v = f.find(key);
  if (!v) return std::nullopt;
  if (v->is_float()) return v->f;
  if (auto i = v->as_int()) return static_cast<double>(*i);
  return std::nullopt;
}

// llama.cpp's llama_model_rope_type for common architectures.
constexpr std::array<std::string_view, 9> k_rope_norm = {"llama", "llama4", "deci", "baichuan", "command-r",
                                                         "deepseek", "deepseek2", "granite", "internlm2"};
constexpr std::array<std::string_view, 16> k_rope_neox = {"qwen", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "phi2",
                                                          "phi3", "gemma", "gemma2", "gemma3", "falcon", "gptneox",
                                                          "stablelm", "olmo2", "starcoder2", "nemotron"};


std::string scalar_text(ValueType t, const uint8_t* p) {
  switch (t) {
    case ValueType::U8: return fmt::format("{}", p[0]);
    case ValueType::I8: return fmt::format("{}", static_cast<int8_t>(p[0]));
    case ValueType::BOOL: return p[0] ? "true" : "false";
    case ValueType::U16: return fmt::format("{}", load_le<uint16_t>(p));
    case ValueType::I16: return fmt::format("{}", load_le<int16_t>(p));
    case ValueType::U32: return fmt::format("{}", load_le<uint32_t>(p));
    case ValueType::I32: return fmt::format("{}", load_le<int32_t>(p));
    case ValueType::F32: return fmt::format("{}", load_le<float>(p));
    case ValueType::U64: return fmt::format("{}", load_le<uint64_t>(p));
    case ValueType::I64: return fmt::format("{}", load_le<int64_t>(p));
    case ValueType::F64: return fmt::format("{}", load_le<double>(p));
    default: return "?";
  }
}

}  // namespace

Totals totals(const GgufFile& f) {
  Totals t;
  for (const TensorInfo& ti : f.tensors()) {
    ++t.n_tensors;
    t.n_params += ti.n_elements;
    t.n_bytes += ti.n_bytes;
    std::string name(dtype_name(ti.type));
    ++t.tensors_by_type[name];
    t.params_by_type[name] += ti.n_elements;
  }
  if (t.n_params) t.bits_per_weight = 8.0 * static_cast<double>(t.n_bytes) / static_cast<double>(t.n_params);
  return t;
}

ArchSummary arch_summary(const GgufFile& f) {
  ArchSummary s;
  const Value* a = f.find("general.architecture");
  if (a && a->type == ValueType::STRING) s.arch = std::string(a->str);
  const std::string p = s.arch + ".";
  s.n_layer = uint_key(f, p + "block_count");
  s.n_embd = uint_key(f, p + "embedding_length");
  s.n_head = uint_key(f, p + "attention.head_count");
  s.n_head_kv = uint_key(f, p + "attention.head_count_kv");
  if (!s.n_head_kv) s.n_head_kv = s.n_head;  // llama.cpp's default: no GQA
  s.n_ff = uint_key(f, p + "feed_forward_length");
  s.n_ctx_train = uint_key(f, p + "context_length");
  s.rope_dim = uint_key(f, p + "rope.dimension_count");
  s.rope_base = float_key(f, p + "rope.freq_base");
  if ((s.head_dim = uint_key(f, p + "attention.key_length"))) {
    s.head_dim_from = "key_length";
  } else if (s.n_embd && s.n_head && *s.n_head && *s.n_embd % *s.n_head == 0) {
    s.head_dim = *s.n_embd / *s.n_head;
    s.head_dim_from = "n_embd/n_head";
  }
  const Value* toks = f.find("tokenizer.ggml.tokens");
  if (toks && toks->type == ValueType::ARRAY) {
    s.n_vocab = toks->count;
    s.n_vocab_from = "tokenizer.ggml.tokens";
  } else if ((s.n_vocab = uint_key(f, p + "vocab_size"))) {
    s.n_vocab_from = p + "vocab_size";
  } else {
    for (const char* name : {"token_embd.weight", "output.weight"}) {
      const TensorInfo* t = f.find_tensor(name);
      if (t && t->n_dims == 2) {
        s.n_vocab = t->ne[1];
        s.n_vocab_from = name;
        break;
      }
    }
  }
  s.rope_type = "unknown";
  for (std::string_view n : k_rope_norm)
    if (s.arch == n) s.rope_type = "norm";
  for (std::string_view n : k_rope_neox)
    if (s.arch == n) s.rope_type = "neox";
  return s;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
        else out += c;  // bytes ≥ 0x80 pass through (UTF-8 text)
    }
  }
  return out + "\"";
}

namespace {
// Quoted, cut after about k_max_text_string bytes (at a UTF-8 character boundary).
constexpr size_t k_max_text_string = 160;
std::string short_quote(std::string_view s) {
  if (s.size() <= k_max_text_string) return quote(s);
  size_t n = k_max_text_string;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;  // not inside a character
  std::string q = quote(s.substr(0, n));
  q.insert(q.size() - 1, "…");
  return q + fmt::format(" ({} bytes)", s.size());
}
}  // namespace

std::string format_value(const Value& v, size_t max_elems) {
  switch (v.type) {
    case ValueType::STRING: return short_quote(v.str);
    case ValueType::BOOL: return v.u ? "true" : "false";
    case ValueType::F32: return fmt::format("{}", static_cast<float>(v.f));
    case ValueType::F64: return fmt::format("{}", v.f);
    case ValueType::ARRAY: {
      std::string out = fmt::format("[{} × {}]", value_type_name(v.elem_type), v.count);
      if (v.count == 0) return out;
      uint64_t shown = std::min<uint64_t>(v.count, max_elems);
      out += " [";
      for (uint64_t k = 0; k < shown; ++k) {
        if (k) out += ", ";
        uint64_t es = value_type_size(static_cast<uint32_t>(v.elem_type)).value_or(0);
        if (es) out += scalar_text(v.elem_type, v.raw + k * es);
        else if (v.elem_type == ValueType::STRING) out += short_quote(v.strings[k]);
        else out += format_value(v.items[k], max_elems);
      }
      if (shown < v.count) out += fmt::format(", … {} more", v.count - shown);
      return out + "]";
    }
    default:
      if (auto i = v.as_int()) return fmt::format("{}", *i);
      return fmt::format("{}", v.u);
  }
}

std::string group_digits(uint64_t n) {
  std::string d = std::to_string(n);
  std::string out;
  for (size_t k = 0; k < d.size(); ++k) {
    if (k && (d.size() - k) % 3 == 0) out += ',';
    out += d[k];
  }
  return out;
}

}  // namespace rocky::gguf
