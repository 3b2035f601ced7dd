#include "runtime/generator.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "core/error.hpp"

namespace rocky::runtime {
namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Per mask byte, the eight lanes' bounds: +inf keeps a logit, -inf removes it (min(x, bound)).
struct MaskBounds {
  float v[256][8];
  constexpr MaskBounds() : v{} {
    for (int b = 0; b < 256; ++b)
      for (int j = 0; j < 8; ++j)
        v[b][j] = ((b >> j) & 1) ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  }
};
constexpr MaskBounds k_mask_bounds;

// Sets the logits of the tokens `mask` leaves out to -inf (ids past the mask are not tokens).
// Returns whether any token stays allowed. Eight logits per mask byte through a bounds table: a
// min the compiler vectorises (a per-bit select over 64 lanes did not, at ≈ 3× the time on a
// 151,936-token vocabulary).
bool apply_mask(std::span<float> logits, const std::vector<uint64_t>& mask) {
  const size_t n = logits.size();
  uint64_t any = 0;
  float* x = logits.data();
  const size_t full = std::min(mask.size(), n / 64);
  for (size_t w = 0; w < full; ++w) {
    const uint64_t m = mask[w];
    any |= m;
    if (m == ~uint64_t{0}) continue;
    float* xw = x + w * 64;
    for (size_t b = 0; b < 8; ++b) {
      const float* bound = k_mask_bounds.v[(m >> (8 * b)) & 0xff];
      float* y = xw + 8 * b;
      for (size_t j = 0; j < 8; ++j) y[j] = std::min(y[j], bound[j]);
    }
  }
  for (size_t i = full * 64; i < n; ++i) {
    const bool on = i / 64 < mask.size() && ((mask[i / 64] >> (i & 63)) & 1);
    any |= on ? 1 : 0;
    if (!on) x[i] = -INFINITY;
  }
  return any != 0;
}

// The next step's grammar mask, computed on a thread of its own while the model evaluates the step
// (it depends only on the tokens accepted so far). One persistent thread per constrained
// generation: start() hands the matcher over as soon as the sampled token is accepted, before the
// next evaluation is submitted, and take() waits only where the mask took longer than the step.
// The matcher is not thread-safe: between start() and take() only the worker touches it.
class MaskAhead {
 public:
  MaskAhead() = default;
  MaskAhead(const MaskAhead&) = delete;
  MaskAhead& operator=(const MaskAhead&) = delete;
  ~MaskAhead() {
    if (!th_.joinable()) return;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return !busy_; });  // the matcher outlives this object only by declaration order
      quit_ = true;
    }
    cv_.notify_all();
    th_.join();
  }
  bool pending() const { return pending_; }
  void start(grammar::Matcher& m) {
    if (!th_.joinable()) th_ = std::thread([this] { loop(); });
    {
      std::lock_guard lk(mu_);
      job_ = &m;
      busy_ = true;
      err_ = nullptr;
    }
    pending_ = true;
    cv_.notify_all();
  }
  // The mask start() asked for (rethrows what computing it threw); `ms`: the time it took.
  const std::vector<uint64_t>* take(double& ms) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return !busy_; });
    pending_ = false;
    ms = ms_;
    if (err_) std::rethrow_exception(err_);
    return out_;
  }

 private:
  void loop() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return quit_ || job_ != nullptr; });
      if (quit_) return;
      grammar::Matcher* m = job_;
      job_ = nullptr;
      lk.unlock();
      const auto t0 = Clock::now();
      const std::vector<uint64_t>* out = nullptr;
      std::exception_ptr err;
      try {
        out = &m->mask();
      } catch (...) {
        err = std::current_exception();
      }
      const double ms = ms_since(t0);
      lk.lock();
      out_ = out;
      err_ = err;
      ms_ = ms;
      busy_ = false;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread th_;
  grammar::Matcher* job_ = nullptr;
  const std::vector<uint64_t>* out_ = nullptr;
  std::exception_ptr err_;
  double ms_ = 0;
  bool busy_ = false, quit_ = false;
  bool pending_ = false;  // the generating thread's own view: a start() not taken yet
};

