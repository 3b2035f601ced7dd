// rocky serve -m MODEL [--host 127.0.0.1] [--port 8080] [-c N] [-np N] [-ub N] [--device D]
//             [--api-key KEY] [--alias NAME] [--chat-template-file FILE] [--queue N]
//             [--max-body BYTES] [--reasoning-format auto|none|deepseek] [-to/--timeout S]
//             [--shutdown-grace S]
// An OpenAI-compatible HTTP server (src/server). Flag names and meanings follow llama-server's;
// llama-server flags that do not apply to rocky (-ngl, -t, --jinja, -fa, …) are accepted and
// ignored with a note on stderr.
#include <fmt/format.h>

#include "commands.hpp"
#include "server/server.hpp"

namespace rocky::cli {

void add_serve(CLI::App& app, Runner& run) {
  auto o = std::make_shared<server::ServerOptions>();
  auto* sub = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
  sub->add_option("-m,--model", o->model, "GGUF model file")->required();
  sub->add_option("--host", o->host, "Address to listen on (default 127.0.0.1: this machine only)");
  sub->add_option("--port", o->port, "Port (default 8080; 0 = any free port, printed on stderr)")
      ->check(CLI::Range(0, 65535));
  sub->add_option("-c,--ctx-size", o->n_ctx,
                  "Context size in tokens; one request may use all of it (0 = the model's, at most 4096)")
      ->check(CLI::Range(0, INT32_MAX));
  sub->add_option("--np,--parallel", o->n_parallel,
                  "Slots: requests generated at the same time (-np also works; default 1)")
      ->check(CLI::Range(1, 64));
  sub->add_option("--ub,--ubatch-size", o->n_ubatch, "Prompt tokens per ubatch (-ub also works; default 512)")
      ->check(CLI::Range(1, INT32_MAX));
  sub->add_flag("--cont-batching,--cb", o->cont_batching,
                "One context for all slots: each step batches every slot's next token and a prompt chunk "
                "(the prefix cache serves each slot's sequence; off for hybrid models)");
  sub->add_option("--prefill-chunk", o->prefill_chunk,
                  "With --cont-batching: prompt tokens per step while others decode (default = -ub)")
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
  sub->add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' (401 otherwise; /health stays open)");
  sub->add_option("-a,--alias", o->alias, "Model id in responses (default: the file name)");
  sub->add_option("--chat-template-file", o->chat_template_file, "Jinja chat template; overrides the model's");
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
  // llama-server flags without a meaning here: accepted, ignored with a note.
  add_ignored(sub,
              {"--ngl,--n-gpu-layers,--gpu-layers", "-t,--threads", "--tb,--threads-batch", "-b,--batch-size",
               "--fa,--flash-attn", "--mlock", "--numa", "--keep", "--slot-save-path", "--n-predict,-n", "-s,--seed",
               "--log-format"},
              {"--jinja", "--no-mmap", "--mmap", "--metrics", "--no-webui", "--embedding"}, "llama-server");
  sub->callback([&run, o, sub, kv] {
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
