// The App behind `rocky serve` (server.cpp): the model, tokenizer, template, prefix cache and
// scheduler, and the handlers of every route. Its request-to-parameters, /infill, embeddings and
// rerank handlers are defined in app_requests.cpp; the rest here. Internal to src/server.
#pragma once

#include <fmt/format.h>
#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <mutex>
#include <optional>
#include <thread>

#include "chat/toolcalls.hpp"
#include "core/error.hpp"
#include "grammar/constraint.hpp"
#include "grammar/pool.hpp"
#include "model/model.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/prefix_cache.hpp"
#include "runtime/scheduler.hpp"
#include "runtime/session.hpp"
#include "runtime/warmup.hpp"
#include "server/anthropic.hpp"
#include "server/chat_template.hpp"
#include "server/connection.hpp"
#include "server/embedding.hpp"
#include "server/infill.hpp"
#include "server/http.hpp"
#include "server/json_fields.hpp"
#include "server/event_stream.hpp"
#include "server/metrics.hpp"
#include "server/openai_responses.hpp"
#include "server/request.hpp"
#include "server/responses.hpp"
#include "server/retrieval_request.hpp"
#include "server/stream.hpp"
#include "core/fault.hpp"
#include "runtime/kv_memory.hpp"
#include "server/structured.hpp"
#include "tokenizer/tokenizer.hpp"

#include "server/server.hpp"

namespace rocky::server::detail {
using Clock = std::chrono::steady_clock;

class App {
 public:
  explicit App(const ServerOptions& o) : o_(o) {
    std::error_code ec;
    model_id_ = o.alias.empty() ? std::filesystem::path(o.model).filename().string() : o.alias;
    shapes_.model_id = model_id_;
    created_ = static_cast<int64_t>(std::time(nullptr));
  }

