#include "server/responses.hpp"

#include <fmt/format.h>

#include <ctime>
#include <mutex>
#include <random>

namespace rocky::server {

std::string build_fingerprint() {
#ifndef ROCKY_BUILD_NUMBER
#define ROCKY_BUILD_NUMBER 0
#define ROCKY_BUILD_COMMIT "unknown"
#endif
  return fmt::format("b{}-{}", ROCKY_BUILD_NUMBER, ROCKY_BUILD_COMMIT);
}

std::string random_id(const char* prefix) {
  static std::mutex m;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lk(m);
  return fmt::format("{}{:016x}", prefix, rng());
}

const char* finish_reason(const runtime::GenerateResult& r, bool tool_calls) {
  if (tool_calls) return "tool_calls";
  switch (r.reason) {
    case runtime::StopReason::Length:
    case runtime::StopReason::ContextFull: return "length";
    default: return "stop";
  }
}

json tool_call_delta(const chat::ToolCall& c, size_t index) {
  return {{"index", index},
          {"id", c.id.empty() ? chat::random_tool_call_id() : c.id},
          {"type", "function"},
          {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

json usage_json(const runtime::GenerateResult& r) {
  const int64_t completion = static_cast<int64_t>(r.tokens.size());
  return {{"prompt_tokens", r.n_prompt},
          {"completion_tokens", completion},
          {"total_tokens", r.n_prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", r.n_cached}}}};
}

json sampling_json(const runtime::SamplerParams& sp) {
  json samplers = json::array();
  for (runtime::SamplerKind k : sp.order) samplers.push_back(std::string(runtime::sampler_name(k)));
  return {{"seed", sp.seed},
          {"temperature", sp.temp},
          {"top_k", sp.top_k},
          {"top_p", sp.top_p},
          {"min_p", sp.min_p},
          {"repeat_last_n", sp.repeat_last_n},
          {"repeat_penalty", sp.repeat_penalty},
          {"presence_penalty", sp.presence_penalty},
          {"frequency_penalty", sp.frequency_penalty},
          {"typical_p", sp.typical_p},
          {"top_n_sigma", sp.top_n_sigma},
          {"xtc_probability", sp.xtc_probability},
          {"xtc_threshold", sp.xtc_threshold},
          {"dry_multiplier", sp.dry_multiplier},
          {"dry_base", sp.dry_base},
          {"dry_allowed_length", sp.dry_allowed_length},
          {"dry_penalty_last_n", sp.dry_penalty_last_n},
          {"dry_sequence_breakers", sp.dry_sequence_breakers},
          {"mirostat", sp.mirostat},
          {"mirostat_tau", sp.mirostat_tau},
          {"mirostat_eta", sp.mirostat_eta},
          {"samplers", std::move(samplers)}};
}

json timings_json(const runtime::GenerateResult& r) {
  const double prompt_n = r.n_prompt - r.n_cached;
  const double predicted_n = static_cast<double>(r.tokens.size());
  auto per_s = [](double n, double ms) { return ms > 0 ? n / (ms / 1000.0) : 0.0; };
  auto per_tok = [](double n, double ms) { return n > 0 ? ms / n : 0.0; };
  json t = {{"cache_n", r.n_cached},
            {"prompt_n", static_cast<int64_t>(prompt_n)},
            {"prompt_ms", r.prompt_ms},
            {"prompt_per_token_ms", per_tok(prompt_n, r.prompt_ms)},
            {"prompt_per_second", per_s(prompt_n, r.prompt_ms)},
            {"predicted_n", static_cast<int64_t>(predicted_n)},
            {"predicted_ms", r.gen_ms},
            {"predicted_per_token_ms", per_tok(predicted_n, r.gen_ms)},
            {"predicted_per_second", per_s(predicted_n, r.gen_ms)},
            // rocky's own: of predicted_ms, the time inside the model's evaluation (the rest is
            // sampling, detokenizing and streaming)
            {"predicted_eval_ms", r.gen_eval_ms},
            // rocky's own: structured output — tokens checked against their step's grammar mask (all
            // passed; 0 without a grammar) and the time spent computing and applying the masks
            {"grammar_checked_n", r.grammar_checked},
            {"grammar_ms", r.grammar_ms},
            // rocky's own: before the prefill, finding and loading the cached prefix (RAM/disk
            // reads, uploads into the KV cache); not part of prompt_ms
            {"cache_ms", r.cache_ms},
            // rocky's own: GPU time of the prefill's / the decode steps' command buffers (0
            // where unknown); prompt_ms − prompt_gpu_ms is host time and gaps
            {"prompt_gpu_ms", r.prompt_gpu_ms},
            {"predicted_gpu_ms", r.gen_gpu_ms},
            {"batch_seqs_max", r.batch_seqs_max}};
  if (r.drafted) {  // llama-server's names: drafted tokens the target evaluated, and of them kept
    t["draft_n"] = r.draft_n;
    t["draft_n_accepted"] = r.draft_n_accepted;
  }
  return t;
}

json Shapes::chunk_base(Kind kind, const std::string& id) const {
  return {{"id", id},
          {"object", kind == Kind::Chat ? "chat.completion.chunk" : "text_completion"},
          {"created", static_cast<int64_t>(std::time(nullptr))},
          {"model", model_id},
          {"system_fingerprint", build_fingerprint()}};
}

json Shapes::delta_chunk(Kind kind, const std::string& id, const std::string& text, int slot) const {
  if (kind == Kind::Native) return {{"content", text}, {"stop", false}, {"id_slot", slot}};
  json c = chunk_base(kind, id);
  if (kind == Kind::Chat)
    c["choices"] = json::array(
        {{{"index", 0}, {"delta", {{"content", text}}}, {"finish_reason", nullptr}, {"logprobs", nullptr}}});
  else
    c["choices"] = json::array({{{"index", 0}, {"text", text}, {"finish_reason", nullptr}, {"logprobs", nullptr}}});
  return c;
}

json Shapes::chat_delta(const std::string& id, const chat::ReplyStream::Delta& d, size_t& n_calls) const {
  json delta = json::object();
  if (!d.reasoning_content.empty()) delta["reasoning_content"] = d.reasoning_content;
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.tool_calls.empty()) {
    json calls = json::array();
    for (const auto& c : d.tool_calls) calls.push_back(tool_call_delta(c, n_calls++));
    delta["tool_calls"] = calls;
  }
  json c = chunk_base(Kind::Chat, id);
  c["choices"] = json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", nullptr}, {"logprobs", nullptr}}});
  return c;
}

json Shapes::role_chunk(const std::string& id) const {
  json c = chunk_base(Kind::Chat, id);
  c["choices"] = json::array({{{"index", 0},
                               {"delta", {{"role", "assistant"}, {"content", ""}}},
                               {"finish_reason", nullptr},
                               {"logprobs", nullptr}}});
  return c;
}

json Shapes::finish_chunk(Kind kind, const std::string& id, const runtime::GenerateResult& r, bool tool_calls) const {
  json c = chunk_base(kind, id);
  if (kind == Kind::Chat)
    c["choices"] = json::array({{{"index", 0},
                                 {"delta", json::object()},
                                 {"finish_reason", finish_reason(r, tool_calls)},
                                 {"logprobs", nullptr}}});
  else
    c["choices"] =
        json::array({{{"index", 0}, {"text", ""}, {"finish_reason", finish_reason(r)}, {"logprobs", nullptr}}});
  c["timings"] = timings_json(r);
  return c;
}

json Shapes::usage_chunk(Kind kind, const std::string& id, const runtime::GenerateResult& r) const {
  json u = chunk_base(kind, id);
  u["choices"] = json::array();
  u["usage"] = usage_json(r);
  u["timings"] = timings_json(r);  // as llama-server: the timings also on the usage chunk
  return u;
}

namespace {
json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}
}  // namespace

json Shapes::logprobs_json(Kind kind, const std::vector<runtime::TokenProbs>& probs) const {
  const bool native = kind == Kind::Native;
  json content = json::array();
  for (const runtime::TokenProbs& tp : probs) {
    auto entry = [&](int32_t id, float lp) {
      const std::string t = piece ? piece(id) : std::string();
      json e = json::object();
      if (native) e["id"] = id;
      e["token"] = t;
      e["logprob"] = lp;
      e["bytes"] = bytes_of(t);
      return e;
    };
    json e = entry(tp.token, tp.logprob);
    json top = json::array();
    for (const auto& [id, lp] : tp.top) top.push_back(entry(id, lp));
    e["top_logprobs"] = top;
    content.push_back(std::move(e));
  }
  if (native) return content;
  json out = {{"content", content}};
  if (kind == Kind::Completion) {  // OpenAI's legacy completions lists
    json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
    size_t off = 0;
    for (const json& e : content) {
      const std::string t = e["token"].get<std::string>();
      tokens.push_back(t);
      lps.push_back(e["logprob"]);
      json m = json::object();
      for (const json& x : e["top_logprobs"]) m[x["token"].get<std::string>()] = x["logprob"];
      tops.push_back(m);
      offsets.push_back(off);
      off += t.size();
    }
    out["tokens"] = tokens;
    out["token_logprobs"] = lps;
    out["top_logprobs"] = tops;
    out["text_offset"] = offsets;
  }
  return out;
}

json Shapes::final_json(Kind kind, const std::string& id, const runtime::GenerateResult& r, int slot,
                        const chat::ReplySyntax& syntax, const runtime::GenerateParams* params) const {
  if (kind == Kind::Native) {
    const char* stop_type = r.reason == runtime::StopReason::Eog          ? "eos"
                            : r.reason == runtime::StopReason::StopString ? "word"
                            : r.reason == runtime::StopReason::Cancelled  ? "none"
                                                                          : "limit";
    json out = {{"content", r.text},
                {"id_slot", slot},
                {"stop", true},
                {"model", model_id},
                {"tokens_predicted", r.tokens.size()},
                {"tokens_evaluated", r.n_prompt},
                {"tokens_cached", r.n_cached},
                {"truncated", r.reason == runtime::StopReason::ContextFull},
                {"has_new_line", r.text.find('\n') != std::string::npos},
                {"tokens", params && params->return_tokens ? json(r.tokens) : json::array()},
                {"stop_type", stop_type},
                {"stopping_word", r.stop_word},
                {"timings", timings_json(r)}};
    if (!r.probs.empty()) out["completion_probabilities"] = logprobs_json(kind, r);
    if (params) {
      json g = sampling_json(params->sampling);
      g["seed"] = r.seed;  // the seed drawn for a random one
      g["t_max_predict_ms"] = params->t_max_predict_ms;
      g["id_slot"] = params->id_slot;
      g["n_predict"] = params->max_tokens;
      g["n_probs"] = params->n_probs;
      g["ignore_eos"] = params->ignore_eos;
      g["stop"] = params->stop;
      g["model"] = model_id;
      if (params->speculative) {  // llama-server's names
        g["speculative.n_max"] = params->draft_max;
        g["speculative.n_min"] = params->draft_min;
        g["speculative.p_min"] = params->draft_p_min;
      }
      out["generation_settings"] = std::move(g);
    }
    return out;
  }
  json c = chunk_base(kind, id);
  if (kind == Kind::Chat) {
    const chat::ParsedReply out = chat::parse_reply(r.text, syntax);
    c["object"] = "chat.completion";
    c["choices"] = json::array({{{"index", 0},
                                 {"message", out.to_openai()},
                                 {"finish_reason", finish_reason(r, !out.tool_calls.empty())},
                                 {"logprobs", r.probs.empty() ? json(nullptr) : logprobs_json(kind, r)}}});
  } else {
    c["object"] = "text_completion";
    c["choices"] = json::array({{{"index", 0},
                                 {"text", r.text},
                                 {"finish_reason", finish_reason(r)},
                                 {"logprobs", r.probs.empty() ? json(nullptr) : logprobs_json(kind, r)}}});
  }
  c["usage"] = usage_json(r);
  c["timings"] = timings_json(r);
  return c;
}

json cache_json(const runtime::PrefixCacheStats& cs, uint64_t identity, const std::string& dir,
                const runtime::SchedulerStats& st) {
  auto tier = [](const runtime::TierStats& t, bool with_fill) {
    json j = {{"hits", t.hits}, {"misses", t.misses}};
    if (with_fill) {
      j["bytes"] = t.bytes;
      j["limit_bytes"] = t.limit;
      j["blocks"] = t.blocks;
      j["evictions"] = t.evictions;
    }
    return j;
  };
  json disk = tier(cs.disk, true);
  disk["enabled"] = cs.disk_enabled;
  disk["dir"] = dir;
  disk["errors"] = cs.disk_errors;
  disk["writes"] = cs.disk_writes;
  disk["pending_writes"] = cs.pending_writes;
  json device = tier(cs.device, false);
  device["cells_used"] = st.kv_used;
  device["cells"] = static_cast<int64_t>(st.n_ctx) * st.n_slots;
  return {{"block_tokens", cs.block},
          {"identity", fmt::format("{:016x}", identity)},
          {"tiers", {{"device", device}, {"ram", tier(cs.ram, true)}, {"disk", disk}}}};
}

}  // namespace rocky::server