bool mask_has(const std::vector<uint64_t>& mask, int32_t t) {
  const auto u = static_cast<size_t>(t);
  return t >= 0 && u / 64 < mask.size() && ((mask[u / 64] >> (u & 63)) & 1);
}
// The prompt and its cached part against the context (before anything is evaluated).
void check_request(std::span<const int32_t> prompt, const GenerateParams& p, int64_t n_ctx) {
  if (prompt.empty()) fail("the prompt is empty (no tokens to evaluate)");
  if (p.n_cached < 0 || static_cast<size_t>(p.n_cached) >= prompt.size())
    fail("n_cached {} must be below the prompt's {} tokens", p.n_cached, prompt.size());
  if (static_cast<int64_t>(prompt.size()) > n_ctx)
    fail("the prompt has {} tokens, more than the context size {}", prompt.size(), n_ctx);
}

// Whether a drafter runs; throws for what speculative decoding cannot serve: a state that cannot
// be cut back, mirostat.
bool drafting(const GenerateParams& p, const SamplerParams& sp, bool can_truncate) {
  if (!p.drafter) return false;
  if (!can_truncate)
    fail(
        "speculative decoding: the model has recurrent (linear-attention) layers whose state cannot be rolled back "
        "past rejected drafts; run it without a drafter");
  if (p.draft_max < 1) fail("speculative decoding: --draft-max must be at least 1 (got {})", p.draft_max);
  if (sp.mirostat != 0)
    fail(
        "speculative decoding: mirostat adapts its target after every drawn token, which verification does not "
        "replay; use it without a drafter");
  return true;
}

}  // namespace

std::shared_ptr<const DryBreakers> dry_breakers(const tok::Tokenizer& tok, const std::vector<std::string>& breakers) {
  return std::make_shared<const DryBreakers>(dry_breaker_sequences(
      breakers, static_cast<int32_t>(tok.vocab().size()), [&](int32_t t) { return tok.token_to_piece(t, true); },
      [&](const std::string& s) { return tok.tokenize(s, false, false); }));
}

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::Eog: return "eog";
    case StopReason::StopString: return "stop";
    case StopReason::Length: return "length";
    case StopReason::ContextFull: return "context_full";
    case StopReason::Cancelled: return "cancelled";
  }
  return "?";
}

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  pending_.append(text);
  if (stops_.empty()) {
    std::string r;
    r.swap(pending_);
    return r;
  }
  // The earliest complete match wins (ties: the longer stop string).
  size_t best = std::string::npos;
  for (const auto& s : stops_) {
    const size_t at = pending_.find(s);
    if (at == std::string::npos) continue;
    if (at < best || (at == best && s.size() > matched_.size())) {
      best = at;
      matched_ = s;
    }
  }
  if (best != std::string::npos) {
    stopped_ = true;
    std::string r = pending_.substr(0, best);
    pending_.clear();
    return r;
  }
  // Hold back the longest suffix of pending_ that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    const size_t max_k = std::min(s.size() - 1, pending_.size());
    for (size_t k = max_k; k > hold; --k) {
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  std::string r = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return r;
}

std::string StopMatcher::flush() {
  std::string r;
  if (!stopped_) r.swap(pending_);
  pending_.clear();
  return r;
}

