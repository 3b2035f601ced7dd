// rocky serve -m MODEL [--host 127.0.0.1] [--port 8080] [-c N] [-np N] [-ub N] [--device D]
//             [--api-key KEY] [--alias NAME] [--chat-template-file FILE] [--queue N]
//             [--max-body BYTES] [--reasoning-format auto|none|deepseek] [-to/--timeout S]
//             [--shutdown-grace S] [--shutdown-drain S]
// An OpenAI-compatible HTTP server (src/server). Flag names and meanings follow llama-server's;
// the three llama-server flags that have no meaning on rocky's single-device path (-ngl, -t, -fa)
// are accepted with a note on stderr; a flag rocky cannot honour is refused (exit 2) saying why.
#include <fmt/format.h>

#include "chat/template.hpp"
#include "commands.hpp"
#include "server/server.hpp"

namespace rocky::cli {

namespace {
// --chat-template: an unknown name is a usage error here, before the model loads (the server's
// own check stays for library callers).
void check_template_name(const std::string& t) {
  if (t.empty() || chat::builtin_template_source(t) || t.find("{{") != std::string::npos ||
      t.find("{%") != std::string::npos)
    return;
  std::string names;
  for (const auto& n : chat::builtin_template_names()) names += (names.empty() ? "" : ", ") + n;
  throw CLI::ValidationError("--chat-template",
                             "'" + t + "' is neither a built-in template (" + names + ") nor a Jinja template");
}

// Speculative decoding (llama-server's flags; runtime/speculative.hpp): each slot drafts with its
// own n-gram lookup or draft-model context.
void add_speculation_flags(CLI::App* sub, server::ServerOptions& o) {
  sub->add_option("--spec-type", o.spec_type,
                  "Speculative decoding drafter: none (default) or ngram-simple (prompt lookup: the last n tokens "
                  "looked up earlier in the prompt and output); -md MODEL drafts with a model")
      ->check(CLI::IsMember({"none", "ngram-simple"}));
  sub->add_option("--md,--model-draft", o.draft_model,
                  "Draft model for speculative decoding (-md also works): the target's vocabulary, a pure-attention "
                  "model; each slot gets a draft context of its size on the target's device");
  sub->add_option("--draft-max,--draft,--draft-n,--spec-draft-n-max", o.draft_max,
                  "Speculation: most drafted tokens per step (default 16; a request's speculative.n_max wins)")
      ->check(CLI::Range(1, 256));
  sub->add_option("--draft-min,--draft-n-min,--spec-draft-n-min", o.draft_min,
                  "Speculation: fewer drafted tokens are not evaluated (default 0; speculative.n_min)")
      ->check(CLI::Range(0, 256));
  sub->add_option("--draft-p-min", o.draft_p_min,
                  "Draft model: stop drafting where its most likely token is below this probability (default 0.75; "
                  "speculative.p_min)")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--cd,--ctx-size-draft", o.draft_ctx,
                  "Draft model: positions of each slot's draft context (-cd also works; default 0: the slot's; a "
                  "longer text drafts nothing)")
      ->check(CLI::Range(0, INT32_MAX));
  sub->add_option("--spec-ngram-size-n,--spec-ngram-simple-size-n", o.ngram_n,
                  "ngram-simple: tokens of the looked-up key (default 3)")
      ->check(CLI::Range(1, 1024));
  sub->add_option("--spec-ngram-size-m,--spec-ngram-simple-size-m", o.ngram_m,
                  "ngram-simple: most tokens drafted from one match (default 48; --draft-max caps it)")
      ->check(CLI::Range(1, 1024));
}

// A speculation flag without the drafter it tunes would be silently ignored: a usage error.
void check_speculation_flags(const CLI::App* sub, const server::ServerOptions& o) {
  const auto needs = [sub](const char* flag, bool ok, const char* what) {
    if (sub->count(flag) > 0 && !ok) throw CLI::ValidationError(flag, std::string("needs ") + what);
  };
  const bool any = o.spec_type != "none" || !o.draft_model.empty();
  if (o.spec_type != "none" && !o.draft_model.empty())
    throw CLI::ValidationError("--spec-type", "and -md both draft; give one");
  needs("--spec-ngram-size-n", o.spec_type == "ngram-simple", "--spec-type ngram-simple");
  needs("--spec-ngram-size-m", o.spec_type == "ngram-simple", "--spec-type ngram-simple");
  needs("--draft-p-min", !o.draft_model.empty(), "a draft model (-md)");
  needs("--ctx-size-draft", !o.draft_model.empty(), "a draft model (-md)");
  needs("--draft-max", any, "a drafter (--spec-type or -md)");
  needs("--draft-min", any, "a drafter (--spec-type or -md)");
  if (o.draft_min > o.draft_max)
    throw CLI::ValidationError("--draft-min", fmt::format("{} is above --draft-max {}", o.draft_min, o.draft_max));
  if (any && o.embedding) throw CLI::ValidationError("--spec-type/-md", "an --embedding server generates no text");
}
}  // namespace

