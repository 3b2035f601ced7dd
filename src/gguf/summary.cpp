// Summaries of a GGUF file for `rocky info`. See summary.hpp.
#include "gguf/summary.hpp"

#include "gguf/names.hpp"

#include <fmt/format.h>

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
  const Value* a = f.find(k_general_architecture);
  if (a && a->type == ValueType::STRING) s.arch = std::string(a->str);
  auto key = [&](Key k) { return arch_key(s.arch, k); };
  s.n_layer = uint_key(f, key(Key::BLOCK_COUNT));
  s.n_embd = uint_key(f, key(Key::EMBEDDING_LENGTH));
  s.n_head = uint_key(f, key(Key::HEAD_COUNT));
  s.n_head_kv = uint_key(f, key(Key::HEAD_COUNT_KV));
  if (!s.n_head_kv) s.n_head_kv = s.n_head;  // llama.cpp's default: no GQA
  s.n_ff = uint_key(f, key(Key::FEED_FORWARD_LENGTH));
  s.n_ctx_train = uint_key(f, key(Key::CONTEXT_LENGTH));
  s.rope_dim = uint_key(f, key(Key::ROPE_DIMENSION_COUNT));
  s.rope_base = float_key(f, key(Key::ROPE_FREQ_BASE));
  s.value_length = uint_key(f, key(Key::VALUE_LENGTH));
  s.rms_eps = float_key(f, key(Key::RMS_EPS));
  s.rope_scaling_factor = float_key(f, key(Key::ROPE_SCALING_FACTOR));
  s.rope_scale_linear = float_key(f, key(Key::ROPE_SCALE_LINEAR));
  if (const Value* st = f.find(key(Key::ROPE_SCALING_TYPE)); st && st->type == ValueType::STRING) {
    s.rope_scaling_type = std::string(st->str);
  }
  if ((s.head_dim = uint_key(f, key(Key::KEY_LENGTH)))) {
    s.head_dim_from = "key_length";
  } else if (s.n_embd && s.n_head && *s.n_head && *s.n_embd % *s.n_head == 0) {
    s.head_dim = *s.n_embd / *s.n_head;
    s.head_dim_from = "n_embd/n_head";
  }
  const Value* toks = f.find("tokenizer.ggml.tokens");
  if (toks && toks->type == ValueType::ARRAY) {
    s.n_vocab = toks->count;
    s.n_vocab_from = "tokenizer.ggml.tokens";
  } else if ((s.n_vocab = uint_key(f, key(Key::VOCAB_SIZE)))) {
    s.n_vocab_from = key(Key::VOCAB_SIZE);
  } else {
    for (Tensor t : {Tensor::TOKEN_EMBD, Tensor::OUTPUT}) {
      const std::string name = tensor_name(t);
      const TensorInfo* ti = f.find_tensor(name);
      if (ti && ti->n_dims == 2) {
        s.n_vocab = ti->ne[1];
        s.n_vocab_from = name;
        break;
      }
    }
  }
  s.rope_type = std::string(rope_type_of(s.arch));
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
        if (u < 0x20 || u == 0x7f)
          out += fmt::format("\\x{:02x}", u);
        else
          out += c;  // bytes ≥ 0x80 pass through (UTF-8 text)
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
        if (es)
          out += scalar_text(v.elem_type, v.raw + k * es);
        else if (v.elem_type == ValueType::STRING)
          out += short_quote(v.strings[k]);
        else
          out += format_value(v.items[k], max_elems);
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
