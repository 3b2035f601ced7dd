// Speculative decoding below the scheduler: drafters and the acceptance rule.
//
// A drafter proposes the next few tokens cheaply; the target evaluates [last token + draft] in one
// ubatch (every row's logits) and keeps the longest prefix the acceptance rule takes, plus one token
// of its own (Generator::generate with GenerateParams::drafter). On a bandwidth-bound device a few
// tokens in one ubatch cost about what one does, so every accepted draft token is nearly free.
//
// Acceptance (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding";
// Chen et al. 2023): with the target's sampling distribution p at a drafted position and the
// drafter's q, the drafted x is kept with probability min(1, p(x)/q(x)); otherwise the token is
// drawn from max(0, p − q) renormalised and the rest of the draft is dropped. The kept text is then
// distributed exactly as plain sampling from p. A deterministic drafter (n-gram lookup, a greedy
// draft model) is the point mass q = δ_x: kept with probability p(x), else drawn from p without x.
// At temperature 0, p is a point mass on the greedy pick: a draft token is kept iff it is that pick,
// so the text equals plain greedy decoding.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/sampler.hpp"
#include "runtime/session.hpp"
#include "tokenizer/vocab.hpp"

namespace rocky::runtime {

// A sampling distribution: candidate ids and their probabilities (summing to 1), most likely first.
struct TokenDist {
  std::vector<int32_t> ids;
  std::vector<double> p;
  double prob(int32_t id) const;  // 0 for an id outside the candidates
};
// Sampler::distribution's (token, probability) pairs as a TokenDist.
TokenDist to_dist(const std::vector<std::pair<int32_t, double>>& d);
// One draw from `d` (one uniform from `rng`).
int32_t draw(const TokenDist& d, std::mt19937& rng);

struct SpecVerdict {
  int32_t token = -1;     // the token kept at this position
  bool accepted = false;  // it is the drafted one (the next drafted position may follow)
};
// The acceptance rule at one drafted position: p is the target's distribution, x the drafted token,
// q the drafter's distribution (no ids: the point mass on x). One or two uniforms from `rng`.
SpecVerdict speculative_accept(const TokenDist& p, int32_t x, const TokenDist& q, std::mt19937& rng);

struct Draft {
  std::vector<int32_t> tokens;
  // Per token, the distribution it was drawn from (empty ids: drawn deterministically, the point
  // mass); either empty or tokens.size() entries.
  std::vector<TokenDist> q;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Proposes at most n_max tokens to follow `history` (the prompt and the output so far; its last
  // token is the one the target evaluates next). May propose none.
  virtual void draft(std::span<const int32_t> history, int32_t n_max, Draft& out) = 0;
  virtual const char* name() const = 0;
};

// Prompt lookup (llama.cpp's ngram-simple): the last `n` tokens of the history are looked for
// earlier in it (the latest occurrence wins); the tokens that followed are the draft (at most m).
class NgramDrafter final : public Drafter {
 public:
  NgramDrafter(int32_t n, int32_t m);
  void draft(std::span<const int32_t> history, int32_t n_max, Draft& out) override;
  const char* name() const override { return "ngram-simple"; }

 private:
  int32_t n_, m_;
};

// A draft model: its own Session (its own KV cache, on the same backend as the target or any
// other), kept in step with the history (the common prefix is kept, the rest evaluated). Greedy
// drafting (point masses) at temperature ≤ 0, else drawn from its own sampling distribution with
// the request's temperature/top-k/top-p/min-p. Drafting stops where the draft's most likely token
// has a probability below p_min (llama.cpp's --draft-p-min; decided before the draw, so the
// proposal distribution stays q).
class ModelDrafter final : public Drafter {
 public:
  ModelDrafter(Session& s, const SamplerParams& target_sampling, int32_t n_vocab, float p_min);
  void draft(std::span<const int32_t> history, int32_t n_max, Draft& out) override;
  const char* name() const override { return "draft"; }
  // The next request's sampling and p_min (a server slot keeps its drafter, and with it the draft
  // context's cells, from one request to the next: a follow-up evaluates only what is new).
  void set_request(const SamplerParams& target_sampling, float p_min);

 private:
  Session& s_;
  Sampler sampler_;
  bool greedy_;
  int32_t n_vocab_;
  float p_min_;
  std::vector<int32_t> held_;  // the tokens the draft context holds
  std::vector<float> logits_;
};

// Measurement only: proposes a known continuation (`oracle`, e.g. the target's own greedy output
// after `n_prompt` prompt tokens) and replaces each drafted token, with probability 1 − alpha, by
// another id: at temperature 0 each draft token is accepted with probability alpha, at no drafting
// cost. Proposes nothing once the output has left the oracle.
class LabDrafter final : public Drafter {
 public:
  LabDrafter(std::vector<int32_t> oracle, size_t n_prompt, double alpha, int32_t n_vocab, uint32_t seed);
  void draft(std::span<const int32_t> history, int32_t n_max, Draft& out) override;
  const char* name() const override { return "lab-alpha"; }

 private:
  std::vector<int32_t> oracle_;
  size_t n_prompt_;
  double alpha_;
  int32_t n_vocab_;
  std::mt19937 rng_;
};

// A draft model must speak the target's vocabulary: the same tokenizer type, BOS/EOS, sizes within
// 128 ids of each other and every shared id the same text. Throws rocky::Error naming what differs.
void check_draft_vocab(const tok::Vocab& target, const tok::Vocab& draft, const std::string& target_name,
                       const std::string& draft_name);

}  // namespace rocky::runtime
