#include "server/server.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "core/error.hpp"
#include "grammar/constraint.hpp"
#include "model/model.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/prefix_cache.hpp"
#include "runtime/scheduler.hpp"
#include "runtime/session.hpp"
#include "chat/toolcalls.hpp"
#include "server/chat_template.hpp"
#include "server/connection.hpp"
#include "server/request.hpp"
#include "server/structured.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::server {
namespace {
using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(dump(j), "application/json; charset=utf-8");
}

void send_error(httplib::Response& res, const ApiError& e) {
  if (e.status == 503) res.set_header("Retry-After", "1");
  send_json(res, e.status, e.to_json());
}

std::string random_id(const char* prefix) {
  static std::mutex m;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lk(m);
  return fmt::format("{}{:016x}", prefix, rng());
}

// One slot's session: its own context (KV cache) on the one backend all slots share, so the
// weights are uploaded once.
std::unique_ptr<runtime::Session> make_slot_session(const model::Model& m, const std::shared_ptr<backend::Backend>& be,
                                                    const ServerOptions& o) {
  return std::make_unique<runtime::Session>(m, be, runtime::SessionOptions{o.n_ctx, o.n_ubatch});
}

const char* finish_reason(const runtime::GenerateResult& r, bool tool_calls = false) {
  if (tool_calls) return "tool_calls";
  switch (r.reason) {
    case runtime::StopReason::Length:
    case runtime::StopReason::ContextFull: return "length";
    default: return "stop";
  }
}

// One streamed tool call as an OpenAI delta entry.
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