  void load() {
    fmt::print(stderr, "rocky: loading model {}\n", o_.model);
    fault::pause(true);  // ROCKY_FAULT counts from the moment the server serves (a load error still exits)
    const auto t0 = Clock::now();
    model_ = model::Model::load(o_.model);
    tok_.emplace(tok::Tokenizer::from_gguf(model_->file()));
    shapes_.piece = [this](int32_t id) { return tok_->token_to_piece(id, true); };
    if (tok_->vocab().size() > static_cast<size_t>(model_->hparams().n_vocab))
      fail("{}: the vocab has {} tokens but token_embd.weight has only {} rows", o_.model, tok_->vocab().size(),
           model_->hparams().n_vocab);
    fim_ = find_fim_tokens(model_->file(), tok_->vocab());
    grammars_ = std::make_unique<grammar::GrammarPool>(
        [this](const std::string& gbnf) { return grammar::compile_gbnf(gbnf, *tok_); });
    if (o_.embedding) {
      pooling_ = o_.pooling.empty() ? gguf_pooling(model_->file()) : *parse_pooling(o_.pooling);
      if (pooling_ == Pooling::rank) {
        rank_head_ = RankHead::load(model_->file(), model_->hparams().n_embd);
        if (!rank_head_) fail("{}: --pooling rank: {}", o_.model, RankHead::why_missing());
      }
      fmt::print(stderr, "rocky: embeddings: pooling {}{}\n", to_string(pooling_),
                 rank_head_ ? fmt::format(" (classification head: {} output(s))", rank_head_->n_out()) : "");
    }
    tmpl_.emplace(ChatTemplate::load(model_->file(), *tok_, o_.chat_template_file, o_.chat_template));
    if (tmpl_->is_fallback() && o_.chat_template_file.empty() && o_.chat_template.empty())
      fmt::print(stderr, "rocky: warning: the model has no chat template; using ChatML\n");
    runtime::BackendOptions bo;
    bo.device = o_.device;
    bo.matmul = o_.matmul;
    bo.kv_f16 = o_.kv_f16;
    bo.env = o_.env;
    const std::shared_ptr<backend::Backend> be = runtime::make_backend(bo);
    backend_ = be;
    // The context table: -c is the server's KV (0: the model's, at most 4096), shared by the
    // slots (one batched context, runtime/batch.hpp); each request's limit is slot_ctx() of it.
    const int32_t n_train = model_->hparams().n_ctx_train;
    n_ctx_total_ = o_.n_ctx > 0 ? o_.n_ctx : (n_train > 0 ? std::min(n_train, 4096) : 4096);
    const int32_t n_slot = slot_ctx(o_, n_ctx_total_);
    if (n_slot < 1)
      fail("-c {} split over -np {} slots leaves no context per slot (use a larger -c or --kv-unified)", n_ctx_total_,
           o_.n_parallel);
    if (o_.kv_type_given && be->stats().kind == "cpu")
      fmt::print(stderr, "rocky: note: -ctk/-ctv/--kv-f16 have no effect on the CPU backend (it keeps K/V in f32)\n");
    {  // --kv-budget, before any KV is allocated (the CPU keeps f32)
      const backend::KvType kvt = be->stats().kind != "cpu" && o_.kv_f16 ? backend::KvType::F16 : backend::KvType::F32;
      // The engine's sliding-window ring (BatchEngine: -ub within a slot's context).
      const int32_t n_ring = model_->swa_ring(n_slot, std::min(o_.n_ubatch, n_slot), o_.swa_full);
      kv_need_ = runtime::kv_bytes(*model_, n_slot, o_.n_parallel, kvt, &kv_per_token_, n_ring);
      if (!o_.draft_model.empty()) {  // each slot's draft context (the draft model loads here, checked)
        load_draft_model();
        const int32_t n_draft = o_.draft_ctx > 0 ? o_.draft_ctx : n_slot;
        const runtime::KvBytes d = runtime::kv_bytes(*draft_model_, n_draft, o_.n_parallel, kvt);
        kv_need_.full += d.full;
        kv_need_.sliding_window += d.sliding_window;
        kv_need_.recurrent += d.recurrent;
        kv_need_.unused += d.unused;
      }
      runtime::check_kv_budget(kv_need_, o_.kv_budget_mib,
                               fmt::format("-c {} ({} slot(s) of {} positions{})", n_ctx_total_, o_.n_parallel, n_slot,
                                           o_.draft_model.empty() ? "" : ", each with a draft context"));
    }
    runtime::BatchOptions bopt;
    bopt.n_seq = o_.n_parallel;
    bopt.n_ctx = n_slot;
    bopt.n_cells = n_ctx_total_;
    bopt.max_seqs = o_.cont_batching ? 0 : 1;
    bopt.n_ubatch = o_.n_ubatch;
    bopt.swa_full = o_.swa_full;
    bopt.prefill_chunk = o_.prefill_chunk;
    auto engine = std::make_shared<runtime::BatchEngine>(*model_, be, bopt);
    fmt::print(stderr, "rocky: {} slots in one context sharing {} KV cells ({}{}{})\n", o_.n_parallel, n_ctx_total_,
               engine->backend().name(), o_.cont_batching ? "" : ", one request per step: --no-cont-batching",
               engine->recurrent() ? ", hybrid: one recurrent state per slot" : "");
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
      cache_ = std::make_shared<runtime::PrefixCache>(runtime::cache_identity(*model_, engine->context()), co);
      fmt::print(
          stderr, "rocky: prefix cache: blocks of {} tokens, RAM ≤ {} MiB, disk {} (identity {:016x}, {:.0f} ms)\n",
          co.block, o_.cache_ram_mib,
          cache_->stats().disk_enabled ? fmt::format("{} ≤ {} MiB", co.dir, o_.cache_disk_mib) : std::string("off"),
          cache_->identity().hash(), std::chrono::duration<double, std::milli>(Clock::now() - t_id).count());
    }
    sched_ = std::make_unique<runtime::Scheduler>(*tok_, engine, o_.queue, cache_, load_speculation(*engine));
    if (o_.warmup) warm_up(be);
    fmt::print(stderr, "rocky: model loaded in {:.0f} ms (slots {}, -c {}, {} tokens per request{})\n",
               std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), o_.n_parallel, n_ctx_total_,
               sched_->n_ctx(), o_.n_parallel_given && !o_.kv_unified ? "" : ", unified");
    fault::pause(false);
    ready_ = true;
  }

  // --spec-type / -md: each slot's drafter (runtime::SlotSpeculation); the draft model loads here
  // and its vocabulary is checked against the target's.
  runtime::SlotSpeculation load_speculation(const runtime::BatchEngine& engine) {
    runtime::SlotSpeculation sp;
    if (o_.spec_type == "none" && o_.draft_model.empty()) return sp;
    if (o_.embedding) fail("--spec-type/-md: an --embedding server generates no text to speculate on");
    if (engine.recurrent())
      fail(
          "{}: speculative decoding is off for this model: its recurrent (linear-attention) layers keep a state that "
          "cannot be rolled back past rejected drafts; run without --spec-type/-md",
          o_.model);
    if (o_.spec_type == "ngram-simple") {
      sp.kind = runtime::SlotSpeculation::Kind::Ngram;
      sp.ngram_n = o_.ngram_n;
      sp.ngram_m = o_.ngram_m;
      fmt::print(stderr, "rocky: speculation: ngram-simple (n {}, m {}), at most {} drafted tokens per step\n",
                 o_.ngram_n, o_.ngram_m, o_.draft_max);
      return sp;
    }
    if (!draft_model_) load_draft_model();
    sp.kind = runtime::SlotSpeculation::Kind::Model;
    sp.draft = draft_model_.get();
    sp.n_vocab = draft_n_vocab_;
    sp.n_ctx = o_.draft_ctx;
    fmt::print(stderr,
               "rocky: speculation: draft model {} (a context of {} per slot), at most {} drafted tokens per step, "
               "p_min {}\n",
               o_.draft_model, o_.draft_ctx > 0 ? o_.draft_ctx : engine.n_ctx(), o_.draft_max, o_.draft_p_min);
    return sp;
  }

  // -md: the draft model, its vocabulary checked against the target's.
  void load_draft_model() {
    draft_model_ = model::Model::load(o_.draft_model);
    const auto dtok = tok::Tokenizer::from_gguf(draft_model_->file());
    runtime::check_draft_vocab(tok_->vocab(), dtok.vocab(), o_.model, o_.draft_model);
    draft_n_vocab_ = static_cast<int32_t>(std::min(tok_->vocab().size(), dtok.vocab().size()));
  }

  void warm_up(const std::shared_ptr<backend::Backend>& be) {
    const int32_t token = tok_->vocab().bos() >= 0 ? tok_->vocab().bos() : 0;
    // With speculation on, every verification length a step can meet (a token and up to
    // --draft-max drafts).
    const bool speculating = o_.spec_type != "none" || !o_.draft_model.empty();
    const runtime::WarmupReport w = runtime::warm_up(*model_, be, token, sched_ ? sched_->n_ctx() : o_.n_ctx,
                                                     o_.n_ubatch, speculating ? o_.draft_max + 1 : 0);
    const backend::BackendStats bs = be->stats();
    fmt::print(stderr, "rocky: warm-up: {} + {}1 tokens{} in {:.0f} ms ({} pipelines, {:.0f} ms creating them)\n",
               w.n_prompt, w.deep ? fmt::format("{} + {} at depth {} + ", w.n_short, w.n_tiny, w.depth) : std::string(),
               w.n_verify > 0 ? fmt::format(", verifications of 2 … {} tokens", w.n_verify + 1) : std::string(), w.ms,
               bs.pipelines, bs.pipeline_create_ms);
  }

  // SIGTERM's first phase: /health says "draining" (a balancer stops sending), requests are served.
  void begin_draining() { draining_ = true; }
  void begin_shutdown() {
    draining_ = true;
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
    if (sched_) sched_->flush_saves();
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
    // As llama-server: /v1/completions is OpenAI's; /completion and /completions are its native one.
    svr.Post("/v1/completions", wrap(true, [this](auto& req, auto& res) { completion(req, res, Kind::Completion); }));
    for (const char* p : {"/completion", "/completions"})
      svr.Post(p, wrap(true, [this](auto& req, auto& res) { completion(req, res, Kind::Native); }));
    for (const char* p : {"/v1/models", "/models"})
      svr.Get(p, wrap(true, [this](auto& req, auto& res) { models(req, res); }));
    svr.Get("/cache", wrap(true, [this](auto& req, auto& res) { cache_get(req, res); }));
    svr.Delete("/cache", wrap(true, [this](auto& req, auto& res) { cache_delete(req, res); }));
    svr.Get("/props", wrap(true, [this](auto& req, auto& res) { props(req, res); }));
    if (o_.slots_endpoint) svr.Get("/slots", wrap(true, [this](auto& req, auto& res) { slots(req, res); }));
    svr.Post(R"(/slots/([^/]*))", wrap(true, [this](auto& req, auto& res) { slot_action(req, res); }));
    svr.Post("/infill", wrap(true, [this](auto& req, auto& res) { infill(req, res); }));
    svr.Post("/v1/embeddings", wrap(true, [this](auto& req, auto& res) { embeddings(req, res, true); }));
    for (const char* p : {"/embeddings", "/embedding"})
      svr.Post(p, wrap(true, [this](auto& req, auto& res) { embeddings(req, res, false); }));
    for (const char* p : {"/rerank", "/reranking", "/v1/rerank", "/v1/reranking"})
      svr.Post(p, wrap(true, [this](auto& req, auto& res) { rerank(req, res); }));
    svr.Post("/tokenize", wrap(true, [this](auto& req, auto& res) { tokenize(req, res); }));
    svr.Post("/detokenize", wrap(true, [this](auto& req, auto& res) { detokenize(req, res); }));
    svr.Post("/apply-template", wrap(true, [this](auto& req, auto& res) { apply_template(req, res); }));
    // The agent APIs: Anthropic Messages (anthropic.cpp) and OpenAI Responses (openai_responses.cpp).
    svr.Post("/v1/messages", wrap(true, [this](auto& req, auto& res) { anthropic_messages(req, res, false); }));
    svr.Post("/v1/messages/count_tokens",
             wrap(true, [this](auto& req, auto& res) { anthropic_messages(req, res, true); }));
    for (const char* p : {"/v1/responses", "/responses"})
      svr.Post(p, wrap(true, [this](auto& req, auto& res) { openai_responses(req, res, false); }));
    for (const char* p : {"/v1/responses/input_tokens", "/responses/input_tokens"})
      svr.Post(p, wrap(true, [this](auto& req, auto& res) { openai_responses(req, res, true); }));
    // A declared body over --max-body is refused from its headers: cpp-httplib 0.11 would first
    // read (skip) all of it, so a client that declares 20 MB and sends less waited --timeout.
    // CORS as llama-server: every response names the request's Origin as allowed (with
    // --cors-origins only a listed one), and a preflight OPTIONS on any path is answered here.
    svr.Options(R"(.*)", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.has_header("Origin") && !origin_allowed(req.get_header_value("Origin"))) {
        send_error(
            res, ApiError(403, fmt::format("origin '{}' is not in --cors-origins", req.get_header_value("Origin")), "",
                          "cors_origin_not_allowed", "permission_error"));
        return;
      }
      res.set_header("Access-Control-Allow-Credentials", "true");
      res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "*");
      res.set_header("Access-Control-Max-Age", "86400");
      res.status = 200;
      res.set_content("", "text/html");
    });
    svr.set_pre_routing_handler([this, max = o_.max_body](const httplib::Request& req, httplib::Response& res) {
      if (req.has_header("Origin") && origin_allowed(req.get_header_value("Origin"))) {
        res.set_header("Access-Control-Allow-Origin", req.get_header_value("Origin"));
        res.set_header("Vary", "Origin");
      }
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

  // --cors-origins: empty (the default) allows every origin, as llama-server; "*" too.
  bool origin_allowed(const std::string& origin) const {
    if (o_.cors_origins.empty()) return true;
    for (const std::string& a : o_.cors_origins)
      if (a == "*" || a == origin) return true;
    return false;
  }

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
          // llama-server also takes the key as 'X-Api-Key: KEY'.
          const std::string auth = req.get_header_value("Authorization");
          bool bearer = auth.size() > 7 && auth[6] == ' ';
          for (size_t i = 0; bearer && i < 6; ++i)
            bearer = std::tolower(static_cast<unsigned char>(auth[i])) == "bearer"[i];
          // Anthropic's clients send the key as x-api-key (header names are case-insensitive).
          const bool x_api_key = req.has_header("x-api-key") && req.get_header_value("x-api-key") == o_.api_key;
          if (!x_api_key && (!bearer || auth.substr(7) != o_.api_key))
            throw ApiError(401, "invalid or missing API key (send 'Authorization: Bearer KEY' or 'X-Api-Key: KEY')", "",
                           "invalid_api_key", "authentication_error");
        }
        if (needs_model && !ready_) throw ApiError(503, "the model is loading", "", "loading", "unavailable_error");
        if (needs_model && stopping_)
          throw ApiError(503, "the server is shutting down", "", "shutting_down", "unavailable_error");
        fn(req, res);
      } catch (const ApiError& e) {
        ++metrics_.errors;
        send_api_error(req, res, e);
      } catch (const std::bad_alloc&) {
        ++metrics_.errors;
        send_api_error(req, res, ApiError(500, "out of host memory", "", "", "server_error"));
      } catch (const std::exception& e) {
        ++metrics_.errors;
        send_api_error(req, res, ApiError(500, e.what(), "", "", "server_error"));
      }
    };
  }

  // Anthropic's routes answer errors in Anthropic's shape, the others in OpenAI's.
  static void send_api_error(const httplib::Request& req, httplib::Response& res, const ApiError& e) {
    if (req.path.rfind("/v1/messages", 0) != 0) return send_error(res, e);
    if (e.status == 503) res.set_header("Retry-After", "1");
    send_json(res, anthropic::error_status(e), anthropic::error_json(e));
  }

  void health(const httplib::Request&, httplib::Response& res) {
    if (!ready_) {
      res.set_header("Retry-After", "1");
      send_json(res, 503, {{"status", "loading model"}});
    } else if (draining_) {
      send_json(res, 503, {{"status", "draining"}});
    } else {
      send_json(res, 200, {{"status", "ok"}});
    }
  }

  void metrics(const httplib::Request&, httplib::Response& res) {
    runtime::SchedulerStats st;
    if (ready_ && sched_) st = sched_->stats();
    res.status = 200;
    res.set_header("Process-Start-Time-Unix", std::to_string(created_));  // as llama-server
    res.set_content(prometheus_text(metrics_, st, backend_.get(), cache_.get(), ready_ ? &kv_need_ : nullptr,
                                    ready_ ? &kv_per_token_ : nullptr),
                    "text/plain; version=0.0.4; charset=utf-8");
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

  json cache_state() const {
    return cache_json(cache_->stats(), cache_->identity().hash(), o_.cache_dir, sched_->stats());
  }

  void cache_get(const httplib::Request&, httplib::Response& res) { send_json(res, 200, cache_state()); }

  void cache_delete(const httplib::Request&, httplib::Response& res) {
    // Saves of finished requests still on their way reach the cache first, then go with the rest.
    sched_->flush_saves();
    cache_->clear();
    sched_->forget_device_prefixes();
    send_json(res, 200, cache_state());
  }

  // The defaults a request without sampling fields gets (llama-server's generation settings).
  json default_params() const {
    json out = sampling_json(o_.sampling);
    out["n_predict"] = o_.n_predict;
    out["max_tokens"] = o_.n_predict;
    if (o_.spec_type != "none" || !o_.draft_model.empty()) {
      out["speculative.n_max"] = o_.draft_max;
      out["speculative.n_min"] = o_.draft_min;
      out["speculative.p_min"] = o_.draft_p_min;
    }
    return out;
  }

  // GET /slots (llama-server's shape, the fields rocky has): ?fail_on_no_slot=1 answers 503 when
  // every slot is busy.
  void slots(const httplib::Request& req, httplib::Response& res) {
    const runtime::SchedulerStats st = sched_->stats();
    if (req.has_param("fail_on_no_slot") && req.get_param_value("fail_on_no_slot") != "0" &&
        st.slots_busy >= st.n_slots)
      throw ApiError(503, "no slot available", "", "", "unavailable_error");
    json out = json::array();
    for (size_t i = 0; i < st.slots.size(); ++i)
      out.push_back({{"id", i},
                     {"n_ctx", sched_->n_ctx()},
                     {"is_processing", st.slots[i].busy},
                     {"n_past", st.slots[i].kv},
                     {"params", default_params()}});
    send_json(res, 200, out);
  }

  void props(const httplib::Request&, httplib::Response& res) {
    json dgs = {{"n_ctx", sched_->n_ctx()}, {"model", model_id_}, {"params", default_params()}};
    send_json(res, 200,
              {{"n_ctx", sched_->n_ctx()},
               {"n_ctx_total", n_ctx_total_},
               {"kv_unified", !o_.n_parallel_given || o_.kv_unified},
               {"default_generation_settings", dgs},
               {"total_slots", o_.n_parallel},
               {"model_path", o_.model},
               {"model_alias", model_id_},
               {"chat_template", tmpl_->source()},
               {"bos_token", tmpl_->bos_token()},
               {"eos_token", tmpl_->eos_token()},
               {"build_info", build_fingerprint()}});
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

  // A request without tools renders with `tools` none (what templates guarded by `if tools` or
  // `tools is not none` expect). A template that reads `tools` or `functions` unguarded (functionary,
  // firefunction) fails on none: it is rendered again with both empty lists, a plain chat, as
  // llama-server does — its own error is kept when that fails too.
  std::string render(const TemplateInputs& in) const {
    try {
      try {
        return tmpl_->render(in);
      } catch (const chat::TemplateError& e) {
        if (!in.tools.is_null() || e.kind() == chat::TemplateError::Kind::raise_exception) throw;
        TemplateInputs empty = in;
        empty.tools = json::array();
        if (!empty.kwargs.contains("functions")) empty.kwargs["functions"] = json::array();
        try {
          return tmpl_->render(empty);
        } catch (const chat::TemplateError&) {
          throw e;
        }
      }
    } catch (const chat::TemplateError& e) {
      // raise_exception() messages are the template's own (what transformers returns).
      throw ApiError(400,
                     e.kind() == chat::TemplateError::Kind::raise_exception ? e.what() : fmt::format("{}", e.what()),
                     "messages", "template_error");
    } catch (const Error& e) {
      throw ApiError(400, fmt::format("chat template: {}", e.what()), "messages", "template_error");
    }
  }

  // A continued (prefilled) assistant message must be the only one at the end (llama-server's 400).
  static void check_one_trailing_assistant(const json& messages) {
    const size_t n = messages.size();
    if (n >= 2 && messages[n - 2].is_object() && messages[n - 2].contains("role") &&
        messages[n - 2]["role"] == "assistant")
      throw ApiError(400, "Cannot have 2 or more assistant messages at the end of the list.", "messages",
                     "invalid_value");
  }

  // As llama-server passes them: enable_thinking true unless reasoning is off (--reasoning-budget 0,
  // --reasoning off); the request's chat_template_kwargs win.
  json template_kwargs(const json& request_kwargs) const {
    json k = request_kwargs;
    if (!k.contains("enable_thinking")) k["enable_thinking"] = o_.reasoning;
    return k;
  }

  void apply_template(const httplib::Request& req, httplib::Response& res) {
    const ApplyTemplateRequest r = parse_apply_template(parse_body(req.body));
    TemplateInputs in;
    in.messages = r.messages;
    in.tools = r.tools;
    in.add_generation_prompt = r.add_generation_prompt;
    in.continue_final_message = r.continue_final_message;
    if (r.continue_final_message) check_one_trailing_assistant(r.messages);
    in.kwargs = template_kwargs(r.chat_template_kwargs);
    send_json(res, 200, {{"prompt", render(in)}});
  }

  mutable std::mutex dry_mu_;
  mutable std::shared_ptr<const runtime::DryBreakers> dry_default_;  // the default breakers as tokens

  // A constraint compiled against the model's vocabulary (from the pool of compiled grammars: the
  // same schema every turn reuses its mask caches); a failure (size or time budget) is a 400 naming
  // the field the constraint came from.
  std::shared_ptr<grammar::CompiledGrammar> compile_constraint(const std::string& gbnf,
                                                               const std::string& param) const {
    try {
      return grammars_->acquire(gbnf);
    } catch (const Error& e) {
      throw ApiError(400, fmt::format("'{}': {}", param, e.what()), param, "invalid_value");
    }
  }

  // A request's sampling: its fields over the server's defaults (--temp, --seed, -n, …).
  runtime::GenerateParams to_params(const SamplingFields& s) const;
  // The request's speculative.* fields against the server's drafter (app_requests.cpp).
  void set_speculation(const SamplingFields& s, runtime::GenerateParams& p) const;

  // Tool calls in the model's own format (structured.hpp): forced for "required" / a named
  // function, lazy (from the format's trigger on) for "auto" unless another constraint was asked
  // for. Chat completions, Anthropic Messages and Responses share it.
  void add_tool_grammar(runtime::GenerateParams& gp, const chat::ReplySyntax& syntax, const json& tools,
                        const std::string& choice, const std::string& name) const;

  void check_fits(const std::vector<int32_t>& prompt, const char* param) const;

  // As llama-server: an --embedding server answers embeddings only, the others completions only.
  void require_completions() const;

  // POST /infill (llama-server's): the FIM prompt of infill.hpp, answered as /completion.
  void infill(const httplib::Request& req, httplib::Response& res);
  // POST /slots/{id}?action=save|restore|erase (app_slots.cpp).
  void slot_action(const httplib::Request& req, httplib::Response& res);

  void check_token_ids(const std::vector<int32_t>& ids, const std::string& param) const;

  // One sequence's hidden states ([ids.size()][n_embd]) through the scheduler (an embedding job).
  std::vector<float> run_hidden(const httplib::Request& req, std::vector<int32_t> ids);

  void require_embedding(const char* what, const char* flag) const;

  // POST /v1/embeddings (oai) and /embedding, /embeddings (llama-server's native shape).
  void embeddings(const httplib::Request& req, httplib::Response& res, bool oai);

  // A rerank pair's tokens as llama-server lays them out: the GGUF's rerank template
  // (tokenizer.chat_template.rerank, {query} and {document} replaced) when it has one, else
  // [BOS] query [EOS] [SEP] document [EOS] with each special token where the vocab adds it.
  std::vector<int32_t> rerank_tokens(const std::string& query, const std::string& doc) const;

  // POST /rerank, /v1/rerank: each document's score is the classification head on the pooled
  // (last-token) state of query + document; results by descending score (Jina / Cohere shape).
  void rerank(const httplib::Request& req, httplib::Response& res);

  void chat(const httplib::Request& req, httplib::Response& res) {
    require_completions();
    const ChatRequest r = parse_chat(parse_body(req.body));
    TemplateInputs in;
    in.messages = normalise_for_template(r.messages);
    if (r.tool_choice != "none") in.tools = r.tools;
    if (r.continue_final_message) check_one_trailing_assistant(r.messages);
    in.add_generation_prompt = r.add_generation_prompt;
    in.continue_final_message = r.continue_final_message;
    in.kwargs = template_kwargs(r.chat_template_kwargs);
    const std::string prompt = render(in);
    chat::ReplySyntax syntax = chat::reply_syntax(tmpl_->source(), in.tools, prompt, reasoning_);
    syntax.parse_tool_calls = r.tool_choice != "none";
    std::vector<int32_t> ids = tokenize_chat_prompt(*tmpl_, *tok_, prompt);
    check_fits(ids, "messages");
    runtime::GenerateParams gp = to_params(r.sampling);
    add_tool_grammar(gp, syntax, in.tools, r.tool_choice, r.tool_choice_name);
    generate(req, res, std::move(ids), std::move(gp), Kind::Chat, r.stream, r.include_usage, syntax, r.sampling.n);
  }

  void completion(const httplib::Request& req, httplib::Response& res, Kind kind) {
    require_completions();
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
    generate(req, res, std::move(ids), to_params(r.sampling), kind, r.stream, r.include_usage, {}, r.sampling.n);
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
  // error — a device fault (503: out of device memory or device lost; the scheduler made the
  // context again, so a retry is served), the generation failed (500), or it was cancelled while its client is still connected,
  // i.e. cut by the shutdown (a client that leaves cancels its own, and nobody reads that answer):
  // a 503 naming how far it got, never a finish_reason "stop" that would pass the cut text off as
  // complete.
  std::optional<ApiError> settle(const runtime::Job& job) {
    if (!job.error.empty() && job.fault) {  // the step's device failed: the context was made again, retry
      ++metrics_.device_faults;
      return ApiError(
          503,
          fmt::format("device fault: {}; the server makes its context again without a restart: retry the request",
                      job.error),
          "", "device_fault", "unavailable_error");
    }
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

  // `n` > 1 (OpenAI's choices): the choices run one after the other on the first one's slot, so
  // each later one finds the prompt in that slot's KV (only its last token is evaluated again).
  void generate(const httplib::Request& req, httplib::Response& res, std::vector<int32_t> ids,
                runtime::GenerateParams p, Kind kind, bool stream, bool include_usage, const chat::ReplySyntax& syntax,
                int64_t n = 1) {
    if (n > 1 && (stream || kind == Kind::Native))
      fields::bad_value("n", stream ? "above 1 is not supported with \"stream\": true (ask without streaming)"
                                    : "above 1 is not supported on the native endpoint (use /v1/completions)");
    auto probe = std::make_shared<ConnectionProbe>(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
    if (n > 1) {
      const std::string id = random_id(kind == Kind::Chat ? "chatcmpl-" : "cmpl-");
      json out;
      int slot = p.id_slot;
      for (int64_t i = 0; i < n; ++i) {
        auto job = submit(ids, p, probe);
        job->id_slot = slot;
        admit(job);
        while (!job->wait_for_ms(20))
          if (!probe->alive()) job->cancel = true;
        if (const auto e = settle(*job)) {
          probe->release();
          throw *e;
        }
        slot = job->slot;
        json f = shapes_.final_json(kind, id, *job->result, job->slot, syntax, &job->params);
        if (i == 0) {
          out = std::move(f);
          continue;
        }
        json c = f["choices"][0];
        c["index"] = i;
        out["choices"].push_back(std::move(c));
        auto& u = out["usage"];
        u["completion_tokens"] = u["completion_tokens"].get<int64_t>() + f["usage"]["completion_tokens"].get<int64_t>();
        u["total_tokens"] = u["prompt_tokens"].get<int64_t>() + u["completion_tokens"].get<int64_t>();
      }
      probe->release();
      send_json(res, 200, out);
      return;
    }
    const int id_slot = p.id_slot;
    auto job = submit(std::move(ids), std::move(p), probe);
    job->id_slot = id_slot;
    const std::string id = random_id(kind == Kind::Chat ? "chatcmpl-" : "cmpl-");
    if (!stream) {
      admit(job);
      while (!job->wait_for_ms(20))
        if (!probe->alive()) job->cancel = true;
      probe->release();
      if (const auto e = settle(*job)) throw *e;
      send_json(res, 200, shapes_.final_json(kind, id, *job->result, job->slot, syntax, &job->params));
      return;
    }
    auto st = collect_pieces(*job, kind == Kind::Native);
    admit(job);
    stream_reply(res, StreamReply{job, st, probe, shapes_, kind, id, include_usage, syntax,
                                  [this](const runtime::Job& j) { return settle(j); }});
  }

  // A chat-shaped prompt of an agent API: rendered as chat completions renders it.
  std::pair<std::string, chat::ReplySyntax> render_chat(const nlohmann::ordered_json& messages,
                                                        const nlohmann::ordered_json& tools,
                                                        const std::string& tool_choice,
                                                        const nlohmann::ordered_json& kwargs) const {
    TemplateInputs in;
    in.messages = normalise_for_template(messages);
    if (tool_choice != "none") in.tools = tools;
    const bool prefill = !messages.empty() && messages.back().value("role", "") == "assistant";
    in.add_generation_prompt = !prefill;
    in.continue_final_message = prefill;
    in.kwargs = kwargs;
    std::string prompt = render(in);
    chat::ReplySyntax syntax = chat::reply_syntax(tmpl_->source(), in.tools, prompt, reasoning_);
    syntax.parse_tool_calls = tool_choice != "none";
    return {std::move(prompt), syntax};
  }

  // Runs an agent API's generation: the whole body from `body` (the parsed reply and the result),
  // or the stream of `sink`'s events.
  void generate_door(const httplib::Request& req, httplib::Response& res, std::vector<int32_t> ids,
                     runtime::GenerateParams p, const chat::ReplySyntax& syntax, bool stream,
                     std::shared_ptr<EventSink> sink,
                     const std::function<json(const chat::ParsedReply&, const runtime::GenerateResult&)>& body) {
    auto probe = std::make_shared<ConnectionProbe>(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
    auto job = submit(std::move(ids), std::move(p), probe);
    if (!stream) {
      admit(job);
      while (!job->wait_for_ms(20))
        if (!probe->alive()) job->cancel = true;
      probe->release();
      if (const auto e = settle(*job)) throw *e;
      send_json(res, 200, body(chat::parse_reply(job->result->text, syntax), *job->result));
      return;
    }
    auto st = collect_pieces(*job);
    admit(job);
    stream_events(
        res, job, st, probe, syntax, [this](const runtime::Job& j) { return settle(j); }, std::move(sink));
  }

  void anthropic_messages(const httplib::Request& req, httplib::Response& res, bool count_tokens) {
    if (!count_tokens) require_completions();
    const anthropic::MessagesRequest r = anthropic::parse_messages(parse_body(req.body), count_tokens);
    auto [prompt, syntax] = render_chat(r.messages, r.tools, r.tool_choice, r.chat_template_kwargs);
    std::vector<int32_t> ids = tokenize_chat_prompt(*tmpl_, *tok_, prompt);
    if (count_tokens) return send_json(res, 200, {{"input_tokens", ids.size()}});
    check_fits(ids, "messages");
    const std::string id = random_id("msg_");
    auto sink = std::make_shared<anthropic::MessageEvents>(id, model_id_, static_cast<int64_t>(ids.size()));
    runtime::GenerateParams gp = to_params(r.sampling);
    add_tool_grammar(gp, syntax, r.tool_choice == "none" ? json() : r.tools, r.tool_choice, r.tool_choice_name);
    generate_door(req, res, std::move(ids), std::move(gp), syntax, r.stream, sink,
                  [&](const chat::ParsedReply& reply, const runtime::GenerateResult& g) {
                    return anthropic::message_json(id, model_id_, reply, g);
                  });
  }

  void openai_responses(const httplib::Request& req, httplib::Response& res, bool input_tokens) {
    if (!input_tokens) require_completions();
    auto r =
        std::make_shared<responses::ResponsesRequest>(responses::parse_responses(parse_body(req.body), input_tokens));
    // The conversation: the stored one of previous_response_id, then this turn's input.
    json conversation = json::array();
    if (r->previous_response_id) {
      auto prev = response_store_.get(*r->previous_response_id);
      if (!prev)
        throw ApiError(400,
                       fmt::format("Previous response with id '{}' not found (never stored, stored with store: "
                                   "false, or evicted from the store of the {} most recent responses)",
                                   *r->previous_response_id, responses::ResponseStore::k_max_entries),
                       "previous_response_id", "previous_response_not_found");
      conversation = std::move(*prev);
    }
    for (const auto& m : r->input) conversation.push_back(m);
    json messages = json::array();
    if (r->instructions) messages.push_back({{"role", "system"}, {"content", *r->instructions}});
    for (const auto& m : conversation) messages.push_back(m);
    auto [prompt, syntax] = render_chat(messages, r->tools, r->tool_choice, json::object());
    std::vector<int32_t> ids = tokenize_chat_prompt(*tmpl_, *tok_, prompt);
    if (input_tokens) return send_json(res, 200, {{"object", "response.input_tokens"}, {"input_tokens", ids.size()}});
    check_fits(ids, "input");
    responses::ResponseHead head{random_id("resp_"), static_cast<int64_t>(std::time(nullptr)), model_id_, r.get()};
    // Stored once done: the conversation and this reply (the next turn's prompt starts with it).
    auto store = [this, r, head, conversation](const chat::ParsedReply& reply, const json& output) {
      if (!r->store) return;
      json all = conversation;
      for (const auto& m : responses::assistant_messages(reply, output)) all.push_back(m);
      response_store_.put(head.id, std::move(all));
    };
    auto sink = std::make_shared<responses::ResponseEvents>(head, store);
    runtime::GenerateParams gp = to_params(r->sampling);
    add_tool_grammar(gp, syntax, r->tool_choice == "none" ? json() : r->tools, r->tool_choice, r->tool_choice_name);
    generate_door(req, res, std::move(ids), std::move(gp), syntax, r->stream, sink,
                  [&](const chat::ParsedReply& reply, const runtime::GenerateResult& g) {
                    const json output = responses::output_items(reply, head.id);
                    store(reply, output);
                    return responses::response_json(head, output, &g);
                  });
  }

  const ServerOptions o_;
  responses::ResponseStore response_store_;  // previous_response_id's conversations
  const chat::ReasoningFormat reasoning_ = chat::parse_reasoning_format(o_.reasoning_format);
  std::string model_id_;
  Shapes shapes_;  // the answers' bodies (model_id_ in each)
  int64_t created_ = 0;
  std::atomic<bool> ready_{false}, stopping_{false}, draining_{false};
  std::atomic<int64_t> in_flight_{0};
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<model::Model> draft_model_;  // -md (the slots' draft contexts use it: sched_ goes first)
  int32_t draft_n_vocab_ = 0;                  // the ids the draft and target vocabularies share
  std::optional<tok::Tokenizer> tok_;
  std::optional<ChatTemplate> tmpl_;
  FimTokens fim_;                                   // /infill's
  Pooling pooling_ = Pooling::none;                 // --embedding's (--pooling, else the GGUF's)
  std::unique_ptr<grammar::GrammarPool> grammars_;  // compiled constraints kept between requests
  std::optional<RankHead> rank_head_;               // pooling rank: the classification head
  std::shared_ptr<runtime::PrefixCache> cache_;
  std::shared_ptr<backend::Backend> backend_;  // the slots' (for /metrics)
  std::unique_ptr<runtime::Scheduler> sched_;
  runtime::KvBytes kv_need_, kv_per_token_;  // the KV the contexts hold, by kind (/metrics)
  int64_t n_params_ = 0, size_ = 0;
  int32_t n_ctx_total_ = 0;  // -c resolved
  Metrics metrics_;
};

}  // namespace rocky::server::detail
