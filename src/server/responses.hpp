// The response bodies, per API: OpenAI chat.completion / text_completion (whole and as stream
// chunks), llama-server's native /completion, and rocky's /cache. Pure JSON from runtime results:
// no HTTP here (server.cpp sends them, stream.cpp frames the chunks as SSE events).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <functional>
#include <string>

#include "chat/toolcalls.hpp"
#include "runtime/generator.hpp"
#include "runtime/prefix_cache.hpp"
#include "runtime/scheduler.hpp"

namespace rocky::server {

using json = nlohmann::ordered_json;

// Which API a generation answers: /v1/chat/completions, /v1/completions, /completion.
enum class Kind { Chat, Completion, Native };

// "chatcmpl-…" / "cmpl-…": the prefix and 16 random hex digits.
std::string random_id(const char* prefix);
// "b<build>-<commit>" (llama-server's system_fingerprint and build_info): the commit count and
// short hash the build was configured at.
std::string build_fingerprint();

// OpenAI's finish_reason: "tool_calls" where the reply called tools, "length" at max_tokens or a
// full context, else "stop".
const char* finish_reason(const runtime::GenerateResult& r, bool tool_calls = false);

// One streamed tool call as an OpenAI delta entry.
json tool_call_delta(const chat::ToolCall& c, size_t index);

// OpenAI's usage (with prompt_tokens_details.cached_tokens).
json usage_json(const runtime::GenerateResult& r);

// A sampler's settings in llama-server's generation_settings shape (seed … samplers), for the
// defaults (/props, /slots) and for each answer's own.
json sampling_json(const runtime::SamplerParams& sp);

// llama-server's timings, plus rocky's own fields (predicted_eval_ms, cache_ms, *_gpu_ms, …).
json timings_json(const runtime::GenerateResult& r);

// The shapes of one model's generation answers. Log-probabilities (GenerateResult::probs): chat
// and /v1/completions carry OpenAI's logprobs {"content": [{token, logprob, bytes, top_logprobs}]}
// (/v1/completions also the legacy tokens / token_logprobs / top_logprobs / text_offset lists);
// native answers llama-server's completion_probabilities [{id, token, logprob, bytes, top_logprobs}].
struct Shapes {
  std::string model_id;  // "model" in every answer
  // A token's text for log-probabilities (the tokenizer's piece, special tokens shown).
  std::function<std::string(int32_t)> piece;

  // id, object, created, model, system_fingerprint.
  json chunk_base(Kind kind, const std::string& id) const;
  // A streamed piece of text (chat: delta.content; completion: text; native: content).
  json delta_chunk(Kind kind, const std::string& id, const std::string& text, int slot = 0) const;
  // A streamed chat delta: reasoning_content / content / tool_calls (`n_calls` numbers the calls
  // across the stream and is advanced past these).
  json chat_delta(const std::string& id, const chat::ReplyStream::Delta& d, size_t& n_calls) const;
  // The first chat chunk: delta {role: assistant, content: ""}.
  json role_chunk(const std::string& id) const;
  // The last OpenAI chunk: an empty delta/text with the finish_reason and the timings.
  json finish_chunk(Kind kind, const std::string& id, const runtime::GenerateResult& r, bool tool_calls) const;
  // stream_options.include_usage's chunk: no choices, the usage.
  json usage_chunk(Kind kind, const std::string& id, const runtime::GenerateResult& r) const;
  // The whole answer (not streamed); chat parses the reply's tool calls and reasoning by `syntax`.
  // Native: llama-server's /completion body (also its last streamed event, with content "").
  // Native answers also carry `tokens` (with params->return_tokens), `has_new_line`, `truncated`
  // (the context filled) and `generation_settings` (the request's sampling; params may be null).
  json final_json(Kind kind, const std::string& id, const runtime::GenerateResult& r, int slot,
                  const chat::ReplySyntax& syntax, const runtime::GenerateParams* params = nullptr) const;
  // The log-probabilities of r.probs in `kind`'s shape (see above).
  json logprobs_json(Kind kind, const runtime::GenerateResult& r) const { return logprobs_json(kind, r.probs); }
  // The same for some of the tokens (a streamed chunk's).
  json logprobs_json(Kind kind, const std::vector<runtime::TokenProbs>& probs) const;
};

// GET /cache: the prefix cache's tiers (device cells from the scheduler), identity and block size.
json cache_json(const runtime::PrefixCacheStats& cs, uint64_t identity, const std::string& dir,
                const runtime::SchedulerStats& st);

}  // namespace rocky::server