json timings_json(const runtime::GenerateResult& r) {
  const double prompt_n = r.n_prompt - r.n_cached;
  const double predicted_n = static_cast<double>(r.tokens.size());
  auto per_s = [](double n, double ms) { return ms > 0 ? n / (ms / 1000.0) : 0.0; };
  auto per_tok = [](double n, double ms) { return n > 0 ? ms / n : 0.0; };
  return {{"cache_n", r.n_cached},
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
}

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

enum class Kind { Chat, Completion, Native };

struct Metrics {
  std::atomic<int64_t> requests{0}, errors{0}, rejected{0}, prompt_tokens{0}, predicted_tokens{0};
  std::mutex m;
  double prompt_ms = 0, predicted_ms = 0;
  void record(const runtime::GenerateResult& r) {
    prompt_tokens += r.n_prompt - r.n_cached;
    predicted_tokens += static_cast<int64_t>(r.tokens.size());
    std::lock_guard lk(m);
    prompt_ms += r.prompt_ms;
    predicted_ms += r.gen_ms;
  }
};

struct StreamState {
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::string> pieces;
};

class App {
 public:
  explicit App(const ServerOptions& o) : o_(o) {
    std::error_code ec;
    model_id_ = o.alias.empty() ? std::filesystem::path(o.model).filename().string() : o.alias;
    created_ = static_cast<int64_t>(std::time(nullptr));
  }

  void load() {
    fmt::print(stderr, "rocky: loading model {}\n", o_.model);
    const auto t0 = Clock::now();
    model_ = model::Model::load(o_.model);
    tok_.emplace(tok::Tokenizer::from_gguf(model_->file()));
    if (tok_->vocab().size() > static_cast<size_t>(model_->hparams().n_vocab))
      fail("{}: the vocab has {} tokens but token_embd.weight has only {} rows", o_.model, tok_->vocab().size(),
           model_->hparams().n_vocab);
    tmpl_.emplace(ChatTemplate::load(model_->file(), *tok_, o_.chat_template_file));
    if (tmpl_->is_fallback() && o_.chat_template_file.empty())
      fmt::print(stderr, "rocky: warning: the model has no chat template; using ChatML\n");
    runtime::BackendOptions bo;
    bo.device = o_.device;
    bo.matmul = o_.matmul;
    bo.kv_f16 = o_.kv_f16;
    bo.env = o_.env;
    const std::shared_ptr<backend::Backend> be = runtime::make_backend(bo);
    backend_ = be;
    std::vector<std::unique_ptr<runtime::Session>> slots;
    std::shared_ptr<runtime::BatchEngine> engine;
    if (o_.cont_batching) {  // one context, n_parallel sequences
      runtime::BatchOptions bopt;
      bopt.n_seq = o_.n_parallel;
      bopt.n_ctx = o_.n_ctx;
      bopt.n_ubatch = o_.n_ubatch;
      bopt.prefill_chunk = o_.prefill_chunk;
      engine = std::make_shared<runtime::BatchEngine>(*model_, be, bopt);
      fmt::print(stderr, "rocky: continuous batching: {} sequences in one context ({})\n", o_.n_parallel,
                 engine->backend().name());
    }
    for (int i = 0; i < o_.n_parallel && !engine; ++i) {
      slots.push_back(make_slot_session(*model_, be, o_));
      fmt::print(stderr, "rocky: slot {}/{} ready ({})\n", i + 1, o_.n_parallel, slots.back()->backend().name());
    }
    for (const auto& t : model_->file().tensors()) {
      n_params_ += static_cast<int64_t>(t.n_elements);
      size_ += static_cast<int64_t>(t.n_bytes);
    }
    {
      const auto t_id = Clock::now();
      runtime::PrefixCacheOptions co;
      co.block = o_.cache_block;
      co.ram_bytes = o_.cache_ram_mib << 20;
      co.dir = o_.cache_dir;
      co.disk_bytes = o_.cache_disk_mib << 20;
      cache_ = std::make_shared<runtime::PrefixCache>(
          runtime::cache_identity(*model_, engine ? engine->context() : slots.front()->context()), co);
      fmt::print(
          stderr, "rocky: prefix cache: blocks of {} tokens, RAM ≤ {} MiB, disk {} (identity {:016x}, {:.0f} ms)\n",
          co.block, o_.cache_ram_mib,
          cache_->stats().disk_enabled ? fmt::format("{} ≤ {} MiB", co.dir, o_.cache_disk_mib) : std::string("off"),
          cache_->identity().hash(), std::chrono::duration<double, std::milli>(Clock::now() - t_id).count());
    }
    sched_ = engine ? std::make_unique<runtime::Scheduler>(*tok_, engine, o_.queue, cache_)
                    : std::make_unique<runtime::Scheduler>(*tok_, std::move(slots), o_.queue, cache_);
    if (o_.warmup) warm_up(be);
    fmt::print(stderr, "rocky: model loaded in {:.0f} ms (slots {}, context {} tokens each)\n",
               std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), o_.n_parallel, sched_->n_ctx());
    ready_ = true;
  }

  // llama-server's warm-up, widened to the shapes an agent's turns meet: a throwaway context (its
  // own KV cache, freed at once) evaluates one ubatch of min(-ub, -c − 1) copies of one token;
  // then, where -c holds a depth of at least k_warm_min_depth, ubatches of min(48, -ub) and
  // min(8, -ub) tokens at depth min(1280, -c − both − 1) (zeros imported into the KV cache, not
  // evaluated): the split-key flash attention (≥ 1,024 keys), its merge and attention_decode; then
  // one decode step. Pipelines are created on first use and a big one costs ≈ 150 ms on the H200's
  // driver (PERF.md, session 9): without this the first turn at depth paid 1.2 s. The pipeline
  // cache file keeps them for the next start.
  static constexpr int32_t k_warm_depth = 1280, k_warm_min_depth = 1088, k_warm_short = 48, k_warm_tiny = 8;
  void warm_up(const std::shared_ptr<backend::Backend>& be) {
    const auto t0 = Clock::now();
    const int32_t n_ctx = std::max<int32_t>(2, sched_ ? sched_->n_ctx() : o_.n_ctx);
    const int32_t ub = std::max<int32_t>(1, o_.n_ubatch);
    const int32_t n = std::min<int32_t>(ub, n_ctx - 1);
    const int32_t n_short = std::min(k_warm_short, ub), n_tiny = std::min(k_warm_tiny, ub);
    const int32_t depth = std::min(k_warm_depth, n_ctx - n_short - n_tiny - 1);
    bool deep = depth >= k_warm_min_depth;
    runtime::Session s(*model_, be,
                       runtime::SessionOptions{deep ? std::max(n + 1, depth + n_short + n_tiny + 1) : n + 1, ub});
    deep = deep && !s.recurrent();  // a hybrid model's state cannot be imported as zeros
    const int32_t id = tok_->vocab().bos() >= 0 ? tok_->vocab().bos() : 0;
    const std::vector<int32_t> ids(static_cast<size_t>(std::max(n, n_short)), id);
    const std::span<const int32_t> all(ids);
    s.eval(all.first(static_cast<size_t>(n)));
    if (deep) {
      s.reset();
      const std::vector<uint8_t> zeros(s.context().kv_export_bytes(depth), 0);
      s.import_kv(0, depth, zeros);
      s.eval(all.first(static_cast<size_t>(n_short)));
      s.eval(all.first(static_cast<size_t>(n_tiny)));
    }
    s.eval(all.first(1));
    const backend::BackendStats bs = be->stats();
    fmt::print(stderr, "rocky: warm-up: {} + {}1 tokens in {:.0f} ms ({} pipelines, {:.0f} ms creating them)\n", n,
               deep ? fmt::format("{} + {} at depth {} + ", n_short, n_tiny, depth) : std::string(),
               std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), bs.pipelines,
               bs.pipeline_create_ms);
  }

  void begin_shutdown() {
    stopping_ = true;
    if (sched_) sched_->close(false);
  }
  void cancel_all() {
    if (sched_) sched_->close(true);
  }
  int64_t in_flight() const { return in_flight_.load(); }
  void drop_scheduler() { sched_.reset(); }
  // Pending disk writes of the prefix cache (SIGTERM: after the in-flight requests).
  void flush_cache() {
    if (!cache_) return;
    const auto st = cache_->stats();
    if (st.pending_writes > 0)
      fmt::print(stderr, "rocky: prefix cache: writing {} pending block(s)\n", st.pending_writes);
    cache_->flush();
  }

  void routes(httplib::Server& svr) {
    svr.Get("/health", wrap(false, [this](auto& req, auto& res) { health(req, res); }));
    svr.Get("/v1/health", wrap(false, [this](auto& req, auto& res) { health(req, res); }));
    svr.Get("/metrics", wrap(false, [this](auto& req, auto& res) { metrics(req, res); }));
    for (const char* p : {"/v1/chat/completions", "/chat/completions"})
      svr.Post(p, wrap(true, [this](auto& req, auto& res) { chat(req, res); }));
    for (const char* p : {"/v1/completions", "/completions"})
      svr.Post(p, wrap(true, [this](auto& req, auto& res) { completion(req, res, Kind::Completion); }));
    svr.Post("/completion", wrap(true, [this](auto& req, auto& res) { completion(req, res, Kind::Native); }));
    for (const char* p : {"/v1/models", "/models"})
      svr.Get(p, wrap(true, [this](auto& req, auto& res) { models(req, res); }));
    svr.Get("/cache", wrap(true, [this](auto& req, auto& res) { cache_get(req, res); }));
    svr.Delete("/cache", wrap(true, [this](auto& req, auto& res) { cache_delete(req, res); }));
    svr.Get("/props", wrap(true, [this](auto& req, auto& res) { props(req, res); }));
    for (const char* p : {"/v1/embeddings", "/embeddings", "/embedding"})
      svr.Post(p, wrap(true, [](auto&, auto&) {
                 throw ApiError(501, "embeddings are not supported yet", "", "not_implemented", "not_supported_error");
               }));
    svr.Post("/tokenize", wrap(true, [this](auto& req, auto& res) { tokenize(req, res); }));
    svr.Post("/detokenize", wrap(true, [this](auto& req, auto& res) { detokenize(req, res); }));
    svr.Post("/apply-template", wrap(true, [this](auto& req, auto& res) { apply_template(req, res); }));
    // A declared body over --max-body is refused from its headers: cpp-httplib 0.11 would first
    // read (skip) all of it, so a client that declares 20 MB and sends less waited --timeout.
    svr.set_pre_routing_handler([max = o_.max_body](const httplib::Request& req, httplib::Response& res) {
      if (!req.has_header("Content-Length")) return httplib::Server::HandlerResponse::Unhandled;
      const std::string v = req.get_header_value("Content-Length");
      bool digits = !v.empty();
      for (char c : v) digits = digits && c >= '0' && c <= '9';
      const bool huge = digits && v.size() > 19;  // past 2^63: larger than any --max-body
      if (digits && !huge && std::stoull(v) <= max) return httplib::Server::HandlerResponse::Unhandled;
      res.set_header("Connection", "close");
      if (!digits)
        send_error(res, ApiError(400, fmt::format("Content-Length '{}' is not a byte count", v.substr(0, 40)), "",
                                 "invalid_content_length"));
      else
        send_error(res, ApiError(413,
                                 fmt::format("the request body ({} bytes) is larger than --max-body ({} bytes)",
                                             v.substr(0, 40), max),
                                 "", "payload_too_large"));
      return httplib::Server::HandlerResponse::Handled;
    });
    svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 413)
        send_error(res, ApiError(413, "the request body is larger than --max-body", "", "payload_too_large"));
      else if (res.status == 404)
        send_error(res, ApiError(404, fmt::format("no endpoint {} {}", req.method, req.path), "", "not_found"));
      else
        send_error(res, ApiError(res.status, fmt::format("HTTP {}", res.status)));
    });
  }

 private:
  using Fn = std::function<void(const httplib::Request&, httplib::Response&)>;

  httplib::Server::Handler wrap(bool needs_model, Fn fn) {
    return [this, needs_model, fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
      ++in_flight_;
      struct Done {
        std::atomic<int64_t>& n;
        ~Done() { --n; }
      } done{in_flight_};
      try {
        if (!o_.api_key.empty() && req.path != "/health" && req.path != "/v1/health") {
          // The auth scheme is case-insensitive (RFC 9110 §11.1); the key is not.
          const std::string auth = req.get_header_value("Authorization");
          bool bearer = auth.size() > 7 && auth[6] == ' ';
          for (size_t i = 0; bearer && i < 6; ++i)
            bearer = std::tolower(static_cast<unsigned char>(auth[i])) == "bearer"[i];
          if (!bearer || auth.substr(7) != o_.api_key)
            throw ApiError(401, "invalid or missing API key (send 'Authorization: Bearer KEY')", "", "invalid_api_key",
                           "authentication_error");
        }
        if (needs_model && !ready_) throw ApiError(503, "the model is loading", "", "loading", "unavailable_error");
        if (needs_model && stopping_)
          throw ApiError(503, "the server is shutting down", "", "shutting_down", "unavailable_error");
        fn(req, res);
      } catch (const ApiError& e) {
        ++metrics_.errors;
        send_error(res, e);
      } catch (const std::bad_alloc&) {
        ++metrics_.errors;
        send_error(res, ApiError(500, "out of host memory", "", "", "server_error"));
      } catch (const std::exception& e) {
        ++metrics_.errors;
        send_error(res, ApiError(500, e.what(), "", "", "server_error"));
      }
    };
  }

  void health(const httplib::Request&, httplib::Response& res) {
    if (!ready_) {
      res.set_header("Retry-After", "1");
      send_json(res, 503, {{"status", "loading model"}});
    } else {
      send_json(res, 200, {{"status", "ok"}});
    }
  }

  void metrics(const httplib::Request&, httplib::Response& res) {
    runtime::SchedulerStats st;
    if (ready_ && sched_) st = sched_->stats();
    double pms, gms;
    {
      std::lock_guard lk(metrics_.m);
      pms = metrics_.prompt_ms;
      gms = metrics_.predicted_ms;
    }
    const double ptps = pms > 0 ? metrics_.prompt_tokens / (pms / 1000.0) : 0.0;
    const double gtps = gms > 0 ? metrics_.predicted_tokens / (gms / 1000.0) : 0.0;
    std::string out;
    auto add = [&](const char* name, const char* type, const char* help, double v) {
      out += fmt::format("# HELP rocky:{} {}\n# TYPE rocky:{} {}\nrocky:{} {}\n", name, help, name, type, name, v);
    };
    add("requests_total", "counter", "Generation requests received.", static_cast<double>(metrics_.requests));
    add("requests_rejected_total", "counter", "Requests refused with 503 because the queue was full.",
        static_cast<double>(metrics_.rejected));
    add("errors_total", "counter", "Requests answered with an error status.", static_cast<double>(metrics_.errors));
    add("prompt_tokens_total", "counter", "Prompt tokens evaluated.", static_cast<double>(metrics_.prompt_tokens));
    add("tokens_predicted_total", "counter", "Tokens generated.", static_cast<double>(metrics_.predicted_tokens));
    add("prompt_tokens_seconds", "gauge", "Average prefill throughput (tokens/s).", ptps);
    add("predicted_tokens_seconds", "gauge", "Average decode throughput (tokens/s).", gtps);
    add("requests_queued", "gauge", "Requests waiting for a slot.", static_cast<double>(st.queued));
    add("slots_busy", "gauge", "Slots generating.", static_cast<double>(st.slots_busy));
    add("slots_total", "gauge", "Slots (-np).", static_cast<double>(st.n_slots));
    add("kv_cells_used", "gauge", "KV cells in use over all slots.", static_cast<double>(st.kv_used));
    add("n_ctx", "gauge", "Context size of one slot (tokens).", static_cast<double>(st.n_ctx));
    if (st.batched) {
      add("batch_seqs_per_step", "gauge", "Sequences in the last batched step.",
          static_cast<double>(st.batch.last_seqs));
      add("batch_seqs_per_step_max", "gauge", "The most sequences one batched step carried.",
          static_cast<double>(st.batch.max_seqs));
      add("batch_steps_total", "counter", "Batched steps (ubatches) run.", static_cast<double>(st.batch.steps));
      add("batch_prefill_tokens_total", "counter", "Prompt tokens evaluated in batched steps.",
          static_cast<double>(st.batch.prefill_tokens));
      add("batch_decode_tokens_total", "counter", "Decode tokens evaluated in batched steps.",
          static_cast<double>(st.batch.decode_tokens));
      // where the steps' wall time goes (runtime::BatchStats).
      add("batch_step_seconds_total", "counter", "Wall time of the batched steps.", st.batch.step_s);
      add("batch_compute_seconds_total", "counter", "Of it, the context's compute (record, submit, GPU, readback).",
          st.batch.compute_s);
      add("batch_record_seconds_total", "counter", "Of the compute, recording command buffers.", st.batch.record_s);
      add("batch_submit_wait_seconds_total", "counter", "Of the compute, waiting for the GPU's fences.",
          st.batch.submit_wait_s);
      add("batch_readback_seconds_total", "counter", "Of the compute, copying logits to the host.",
          st.batch.readback_s);
      add("batch_gather_seconds_total", "counter",
          "Between steps while a sequence was active (sampling, streaming, the join window).", st.batch.gather_s);
      add("batch_replays_total", "counter", "Batched steps that replayed a recorded command buffer.",
          static_cast<double>(st.batch.replays));
    }
    if (backend_) {  // pipelines are created on first use: a request of a new shape pays for them
      const backend::BackendStats bs = backend_->stats();
      add("pipelines_created_total", "counter", "Compute pipelines created (first use of a kernel variant).",
          static_cast<double>(bs.pipelines));
      add("pipeline_create_seconds_total", "counter", "Wall time spent creating compute pipelines.",
          bs.pipeline_create_ms / 1000.0);
    }
    if (cache_) {
      const runtime::PrefixCacheStats cs = cache_->stats();
      auto tiered = [&](const char* name, const char* type, const char* help, auto get) {
        out += fmt::format("# HELP rocky:{} {}\n# TYPE rocky:{} {}\n", name, help, name, type);
        for (const auto& [tier, t] : {std::pair<const char*, const runtime::TierStats*>{"device", &cs.device},
                                      {"ram", &cs.ram},
                                      {"disk", &cs.disk}})
          out += fmt::format("rocky:{}{{tier=\"{}\"}} {}\n", name, tier, static_cast<double>(get(*t)));
      };
      tiered("prefix_cache_hits_total", "counter", "Prompt blocks found in a prefix-cache tier.",
             [](const runtime::TierStats& t) { return t.hits; });
      tiered("prefix_cache_misses_total", "counter", "Prompt block lookups a prefix-cache tier could not answer.",
             [](const runtime::TierStats& t) { return t.misses; });
      tiered("prefix_cache_bytes", "gauge", "Bytes held by a prefix-cache tier.",
             [](const runtime::TierStats& t) { return t.bytes; });
      tiered("prefix_cache_evictions_total", "counter", "Blocks evicted from a prefix-cache tier.",
             [](const runtime::TierStats& t) { return t.evictions; });
      add("prefix_cache_disk_errors_total", "counter", "Damaged disk entries skipped (recomputed).",
          static_cast<double>(cs.disk_errors));
      add("prefix_cache_disk_writes_total", "counter", "Blocks written to the disk tier.",
          static_cast<double>(cs.disk_writes));
    }
    res.status = 200;
    res.set_content(out, "text/plain; version=0.0.4; charset=utf-8");
  }

  json model_meta() const {
    const auto& hp = model_->hparams();
    return {{"vocab_type", tok_->vocab().type() == tok::VocabType::Spm ? 1 : 2},
            {"n_vocab", hp.n_vocab},
            {"n_ctx_train", hp.n_ctx_train},
            {"n_embd", hp.n_embd},
            {"n_params", n_params_},
            {"size", size_}};
  }

  void models(const httplib::Request&, httplib::Response& res) {
    json m = {
        {"id", model_id_}, {"object", "model"}, {"created", created_}, {"owned_by", "rocky"}, {"meta", model_meta()}};
    send_json(res, 200, {{"object", "list"}, {"data", json::array({m})}});
  }

  json cache_json() const {
    const runtime::PrefixCacheStats cs = cache_->stats();
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
    disk["dir"] = o_.cache_dir;
    disk["errors"] = cs.disk_errors;
    disk["writes"] = cs.disk_writes;
    disk["pending_writes"] = cs.pending_writes;
    const auto st = sched_->stats();
    json device = tier(cs.device, false);
    device["cells_used"] = st.kv_used;
    device["cells"] = static_cast<int64_t>(st.n_ctx) * st.n_slots;
    return {{"block_tokens", cs.block},
            {"identity", fmt::format("{:016x}", cache_->identity().hash())},
            {"tiers", {{"device", device}, {"ram", tier(cs.ram, true)}, {"disk", disk}}}};
  }

  void cache_get(const httplib::Request&, httplib::Response& res) { send_json(res, 200, cache_json()); }

  void cache_delete(const httplib::Request&, httplib::Response& res) {
    cache_->clear();
    sched_->forget_device_prefixes();
    send_json(res, 200, cache_json());
  }

  void props(const httplib::Request&, httplib::Response& res) {
    send_json(res, 200,
              {{"n_ctx", sched_->n_ctx()},
               {"default_generation_settings", {{"n_ctx", sched_->n_ctx()}, {"model", model_id_}}},
               {"total_slots", o_.n_parallel},
               {"model_path", o_.model},
               {"model_alias", model_id_},
               {"chat_template", tmpl_->source()},
               {"bos_token", tmpl_->bos_token()},
               {"eos_token", tmpl_->eos_token()},
               {"build_info", "rocky 0.1.0"}});
  }

  void tokenize(const httplib::Request& req, httplib::Response& res) {
    const TokenizeRequest r = parse_tokenize(parse_body(req.body));
    const auto ids = tok_->tokenize(r.content, r.add_special, r.parse_special);
    json tokens = json::array();
    for (int32_t id : ids) {
      if (!r.with_pieces) {
        tokens.push_back(id);
        continue;
      }
      const std::string piece = tok_->token_to_piece(id, true);
      json p = find_invalid_utf8(piece) == std::string::npos ? json(piece)
                                                             : json(std::vector<uint8_t>(piece.begin(), piece.end()));
      tokens.push_back({{"id", id}, {"piece", p}});
    }
    send_json(res, 200, {{"tokens", tokens}});
  }

  void detokenize(const httplib::Request& req, httplib::Response& res) {
    const std::vector<int32_t> ids = parse_detokenize(parse_body(req.body));
    for (size_t i = 0; i < ids.size(); ++i)
      if (!tok_->vocab().valid(ids[i]))
        throw ApiError(
            400, fmt::format("'tokens[{}]' is {}, not a token id (the vocab has {})", i, ids[i], tok_->vocab().size()),
            fmt::format("tokens[{}]", i), "invalid_value");
    send_json(res, 200, {{"content", tok_->detokenize(ids)}});
  }

  std::string render(const TemplateInputs& in) const {
    try {
      return tmpl_->render(in);
    } catch (const chat::TemplateError& e) {
      // raise_exception() messages are the template's own (what transformers returns).
      throw ApiError(400,
                     e.kind() == chat::TemplateError::Kind::raise_exception ? e.what() : fmt::format("{}", e.what()),
                     "messages", "template_error");
    } catch (const Error& e) {
      throw ApiError(400, fmt::format("chat template: {}", e.what()), "messages", "template_error");
    }
  }

  void apply_template(const httplib::Request& req, httplib::Response& res) {
    const ApplyTemplateRequest r = parse_apply_template(parse_body(req.body));
    TemplateInputs in;
    in.messages = r.messages;
    in.tools = r.tools;
    in.add_generation_prompt = r.add_generation_prompt;
    in.kwargs = r.chat_template_kwargs;
    send_json(res, 200, {{"prompt", render(in)}});
  }

  // A constraint compiled against the model's vocabulary; a failure (size or time budget) is a 400
  // naming the field the constraint came from.
  std::shared_ptr<grammar::CompiledGrammar> compile_constraint(const std::string& gbnf,
                                                               const std::string& param) const {
    try {
      return grammar::compile_gbnf(gbnf, *tok_);
    } catch (const Error& e) {
      throw ApiError(400, fmt::format("'{}': {}", param, e.what()), param, "invalid_value");
    }
  }

  runtime::GenerateParams to_params(const SamplingFields& s) const {
    runtime::GenerateParams p;
    if (!s.grammar.empty()) p.grammar = compile_constraint(s.grammar, s.grammar_param);
    if (s.temperature) p.sampling.temp = static_cast<float>(*s.temperature);
    if (s.top_p) p.sampling.top_p = static_cast<float>(*s.top_p);
    if (s.min_p) p.sampling.min_p = static_cast<float>(*s.min_p);
    if (s.top_k) p.sampling.top_k = static_cast<int32_t>(*s.top_k);
    if (s.repeat_penalty) p.sampling.repeat_penalty = static_cast<float>(*s.repeat_penalty);
    if (s.repeat_last_n) p.sampling.repeat_last_n = static_cast<int32_t>(*s.repeat_last_n);
    if (s.seed) p.sampling.seed = static_cast<uint32_t>(*s.seed);  // -1 → 0xFFFFFFFF: random, as llama.cpp
    p.max_tokens = static_cast<int32_t>(s.max_tokens);
    p.stop = s.stop;
    p.ignore_eos = s.ignore_eos;
    p.cache_prompt = s.cache_prompt;
    return p;
  }

  void check_fits(const std::vector<int32_t>& prompt, const char* param) const {
    if (prompt.empty()) throw ApiError(400, "the prompt is empty (no tokens to evaluate)", param, "invalid_value");
    if (static_cast<int64_t>(prompt.size()) > sched_->n_ctx())
      throw ApiError(400,
                     fmt::format("the prompt ('{}') has {} tokens, more than the context size {} tokens", param,
                                 prompt.size(), sched_->n_ctx()),
                     param, "context_length_exceeded");
  }

  void chat(const httplib::Request& req, httplib::Response& res) {
    const ChatRequest r = parse_chat(parse_body(req.body));
    TemplateInputs in;
    in.messages = normalise_for_template(r.messages);
    if (r.tool_choice != "none") in.tools = r.tools;
    const bool prefill = r.messages.back().value("role", "") == "assistant";
    in.add_generation_prompt = !prefill;
    in.continue_final_message = prefill;
    in.kwargs = r.chat_template_kwargs;
    const std::string prompt = render(in);
    chat::ReplySyntax syntax = chat::reply_syntax(tmpl_->source(), in.tools, prompt, reasoning_);
    syntax.parse_tool_calls = r.tool_choice != "none";
    std::vector<int32_t> ids = tokenize_chat_prompt(*tmpl_, *tok_, prompt);
    check_fits(ids, "messages");
    runtime::GenerateParams gp = to_params(r.sampling);
    // Tool calls in the model's own format: forced for "required" / a named function, lazy (from
    // the format's trigger on) for "auto" unless another constraint was asked for.
    if (!in.tools.is_null() && r.tool_choice != "none" && (r.tool_choice != "auto" || !gp.grammar)) {
      const ToolGrammar tg = tool_call_grammar(syntax.format, in.tools, r.tool_choice, r.tool_choice_name);
      if (!tg.gbnf.empty()) {
        gp.grammar = compile_constraint(tg.gbnf, "tools");
        gp.grammar_triggers = tg.triggers;
      }
    }
    generate(req, res, std::move(ids), std::move(gp), Kind::Chat, r.stream, r.include_usage, syntax);
  }

  void completion(const httplib::Request& req, httplib::Response& res, Kind kind) {
    const CompletionRequest r = parse_completion(parse_body(req.body), kind == Kind::Native);
    std::vector<int32_t> ids;
    if (r.prompt_text) {
      ids = tok_->tokenize(*r.prompt_text, true, true);
    } else {
      ids = r.prompt_tokens;
      for (size_t i = 0; i < ids.size(); ++i)
        if (!tok_->vocab().valid(ids[i]))
          throw ApiError(
              400,
              fmt::format("'prompt[{}]' is {}, not a token id (the vocab has {})", i, ids[i], tok_->vocab().size()),
              fmt::format("prompt[{}]", i), "invalid_value");
    }
    check_fits(ids, "prompt");
    generate(req, res, std::move(ids), to_params(r.sampling), kind, r.stream, r.include_usage, {});
  }

  json chunk_base(Kind kind, const std::string& id) const {
    return {{"id", id},
            {"object", kind == Kind::Chat ? "chat.completion.chunk" : "text_completion"},
            {"created", static_cast<int64_t>(std::time(nullptr))},
            {"model", model_id_},
            {"system_fingerprint", "rocky-0.1.0"}};
  }

  json delta_chunk(Kind kind, const std::string& id, const std::string& text) const {
    if (kind == Kind::Native) return {{"content", text}, {"stop", false}, {"id_slot", 0}};
    json c = chunk_base(kind, id);
    if (kind == Kind::Chat)
      c["choices"] = json::array(
          {{{"index", 0}, {"delta", {{"content", text}}}, {"finish_reason", nullptr}, {"logprobs", nullptr}}});
    else
      c["choices"] = json::array({{{"index", 0}, {"text", text}, {"finish_reason", nullptr}, {"logprobs", nullptr}}});
    return c;
  }

  json final_json(Kind kind, const std::string& id, const runtime::GenerateResult& r, int slot,
                  const chat::ReplySyntax& syntax) const {
    if (kind == Kind::Native) {
      const char* stop_type = r.reason == runtime::StopReason::Eog          ? "eos"
                              : r.reason == runtime::StopReason::StopString ? "word"
                              : r.reason == runtime::StopReason::Cancelled  ? "none"
                                                                            : "limit";
      return {{"content", r.text},
              {"id_slot", slot},
              {"stop", true},
              {"model", model_id_},
              {"tokens_predicted", r.tokens.size()},
              {"tokens_evaluated", r.n_prompt},
              {"tokens_cached", r.n_cached},
              {"truncated", false},
              {"stop_type", stop_type},
              {"stopping_word", r.stop_word},
              {"timings", timings_json(r)}};
    }
    json c = chunk_base(kind, id);
    if (kind == Kind::Chat) {
      const chat::ParsedReply out = chat::parse_reply(r.text, syntax);
      c["object"] = "chat.completion";
      c["choices"] = json::array({{{"index", 0},
                                   {"message", out.to_openai()},
                                   {"finish_reason", finish_reason(r, !out.tool_calls.empty())},
                                   {"logprobs", nullptr}}});
    } else {
      c["object"] = "text_completion";
      c["choices"] =
          json::array({{{"index", 0}, {"text", r.text}, {"finish_reason", finish_reason(r)}, {"logprobs", nullptr}}});
    }
    c["usage"] = usage_json(r);
    c["timings"] = timings_json(r);
    return c;
  }

  std::shared_ptr<runtime::Job> submit(std::vector<int32_t> ids, runtime::GenerateParams p,
                                       const std::shared_ptr<ConnectionProbe>& probe) {
    auto job = std::make_shared<runtime::Job>();
    job->prompt = std::move(ids);
    job->params = std::move(p);
    job->alive = [probe] { return probe->alive(); };
    return job;
  }

  void admit(const std::shared_ptr<runtime::Job>& job) {
    if (o_.test_token_delay_ms > 0) {
      job->on_token = [inner = job->on_token, ms = o_.test_token_delay_ms](const runtime::TokenEvent& ev) {
        const bool go_on = !inner || inner(ev);
        if (ev.token >= 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        return go_on;
      };
    }
    ++metrics_.requests;
    switch (sched_->submit(job)) {
      case runtime::Scheduler::Admit::Accepted: return;
      case runtime::Scheduler::Admit::QueueFull:
        ++metrics_.rejected;
        throw ApiError(
            503, fmt::format("the server is busy: every slot is generating and {} requests wait (--queue)", o_.queue),
            "", "queue_full", "unavailable_error");
      case runtime::Scheduler::Admit::ShuttingDown:
        throw ApiError(503, "the server is shutting down", "", "shutting_down", "unavailable_error");
    }
  }

  // A finished job: records the metrics of one that ran, and returns its answer when that is an
  // error — the generation failed (500), or it was cancelled while its client is still connected,
  // i.e. cut by the shutdown (a client that leaves cancels its own, and nobody reads that answer):
  // a 503 naming how far it got, never a finish_reason "stop" that would pass the cut text off as
  // complete.
  std::optional<ApiError> settle(const runtime::Job& job) {
    if (!job.error.empty()) return ApiError(500, job.error, "", "", "server_error");
    const runtime::GenerateResult& r = *job.result;
    metrics_.record(r);
    if (r.reason != runtime::StopReason::Cancelled) return std::nullopt;
    return ApiError(503,
                    fmt::format("the server is shutting down: the generation was cancelled after {} token(s) "
                                "(the shutdown grace of {} s ran out, or a second signal came); the text so "
                                "far is not complete",
                                r.tokens.size(), o_.shutdown_grace_s),
                    "", "shutting_down", "unavailable_error");
  }

  void generate(const httplib::Request& req, httplib::Response& res, std::vector<int32_t> ids,
                runtime::GenerateParams p, Kind kind, bool stream, bool include_usage,
                const chat::ReplySyntax& syntax) {
    auto probe = std::make_shared<ConnectionProbe>(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
    auto job = submit(std::move(ids), std::move(p), probe);
    const std::string id = random_id(kind == Kind::Chat ? "chatcmpl-" : "cmpl-");
    if (!stream) {
      admit(job);
      while (!job->wait_for_ms(20))
        if (!probe->alive()) job->cancel = true;
      probe->release();
      if (const auto e = settle(*job)) throw *e;
      send_json(res, 200, final_json(kind, id, *job->result, job->slot, syntax));
      return;
    }
    auto st = std::make_shared<StreamState>();
    job->on_token = [st](const runtime::TokenEvent& ev) {
      if (!ev.text.empty()) {
        std::lock_guard lk(st->m);
        st->pieces.emplace_back(ev.text);
      }
      st->cv.notify_one();
      return true;
    };
    admit(job);
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, job, st, probe, kind, id, include_usage, syntax](size_t, httplib::DataSink& sink) {
          chat::ReplyStream reply(syntax);  // chat: content / reasoning / tool-call deltas
          size_t n_calls = 0;
          auto chat_delta = [&](const chat::ReplyStream::Delta& d) {
            json delta = json::object();
            if (!d.reasoning_content.empty()) delta["reasoning_content"] = d.reasoning_content;
            if (!d.content.empty()) delta["content"] = d.content;
            if (!d.tool_calls.empty()) {
              json calls = json::array();
              for (const auto& c : d.tool_calls) calls.push_back(tool_call_delta(c, n_calls++));
              delta["tool_calls"] = calls;
            }
            json c = chunk_base(kind, id);
            c["choices"] =
                json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", nullptr}, {"logprobs", nullptr}}});
            return c;
          };
          auto write = [&](const std::string& s) {
            if (sink.write(s.data(), s.size())) return true;
            job->cancel = true;
            return false;
          };
          if (kind == Kind::Chat) {
            json c = chunk_base(kind, id);
            c["choices"] = json::array({{{"index", 0},
                                         {"delta", {{"role", "assistant"}, {"content", ""}}},
                                         {"finish_reason", nullptr},
                                         {"logprobs", nullptr}}});
            if (!write(sse(c))) return false;
          }
          for (;;) {
            std::deque<std::string> got;
            bool finished = false;
            {
              std::unique_lock lk(st->m);
              st->cv.wait_for(lk, std::chrono::milliseconds(20), [&] { return !st->pieces.empty(); });
              got.swap(st->pieces);
              finished = got.empty() && job->done();
            }
            for (const auto& piece : got) {
              if (kind == Kind::Chat) {
                const auto d = reply.push(piece);
                if (!d.empty() && !write(sse(chat_delta(d)))) return false;
              } else if (!write(sse(delta_chunk(kind, id, piece)))) {
                return false;
              }
            }
            if (finished) {
              std::lock_guard lk(st->m);
              if (st->pieces.empty()) break;
            }
            if (got.empty() && !probe->alive()) job->cancel = true;
          }
          if (const auto e = settle(*job)) {  // an error event, never a finish_reason
            write(sse(e->to_json()));
            sink.done();
            return true;
          }
          const runtime::GenerateResult& r = *job->result;
          bool tool_calls = false;
          if (kind == Kind::Chat) {
            const auto d = reply.finish();
            if (!d.empty() && !write(sse(chat_delta(d)))) return false;
            tool_calls = !reply.result().tool_calls.empty();
          }
          if (kind == Kind::Native) {
            json f = final_json(kind, id, r, job->slot, syntax);
            f["content"] = "";
            write(sse(f));
          } else {
            json c = chunk_base(kind, id);
            if (kind == Kind::Chat)
              c["choices"] = json::array({{{"index", 0},
                                           {"delta", json::object()},
                                           {"finish_reason", finish_reason(r, tool_calls)},
                                           {"logprobs", nullptr}}});
            else
              c["choices"] = json::array(
                  {{{"index", 0}, {"text", ""}, {"finish_reason", finish_reason(r)}, {"logprobs", nullptr}}});
            c["timings"] = timings_json(r);
            if (!write(sse(c))) return false;
            if (include_usage) {
              json u = chunk_base(kind, id);
              u["choices"] = json::array();
              u["usage"] = usage_json(r);
              if (!write(sse(u))) return false;
            }
            if (!write("data: [DONE]\n\n")) return false;
          }
          sink.done();
          return true;
        },
        [job, probe](bool) {
          // Runs whether or not the provider did (e.g. the client left before the headers).
          job->cancel = true;
          job->wait();
          probe->release();
        });
  }

  const ServerOptions o_;
  const chat::ReasoningFormat reasoning_ = chat::parse_reasoning_format(o_.reasoning_format);
  std::string model_id_;
  int64_t created_ = 0;
  std::atomic<bool> ready_{false}, stopping_{false};
  std::atomic<int64_t> in_flight_{0};
  std::unique_ptr<model::Model> model_;
  std::optional<tok::Tokenizer> tok_;
  std::optional<ChatTemplate> tmpl_;
  std::shared_ptr<runtime::PrefixCache> cache_;
  std::shared_ptr<backend::Backend> backend_;  // the slots' (for /metrics)
  std::unique_ptr<runtime::Scheduler> sched_;
  int64_t n_params_ = 0, size_ = 0;
  Metrics metrics_;
};

}  // namespace

