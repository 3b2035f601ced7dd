// rocky bench -m MODEL [-p 512] [-n 128] [-ub 64,128,...] [-b N] [-r 5] [-o md|json|csv] [--device D] [--matmul P]
//   [--roofline-json FILE | --no-roofline] [--no-warmup] [--profile]
// llama-bench's table (model, size, params, backend, n_ubatch, test, t/s ± stddev) plus peak
// device memory and the % of the device's measured roofline; see runtime/bench.hpp for the method.
// Comma-separated lists as in llama-bench (-p 128,512). Progress goes to stderr.
#include <algorithm>
#include <fmt/format.h>

#include <memory>

#include "backend/vulkan/device.hpp"
#include "backend/vulkan/roofline.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "runtime/bench.hpp"

namespace rocky::cli {
namespace {

struct BenchOpts {
  runtime::BenchParams p;
  std::vector<int32_t> n_batch;  // accepted for llama-bench compatibility (rocky has no separate logical batch)
  std::string output = "md";
  std::string roofline_json;
  bool no_roofline = false;
  bool no_warmup = false;
  bool quiet = false;
  KvCacheFlags kv;
};

int run_bench(BenchOpts o) {
  o.p.warmup = !o.no_warmup;
  o.p.env = process_env();
  const bool on_gpu = o.p.device != "cpu";
  if (!o.roofline_json.empty()) {
    o.p.roofline = runtime::load_roofline_json(o.roofline_json);
  } else if (!o.no_roofline && on_gpu) {
    uint32_t idx = 0;
    std::string why;
    if (auto i = vulkan::parse_vulkan_device(o.p.device)) {
      idx = *i;
    } else if (auto g = vulkan::first_gpu(&why, runtime::instance_options(process_env()))) {
      idx = *g;
    } else {
      idx = UINT32_MAX;
    }
    if (idx != UINT32_MAX) {
      if (!o.quiet)
        fmt::print(stderr, "bench: measuring the roofline of vulkan:{} (skip: --no-roofline or --roofline-json)\n",
                   idx);
      auto inst = std::make_shared<vulkan::Instance>(runtime::instance_options(process_env()));
      vulkan::Device dev(inst, idx);
      vulkan::RooflineOptions ro;
      ro.timeout_s = process_env().lab.vulkan_timeout_s;
      vulkan::Roofline r = vulkan::measure_roofline(dev, ro);
      o.p.roofline = runtime::BenchRoofline{r.fp32_tflops, r.int8_dot_tops, r.copy_gbs};
    }
  }
  auto rows = runtime::run_bench(o.p, [&](const std::string& s) {
    if (!o.quiet) fmt::print(stderr, "{}\n", s);
  });
  if (o.output == "json") {
    fmt::print("{}\n", runtime::bench_json(rows).dump(2));
  } else if (o.output == "csv") {
    fmt::print("{}", runtime::bench_csv(rows));
  } else {
    fmt::print("{}", runtime::bench_markdown(rows));
    if (o.p.profile) {
      for (const auto& r : rows) {
        if (r.profile.empty()) continue;
        double total = 0;
        for (const auto& e : r.profile) total += e["ms"].get<double>();
        fmt::print("\nGPU time per op, last {} of {} at ub {} ({:.3f} ms):\n", r.n_gen > 0 ? "token" : "ubatch", r.test,
                   r.n_ubatch, total);
        for (const auto& e : r.profile)
          fmt::print("  {:<20} {:9.3f} ms {:5.1f} % {:5} dispatches\n", e["op"].get<std::string>(),
                     e["ms"].get<double>(), total > 0 ? 100.0 * e["ms"].get<double>() / total : 0.0,
                     e["dispatches"].get<int>());
      }
    }
  }
  return 0;
}

}  // namespace

void add_bench(CLI::App& app, Runner& run) {
  auto o = std::make_shared<BenchOpts>();
  auto* sub = app.add_subcommand("bench", "Measure prefill (pp) and decode (tg) throughput, llama-bench style");
  sub->add_option("-m,--model", o->p.model, "GGUF model")->required()->check(CLI::ExistingFile);
  sub->add_option("-p,--n-prompt", o->p.n_prompt, "Prompt lengths (pp tests), comma-separated")
      ->delimiter(',')
      ->check(whole_at_least(0))
      ->capture_default_str();
  sub->add_option("-n,--n-gen", o->p.n_gen, "Generated tokens (tg tests), comma-separated")
      ->delimiter(',')
      ->check(whole_at_least(0))
      ->capture_default_str();
  sub->add_option("-d,--n-depth", o->p.n_depth,
                  "KV depths: tokens in the cache before each test (llama-bench's -d), comma-separated")
      ->delimiter(',')
      ->check(whole_at_least(0))
      ->capture_default_str();
  sub->add_option("--npl", o->p.n_pl,
                  "Parallel decode: sequences per step, comma-separated (llama-batched-bench's -npl; -npl works)")
      ->delimiter(',')
      ->check(whole_at_least(1));
  sub->add_option("--spec", o->p.spec,
                  "Speculative decoding rows, comma-separated: lab:ALPHA (measurement only: the target's own greedy "
                  "output, each drafted token corrupted with probability 1 - ALPHA), ngram (prompt lookup), "
                  "draft:MODEL (a draft model); greedy tg with and without, acceptance and speed-up")
      ->delimiter(',');
  sub->add_option("--grammar-file", o->p.grammar_file,
                  "Constrained decode rows: tg with the GBNF grammar in this file against tg without it")
      ->check(CLI::ExistingFile);
  sub->add_option("--json-schema-file", o->p.json_schema_file,
                  "Constrained decode rows: tg with this JSON Schema file against tg without it")
      ->check(CLI::ExistingFile);
  sub->add_option("--draft-max", o->p.draft_max, "Speculation rows: most drafted tokens per step")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  sub->add_option("--ub,--ubatch-size", o->p.n_ubatch, "Ubatch sizes, comma-separated (-ub also works)")
      ->delimiter(',')
      ->check(finite_number(0))
      ->capture_default_str();
  sub->add_option("-b,--batch-size", o->n_batch,
                  "Accepted for llama-bench compatibility (ignored: rocky's batch is the ubatch)")
      ->delimiter(',')
      ->check(whole_at_least(1));
  sub->add_option("-r,--repetitions", o->p.reps, "Timed repetitions per test")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  sub->add_option("-o,--output", o->output, "Output format")
      ->check(CLI::IsMember({"md", "json", "csv"}))
      ->capture_default_str();
  sub->add_option("--device", o->p.device, "cpu, vulkan[:N] or auto")->capture_default_str();
  sub->add_option("--matmul", o->p.matmul,
                  "Prefill matmul kernels: auto (= mmq), mmq (int8: q8_1 activations), mm (f32 tiles), basic")
      ->check(CLI::IsMember({"auto", "mmq", "mm", "basic"}))
      ->capture_default_str();
  sub->add_option("--roofline-json", o->roofline_json, "Peaks from `rocky roofline --json` (else measured once)")
      ->check(CLI::ExistingFile);
  sub->add_flag("--no-roofline", o->no_roofline, "No % of roofline column");
  sub->add_flag("--no-warmup", o->no_warmup, "Skip the warm-up run");
  sub->add_flag("--profile", o->p.profile,
                "Per-op GPU time of the last pp ubatch and tg token (timestamps; slows the run)");
  sub->add_option("--seed", o->p.seed, "Seed of the random tokens")->capture_default_str();
  sub->add_flag("-q,--quiet", o->quiet, "No progress on stderr");
  add_kv_cache_flags(sub, o->kv);
  sub->add_option("--kv-budget", o->p.kv_budget_mib,
                  "KV budget in MiB: a context whose KV is over it is refused before allocation (0 = none)")
      ->check(CLI::Range(uint64_t(0), uint64_t(1) << 30));
  add_ignored(sub, {"--ngl,--n-gpu-layers", "-t,--threads", "--fa,--flash-attn", "--mmp,--mmap", "--numa"}, {},
              "llama-bench");
  sub->callback([&run, o, sub] {
    const std::vector<std::string> notes = ignored_given(sub);
    print_ignored(notes);
    const auto positive = [](const std::vector<int32_t>& v) {
      return std::any_of(v.begin(), v.end(), [](int32_t x) { return x > 0; });
    };
    if (!positive(o->p.n_prompt) && !positive(o->p.n_gen))  // a usage error (exit 2), not an empty table
      throw CLI::ValidationError("-p/-n", "every prompt and generation length is 0: nothing to measure");
    run = [o] {
      o->p.kv_f16 = kv_cache_f16(o->kv);
      return run_bench(*o);
    };
  });
}

}  // namespace rocky::cli
