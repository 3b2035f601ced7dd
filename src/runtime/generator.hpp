// Generation below the CLI: prompt ids → prefill → sample → stop rules → UTF-8-safe text stream.
//
// One Generator::generate() call runs one request on one context:
//   1. prefill: the prompt tokens after the first `n_cached` (already in the context: the prefix cache's hook)
//      are evaluated in ubatches (LogitSource::eval);
//   2. sample (runtime::Sampler; the prompt is accepted first, for the repetition penalty);
//   3. stop rules, in this order per sampled token: an end-of-generation id (unless ignore_eos; the
//      id is neither kept nor emitted) → a stop string, which may span tokens (the text from the
//      match on is never emitted; text that could still become a stop string is held back until it
//      cannot) → max_tokens → the context being full (the last token is kept but not evaluated);
//   4. an incremental detokenizer (tok::StreamDecoder) that never emits half a UTF-8 code point;
//   5. a per-token callback, called once per kept token with the text that became safe to show
//      (possibly empty) and once more at the end with the flushed tail (token = -1); returning
//      false cancels the generation after that token.
// `rocky run` and `rocky serve` use this same code.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/matcher.hpp"
#include "runtime/sampler.hpp"
#include "core/error.hpp"
#include "runtime/session.hpp"
#include "runtime/speculative.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::runtime {

// What the generator evaluates: a Session in the programs, a scripted source in the tests.
class LogitSource {
 public:
  virtual ~LogitSource() = default;
  // Appends `tokens` to the context; the last token's logits (or every token's with all_logits,
  // row-major [tokens.size()][n_vocab]).
  virtual std::vector<float> eval(std::span<const int32_t> tokens, bool all_logits, const ProgressFn& progress) = 0;
  // The same into `out`; a source that can fill it in place keeps its capacity (the decode loop
  // then allocates its logits once).
  virtual void eval_into(std::span<const int32_t> tokens, bool all_logits, const ProgressFn& progress,
                         std::vector<float>& out) {
    out = eval(tokens, all_logits, progress);
  }
  // Speculative verification: [last token + draft] with every row's logits into `out`. A batched
  // source puts them into a decode step beside other sequences' tokens.
  virtual void eval_draft(std::span<const int32_t> tokens, std::vector<float>& out) {
    eval_into(tokens, true, {}, out);
  }
  virtual int32_t n_past() const = 0;
  virtual int32_t n_ctx() const = 0;
  virtual int32_t n_vocab() const = 0;
  // GPU time of the source's context so far (ms; backend::Context::gpu_ms; 0 where unknown).
  virtual double gpu_ms() const { return 0; }
  // Keeps the first n positions (speculative decoding drops the cells of rejected drafts); only
  // where can_truncate().
  virtual void truncate(int32_t n) { fail("this logit source cannot drop positions (asked to keep {})", n); }
  virtual bool can_truncate() const { return false; }
};

class SessionSource final : public LogitSource {
 public:
  explicit SessionSource(Session& s) : s_(s) {}
  std::vector<float> eval(std::span<const int32_t> tokens, bool all_logits, const ProgressFn& progress) override {
    return s_.eval(tokens, all_logits, progress);
  }
  void eval_into(std::span<const int32_t> tokens, bool all_logits, const ProgressFn& progress,
                 std::vector<float>& out) override {
    s_.eval_into(tokens, all_logits, progress, out);
  }
  void eval_draft(std::span<const int32_t> tokens, std::vector<float>& out) override { s_.eval_draft(tokens, out); }
  int32_t n_past() const override { return s_.n_past(); }
  int32_t n_ctx() const override { return s_.n_ctx(); }
  int32_t n_vocab() const override { return s_.n_vocab(); }
  double gpu_ms() const override { return s_.context().gpu_ms(); }
  void truncate(int32_t n) override { s_.truncate(n); }
  // A recurrent (linear-attention) state cannot be cut back (Session::truncate).
  bool can_truncate() const override { return !s_.recurrent(); }

 private:
  Session& s_;
};

enum class StopReason {
  Eog,          // an end-of-generation token
  StopString,   // one of GenerateParams::stop
  Length,       // max_tokens
  ContextFull,  // the context has no room for the next token
  Cancelled,    // the callback returned false
};
const char* stop_reason_name(StopReason r);  // "eog", "stop", "length", "context_full", "cancelled"