int run_server(const ServerOptions& o) {
  // SIGINT/SIGTERM are taken by sigtimedwait below, in this thread only: block them before any
  // thread starts (threads inherit the mask). SIGPIPE (a client gone mid-write) is ignored.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  App app(o);
  httplib::Server svr;
  const size_t n_threads = static_cast<size_t>(o.n_parallel) + o.queue + 8;
  svr.new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
  svr.set_payload_max_length(o.max_body);
  svr.set_read_timeout(o.timeout_s, 0);
  svr.set_write_timeout(o.timeout_s, 0);
  svr.set_tcp_nodelay(true);
  app.routes(svr);
  int port = o.port;
  if (port == 0) {
    port = svr.bind_to_any_port(o.host);
    if (port < 0) fail("cannot listen on {} (any port)", o.host);
  } else if (!svr.bind_to_port(o.host, port)) {
    fail("cannot listen on {}:{} (in use, or not an address of this machine?)", o.host, port);
  }
  std::atomic<bool> http_done{false};
  std::thread http([&] {
    svr.listen_after_bind();
    http_done = true;
  });
  // An IPv6 literal goes in brackets in a URL (RFC 3986 §3.2.2): http://[::1]:8080.
  const std::string url_host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  fmt::print(stderr, "rocky: listening on http://{}:{}\n", url_host, port);

  std::atomic<bool> loaded{false}, load_failed{false};
  std::string load_error;
  std::thread loader([&] {
    try {
      app.load();
      fmt::print(stderr, "rocky: ready: http://{}:{}/v1 (model '{}')\n", url_host, port,
                 o.alias.empty() ? std::filesystem::path(o.model).filename().string() : o.alias);
      loaded = true;
    } catch (const std::exception& e) {
      load_error = e.what();
      load_failed = true;
    }
  });

  int sig = 0;
  const timespec tick{0, 100'000'000};
  while (!load_failed) {
    sig = sigtimedwait(&sigs, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) break;
    sig = 0;
  }
  loader.join();
  const auto t_stop = Clock::now();
  if (sig)
    fmt::print(stderr, "rocky: {} received: stopping (grace {} s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
               o.shutdown_grace_s);
  app.begin_shutdown();
  svr.stop();
  // In-flight requests finish within the grace; then what is left is cancelled (each stops within
  // one token). A second signal cancels at once.
  bool cancelled = false;
  const auto grace = std::chrono::duration<double>(o.shutdown_grace_s);
  while (!http_done) {
    const bool again = sigtimedwait(&sigs, nullptr, &tick) > 0;
    if (!cancelled && (again || Clock::now() - t_stop > grace)) {
      if (app.in_flight() > 0) fmt::print(stderr, "rocky: cancelling {} request(s)\n", app.in_flight());
      app.cancel_all();
      cancelled = true;
    }
    if (cancelled && Clock::now() - t_stop > grace + std::chrono::seconds(10)) {
      fmt::print(stderr, "rocky: connections still open after the grace; exiting\n");
      std::fflush(stderr);
      std::_Exit(load_failed ? 1 : 0);
    }
  }
  http.join();
  app.drop_scheduler();
  app.flush_cache();
  if (load_failed) fail("{}", load_error);
  fmt::print(stderr, "rocky: stopped\n");
  return 0;
}

}  // namespace rocky::server