GenerateResult Generator::generate(std::span<const int32_t> prompt, const GenerateParams& p, const TokenFn& on_token,
                                   const ProgressFn& progress, const PromptLogitsFn& on_prompt_logits) {
  check_request(prompt, p, src_.n_ctx());
  GenerateResult res;
  res.n_prompt = static_cast<int32_t>(prompt.size());
  res.n_cached = p.n_cached;

  // Structured output (see GenerateParams::grammar). The first mask is computed by `ahead` (see
  // MaskAhead; declared after `gm`, so it is done with the matcher before the matcher goes) while
  // the prompt is evaluated, and so is every later one while its step is evaluated. grammar_ms
  // counts the masks' own time wherever they ran, and applying them.
  std::optional<grammar::Matcher> gm;
  bool constrained = false;
  std::string lazy_text;  // lazy grammar: the text so far, searched for a trigger
  if (p.grammar) {
    gm.emplace(p.grammar);
    constrained = p.grammar_triggers.empty();
  }
  MaskAhead ahead;
  if (constrained && p.max_tokens != 0) ahead.start(*gm);

  const auto t_prompt = Clock::now();
  const double gpu0 = src_.gpu_ms();
  std::vector<float> logits = src_.eval(prompt.subspan(static_cast<size_t>(p.n_cached)), p.all_logits, progress);
  res.prompt_ms = ms_since(t_prompt);
  const double gpu1 = src_.gpu_ms();
  res.prompt_gpu_ms = gpu1 - gpu0;
  if (on_prompt_logits) on_prompt_logits(logits);
  const size_t nv = static_cast<size_t>(src_.n_vocab());
  // Only the last row goes on, in a vector of its own size (eval_into keeps capacity: an all-logits
  // prompt's n_prompt · n_vocab floats would otherwise stay allocated through the generation).
  if (logits.size() > nv) logits = std::vector<float>(logits.end() - static_cast<std::ptrdiff_t>(nv), logits.end());

  // A padded embedding table (alignment rows) is legal: ids past the vocabulary are never sampled.
  SamplerParams sp = p.sampling;
  if (sp.n_vocab == 0) sp.n_vocab = static_cast<int32_t>(std::min(tok_.vocab().size(), nv));
  if (sp.dry_multiplier != 0.0f && !sp.dry_breakers) sp.dry_breakers = dry_breakers(tok_, sp.dry_sequence_breakers);
  Sampler sampler(sp);
  res.seed = sampler.seed();
  for (int32_t t : prompt) sampler.accept(t);
  tok::StreamDecoder dec(tok_, /*special=*/false);
  // The continuation follows the prompt: prime the decoder with the last prompt token so SPM's
  // leading-space removal (for the first piece of a text) does not eat the first generated space.
  dec.push(prompt.back());
  dec.flush();
  StopMatcher stop(p.stop);
  const int64_t max_tokens = p.max_tokens < 0 ? INT64_MAX : p.max_tokens;

  // Speculative decoding (GenerateParams::drafter): `logits` holds one row per position of the last
  // evaluation; row k follows draft[k - 1] (row 0: the last kept token).
  res.drafted = drafting(p, sp, src_.can_truncate());
  std::vector<int32_t> history;  // prompt + kept output: what the drafter reads
  if (p.drafter) history.assign(prompt.begin(), prompt.end());
  Draft draft;
  size_t n_rows = 1;
  int32_t base = 0;  // with a draft: n_past before the evaluation of [last token + draft]

  const auto t_gen = Clock::now();
  bool done = max_tokens == 0;
  bool has_new_line = false;  // t_max_predict_ms counts only once the text has a new line
  res.reason = StopReason::Length;
  while (!done) {
    size_t k = 0;  // the row being sampled
    for (; k < n_rows; ++k) {
      std::span<float> row(logits.data() + k * nv, nv);
      const std::vector<uint64_t>* mask = nullptr;
      if (constrained) {
        if (ahead.pending()) {
          double mask_ms = 0;
          mask = ahead.take(mask_ms);  // waits only where the mask took longer than the step
          res.grammar_ms += mask_ms;
        }
        const auto t_mask = Clock::now();
        if (mask == nullptr) mask = &gm->mask();
        if (!apply_mask(row, *mask)) fail("grammar: no token of the vocabulary can continue the output");
        res.grammar_ms += ms_since(t_mask);
      }
      int32_t t = -1;
      bool accepted = false;
      if (k < draft.tokens.size()) {
        // A drafted position: the acceptance rule against the request's own sampling distribution.
        static const TokenDist k_point;
        const SpecVerdict v = speculative_accept(to_dist(sampler.distribution(row)), draft.tokens[k],
                                                 draft.q.empty() ? k_point : draft.q[k], sampler.rng());
        t = v.token;
        accepted = v.accepted;
      } else {
        t = sampler.sample(row);
      }
      if (constrained) {
        // The check tests rely on: the sampled token was in this step's mask and the matcher takes it.
        if (!mask_has(*mask, t) || !gm->accept(t))
          fail("grammar: sampled token {} was not allowed by the grammar (internal error)", t);
        ++res.grammar_checked;
        // The next mask starts now, before the token is streamed and the next step submitted; not
        // with a draft (its later rows need the matcher here), where nothing follows, or where it is
        // cached (a lookup at sampling time costs less than the hand-offs to the mask thread).
        const bool more = static_cast<int64_t>(res.tokens.size()) + 1 < max_tokens;
        if (!p.drafter && !gm->finished() && more && !gm->mask_cached()) ahead.start(*gm);
      }
      if ((!p.ignore_eos && tok_.vocab().is_eog(t)) || (constrained && gm->finished())) {
        res.reason = StopReason::Eog;
        done = true;
        break;
      }
      sampler.accept(t);
      if (p.n_probs >= 0) res.probs.push_back(token_probs(row, sp.n_vocab, t, p.n_probs));
      res.tokens.push_back(t);
      if (p.drafter) history.push_back(t);
      if (accepted) ++res.draft_n_accepted;
      if (gm && !constrained) {
        // Lazy grammar: constrain from the first trigger on (the text from the trigger is fed first).
        lazy_text += tok_.token_to_piece(t, false);
        for (const std::string& trig : p.grammar_triggers) {
          const size_t at = trig.empty() ? std::string::npos : lazy_text.find(trig);
          if (at == std::string::npos) continue;
          constrained = gm->accept_bytes(std::string_view(lazy_text).substr(at));
          if (!constrained) gm.reset();  // the text around the trigger already left the grammar
          break;
        }
      }
      const std::string text = stop.push(dec.push(t));
      res.text += text;
      const int32_t index = static_cast<int32_t>(res.tokens.size()) - 1;
      const bool keep_going =
          !on_token || on_token(TokenEvent{t, text, index, p.n_probs >= 0 ? &res.probs.back() : nullptr});
      if (stop.stopped()) {
        res.reason = StopReason::StopString;
        done = true;
      } else if (!keep_going) {
        res.reason = StopReason::Cancelled;
        done = true;
      } else if (static_cast<int64_t>(res.tokens.size()) >= max_tokens) {
        res.reason = StopReason::Length;
        done = true;
      } else {
        has_new_line = has_new_line || text.find('\n') != std::string::npos;
        if (p.t_max_predict_ms > 0 && has_new_line && ms_since(t_gen) > p.t_max_predict_ms) {
          res.reason = StopReason::Length;
          done = true;
        }
      }
      if (done || !accepted) break;
    }
    // The context keeps the last token and the drafts before row k (the token sampled from row k is
    // evaluated next): the cells of the rejected rest are dropped.
    if (n_rows > 1) src_.truncate(base + 1 + static_cast<int32_t>(std::min(k, n_rows - 1)));
    if (done) break;
    if (src_.n_past() >= src_.n_ctx()) {
      res.reason = StopReason::ContextFull;
      break;
    }
    if (constrained && !ahead.pending() && !gm->mask_cached()) ahead.start(*gm);
    const int32_t t = res.tokens.back();
    draft.tokens.clear();
    draft.q.clear();
    if (p.drafter) {
      // Room: the context after the last token, and the tokens still to generate after the one the
      // last token's row gives.
      const int64_t room =
          std::min<int64_t>(src_.n_ctx() - src_.n_past() - 1, max_tokens - static_cast<int64_t>(res.tokens.size()) - 1);
      const int32_t n_max = static_cast<int32_t>(std::min<int64_t>(p.draft_max, room));
      if (n_max > 0) p.drafter->draft(history, n_max, draft);
      if (draft.tokens.size() > static_cast<size_t>(std::max(n_max, 0)) ||
          draft.tokens.size() < static_cast<size_t>(std::max(p.draft_min, 1))) {
        draft.tokens.clear();
        draft.q.clear();
      }
    }
    const auto t_eval = Clock::now();
    if (draft.tokens.empty()) {
      n_rows = 1;
      src_.eval_into(std::span<const int32_t>(&t, 1), false, {}, logits);
    } else {
      base = src_.n_past();
      std::vector<int32_t> batch;
      batch.reserve(draft.tokens.size() + 1);
      batch.push_back(t);
      batch.insert(batch.end(), draft.tokens.begin(), draft.tokens.end());
      n_rows = batch.size();
      src_.eval_draft(batch, logits);
      res.draft_n += static_cast<int32_t>(draft.tokens.size());
      ++res.spec_steps;
    }
    res.gen_eval_ms += ms_since(t_eval);
  }
  if (res.reason != StopReason::StopString) {
    // The decoder's held-back bytes may still complete a stop string.
    std::string tail = stop.push(dec.flush());
    if (stop.stopped()) res.reason = StopReason::StopString;
    tail += stop.flush();
    res.text += tail;
    if (on_token) on_token(TokenEvent{-1, tail, static_cast<int32_t>(res.tokens.size())});
  } else if (on_token) {
    on_token(TokenEvent{-1, {}, static_cast<int32_t>(res.tokens.size())});
  }
  if (stop.stopped()) res.stop_word = stop.matched();
  res.gen_ms = ms_since(t_gen);
  res.gen_gpu_ms = src_.gpu_ms() - gpu1;
  return res;
}

}  // namespace rocky::runtime