struct GenerateParams {
  SamplerParams sampling;
  int32_t max_tokens = -1;        // < 0: until end-of-generation or the end of the context
  std::vector<std::string> stop;  // stop strings (empty ones are ignored)
  bool ignore_eos = false;
  bool all_logits = false;   // on_prompt_logits gets every prompt position's logits
  int32_t n_cached = 0;      // leading prompt tokens already in the context; < prompt size
  bool cache_prompt = true;  // read by the Scheduler, not here: false = reuse no cached prefix
  // Structured output: every sampled token must keep the text inside this grammar (its mask is
  // applied to the logits before sampling; end-of-generation only where the grammar is complete).
  // With `grammar_triggers`, the grammar is lazy: text is free until one of the trigger strings
  // appears, and from the trigger's first byte on it must match the grammar (a tool call in `auto`
  // mode). The compiled grammar holds per-request caches: one per generation.
  std::shared_ptr<grammar::CompiledGrammar> grammar;
  std::vector<std::string> grammar_triggers;
  // ≥ 0: each kept token's log-probability and this many top alternatives (GenerateResult::probs).
  int32_t n_probs = -1;
  bool return_tokens = false;  // read by the server, not here: native answers list the token ids
  // > 0: llama-server's time limit: once the text has a new line, the generation stops
  // (StopReason::Length) when it has run longer than this since its first token.
  int32_t t_max_predict_ms = 0;
  int32_t id_slot = -1;  // read by the server, not here: ≥ 0 runs on that slot (Job::id_slot)
  // Speculative decoding (runtime/speculative.hpp): with a drafter, each step evaluates the last
  // token and up to draft_max drafted ones in one ubatch and keeps what the acceptance rule takes
  // (the same text at temperature 0, the same distribution above it). Drafts shorter than
  // draft_min are not evaluated. The source must be able to drop positions (not a recurrent model).
  Drafter* drafter = nullptr;
  int32_t draft_max = 16;
  int32_t draft_min = 0;
  // Read by the Scheduler, not here: draft with the slot's drafter (rocky serve's --spec-type/-md;
  // a request's speculative.n_max 0 turns it off), and a draft model's p_min (--draft-p-min,
  // speculative.p_min).
  bool speculative = false;
  float draft_p_min = 0.75f;
};

struct TokenEvent {
  int32_t token = -1;                 // the sampled id; -1 for the final flush
  std::string_view text;              // text that became safe to emit with this token (may be empty)
  int32_t index = 0;                  // 0-based position among the generated tokens
  const TokenProbs* probs = nullptr;  // with GenerateParams::n_probs ≥ 0: this token's (valid during the call)
};
// Returns false to stop after this token (StopReason::Cancelled).
using TokenFn = std::function<bool(const TokenEvent&)>;
// Called once after the prefill with the logits eval returned (the last row is the one sampled).
using PromptLogitsFn = std::function<void(std::span<const float> logits)>;

// DRY's breakers as the vocabulary's token sequences (dry_breaker_sequences over `tok`): a scan of
// the whole vocabulary (the server keeps the default breakers' result).
std::shared_ptr<const DryBreakers> dry_breakers(const tok::Tokenizer& tok, const std::vector<std::string>& breakers);

struct GenerateResult {
  std::vector<int32_t> tokens;  // kept ids (the end-of-generation id is not kept)
  std::string text;             // everything emitted, tail included
  StopReason reason = StopReason::Length;
  std::string stop_word;          // the stop string that matched (StopString only)
  int32_t n_prompt = 0;           // prompt tokens
  int32_t n_cached = 0;           // of which were already in the context
  double prompt_ms = 0;           // prefill wall time
  double gen_ms = 0;              // from the first sample to the final flush
  double gen_eval_ms = 0;         // of gen_ms, inside the source's eval() (the rest: sampling, decoding, callbacks)
  double cache_ms = 0;            // before the prefill: restoring the cached prefix (set by the scheduler)
  double prompt_gpu_ms = 0;       // of prompt_ms, GPU time of the prefill's command buffers (0 where unknown)
  double gen_gpu_ms = 0;          // of gen_ms, GPU time of the decode steps' command buffers
  uint32_t seed = 0;              // the sampler's seed (drawn at random when none was given)
  int32_t batch_seqs_max = 1;     // the most sequences in one step that carried this job's tokens
  int32_t grammar_checked = 0;    // sampled tokens checked against that step's grammar mask (all passed)
  double grammar_ms = 0;          // computing and applying grammar masks (the next step's mask runs while
                                  // the model evaluates the step: only what exceeds the step adds to gen_ms)
  std::vector<TokenProbs> probs;  // per kept token, with GenerateParams::n_probs ≥ 0
  int32_t draft_n = 0;            // drafted tokens the target evaluated (llama-server's timings.draft_n)
  int32_t draft_n_accepted = 0;   // of which were kept (timings.draft_n_accepted)
  int32_t spec_steps = 0;         // target evaluations that carried a draft
  bool drafted = false;           // a drafter ran (responses report draft_n and draft_n_accepted)
};

// Holds back text that may be the start of a stop string; finds stop strings split across pushes.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Appends `text`; returns what is now safe to emit. Once a stop string is complete, stopped()
  // is true, the returned text ends right before the match and later pushes return nothing.
  std::string push(std::string_view text);
  // The held-back rest (no stop string can complete any more).
  std::string flush();
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
  std::string matched_;
};

class Generator {
 public:
  Generator(LogitSource& src, const tok::Tokenizer& tok) : src_(src), tok_(tok) {}
  // Runs one generation after `prompt` (non-empty; its first p.n_cached tokens are already in the
  // context). Throws rocky::Error when the prompt does not fit the context.
  GenerateResult generate(std::span<const int32_t> prompt, const GenerateParams& p, const TokenFn& on_token = {},
                          const ProgressFn& progress = {}, const PromptLogitsFn& on_prompt_logits = {});

 private:
  LogitSource& src_;
  const tok::Tokenizer& tok_;
};

}  // namespace rocky::runtime
