// Drafters and the acceptance rule (see speculative.hpp).
#include "runtime/speculative.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.hpp"

namespace rocky::runtime {

double TokenDist::prob(int32_t id) const {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] == id) return p[i];
  return 0.0;
}

TokenDist to_dist(const std::vector<std::pair<int32_t, double>>& d) {
  TokenDist out;
  out.ids.reserve(d.size());
  out.p.reserve(d.size());
  for (const auto& [id, pr] : d) {
    out.ids.push_back(id);
    out.p.push_back(pr);
  }
  return out;
}

int32_t draw(const TokenDist& d, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  double r = u(rng), cum = 0;
  for (size_t i = 0; i < d.ids.size(); ++i) {
    cum += d.p[i];
    if (r < cum) return d.ids[i];
  }
  return d.ids.back();
}

SpecVerdict speculative_accept(const TokenDist& p, int32_t x, const TokenDist& q, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const bool point = q.ids.empty();
  const double px = p.prob(x);
  const double qx = point ? 1.0 : q.prob(x);
  // Keep x with probability min(1, p(x)/q(x)) (a q(x) of 0 cannot have proposed x: the point mass).
  if (px > 0 && u(rng) * (qx > 0 ? qx : 1.0) < px) return SpecVerdict{x, true};
  // Rejected: draw from max(0, p − q), renormalised (for the point mass: p without x).
  std::unordered_map<int32_t, double> qm;
  if (point || qx <= 0) {
    qm[x] = 1.0;
  } else {
    for (size_t i = 0; i < q.ids.size(); ++i) qm[q.ids[i]] = q.p[i];
  }
  TokenDist r;
  double sum = 0;
  for (size_t i = 0; i < p.ids.size(); ++i) {
    auto it = qm.find(p.ids[i]);
    const double d = p.p[i] - (it == qm.end() ? 0.0 : it->second);
    if (d <= 0) continue;
    r.ids.push_back(p.ids[i]);
    r.p.push_back(d);
    sum += d;
  }
  // p ≤ q everywhere happens only through rounding (then p = q: any draw from p is right).
  const TokenDist& from = sum > 0 ? r : p;
  const double total = sum > 0 ? sum : 1.0;
  double v = u(rng) * total, cum = 0;
  for (size_t i = 0; i < from.ids.size(); ++i) {
    cum += from.p[i];
    if (v < cum) return SpecVerdict{from.ids[i], false};
  }
  return SpecVerdict{from.ids.back(), false};
}

NgramDrafter::NgramDrafter(int32_t n, int32_t m) : n_(n), m_(m) {
  if (n < 1) fail("--spec-ngram-size-n must be at least 1 (got {})", n);
  if (m < 1) fail("--spec-ngram-size-m must be at least 1 (got {})", m);
}

void NgramDrafter::draft(std::span<const int32_t> history, int32_t n_max, Draft& out) {
  out.tokens.clear();
  out.q.clear();
  const size_t n = static_cast<size_t>(n_);
  if (history.size() <= n || n_max <= 0) return;
  const auto key = history.last(n);
  const size_t want = static_cast<size_t>(std::min(n_max, m_));
  // The latest earlier occurrence of the key (it may overlap the key itself: a repeating pattern).
  for (size_t start = history.size() - n; start-- > 0;) {
    if (!std::equal(key.begin(), key.end(), history.begin() + static_cast<std::ptrdiff_t>(start))) continue;
    const size_t from = start + n;
    const size_t k = std::min(want, history.size() - from);
    out.tokens.assign(history.begin() + static_cast<std::ptrdiff_t>(from),
                      history.begin() + static_cast<std::ptrdiff_t>(from + k));
    return;
  }
}

namespace {
SamplerParams draft_sampling(const SamplerParams& t, int32_t n_vocab) {
  SamplerParams d;
  d.temp = t.temp;
  d.top_k = t.top_k;
  d.top_p = t.top_p;
  d.min_p = t.min_p;
  // Its own stream of random numbers: the target's draws stay those of the request's seed.
  d.seed = t.seed == k_default_seed ? k_default_seed : t.seed ^ 0x9E3779B9u;
  d.n_vocab = n_vocab;
  return d;
}
}  // namespace

ModelDrafter::ModelDrafter(Session& s, const SamplerParams& target_sampling, int32_t n_vocab, float p_min)
    : s_(s),
      sampler_(draft_sampling(target_sampling, n_vocab)),
      greedy_(target_sampling.temp <= 0),
      n_vocab_(n_vocab),
      p_min_(p_min) {
  if (s.recurrent())
    fail(
        "the draft model has recurrent (linear-attention) layers: its state cannot be rolled back past rejected "
        "drafts; use a pure-attention draft model");
}

