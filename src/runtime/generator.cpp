#include "runtime/generator.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <future>
#include <optional>

#include "core/error.hpp"

namespace rocky::runtime {
namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Sets the logits of the tokens `mask` leaves out to -inf (ids past the mask are not tokens).
// Returns whether any token stays allowed.
bool apply_mask(std::vector<float>& logits, const std::vector<uint64_t>& mask) {
  const size_t n = logits.size();
  bool any = false;
  for (size_t w = 0; w < mask.size() && w * 64 < n; ++w) {
    const uint64_t m = mask[w];
    any = any || m != 0;
    if (m == ~uint64_t{0}) continue;
    const size_t end = std::min(n, w * 64 + 64);
    for (size_t i = w * 64; i < end; ++i)
      if (!((m >> (i & 63)) & 1)) logits[i] = -INFINITY;
  }
  for (size_t i = mask.size() * 64; i < n; ++i) logits[i] = -INFINITY;
  return any;
}
bool mask_has(const std::vector<uint64_t>& mask, int32_t t) {
  const auto u = static_cast<size_t>(t);
  return t >= 0 && u / 64 < mask.size() && ((mask[u / 64] >> (u & 63)) & 1);
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
  if (prompt.empty()) fail("the prompt is empty (no tokens to evaluate)");
  if (p.n_cached < 0 || static_cast<size_t>(p.n_cached) >= prompt.size())
    fail("n_cached {} must be below the prompt's {} tokens", p.n_cached, prompt.size());
  if (static_cast<int64_t>(prompt.size()) > src_.n_ctx())
    fail("the prompt has {} tokens, more than the context size {}", prompt.size(), src_.n_ctx());
  GenerateResult res;
  res.n_prompt = static_cast<int32_t>(prompt.size());
  res.n_cached = p.n_cached;

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

  // Structured output (see GenerateParams::grammar).
  std::optional<grammar::Matcher> gm;
  bool constrained = false;
  std::string lazy_text;  // lazy grammar: the text so far, searched for a trigger
  if (p.grammar) {
    gm.emplace(p.grammar);
    constrained = p.grammar_triggers.empty();
  }

  const auto t_gen = Clock::now();
  bool done = max_tokens == 0;
  bool has_new_line = false;  // t_max_predict_ms counts only once the text has a new line
  res.reason = StopReason::Length;
  // The next step's mask depends only on the tokens accepted so far, so it is computed on another
  // thread while the model evaluates that step (the GPU's time hides the CPU's; std::async's future
  // joins it on every exit path). grammar_ms counts the masks' own time wherever they ran.
  std::future<const std::vector<uint64_t>*> mask_ahead;
  double mask_ms = 0;
  while (!done) {
    const std::vector<uint64_t>* mask = nullptr;
    if (constrained) {
      if (mask_ahead.valid()) {
        mask = mask_ahead.get();  // waits only where the mask took longer than the step
        res.grammar_ms += mask_ms;
      }
      const auto t_mask = Clock::now();
      if (mask == nullptr) mask = &gm->mask();
      if (!apply_mask(logits, *mask)) fail("grammar: no token of the vocabulary can continue the output");
      res.grammar_ms += ms_since(t_mask);
    }
    const int32_t t = sampler.sample(logits);
    if (constrained) {
      // The check tests rely on: the sampled token was in this step's mask and the matcher takes it.
      if (!mask_has(*mask, t) || !gm->accept(t))
        fail("grammar: sampled token {} was not allowed by the grammar (internal error)", t);
      ++res.grammar_checked;
    }
    if ((!p.ignore_eos && tok_.vocab().is_eog(t)) || (constrained && gm->finished())) {
      res.reason = StopReason::Eog;
      break;
    }
    sampler.accept(t);
    if (p.n_probs >= 0) res.probs.push_back(token_probs(logits, sp.n_vocab, t, p.n_probs));
    res.tokens.push_back(t);
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
      break;
    }
    if (!keep_going) {
      res.reason = StopReason::Cancelled;
      break;
    }
    if (static_cast<int64_t>(res.tokens.size()) >= max_tokens) {
      res.reason = StopReason::Length;
      break;
    }
    has_new_line = has_new_line || text.find('\n') != std::string::npos;
    if (p.t_max_predict_ms > 0 && has_new_line && ms_since(t_gen) > p.t_max_predict_ms) {
      res.reason = StopReason::Length;
      break;
    }
    if (src_.n_past() >= src_.n_ctx()) {
      res.reason = StopReason::ContextFull;
      break;
    }
    if (constrained)
      mask_ahead = std::async(std::launch::async, [&gm, &mask_ms] {
        const auto t0 = Clock::now();
        const std::vector<uint64_t>* m = &gm->mask();
        mask_ms = ms_since(t0);
        return m;
      });
    const auto t_eval = Clock::now();
    src_.eval_into(std::span<const int32_t>(&t, 1), false, {}, logits);
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
