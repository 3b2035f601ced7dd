// Request parsing and validation for `rocky serve`: HTTP bodies → typed requests, or an ApiError
// (an HTTP status and an OpenAI error object naming the offending field).
//
// Bodies are parsed as ordered_json: key order is kept, so templates (tojson of tools, arguments)
// see exactly what the client sent. Pure functions of the body: no model, no I/O (the libFuzzer target fuzz/server_request_fuzz.cpp
// drives every parser here). Checks that need the model (prompt length vs the context) happen
// later, in the server. What agents really send is accepted: `content` as a string, null (an
// assistant message with tool_calls) or a list of {"type":"text"} parts on any role; tool-call
// `arguments` as an object or a string; extra message fields pass through to the template.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/sampler_kind.hpp"

namespace rocky::server {

// An OpenAI error: {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError : std::exception {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the field, e.g. "messages[2].role" ("" = null)
  std::string code;   // e.g. "invalid_type", "invalid_value" ("" = null)
  // Fields merged into the error object over the above (llama-server's exceed_context_size_error
  // carries "code": 400, "n_prompt_tokens" and "n_ctx").
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  ApiError(int status_, std::string message_, std::string param_ = {}, std::string code_ = {},
           std::string type_ = "invalid_request_error")
      : status(status_),
        message(std::move(message_)),
        type(std::move(type_)),
        param(std::move(param_)),
        code(std::move(code_)) {}
  const char* what() const noexcept override { return message.c_str(); }
  nlohmann::ordered_json to_json() const;
};

// One logit_bias entry: a token id, or a string whose tokens all get the bias (llama-server's
// form; the server tokenizes it). `bias` -inf: the token is never sampled (llama-server's false).
struct LogitBias {
  int64_t id = -1;   // ≥ 0: a token id (checked against the vocab by the server)
  std::string text;  // id < 0: this text's tokens
  double bias = 0;
  std::string param;  // the field, for errors: "logit_bias.15043", "logit_bias[2]"
};

// Sampling and stop fields shared by chat, completions and /completion. Absent fields take the
// server's defaults (--temp, --seed, -n, …).
struct SamplingFields {
  std::optional<double> temperature, top_p, min_p, repeat_penalty, presence_penalty, frequency_penalty;
  std::optional<int64_t> top_k, seed, repeat_last_n;
  // llama-server's other samplers (runtime::SamplerParams has their meanings and defaults).
  std::optional<double> typical_p, top_n_sigma, xtc_probability, xtc_threshold, dry_multiplier, dry_base, mirostat_tau,
      mirostat_eta;
  std::optional<int64_t> dry_allowed_length, dry_penalty_last_n, mirostat;
  std::optional<std::vector<std::string>> dry_sequence_breakers;
  std::optional<std::vector<runtime::SamplerKind>> samplers;  // the chain's order
  int64_t n = 1;                                              // choices (OpenAI's n)
  int64_t id_slot = -1;                                       // llama-server's: ≥ 0 runs on that slot
  int64_t t_max_predict_ms = 0;  // llama-server's: > 0 stops the generation after this long (finish_reason "length")
  std::vector<LogitBias> logit_bias;
  int64_t n_probs = -1;               // ≥ 0: log-probabilities of each token and this many alternatives
  bool return_tokens = false;         // llama-server's: native answers carry the generated ids in `tokens`
  std::optional<int64_t> max_tokens;  // absent: -n; -1: until end-of-generation or the end of the context
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool cache_prompt = true;  // llama-server's field, on every endpoint: false = reuse no cached prefix
  // Structured output, as GBNF (checked: it parses): from `grammar`, `json_schema` or
  // `response_format` (json_object / json_schema), at most one of them; "" = none.
  std::string grammar;
  std::string grammar_param;  // the field it came from, for errors
  // llama-server's speculative.n_max / n_min / p_min (flat dotted keys, or one "speculative"
  // object); checked against the server's drafter later. spec_param: the first one given.
  std::optional<int64_t> spec_n_max, spec_n_min;
  std::optional<double> spec_p_min;
  std::string spec_param;
};

struct ChatRequest {
  std::string model;
  nlohmann::ordered_json messages;   // validated; as sent (normalise_for_template makes the template input)
  nlohmann::ordered_json tools;      // null or the validated array
  std::string tool_choice = "auto";  // "auto" | "none" | "required" | "function" (a named one)
  std::string tool_choice_name;      // tool_choice "function": the function's name (one of `tools`)
  bool parallel_tool_calls = true;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  // A final assistant message is continued (prefill) unless add_generation_prompt is given; both
  // true is a 400 (as /apply-template).
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  bool stream = false;
  bool include_usage = false;
  SamplingFields sampling;
};

struct CompletionRequest {
  std::string model;
  std::optional<std::string> prompt_text;  // prompt as a string…
  std::vector<int32_t> prompt_tokens;      // …or as token ids
  bool stream = false;
  bool include_usage = false;
  bool cache_prompt = true;  // /completion; accepted (the prefix cache, , uses it)
  SamplingFields sampling;
};

struct TokenizeRequest {
  std::string content;
  bool add_special = false;
  bool parse_special = true;
  bool with_pieces = false;
};

struct ApplyTemplateRequest {
  nlohmann::ordered_json messages;      // as given (validated only as a list of objects)
  nlohmann::ordered_json tools;         // null when absent
  bool add_generation_prompt = true;    // default: true unless the final message is continued
  bool continue_final_message = false;  // default: true when the last message is the assistant's
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
};

// The GBNF `make` returns (a schema converted, or a grammar as sent), checked to parse; a failure
// of either is a 400 naming `param`.
std::string checked_gbnf(const std::string& param, const std::function<std::string()>& make);

// The body as a JSON object: 400 for invalid UTF-8 (naming the byte offset), malformed JSON, or a
// value that is not an object.
nlohmann::ordered_json parse_body(std::string_view body);

ChatRequest parse_chat(const nlohmann::ordered_json& body);
// `native`: llama-server's POST /completion (n_predict as well as max_tokens; cache_prompt).
CompletionRequest parse_completion(const nlohmann::ordered_json& body, bool native);
TokenizeRequest parse_tokenize(const nlohmann::ordered_json& body);
std::vector<int32_t> parse_detokenize(const nlohmann::ordered_json& body);
ApplyTemplateRequest parse_apply_template(const nlohmann::ordered_json& body);

// Chat messages as the template sees them in a chat completion: null or absent content becomes "",
// list-of-text-parts content is joined into a string (parts separated by "\n"), tool-call arguments given as strings parsed to objects
// when they are JSON (as llama-server does for Jinja templates); other fields unchanged.
nlohmann::ordered_json normalise_for_template(const nlohmann::ordered_json& messages);

// Byte offset of the first invalid UTF-8 sequence in `s`, or npos.
size_t find_invalid_utf8(std::string_view s);

}  // namespace rocky::server
