// Sampler (see sampler.hpp).
#include "runtime/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace rocky::runtime {

DryBreakers dry_breaker_sequences(const std::vector<std::string>& breakers, int32_t n_vocab,
                                  const std::function<std::string(int32_t)>& piece,
                                  const std::function<std::vector<int32_t>(const std::string&)>& tokenize) {
  constexpr size_t k_max_chars = 40, k_max_tail = 20;  // llama.cpp's MAX_CHAR_LEN, MAX_SEQ_LEN
  DryBreakers out;
  std::vector<std::string> words(static_cast<size_t>(std::max(n_vocab, 0)));
  for (int32_t t = 0; t < n_vocab; ++t) words[static_cast<size_t>(t)] = piece(t);
  for (std::string b : breakers) {
    if (b.empty()) continue;
    if (b.size() > k_max_chars) b.resize(k_max_chars);
    for (int32_t t = 0; t < n_vocab; ++t) {
      const std::string& w = words[static_cast<size_t>(t)];
      if (w.find(b) != std::string::npos) {
        out.emplace_back(t, std::vector<int32_t>{});
        continue;
      }
      // Every position where the token's text ends with a prefix of the breaker: the rest of the
      // breaker, tokenized, must follow.
      for (size_t pos = w.find(b[0]); pos != std::string::npos; pos = w.find(b[0], pos + 1)) {
        size_t i = 1;
        bool match = true;
        for (; i < b.size() && pos + i < w.size(); ++i)
          if (w[pos + i] != b[i]) {
            match = false;
            break;
          }
        if (!match) continue;
        std::vector<int32_t> tail = tokenize(b.substr(i));
        if (tail.size() > k_max_tail) tail.resize(k_max_tail);
        const bool dup =
            std::any_of(out.begin(), out.end(), [&](const auto& e) { return e.first == t && e.second == tail; });
        if (!dup) out.emplace_back(t, std::move(tail));
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

int32_t argmax(std::span<const float> logits, int32_t n_vocab) {
  if (n_vocab > 0 && static_cast<size_t>(n_vocab) < logits.size()) logits = logits.first(static_cast<size_t>(n_vocab));
  // The first index of the largest value. Eight independent lanes, then the lanes' best: one
  // compare chain through `best` made a 151,936-token argmax 0.40 ms, the lanes 0.06 ms (it
  // runs once per generated token).
  constexpr size_t k_lanes = 8;
  const size_t n = logits.size();
  size_t best = 0;
  size_t i = 1;
  if (n >= 2 * k_lanes) {
    float bv[k_lanes];
    size_t bi[k_lanes];
    for (size_t k = 0; k < k_lanes; ++k) {
      bv[k] = logits[k];
      bi[k] = k;
    }
    for (i = k_lanes; i + k_lanes <= n; i += k_lanes)
      for (size_t k = 0; k < k_lanes; ++k)
        if (logits[i + k] > bv[k]) {
          bv[k] = logits[i + k];
          bi[k] = i + k;
        }
    best = bi[0];
    bool nan_lane = false;  // a NaN seed hides its lane (x > NaN is false): the one-chain walk then
    for (size_t k = 1; k < k_lanes; ++k) {
      nan_lane = nan_lane || bv[k] != bv[k];
      if (bv[k] > logits[best] || (bv[k] == logits[best] && bi[k] < best)) best = bi[k];
    }
    if (nan_lane) {
      best = 0;
      i = 1;
    }
  }
  for (; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<int32_t>(best);
}

TokenProbs token_probs(std::span<const float> logits, int32_t n_vocab, int32_t token, int32_t n_top) {
  if (n_vocab > 0 && static_cast<size_t>(n_vocab) < logits.size()) logits = logits.first(static_cast<size_t>(n_vocab));
  TokenProbs out;
  out.token = token;
  if (logits.empty()) return out;
  // log p_i = l_i − (max + log Σ exp(l_j − max)), the sum in double.
  float mx = logits[0];
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  const double lse = mx + std::log(sum);
  auto lp = [&](int32_t t) { return static_cast<float>(logits[static_cast<size_t>(t)] - lse); };
  if (token >= 0 && static_cast<size_t>(token) < logits.size()) out.logprob = lp(token);
  const size_t k = std::min(static_cast<size_t>(std::max(n_top, 0)), logits.size());
  if (k > 0) {
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), [&](int32_t a, int32_t b) {
      const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
      return la > lb || (la == lb && a < b);
    });
    for (size_t i = 0; i < k; ++i) out.top.emplace_back(ids[i], lp(ids[i]));
  }
  return out;
}

Sampler::Sampler(const SamplerParams& p)
    : p_(p),
      seed_(p.seed == k_default_seed ? std::random_device{}() : p.seed),
      rng_(seed_),
      mu_(2.0f * p.mirostat_tau) {}

void Sampler::accept(int32_t token) {
  if (p_.repeat_last_n != 0) {
    recent_.push_back(token);
    while (p_.repeat_last_n > 0 && recent_.size() > static_cast<size_t>(p_.repeat_last_n)) recent_.pop_front();
  }
  if (p_.dry_multiplier != 0.0f && p_.dry_penalty_last_n != 0) {
    dry_.push_back(token);
    while (p_.dry_penalty_last_n > 0 && dry_.size() > static_cast<size_t>(p_.dry_penalty_last_n)) dry_.pop_front();
  }
}

namespace {

bool in_order(const SamplerParams& p, SamplerKind k) {
  return p.mirostat == 0 && std::find(p.order.begin(), p.order.end(), k) != p.order.end();
}
bool penalties_on(const SamplerParams& p) {
  return p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
}
bool dry_on(const SamplerParams& p) {
  return p.dry_multiplier != 0.0f && p.dry_base >= 1.0f && p.dry_penalty_last_n != 0;
}
bool is_neg_inf(float v) { return std::isinf(v) && v < 0; }

}  // namespace

bool Sampler::plain() const {
  const bool pen = !recent_.empty() && penalties_on(p_) && in_order(p_, SamplerKind::penalties);
  const bool dr = !dry_.empty() && dry_on(p_) && in_order(p_, SamplerKind::dry);
  return !mask_ && p_.logit_bias.empty() && !pen && !dr;
}

// Greedy (temp ≤ 0 applied by the chain) is the argmax of the adjusted logits unless a sampler
// that may remove the largest one runs: typical sampling, XTC. top-k, top-p, min-p and
// top-n-sigma always keep it.
bool Sampler::greedy_exact() const {
  if (p_.temp > 0.0f) return false;
  if (p_.mirostat != 0) return true;  // temperature first: one candidate left
  if (!in_order(p_, SamplerKind::temperature)) return false;
  for (SamplerKind k : p_.order) {
    if (k == SamplerKind::temperature) break;
    if (k == SamplerKind::typical_p && p_.typical_p < 1.0f) return false;
    if (k == SamplerKind::xtc && p_.xtc_probability > 0.0f && p_.xtc_threshold <= 0.5f) return false;
  }
  return true;
}

// llama.cpp's penalties sampler: each token among the recent ones, once, by its count there.
void Sampler::penalize(std::vector<Cand>& c, bool identity) const {
  if (recent_.empty() || !penalties_on(p_)) return;
  std::unordered_map<int32_t, int> count;
  for (int32_t t : recent_) ++count[t];
  auto apply = [&](float& v, int n) {
    v = v <= 0 ? v * p_.repeat_penalty : v / p_.repeat_penalty;
    v -= static_cast<float>(n) * p_.frequency_penalty + p_.presence_penalty;
  };
  if (identity) {
    for (const auto& [t, n] : count)
      if (t >= 0 && static_cast<size_t>(t) < c.size()) apply(c[static_cast<size_t>(t)].logit, n);
  } else {
    for (Cand& x : c)
      if (auto it = count.find(x.id); it != count.end()) apply(x.logit, it->second);
  }
}

// llama.cpp's DRY (llama_sampler_dry_apply): the repeats of the context's end earlier in the
// window, cut at the last sequence breaker.
void Sampler::dry(std::vector<Cand>& c, bool identity) const {
  if (!dry_on(p_) || !p_.dry_breakers) return;
  const int n = static_cast<int>(dry_.size());
  const int allowed = p_.dry_allowed_length;
  if (n <= allowed) return;
  const DryBreakers& br = *p_.dry_breakers;  // sorted by head token
  auto heads = [&](int32_t t) {
    return std::equal_range(br.begin(), br.end(), std::pair<int32_t, std::vector<int32_t>>{t, {}},
                            [](const auto& a, const auto& b) { return a.first < b.first; });
  };
  auto w = [&](int i) { return dry_[static_cast<size_t>(i)]; };
  // Step 1: the last breaker (head at distance i from the end, its tail after it) limits the repeat.
  int rep_limit = n;
  for (int i = 0; i < n; ++i) {
    auto [lo, hi] = heads(w(n - 1 - i));
    int longest = -1;
    for (auto it = lo; it != hi; ++it) {
      const int len = static_cast<int>(it->second.size());
      if (len <= longest || len > i) continue;
      bool match = true;
      for (int k = 0; k < len && match; ++k) match = it->second[static_cast<size_t>(k)] == w(n - i + k);
      if (match) longest = len;
    }
    if (longest >= 0) {
      rep_limit = i - longest;
      break;
    }
  }
  if (rep_limit < allowed) return;
  // Steps 2-3: for each earlier position j, the length of the context's suffix that ends there
  // (capped at rep_limit); the token after j would extend that repeat.
  std::unordered_map<int32_t, int> max_repeat;
  for (int j = 0; j < n - 1; ++j) {
    int len = 0;
    while (len < rep_limit && j - len >= 0 && w(j - len) == w(n - 1 - len)) ++len;
    if (len < allowed) continue;
    int& m = max_repeat[w(j + 1)];
    m = std::max(m, len);
  }
  if (max_repeat.empty()) return;
  // Step 4: the penalty, except on tokens that are breakers on their own. The exponent is capped
  // so that base^exp stays finite.
  const float k_float_max_log = 88.7228391f;
  const int max_exp = p_.dry_base > 1.000001f ? static_cast<int>(k_float_max_log / std::log(p_.dry_base)) : 0;
  auto apply = [&](Cand& x, int len) {
    auto [lo, hi] = heads(x.id);
    for (auto it = lo; it != hi; ++it)
      if (it->second.empty()) return;
    int e = len - allowed;
    if (max_exp > 0 && e > max_exp) e = max_exp;
    x.logit -= p_.dry_multiplier * std::pow(p_.dry_base, static_cast<float>(e));
  };
  if (identity) {
    for (const auto& [t, len] : max_repeat)
      if (t >= 0 && static_cast<size_t>(t) < c.size()) apply(c[static_cast<size_t>(t)], len);
  } else {
    for (Cand& x : c)
      if (auto it = max_repeat.find(x.id); it != max_repeat.end()) apply(x, it->second);
  }
}

std::vector<float> Sampler::adjusted(std::span<const float> logits) const {
  if (p_.n_vocab > 0 && static_cast<size_t>(p_.n_vocab) < logits.size())
    logits = logits.first(static_cast<size_t>(p_.n_vocab));
  std::vector<float> l(logits.begin(), logits.end());
  if (mask_) mask_(l);
  for (const auto& [t, b] : p_.logit_bias)
    if (t >= 0 && static_cast<size_t>(t) < l.size()) l[static_cast<size_t>(t)] += b;
  if (p_.mirostat != 0) return l;  // llama.cpp: no penalties, no DRY with mirostat
  std::vector<Cand> c(l.size());
  for (size_t i = 0; i < l.size(); ++i) c[i] = {static_cast<int32_t>(i), l[i]};
  for (SamplerKind k : p_.order) {
    if (k == SamplerKind::penalties) penalize(c, true);
    if (k == SamplerKind::dry) dry(c, true);
  }
  for (size_t i = 0; i < l.size(); ++i) l[i] = c[i].logit;
  return l;
}

std::span<const float> Sampler::chain_input(std::span<const float> logits, std::vector<float>& adj) const {
  if (!mask_ && p_.logit_bias.empty()) return logits;
  adj.assign(logits.begin(), logits.end());
  if (mask_) mask_(adj);
  for (const auto& [t, b] : p_.logit_bias)
    if (t >= 0 && static_cast<size_t>(t) < adj.size()) adj[static_cast<size_t>(t)] += b;
  return adj;
}

size_t Sampler::first_working() const {
  size_t first = 0;
  while (first < p_.order.size() &&
         ((p_.order[first] == SamplerKind::penalties && (recent_.empty() || !penalties_on(p_))) ||
          (p_.order[first] == SamplerKind::dry && (dry_.empty() || !dry_on(p_) || !p_.dry_breakers)) ||
          (p_.order[first] == SamplerKind::top_n_sigma && p_.top_n_sigma <= 0.0f)))
    ++first;
  return first;
}

void Sampler::top_k_one_pass(std::span<const float> l, size_t k, std::vector<Cand>& c) {
  c.clear();
  c.reserve(k);
  for (size_t i = 0; i < k; ++i) c.push_back({static_cast<int32_t>(i), l[i]});
  std::make_heap(c.begin(), c.end(), by_logit);  // the front: the worst of the best k so far
  for (size_t i = k; i < l.size(); ++i) {
    if (l[i] <= c.front().logit) continue;  // not better (an equal logit has a higher id)
    std::pop_heap(c.begin(), c.end(), by_logit);
    c.back() = {static_cast<int32_t>(i), l[i]};
    std::push_heap(c.begin(), c.end(), by_logit);
  }
  std::sort_heap(c.begin(), c.end(), by_logit);
}

void Sampler::run_chain(std::span<const float> logits, std::vector<Cand>& c, std::vector<double>& prob) {
  std::vector<float> adj;
  const std::span<const float> l = chain_input(logits, adj);
  bool identity = true;  // c[i].id == i: the whole vocabulary in id order
  bool sorted = false;   // by_logit
  // Top-k as the chain's first working sampler (the default settings): one pass, no candidate array
  // of the whole vocabulary. `first`: the first sampler in p_.order that runs below.
  size_t first = first_working();
  if (p_.mirostat == 0 && first < p_.order.size() && p_.order[first] == SamplerKind::top_k && p_.top_k > 0 &&
      static_cast<size_t>(p_.top_k) < l.size()) {
    top_k_one_pass(l, static_cast<size_t>(p_.top_k), c);
    identity = false;
    sorted = true;
    ++first;
  } else {
    first = 0;
    c.resize(l.size());
    for (size_t i = 0; i < l.size(); ++i) c[i] = {static_cast<int32_t>(i), l[i]};
  }
  // Tokens the mask or a -inf bias removed are never candidates (not even the last one).
  auto drop_removed = [&] {
    if (std::none_of(c.begin(), c.end(), [](const Cand& x) { return is_neg_inf(x.logit); })) return;
    if (std::all_of(c.begin(), c.end(), [](const Cand& x) { return is_neg_inf(x.logit); })) {
      c.resize(1);
    } else {
      c.erase(std::remove_if(c.begin(), c.end(), [](const Cand& x) { return is_neg_inf(x.logit); }), c.end());
    }
    identity = false;
  };
  auto sort_all = [&] {
    if (!sorted) std::sort(c.begin(), c.end(), by_logit);
    sorted = true;
    identity = false;
  };
  // Probabilities of the candidates as they stand (softmax of the logits, in double).
  auto softmax = [&] {
    prob.resize(c.size());
    float mx = c[0].logit;
    for (const Cand& x : c) mx = std::max(mx, x.logit);
    double sum = 0;
    for (size_t i = 0; i < c.size(); ++i) sum += prob[i] = std::exp(static_cast<double>(c[i].logit) - mx);
    for (double& x : prob) x /= sum;
  };
  auto temperature = [&] {
    if (p_.temp > 0.0f) {
      for (Cand& x : c) x.logit /= p_.temp;
      return;
    }
    size_t best = 0;  // greedy: the largest logit, ties → lowest id
    for (size_t i = 1; i < c.size(); ++i)
      if (c[i].logit > c[best].logit || (c[i].logit == c[best].logit && c[i].id < c[best].id)) best = i;
    c = {c[best]};
    identity = false;
    sorted = true;
  };

  if (p_.mirostat != 0) {
    temperature();
    drop_removed();
    sort_all();
    softmax();
    if (p_.mirostat == 1) {
      // Estimate the Zipf exponent s from the top m = 100 tokens, then keep the top k that make the
      // expected surprise mu (llama.cpp's llama_sampler_mirostat_apply).
      const size_t m = 100;
      double sum_ti_bi = 0, sum_ti_sq = 0;
      for (size_t i = 0; i + 1 < m && i + 1 < c.size(); ++i) {
        const double t_i = std::log(static_cast<double>(i + 2) / static_cast<double>(i + 1));
        const double b_i = std::log(prob[i] / prob[i + 1]);
        sum_ti_bi += t_i * b_i;
        sum_ti_sq += t_i * t_i;
      }
      if (sum_ti_sq > 0) {
        const double s_hat = sum_ti_bi / sum_ti_sq, eps = s_hat - 1;
        const double nv = static_cast<double>(logits.size());
        const double k = std::pow(eps * std::pow(2.0, static_cast<double>(mu_)) / (1 - std::pow(nv, -eps)), 1 / s_hat);
        const size_t keep = std::isfinite(k) ? static_cast<size_t>(std::max(k, 1.0)) : c.size();
        if (keep < c.size()) c.resize(keep);
      }
    } else {
      // Mirostat 2: drop the tokens whose surprise −log2 p exceeds mu (keep at least one).
      size_t keep = 0;
      while (keep < c.size() && -std::log2(prob[keep]) <= mu_) ++keep;
      c.resize(std::max<size_t>(keep, 1));
    }
    softmax();
    return;
  }

  for (size_t ki = first; ki < p_.order.size(); ++ki) {
    const SamplerKind k = p_.order[ki];
    if (c.size() <= 1 && k != SamplerKind::penalties && k != SamplerKind::dry) continue;
    switch (k) {
      case SamplerKind::penalties: penalize(c, identity); break;
      case SamplerKind::dry: dry(c, identity); break;
      case SamplerKind::top_n_sigma: {
        if (p_.top_n_sigma <= 0.0f) break;
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        size_t n = 0;
        for (const Cand& x : c)
          if (!is_neg_inf(x.logit)) mx = std::max(mx, static_cast<double>(x.logit)), sum += x.logit, ++n;
        if (n == 0) break;
        const double mean = sum / static_cast<double>(n);
        double acc = 0;
        for (const Cand& x : c)
          if (!is_neg_inf(x.logit)) acc += (x.logit - mean) * (x.logit - mean);
        const double thr = mx - p_.top_n_sigma * std::sqrt(acc / static_cast<double>(n));
        c.erase(std::remove_if(c.begin(), c.end(), [&](const Cand& x) { return x.logit < thr; }), c.end());
        identity = false;
        break;
      }
      case SamplerKind::top_k: {
        if (p_.top_k <= 0) break;
        const size_t kk = std::min(static_cast<size_t>(p_.top_k), c.size());
        if (!sorted) std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(kk), c.end(), by_logit);
        c.resize(kk);
        sorted = true;
        identity = false;
        break;
      }
      case SamplerKind::typical_p: {
        // Locally typical sampling: keep the tokens whose surprise is closest to the entropy until
        // their mass exceeds p, in that order.
        if (p_.typical_p >= 1.0f) break;
        drop_removed();
        sort_all();
        softmax();
        double entropy = 0;
        for (double q : prob) entropy -= q > 0 ? q * std::log(q) : 0;
        std::vector<double> shifted(c.size());
        for (size_t i = 0; i < c.size(); ++i) shifted[i] = std::fabs(-std::log(prob[i]) - entropy);
        std::vector<size_t> idx(c.size());
        std::iota(idx.begin(), idx.end(), size_t{0});
        std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return shifted[a] < shifted[b]; });
        double cum = 0;
        size_t keep = idx.size();
        for (size_t i = 0; i < idx.size(); ++i) {
          cum += prob[idx[i]];
          if (cum > p_.typical_p) {
            keep = i + 1;
            break;
          }
        }
        std::vector<Cand> kept;
        kept.reserve(keep);
        for (size_t i = 0; i < keep; ++i) kept.push_back(c[idx[i]]);
        c = std::move(kept);
        sorted = false;
        break;
      }
      case SamplerKind::top_p: {
        if (p_.top_p >= 1.0f) break;
        drop_removed();
        sort_all();
        softmax();
        double cum = 0;
        size_t keep = c.size();
        for (size_t i = 0; i < c.size(); ++i) {
          cum += prob[i];
          if (cum >= p_.top_p) {
            keep = i + 1;
            break;
          }
        }
        c.resize(std::max<size_t>(1, keep));
        break;
      }
      case SamplerKind::min_p: {
        // Keep p ≥ min_p · p_max, i.e. logit ≥ max + log(min_p); the order is kept.
        if (p_.min_p <= 0.0f) break;
        float mx = c[0].logit;
        for (const Cand& x : c) mx = std::max(mx, x.logit);
        const float thr = mx + std::log(p_.min_p);
        c.erase(std::remove_if(c.begin(), c.end(), [&](const Cand& x) { return x.logit < thr; }), c.end());
        identity = false;
        break;
      }
      case SamplerKind::xtc: {
        // Exclude the top choices: with probability xtc_probability, every token with p ≥ the
        // threshold except the least likely of them goes.
        if (p_.xtc_probability <= 0.0f || p_.xtc_threshold > 0.5f) break;
        std::uniform_real_distribution<float> u(0.0f, 1.0f);
        if (u(rng_) > p_.xtc_probability) break;
        drop_removed();
        if (c.size() < 2) break;
        sort_all();
        softmax();
        size_t last = 0;
        for (size_t i = 0; i < c.size() && prob[i] >= p_.xtc_threshold; ++i) last = i;
        if (last > 0) c.erase(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(last));
        break;
      }
      case SamplerKind::temperature: temperature(); break;
    }
  }
  drop_removed();
  if (!sorted) sort_all();
  softmax();
}

