// `rocky serve`: an OpenAI-compatible HTTP server (cpp-httplib) over runtime::Scheduler.
//
// run_server() binds the port first (so /health can answer 503 {"status":"loading model"} while
// the model loads), loads the model and the slots' batched context, then serves until SIGINT/SIGTERM:
// on SIGTERM it first drains for shutdown_drain_s seconds (/health answers 503 "draining" so a load
// balancer takes the node out, while requests that still arrive are served), then stops accepting,
// lets in-flight requests finish until shutdown_grace_s seconds after the signal, cancels
// what is left (each cut request gets a 503 "shutting_down" error, an error event when streamed),
// and returns 0. Endpoints and shapes: README.md "Server".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/options.hpp"
#include "runtime/sampler.hpp"

namespace rocky::server {

// -np when not given (llama-server's auto with a unified KV).
inline constexpr int k_auto_parallel = 4;

struct ServerOptions {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;     // 0: any free port (the chosen one is printed on stderr)
  int32_t n_ctx = 0;   // -c: the server's KV (0 = the model's, at most 4096)
  int n_parallel = 1;  // -np: slots (k_auto_parallel when not given)
  // The context table (llama-server's): every server runs one batched context whose -c KV cells the
  // slots share (runtime/batch.hpp). With -np given and no --kv-unified each slot may use
  // n_ctx / n_parallel of them; with -np left at its default (auto: 4 slots) or --kv-unified the KV
  // is unified and one request may use all n_ctx (the others then wait or are preempted).
  bool n_parallel_given = false;
  bool kv_unified = false;
  int32_t n_ubatch = 512;  // -ub
  bool swa_full = false;   // --swa-full: sliding-window layers keep every position (no ring)
  int32_t n_batch = 2048;  // -b: llama-server's logical batch (/infill sizes the prefix and suffix by it)
  // --embedding: the embedding endpoints instead of completions (llama-server's split); --pooling
  // ("" = the model's); --reranking: /rerank with the classification head (pooling rank).
  bool embedding = false;
  std::string pooling;
  bool reranking = false;
  // Continuous batching (the default): every step batches the slots' next tokens and a
  // --prefill-chunk of one waiting prompt. --no-cont-batching (-nocb): one request per step.
  bool cont_batching = true;
  // Before /health says ok, runtime::warm_up (runtime/warmup.hpp) on the slots' backend: the
  // shapes an agent's turns meet, so the kernels' pipelines (created on first use) exist before the
  // first request. --no-warmup (llama-server's flag) skips it.
  bool warmup = true;
  int32_t prefill_chunk = 0;  // --prefill-chunk: prompt tokens per step (0 = -ub)
  std::string device = "auto";
  std::string matmul = "auto";
  bool kv_f16 = true;          // -ctk/-ctv: the GPU's KV cache type (the CPU keeps f32)
  bool kv_type_given = false;  // -ctk/-ctv/--kv-f16 on the command line (a note where they do nothing)
  uint64_t kv_budget_mib = 0;  // --kv-budget (0: what -c and -np need, runtime/kv_memory.hpp)
  std::string api_key;         // empty: no auth
  std::string alias;           // model id in responses (default: the file name)
  std::string chat_template_file;
  std::string chat_template;       // --chat-template: a built-in name or a Jinja source
  std::string chat_template_name;  // --chat-template NAME: a built-in template (chat/builtin_templates.hpp)
  // Defaults of the requests' sampling fields (--temp, --top-k, …, --seed) and of max_tokens (-n).
  runtime::SamplerParams sampling;
  int32_t n_predict = -1;                 // -n: max_tokens of a request that sends none (-1: no limit)
  bool slots_endpoint = true;             // --slots / --no-slots: GET /slots
  std::string slot_save_path;             // --slot-save-path: POST /slots/{id}?action=… (empty: 501)
  bool reasoning = true;                  // --reasoning-budget 0 / --reasoning off: enable_thinking false
  bool verbose = false;                   // --verbose: one stderr line per HTTP request
  std::vector<std::string> cors_origins;  // --cors-origins: allowed Origin values (empty: any, "*")
  size_t queue = 64;                      // requests that may wait for a slot
  size_t max_body = 16u << 20;            // bytes
  std::string reasoning_format = "auto";  // auto | none | deepseek
  int timeout_s = 600;                    // HTTP read/write timeout
  double shutdown_grace_s = 10;
  double shutdown_drain_s = 2;  // SIGTERM only; SIGINT stops accepting at once
  // Prefix KV cache (runtime/prefix_cache.hpp).
  int32_t cache_block = 256;       // --cache-block: tokens per cached block (1 .. 256)
  uint64_t cache_ram_mib = 2048;   // --cache-ram: host-RAM tier (0 = off)
  std::string cache_dir;           // --cache-dir: disk tier (empty = off)
  uint64_t cache_disk_mib = 8192;  // --cache-disk
  // Speculative decoding (runtime/speculative.hpp; llama-server's flags): --spec-type ngram-simple
  // (prompt lookup) or -md MODEL (a draft model of the target's vocabulary); each slot keeps its
  // own drafter. Requests tune it with speculative.n_max / n_min / p_min.
  std::string spec_type = "none";  // none | ngram-simple
  std::string draft_model;         // -md
  int32_t draft_max = 16, draft_min = 0;
  float draft_p_min = 0.75f;
  int32_t draft_ctx = 0;              // -cd: each slot's draft context (0: the slot's size)
  int32_t ngram_n = 3, ngram_m = 48;  // --spec-ngram-size-n / -m
  int test_token_delay_ms = 0;        // tests only: sleep this long after each generated token
  runtime::EnvOptions env;            // the program's environment (ROCKY_* lab overrides, cache dir, …)
};

// The per-request context limit of the table above (n_ctx already resolved from 0).
int32_t slot_ctx(const ServerOptions& o, int32_t n_ctx);

int run_server(const ServerOptions& o);

}  // namespace rocky::server