void add_serve(CLI::App& app, Runner& run) {
  auto o = std::make_shared<server::ServerOptions>();
  auto* sub = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
  sub->add_option("-m,--model", o->model, "GGUF model file")->required();
  sub->add_option("--host", o->host, "Address to listen on (default 127.0.0.1: this machine only)");
  sub->add_option("--port", o->port, "Port (default 8080; 0 = any free port, printed on stderr)")
      ->check(CLI::Range(0, 65535));
  sub->add_option("-c,--ctx-size", o->n_ctx,
                  "The server's KV in tokens (0 = the model's, at most 4096). With -np N given and no "
                  "--kv-unified each slot has -c / N; otherwise one request may use all of it")
      ->check(CLI::Range(0, INT32_MAX));
  auto* np = sub->add_option("--np,--parallel", o->n_parallel,
                             "Slots: requests generated at the same time (-np also works; default auto: 4, "
                             "sharing -c as one unified KV)")
                 ->check(CLI::Range(1, 64));
  sub->add_flag("--kv-unified,--kvu", o->kv_unified,
                "With -np N: every request may use all of -c (default when -np is not given)");
  sub->add_flag("--swa-full", o->swa_full,
                "Sliding-window layers keep KV for every position instead of a ring of window + ubatch cells "
                "(a ring keeps prefix-cache blocks only of its newest positions)");
  sub->add_option("--ub,--ubatch-size", o->n_ubatch, "Prompt tokens per ubatch (-ub also works; default 512)")
      ->check(CLI::Range(1, INT32_MAX));
  // Flags read in the callback (they outlive this function).
  struct Extra {
    int32_t n_batch = 0;
    int64_t seed = -1;
    int reasoning_budget = -1;
    std::string reasoning = "auto";
    bool context_shift = false;
  };
  auto x = std::make_shared<Extra>();
  auto* nb =
      sub->add_option("-b,--batch-size", x->n_batch, "Logical batch: caps -ub as in llama-server (-ub = min(-ub, -b))")
          ->check(CLI::Range(1, INT32_MAX));
  // Defaults of the requests' fields (a request's own value wins).
  auto& sp = o->sampling;
  sub->add_option("-s,--seed", x->seed, "Seed of requests that send none (default -1: a random seed per request)")
      ->check(CLI::Range(int64_t(-1), int64_t(UINT32_MAX)));
  sub->add_option("-n,--n-predict,--predict", o->n_predict,
                  "max_tokens of requests that send none (default -1: until end-of-generation or the context)")
      ->check(CLI::Range(-1, INT32_MAX));
  sub->add_option("--temp", sp.temp, "Default temperature (0.8; 0 = greedy)")->check(CLI::Range(0.0, 1.0e4));
  sub->add_option("--top-k", sp.top_k, "Default top_k (40; 0 = off)")->check(CLI::Range(0, INT32_MAX));
  sub->add_option("--top-p", sp.top_p, "Default top_p (0.95; 1 = off)")->check(CLI::Range(0.0, 1.0));
  sub->add_option("--min-p", sp.min_p, "Default min_p (0.05; 0 = off)")->check(CLI::Range(0.0, 1.0));
  sub->add_option("--repeat-penalty", sp.repeat_penalty, "Default repeat_penalty (1.0 = off)")
      ->check(CLI::Range(0.0, 1.0e4));
  sub->add_option("--repeat-last-n", sp.repeat_last_n, "Default repeat_last_n (64; 0 = off, -1 = the context)")
      ->check(CLI::Range(-1, INT32_MAX));
  sub->add_option("--presence-penalty", sp.presence_penalty, "Default presence_penalty (0 = off)")
      ->check(CLI::Range(-2.0, 2.0));
  sub->add_option("--frequency-penalty", sp.frequency_penalty, "Default frequency_penalty (0 = off)")
      ->check(CLI::Range(-2.0, 2.0));
  add_sampler_flags(sub, sp, "Default ");
  sub->add_flag("--embedding,--embeddings", o->embedding,
                "Serve embeddings (/v1/embeddings, /embedding) instead of completions, as llama-server: the "
                "hidden states after the output norm, pooled by --pooling");
  sub->add_option("--pooling", o->pooling,
                  "Embedding pooling: none, mean, cls, last or rank (default: the model's <arch>.pooling_type, "
                  "none when absent)")
      ->check(CLI::IsMember({"none", "mean", "cls", "last", "rank"}));
  sub->add_flag("--reranking,--rerank", o->reranking,
                "Serve /rerank and /v1/rerank with the model's classification head (implies --embedding and "
                "--pooling rank)");
  sub->add_flag("--cont-batching,--cb,!--no-cont-batching,!--nocb", o->cont_batching,
                "Continuous batching (the default): each step batches every slot's next token, with a prompt "
                "chunk between those steps; --no-cont-batching (-nocb) runs one request per step");
  sub->add_option("--prefill-chunk", o->prefill_chunk, "Prompt tokens per step while others decode (default = -ub)")
      ->check(CLI::Range(1, INT32_MAX));
  sub->add_flag("!--no-warmup", o->warmup,
                "Skip the warm-up (before /health says ok: one ubatch, two short ubatches at a depth of up "
                "to 1,280 where -c holds one, and one decode step, so the first request does not create "
                "the kernels' pipelines)");
  sub->add_option("--device", o->device,
                  "Backend: auto (default: the first Vulkan GPU, else the CPU), vulkan[:N], cpu");
  sub->add_option("--matmul", o->matmul, "Prefill matmul kernels: auto (= mmq), mmq, mm, basic")
      ->check(CLI::IsMember({"auto", "mmq", "mm", "basic"}));
  auto kv = std::make_shared<KvCacheFlags>();
  add_kv_cache_flags(sub, *kv);
  sub->add_option("--kv-budget", o->kv_budget_mib,
                  "KV budget in MiB (default: what -c and -np need): checked before any KV is allocated, "
                  "refused naming the budget when -c / -np need more; the server never allocates KV past it")
      ->check(CLI::Range(uint64_t(0), uint64_t(1) << 30));
  sub->add_option("--api-key", o->api_key,
                  "Require 'Authorization: Bearer KEY' or 'X-Api-Key: KEY' (401 otherwise; /health stays open)");
  sub->add_option("-a,--alias", o->alias, "Model id in responses (default: the file name)");
  sub->add_option("--chat-template-file", o->chat_template_file, "Jinja chat template; overrides the model's");
  sub->add_option("--chat-template", o->chat_template,
                  "Chat template: a llama.cpp built-in name (chatml, llama3, gemma, mistral-v7, mistral-v7-tekken, "
                  "phi3, phi4, deepseek3, zephyr) or a Jinja template; overrides the model's")
      ->excludes("--chat-template-file");
  sub->add_option("--cors-origins", o->cors_origins,
                  "Origins allowed by CORS, comma-separated (default: any, as llama-server; browsers of other "
                  "origins get no Access-Control-Allow-Origin, their preflights a 403)")
      ->delimiter(',');
  sub->add_flag("!--no-slots", o->slots_endpoint, "Disable GET /slots (on by default; --slots turns it on)");
  sub->add_flag("--slots", o->slots_endpoint, "Serve GET /slots (the default)");
  sub->add_option("--slot-save-path", o->slot_save_path,
                  "Directory of slot files: enables POST /slots/{id}?action=save|restore|erase (as llama-server)")
      ->check(CLI::ExistingDirectory);
  sub->add_flag("--metrics")
      ->description("Serve /metrics (rocky always does; accepted for llama-server command lines)");
  sub->add_flag("--jinja")->description("Render chat templates with Jinja (rocky always does)");
  sub->add_option("--reasoning-budget", x->reasoning_budget,
                  "-1: thinking allowed (default); 0: off (the template gets enable_thinking false)")
      ->check(CLI::Range(-1, 0));
  sub->add_option("--rea,--reasoning", x->reasoning, "on | off | auto (default): off = --reasoning-budget 0")
      ->check(CLI::IsMember({"on", "off", "auto"}));
  sub->add_flag("-v,--verbose", o->verbose, "Log each HTTP request (method, path, status, time) on stderr");
  sub->add_flag("--context-shift,!--no-context-shift", x->context_shift,
                "Refused: rocky does not shift the context; a generation that fills it ends with "
                "finish_reason \"length\" (--no-context-shift, llama-server's default, is what rocky does)");
  sub->add_option("--queue", o->queue, "Requests that may wait for a slot; beyond them 503 + Retry-After (default 64)")
      ->check(CLI::Range(0, 4096));
  sub->add_option("--max-body", o->max_body, "Largest request body in bytes (default 16 MiB)")
      ->check(CLI::Range(1, INT32_MAX));
  sub->add_option("--reasoning-format", o->reasoning_format, "Where <think> text goes: auto (default), none, deepseek")
      ->check(CLI::IsMember({"auto", "none", "deepseek"}));
  sub->add_option("--to,--timeout", o->timeout_s, "HTTP read/write timeout in seconds (-to also works; default 600)")
      ->check(CLI::Range(1, 86400));
  sub->add_option("--shutdown-grace", o->shutdown_grace_s,
                  "Seconds in-flight requests may finish after SIGINT/SIGTERM before they are cancelled (default 10)")
      ->check(finite_at_least(0));
  sub->add_option("--shutdown-drain", o->shutdown_drain_s,
                  "Seconds after SIGTERM during which /health answers 503 {\"status\":\"draining\"} while new "
                  "requests are still served, so a load balancer's health checks take the node out first "
                  "(default 2; 0 = stop accepting at once; SIGINT never drains)")
      ->check(finite_at_least(0));
  sub->add_option("--cache-block", o->cache_block, "Prefix cache: tokens per cached block (1 .. 256, default 256)")
      ->check(CLI::Range(1, 256));
  sub->add_option("--cache-ram,--cram", o->cache_ram_mib, "Prefix cache: host-RAM tier in MiB (default 2048; 0 = off)")
      ->check(CLI::Range(uint64_t(0), uint64_t(1) << 30));
  sub->add_option("--cache-dir", o->cache_dir,
                  "Prefix cache: directory of the disk tier, kept across restarts (default: none)");
  sub->add_option("--cache-disk", o->cache_disk_mib, "Prefix cache: disk tier in MiB (default 8192)")
      ->check(CLI::Range(uint64_t(0), uint64_t(1) << 40));
  sub->add_option("--test-token-delay-ms", o->test_token_delay_ms, "Tests only: sleep N ms after each token")
      ->check(CLI::Range(0, 10000))
      ->group("");  // hidden from --help
  // The llama-server flags without a meaning on rocky's single-device path (the whole model is on
  // the device; the GPU does the work; attention is always fused): accepted, with a note.
  add_speculation_flags(sub, *o);
  add_ignored(sub,
              {"--ngl,--n-gpu-layers,--gpu-layers", "--ngld,--gpu-layers-draft,--n-gpu-layers-draft",
               "-t,--threads,--tb,--threads-batch", "--fa,--flash-attn"},
              {}, "llama-server");
  // llama-server flags rocky cannot honour: refused (exit 2) with the reason, never ignored.
  const std::pair<const char*, const char*> refused[] = {
      {"--mlock", "rocky does not lock the model in RAM (the weights live on the device)"},
      {"--no-mmap", "rocky always maps the model file"},
      {"--numa", "rocky has no NUMA placement (one device does the work)"},
      {"--keep", "there is no context shift to keep tokens across (see --context-shift)"},
      {"--log-format", "rocky's log is plain text"},
      {"--hf,--hfr,--hf-repo", "rocky does not download models; give the GGUF file with -m"},
      {"--mu,--model-url", "rocky does not download models; give the GGUF file with -m"},
      {"--devd,--device-draft", "the draft model runs on the target's device (--device)"},
  };
  for (const auto& [names, why] : refused) {
    const std::string reason = why;
    sub->add_option_function<std::vector<std::string>>(
           names,
           [names = std::string(names), reason](const std::vector<std::string>&) {
             throw CLI::ValidationError(names, "is not supported: " + reason);
           },
           "(llama-server flag; refused: " + reason + ")")
        ->expected(0, 1);
  }
  sub->callback([&run, o, sub, kv, np, nb, x] {
    if (x->context_shift)
      throw CLI::ValidationError("--context-shift",
                                 "is not supported: rocky does not shift the context (a generation that fills it "
                                 "ends with finish_reason \"length\"); leave the flag out");
    check_template_name(o->chat_template);
    check_speculation_flags(sub, *o);
    o->n_parallel_given = np->count() > 0;
    for (const char* f : {"--ctk", "--ctv", "--kv-f16"})
      if (sub->get_option(f)->count() > 0) o->kv_type_given = true;
    if (nb->count() > 0) o->n_ubatch = std::min(o->n_ubatch, x->n_batch);
    if (nb->count() > 0) o->n_batch = x->n_batch;
    if (o->reranking) {
      if (!o->pooling.empty() && o->pooling != "rank")
        throw CLI::ValidationError("--pooling", "is '" + o->pooling + "' but --reranking needs rank");
      o->embedding = true;
      o->pooling = "rank";
    }
    if (x->seed >= 0) o->sampling.seed = static_cast<uint32_t>(x->seed);
    o->reasoning = x->reasoning_budget != 0 && x->reasoning != "off";
    const std::vector<std::string> notes = ignored_given(sub);
    run = [o, notes, kv] {
      o->env = process_env();
      o->kv_f16 = kv_cache_f16(*kv);
      print_ignored(notes);
      return server::run_server(*o);
    };
  });
}

}  // namespace rocky::cli
