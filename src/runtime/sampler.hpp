// Token sampling with llama.cpp's default chain and defaults (common/common.h, common/sampling.cpp,
// src/llama-sampling.cpp at 0253fb21f):
//   mask (a constraint: Sampler::set_mask) → logit bias → penalties (repeat, frequency, presence)
//   → top-k → top-p → min-p → temperature → softmax → draw (mt19937).
// temp ≤ 0 is greedy: argmax after the mask, the bias and the penalties, ties → lowest id.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <functional>
#include <span>
#include <utility>
#include <vector>

namespace rocky::runtime {

inline constexpr uint32_t k_default_seed = 0xFFFFFFFFu;  // llama.cpp LLAMA_DEFAULT_SEED: pick at random

struct SamplerParams {
  float temp = 0.8f;               // ≤ 0: greedy
  int32_t top_k = 40;              // ≤ 0: off
  float top_p = 0.95f;             // ≥ 1: off
  float min_p = 0.05f;             // ≤ 0: off
  float repeat_penalty = 1.0f;     // 1: off. logit > 0 → logit / penalty, else logit · penalty
  float frequency_penalty = 0.0f;  // 0: off. logit -= count · penalty (count: in the last repeat_last_n)
  float presence_penalty = 0.0f;   // 0: off. logit -= penalty when the token is among them
  int32_t repeat_last_n = 64;      // how many recent tokens the penalties look at (0: off; -1: all)
  // Added to the logits before anything else (llama-server's logit_bias; -inf removes a token).
  std::vector<std::pair<int32_t, float>> logit_bias;
  uint32_t seed = k_default_seed;
  // Tokens the vocabulary has. An embedding/output table may be padded past it (legal: rows for
  // alignment); logits at ids ≥ n_vocab are never picked. 0 = every logit is a token.
  int32_t n_vocab = 0;
};

// Index of the largest value; ties → lowest index. With n_vocab > 0 only the first n_vocab values
// are candidates (padded logits rows: SamplerParams::n_vocab).
int32_t argmax(std::span<const float> logits, int32_t n_vocab = 0);

// A generated token's log-probability under the model (log-softmax of the raw logits, before any
// sampler: what llama-server reports by default) and the `n_top` most likely tokens with theirs
// (largest first, ties → lowest id). llama-server's n_probs, OpenAI's logprobs / top_logprobs.
struct TokenProbs {
  int32_t token = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};
// Over the first n_vocab logits (0: all).
TokenProbs token_probs(std::span<const float> logits, int32_t n_vocab, int32_t token, int32_t n_top);

// A sampling distribution: candidate ids and their probabilities (summing to 1), most likely first.
// What Sampler::sample() draws from; speculative verification compares it with a draft's.
struct TokenDist {
  std::vector<int32_t> ids;
  std::vector<double> p;
  double prob(int32_t id) const;  // 0 for an id outside the candidates
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p);
  // Picks the next token from `logits` (the output rows, not modified); never an id ≥
  // SamplerParams::n_vocab.
  int32_t sample(std::span<const float> logits);
  // The distribution sample() draws from for these logits (the whole chain; temp ≤ 0: a point mass
  // on the greedy pick). sample(l) == draw(distribution(l)) for the same generator state.
  TokenDist distribution(std::span<const float> logits) const;
  // Draws from `d` with the sampler's generator (one uniform number).
  int32_t draw(const TokenDist& d);
  std::mt19937& rng() { return rng_; }
  // Records a token of the context (prompt or generated) for the repetition penalty.
  void accept(int32_t token);
  uint32_t seed() const { return seed_; }
  // A constraint applied to the logits before the rest of the chain (a grammar's per-step token
  // mask: it sets the logits of the tokens it forbids to -inf). Called once per sample() with a
  // copy of the step's logits (the first n_vocab), which it may change.
  using Mask = std::function<void(std::span<float> logits)>;
  void set_mask(Mask m) { mask_ = std::move(m); }
  // The logits the chain's filters see: `logits` after the mask, the bias and the penalties (what
  // sample() draws from after top-k … temperature). For tests and log-probabilities.
  std::vector<float> adjusted(std::span<const float> logits) const;

 private:
  SamplerParams p_;
  uint32_t seed_;
  std::mt19937 rng_;
  std::deque<int32_t> recent_;
  Mask mask_;
  bool plain() const;  // no mask, no bias, no penalty in effect: the logits are used as they are
};

}  // namespace rocky::runtime
