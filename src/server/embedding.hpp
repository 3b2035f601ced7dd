// Embeddings of `rocky serve --embedding`: a sequence's hidden states (the last layer's output
// after output_norm, one n_embd row per token — what llama.cpp calls the embeddings) pooled into
// one vector, normalised as llama-server does, and the rerank head (cls.weight / cls.output.weight)
// applied to the pooled state.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf.hpp"

namespace rocky::server {

// llama.cpp's enum llama_pooling_type (the GGUF's <arch>.pooling_type values).
enum class Pooling : int { none = 0, mean = 1, cls = 2, last = 3, rank = 4 };

const char* to_string(Pooling p);
// "none" | "mean" | "cls" | "last" | "rank"; nullopt otherwise.
std::optional<Pooling> parse_pooling(const std::string& s);
// The file's <arch>.pooling_type (absent: none, as llama.cpp). Throws rocky::Error for a value
// outside 0..4.
Pooling gguf_pooling(const gguf::GgufFile& f);

// `hidden`: n_tokens rows of n_embd. none: all rows unchanged; mean: their average; cls: row 0;
// last and rank: the last row (rank is applied to it by RankHead).
std::vector<std::vector<float>> pool(std::span<const float> hidden, int64_t n_embd, Pooling p);

// llama.cpp's common_embd_normalize: -1 none, 0 max-abs scaled to int16 (32760), 1 taxicab, 2
// euclidean (L2), p > 2 the p-norm. A zero vector stays zero.
void normalize(std::vector<float>& v, int embd_normalize);

// Little-endian float32 bytes, base64 encoded (OpenAI's encoding_format "base64").
std::string base64_floats(const std::vector<float>& v);

// The classification head of a reranker: optional cls.weight [n_embd, n_embd] + cls.bias with a
// tanh (BERT-style rerankers), then cls.output.weight [n_in, n_cls_out] + cls.output.bias; the
// score is output 0 (llama-server's rerank score). Weights are read from the GGUF as f32/f16.
class RankHead {
 public:
  // nullopt when the file has no cls.output.weight (why() says what is missing).
  static std::optional<RankHead> load(const gguf::GgufFile& f, int64_t n_embd);
  static std::string why_missing() {
    return "the model has no classification head (cls.output.weight): it is not a reranker";
  }
  float score(std::span<const float> pooled) const;
  int64_t n_out() const { return n_out_; }

 private:
  int64_t n_embd_ = 0, n_out_ = 0;
  std::vector<float> w1_, b1_;  // cls.weight / cls.bias (empty: none)
  std::vector<float> w2_, b2_;  // cls.output.weight [n_out][n_embd] / cls.output.bias
};

}  // namespace rocky::server
