// Token sampling with llama.cpp's chain and defaults (common/common.h, common/sampling.cpp,
// src/llama-sampling.cpp):
//   mask (a constraint: Sampler::set_mask) → logit bias → the samplers in `order` (default:
//   penalties → dry → top_n_sigma → top_k → typ_p → top_p → min_p → xtc → temperature) → softmax
//   → draw (mt19937). With mirostat 1 or 2 the chain is mask → bias → temperature → mirostat, as in
//   llama.cpp (the order and the other samplers are not used).
// temp ≤ 0 is greedy: the temperature step keeps only the largest logit (ties → lowest id).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/sampler_kind.hpp"

namespace rocky::runtime {

inline constexpr uint32_t k_default_seed = 0xFFFFFFFFu;  // llama.cpp LLAMA_DEFAULT_SEED: pick at random

// DRY's sequence breakers as tokens: a head token and the tokens that must follow it for the
// breaker to be complete (empty: the head token alone contains a breaker). Made by
// dry_breaker_sequences from the breaker strings and the vocabulary.
using DryBreakers = std::vector<std::pair<int32_t, std::vector<int32_t>>>;

struct SamplerParams {
  float temp = 0.8f;               // ≤ 0: greedy
  int32_t top_k = 40;              // ≤ 0: off
  float top_p = 0.95f;             // ≥ 1: off
  float min_p = 0.05f;             // ≤ 0: off
  float typical_p = 1.0f;          // ≥ 1: off (locally typical sampling)
  float top_n_sigma = -1.0f;       // ≤ 0: off. Keeps logits ≥ max − n·σ of the candidates' logits
  float xtc_probability = 0.0f;    // 0: off. The chance, per token, that XTC removes the top choices
  float xtc_threshold = 0.1f;      // > 0.5: off. XTC removes all tokens with p ≥ this but the least likely of them
  float repeat_penalty = 1.0f;     // 1: off. logit > 0 → logit / penalty, else logit · penalty
  float frequency_penalty = 0.0f;  // 0: off. logit -= count · penalty (count: in the last repeat_last_n)
  float presence_penalty = 0.0f;   // 0: off. logit -= penalty when the token is among them
  int32_t repeat_last_n = 64;      // how many recent tokens the penalties look at (0: off; -1: all)
  // DRY ("don't repeat yourself"): a token that would extend a repeat of n ≥ allowed_length tokens
  // of the last dry_penalty_last_n loses multiplier · base^(n − allowed_length) of its logit.
  float dry_multiplier = 0.0f;  // 0: off
  float dry_base = 1.75f;
  int32_t dry_allowed_length = 2;
  int32_t dry_penalty_last_n = -1;  // -1: the whole context; 0: off
  std::vector<std::string> dry_sequence_breakers = {"\n", ":", "\"", "*"};
  // The breakers as tokens (dry_breaker_sequences); null: the generator makes them from
  // dry_sequence_breakers when DRY is on.
  std::shared_ptr<const DryBreakers> dry_breakers;
  int32_t mirostat = 0;  // 0: off; 1: Mirostat; 2: Mirostat 2.0
  float mirostat_tau = 5.0f;
  float mirostat_eta = 0.1f;
  std::vector<SamplerKind> order = default_sampler_order();
  // Added to the logits before anything else (llama-server's logit_bias; -inf removes a token).
  std::vector<std::pair<int32_t, float>> logit_bias;
  uint32_t seed = k_default_seed;
  // Tokens the vocabulary has. An embedding/output table may be padded past it (legal: rows for
  // alignment); logits at ids ≥ n_vocab are never picked. 0 = every logit is a token.
  int32_t n_vocab = 0;
};

// llama.cpp's processing of DRY's breakers (llama_sampler_init_dry): every token whose text
// contains a breaker is a breaker on its own; a token whose text ends with the start of a breaker
// is a head, followed by the tokens of the breaker's rest (at most 20). Breakers are cut at 40
// bytes. `piece` gives a token's text, `tokenize` a string's tokens (no special tokens).
DryBreakers dry_breaker_sequences(const std::vector<std::string>& breakers, int32_t n_vocab,
                                  const std::function<std::string(int32_t)>& piece,
                                  const std::function<std::vector<int32_t>(const std::string&)>& tokenize);

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

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p);
  // Picks the next token from `logits` (the output rows, not modified); never an id ≥
  // SamplerParams::n_vocab.
  int32_t sample(std::span<const float> logits);
  // Records a token of the context (prompt or generated) for the penalties and DRY.
  void accept(int32_t token);
  uint32_t seed() const { return seed_; }
  // A constraint applied to the logits before the rest of the chain (a grammar's per-step token
  // mask: it sets the logits of the tokens it forbids to -inf). Called once per sample() with a
  // copy of the step's logits (the first n_vocab), which it may change.
  using Mask = std::function<void(std::span<float> logits)>;
  void set_mask(Mask m) { mask_ = std::move(m); }
  // The logits after the mask, the bias and the logit-changing samplers of the chain (penalties,
  // DRY), before any candidate is removed. For tests and log-probabilities.
  std::vector<float> adjusted(std::span<const float> logits) const;
  // The distribution sample() draws from: (token, probability) after the whole chain, largest
  // first. Draws the random numbers a step would (XTC's), so it is a step without the final draw.
  std::vector<std::pair<int32_t, double>> distribution(std::span<const float> logits);
  // The generator (speculative verification draws its uniforms from the request's stream).
  std::mt19937& rng() { return rng_; }
  // Mirostat's running target surprise (starts at 2 τ).
  float mirostat_mu() const { return mu_; }

 private:
  struct Cand {
    int32_t id;
    float logit;
  };
  SamplerParams p_;
  uint32_t seed_;
  std::mt19937 rng_;
  std::deque<int32_t> recent_;  // penalties' window
  std::deque<int32_t> dry_;     // DRY's window
  Mask mask_;
  float mu_ = 0;
  bool plain() const;  // no mask, no bias, no logit changes: greedy reads the logits where they are
  bool greedy_exact() const;
  void penalize(std::vector<Cand>& c, bool identity) const;
  void dry(std::vector<Cand>& c, bool identity) const;
  // The chain up to the draw: the candidates left and their probabilities (same order).
  void run_chain(std::span<const float> logits, std::vector<Cand>& c, std::vector<double>& prob);
  // The logits as the chain sees them: `logits` itself, or a copy in `adj` where a mask or a logit
  // bias changes them.
  std::span<const float> chain_input(std::span<const float> logits, std::vector<float>& adj) const;
  // Where the chain's work starts: the first sampler of p_.order that changes anything (penalties,
  // DRY and top-n-sigma ahead of it may have nothing to do).
  size_t first_working() const;
  // The chain's candidate order: by logit, descending, ties to the lower id — a total order, so the
  // k best are one set in one order however they are found.
  static bool by_logit(const Cand& a, const Cand& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
  // The top-k candidates of `l` in one pass (a heap of the k best so far), in by_logit order.
  static void top_k_one_pass(std::span<const float> l, size_t k, std::vector<Cand>& c);
};

}  // namespace rocky::runtime
