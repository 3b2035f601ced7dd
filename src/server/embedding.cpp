#include "server/embedding.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "quant/quant.hpp"

namespace rocky::server {

const char* to_string(Pooling p) {
  switch (p) {
    case Pooling::none: return "none";
    case Pooling::mean: return "mean";
    case Pooling::cls: return "cls";
    case Pooling::last: return "last";
    case Pooling::rank: return "rank";
  }
  return "?";
}

std::optional<Pooling> parse_pooling(const std::string& s) {
  for (Pooling p : {Pooling::none, Pooling::mean, Pooling::cls, Pooling::last, Pooling::rank})
    if (s == to_string(p)) return p;
  return std::nullopt;
}

Pooling gguf_pooling(const gguf::GgufFile& f) {
  const auto arch = f.get_string("general.architecture");
  if (!arch) return Pooling::none;
  const std::string key = std::string(*arch) + ".pooling_type";
  const auto v = f.get_uint(key);
  if (!v) return Pooling::none;
  if (*v > 4) fail("'{}' is {}: not a pooling type (0 none, 1 mean, 2 cls, 3 last, 4 rank)", key, *v);
  return static_cast<Pooling>(*v);
}

std::vector<std::vector<float>> pool(std::span<const float> hidden, int64_t n_embd, Pooling p) {
  const int64_t n = static_cast<int64_t>(hidden.size()) / n_embd;
  auto row = [&](int64_t i) {
    return std::vector<float>(hidden.begin() + i * n_embd, hidden.begin() + (i + 1) * n_embd);
  };
  std::vector<std::vector<float>> out;
  if (n == 0) return out;
  switch (p) {
    case Pooling::none:
      for (int64_t i = 0; i < n; ++i) out.push_back(row(i));
      break;
    case Pooling::mean: {
      std::vector<double> acc(static_cast<size_t>(n_embd), 0.0);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n_embd; ++j) acc[static_cast<size_t>(j)] += hidden[static_cast<size_t>(i * n_embd + j)];
      std::vector<float> m(static_cast<size_t>(n_embd));
      for (int64_t j = 0; j < n_embd; ++j)
        m[static_cast<size_t>(j)] = static_cast<float>(acc[static_cast<size_t>(j)] / n);
      out.push_back(std::move(m));
      break;
    }
    case Pooling::cls: out.push_back(row(0)); break;
    case Pooling::last:
    case Pooling::rank: out.push_back(row(n - 1)); break;
  }
  return out;
}

void normalize(std::vector<float>& v, int embd_normalize) {
  double sum = 0;
  switch (embd_normalize) {
    case -1: return;
    case 0:  // max absolute, scaled to int16's range
      for (float x : v) sum = std::max(sum, static_cast<double>(std::fabs(x)));
      sum /= 32760.0;
      break;
    case 2:
      for (float x : v) sum += static_cast<double>(x) * x;
      sum = std::sqrt(sum);
      break;
    default:  // 1: taxicab; p > 2: the p-norm
      for (float x : v) sum += std::pow(std::fabs(static_cast<double>(x)), embd_normalize);
      sum = std::pow(sum, 1.0 / embd_normalize);
      break;
  }
  const double norm = sum > 0 ? 1.0 / sum : 0.0;
  for (float& x : v) x = static_cast<float>(x * norm);
}

std::string base64_floats(const std::vector<float>& v) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> b(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    for (int j = 0; j < 4; ++j) b[i * 4 + static_cast<size_t>(j)] = static_cast<uint8_t>(u >> (8 * j));
  }
  std::string out;
  out.reserve((b.size() + 2) / 3 * 4);
  for (size_t i = 0; i < b.size(); i += 3) {
    const uint32_t n = (uint32_t{b[i]} << 16) | (i + 1 < b.size() ? uint32_t{b[i + 1]} << 8 : 0u) |
                       (i + 2 < b.size() ? uint32_t{b[i + 2]} : 0u);
    out += k[(n >> 18) & 63];
    out += k[(n >> 12) & 63];
    out += i + 1 < b.size() ? k[(n >> 6) & 63] : '=';
    out += i + 2 < b.size() ? k[n & 63] : '=';
  }
  return out;
}

namespace {

// A whole tensor as f32 (any type dequantize_row takes), checked against the expected shape.
std::vector<float> read_f32(const gguf::TensorInfo& t, int64_t ne0, int64_t ne1) {
  if (static_cast<int64_t>(t.ne[0]) != ne0 || static_cast<int64_t>(t.rows()) != ne1)
    fail("tensor '{}' is [{}, {}]; a rerank head of this model needs [{}, {}]", t.name, t.ne[0], t.rows(), ne0, ne1);
  std::vector<float> out(static_cast<size_t>(ne0 * ne1));
  const uint64_t row_bytes = t.n_bytes / t.rows();
  for (int64_t r = 0; r < ne1; ++r) quant::dequantize_row(t.type, t.data + r * row_bytes, out.data() + r * ne0, ne0);
  return out;
}

}  // namespace

std::optional<RankHead> RankHead::load(const gguf::GgufFile& f, int64_t n_embd) {
  const gguf::TensorInfo* out = f.find_tensor("cls.output.weight");
  if (!out) return std::nullopt;
  RankHead h;
  h.n_embd_ = n_embd;
  if (const gguf::TensorInfo* w = f.find_tensor("cls.weight")) {
    h.w1_ = read_f32(*w, n_embd, n_embd);
    if (const gguf::TensorInfo* b = f.find_tensor("cls.bias")) h.b1_ = read_f32(*b, n_embd, 1);
  }
  h.n_out_ = static_cast<int64_t>(out->rows());
  if (h.n_out_ < 1) fail("tensor 'cls.output.weight' has no rows");
  h.w2_ = read_f32(*out, n_embd, h.n_out_);
  if (const gguf::TensorInfo* b = f.find_tensor("cls.output.bias")) h.b2_ = read_f32(*b, h.n_out_, 1);
  return h;
}

float RankHead::score(std::span<const float> pooled) const {
  std::vector<float> x(pooled.begin(), pooled.end());
  if (!w1_.empty()) {
    std::vector<float> y(static_cast<size_t>(n_embd_));
    for (int64_t i = 0; i < n_embd_; ++i) {
      double s = b1_.empty() ? 0.0 : b1_[static_cast<size_t>(i)];
      for (int64_t j = 0; j < n_embd_; ++j)
        s += static_cast<double>(w1_[static_cast<size_t>(i * n_embd_ + j)]) * x[static_cast<size_t>(j)];
      y[static_cast<size_t>(i)] = static_cast<float>(std::tanh(s));
    }
    x = std::move(y);
  }
  double s = b2_.empty() ? 0.0 : b2_[0];
  for (int64_t j = 0; j < n_embd_; ++j)
    s += static_cast<double>(w2_[static_cast<size_t>(j)]) * x[static_cast<size_t>(j)];
  return static_cast<float>(s);
}

}  // namespace rocky::server