void ModelDrafter::set_request(const SamplerParams& target_sampling, float p_min) {
  sampler_ = Sampler(draft_sampling(target_sampling, n_vocab_));
  greedy_ = target_sampling.temp <= 0;
  p_min_ = p_min;
}

void ModelDrafter::draft(std::span<const int32_t> history, int32_t n_max, Draft& out) {
  out.tokens.clear();
  out.q.clear();
  if (history.empty() || n_max <= 0) return;
  if (static_cast<int64_t>(history.size()) + n_max > s_.n_ctx()) return;  // the draft context is full
  size_t keep = 0;
  while (keep < held_.size() && keep < history.size() && held_[keep] == history[keep]) ++keep;
  keep = std::min({keep, history.size() - 1, static_cast<size_t>(s_.n_past())});
  if (!s_.can_keep(static_cast<int32_t>(keep))) keep = 0;  // a sliding-window ring lost what keep needs
  s_.truncate(static_cast<int32_t>(keep));
  s_.eval_into(history.subspan(keep), false, {}, logits_);
  held_.assign(history.begin(), history.end());
  const size_t nv = static_cast<size_t>(n_vocab_);
  for (int32_t i = 0; i < n_max; ++i) {
    std::span<const float> row(logits_.data(), std::min(nv, logits_.size()));
    int32_t x = 0;
    if (greedy_) {
      x = argmax(row);
      if (p_min_ > 0) {  // the greedy pick's probability under the draft (softmax at temperature 1)
        const float mx = row[static_cast<size_t>(x)];
        double sum = 0;
        for (float v : row) sum += std::exp(static_cast<double>(v) - mx);
        if (1.0 / sum < p_min_) break;
      }
      out.tokens.push_back(x);
      out.q.emplace_back();
    } else {
      TokenDist q = to_dist(sampler_.distribution(row));
      if (q.p.front() < p_min_) break;  // decided before the draw: q stays the proposal
      x = draw(q, sampler_.rng());
      out.tokens.push_back(x);
      out.q.push_back(std::move(q));
    }
    if (i + 1 == n_max) break;
    s_.eval_into(std::span<const int32_t>(&x, 1), false, {}, logits_);
    held_.push_back(x);
  }
}

LabDrafter::LabDrafter(std::vector<int32_t> oracle, size_t n_prompt, double alpha, int32_t n_vocab, uint32_t seed)
    : oracle_(std::move(oracle)), n_prompt_(n_prompt), alpha_(alpha), n_vocab_(n_vocab), rng_(seed) {
  if (!(alpha >= 0 && alpha <= 1)) fail("the lab drafter's alpha must be in [0, 1] (got {})", alpha);
  if (n_vocab < 2) fail("the lab drafter needs a vocabulary of at least 2 tokens");
}

void LabDrafter::draft(std::span<const int32_t> history, int32_t n_max, Draft& out) {
  out.tokens.clear();
  out.q.clear();
  if (history.size() <= n_prompt_) return;
  const size_t g = history.size() - n_prompt_;  // generated tokens so far
  if (g > oracle_.size() ||
      !std::equal(history.begin() + static_cast<std::ptrdiff_t>(n_prompt_), history.end(), oracle_.begin()))
    return;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<int32_t> other(1, n_vocab_ - 1);
  for (size_t i = g; i < oracle_.size() && out.tokens.size() < static_cast<size_t>(std::max(n_max, 0)); ++i) {
    int32_t t = oracle_[i];
    if (u(rng_) >= alpha_) t = (t + other(rng_)) % n_vocab_;  // any id but the oracle's
    out.tokens.push_back(t);
  }
}

void check_draft_vocab(const tok::Vocab& target, const tok::Vocab& draft, const std::string& target_name,
                       const std::string& draft_name) {
  auto type = [](tok::VocabType t) { return t == tok::VocabType::Bpe ? "bpe" : "spm"; };
  const std::string both = fmt::format("draft model {} and target {}", draft_name, target_name);
  if (target.type() != draft.type())
    fail("{}: tokenizer types differ ({} vs {}); speculation needs one vocabulary", both, type(draft.type()),
         type(target.type()));
  if (target.bos() != draft.bos() || target.eos() != draft.eos())
    fail("{}: special tokens differ (bos {} vs {}, eos {} vs {})", both, draft.bos(), target.bos(), draft.eos(),
         target.eos());
  const size_t a = target.size(), b = draft.size();
  if ((a > b ? a - b : b - a) > 128) fail("{}: vocabulary sizes differ by more than 128 ({} vs {} tokens)", both, b, a);
  for (size_t i = 0; i < std::min(a, b); ++i) {
    const auto id = static_cast<tok::TokenId>(i);
    if (target.token(id).text != draft.token(id).text)
      fail("{}: token {} differs ('{}' vs '{}')", both, i, draft.token(id).text, target.token(id).text);
  }
}

}  // namespace rocky::runtime