std::vector<std::pair<int32_t, double>> Sampler::distribution(std::span<const float> logits) {
  if (p_.n_vocab > 0 && static_cast<size_t>(p_.n_vocab) < logits.size())
    logits = logits.first(static_cast<size_t>(p_.n_vocab));
  // Greedy: the point mass on sample()'s pick, without a candidate list of the whole vocabulary
  // (speculative verification asks for it at every drafted position).
  if (greedy_exact()) return {{plain() ? argmax(logits) : argmax(adjusted(logits)), 1.0}};
  std::vector<Cand> c;
  std::vector<double> prob;
  run_chain(logits, c, prob);
  std::vector<std::pair<int32_t, double>> out;
  for (size_t i = 0; i < c.size(); ++i) out.emplace_back(c[i].id, prob[i]);
  return out;
}

int32_t Sampler::sample(std::span<const float> logits) {
  // Padded tables: rows past the vocabulary are not tokens (SamplerParams::n_vocab).
  if (p_.n_vocab > 0 && static_cast<size_t>(p_.n_vocab) < logits.size())
    logits = logits.first(static_cast<size_t>(p_.n_vocab));
  // Greedy with nothing to adjust reads the logits where they are (no copy of n_vocab floats per token).
  if (greedy_exact()) return plain() ? argmax(logits) : argmax(adjusted(logits));

  std::vector<Cand> c;
  std::vector<double> prob;
  run_chain(logits, c, prob);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double r = u(rng_);
  double cum = 0;
  size_t pick = c.size() - 1;
  for (size_t i = 0; i < c.size(); ++i) {
    cum += prob[i];
    if (r < cum) {
      pick = i;
      break;
    }
  }
  if (p_.mirostat != 0) {
    // Move mu toward the target surprise tau by the observed one.
    const double surprise = -std::log2(prob[pick]);
    mu_ -= p_.mirostat_eta * static_cast<float>(surprise - p_.mirostat_tau);
  }
  return c[pick].id;
}

}  // namespace rocky::runtime
