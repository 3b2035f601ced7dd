// `rocky bench`: llama-bench-style throughput of prefill (pp) and decode (tg) through the runtime's
// Session, plus peak device memory and the share of the device's measured roofline.
//
// Method (as llama-bench, llama.cpp tools/llama-bench):
//   - one fresh backend + Session per ubatch size (so "peak device memory" is per ub);
//   - pp rows: a prefill of n_prompt seeded random tokens in ubatches of n_ubatch tokens, starting
//     from an empty KV cache each repetition (Session::reset()); only the last token's logits;
//   - tg rows: n_gen 1-token decode steps from an empty KV cache;
//   - parallel-decode rows (--npl): see BenchParams::n_pl;
//   - warm-up runs of each test first, repeated until 0.5 s have passed (at least one; not timed;
//     none when warmup = false): GPU clocks ramp up (the H200's first timed run was 2× slow after one);
//   - t/s = tokens / wall seconds of the whole eval (graph build + plan + submit + wait);
//     reported as mean ± sample standard deviation over `reps` repetitions.
//
// FLOP per token (flops_per_token()): 2 · (every 2-D weight a token multiplies, except the token
// embedding table; the output head counted once, tied or not) + attention 4 · n_layer · n_head ·
// head_dim · average context ((n+1)/2 for a prefill of n tokens, n_gen/2 for decode).
// Roofline: pp rows against the int8-dot peak when the prefill ran on the int8 path (--matmul
// auto/mmq with quantized weights), else the FP32 FMA peak; tg rows against the copy bandwidth with
// the weight bytes read per token (bytes_per_token()).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <map>
#include <nlohmann/json.hpp>

#include "backend/backend.hpp"
#include "model/model.hpp"
#include "runtime/kv_memory.hpp"
#include "runtime/options.hpp"

namespace rocky::runtime {

struct BenchRoofline {  // the subset of `rocky roofline --json` the bench uses
  double fp32_tflops = 0;
  double int8_dot_tops = 0;
  double copy_gbs = 0;
};

struct BenchParams {
  std::string model;
  std::vector<int32_t> n_prompt{512};
  std::vector<int32_t> n_gen{128};
  std::vector<int32_t> n_ubatch{512};
  // -d (llama-bench's --n-depth): tokens already in the KV cache before each timed run (prefilled
  // untimed, in ubatches); every pp/tg test runs at each depth ("pp512 @ d4096").
  std::vector<int32_t> n_depth{0};
  // --npl (llama-batched-bench's -npl): parallel-decode rows "pp P+tg N ×S": S sequences in
  // one context (ContextOptions::n_seq), each prefilled with the first -p prompt (untimed), then N
  // steps that decode one token of every sequence in one ubatch; t/s = S · N / the steps' wall time.
  std::vector<int32_t> n_pl;
  // --spec (speculative decoding rows "tgN spec:D"): for each -n and each drafter D of
  // lab:ALPHA (the target's own greedy continuation, each drafted token corrupted with probability
  // 1 − ALPHA: measurement only), ngram (prompt lookup, n = 3) or draft:MODEL (a draft model),
  // greedy generation of N tokens after a 64-token prompt that repeats its first half (seeded random
  // tokens), timed with and without the drafter in each repetition: t/s of the speculative run, its
  // acceptance and the speed-up over the plain run. draft_max tokens drafted per step (--draft-max).
  std::vector<std::string> spec;
  int32_t draft_max = 8;
  // --grammar-file / --json-schema-file (llama.cpp's flag names): decode rows "tgN grammar" /
  // "tgN json-schema" that sample N tokens (temperature 0.8, seed = repetition) after a 32-token
  // prompt (seeded random tokens) under the constraint, compiled afresh per repetition as a server
  // request would, and the same number of tokens without it (ignore_eos) in the same repetition:
  // t/s of each, the constraint's cost per token and its mask time (GenerateResult::grammar_ms).
  std::string grammar_file, json_schema_file;
  int32_t reps = 5;
  std::string device = "auto";
  bool warmup = true;
  bool profile =
      false;  // per-op GPU time of the last pp ubatch / tg token (Vulkan only; slows the run; -npl: the last step)
  std::string matmul = "auto";  // prefill matmul kernels: auto | mmq | mm | basic (ops::MatmulPath)
  bool kv_f16 = true;           // the GPU's KV cache type (-ctk/-ctv; the CPU keeps f32)
  uint64_t kv_budget_mib = 0;   // --kv-budget: a context's KV over it is refused before allocation (0 = none)
  uint64_t seed = 1234;
  std::optional<BenchRoofline> roofline;  // empty: no % column
  EnvOptions env;                         // the program's environment (lab overrides, cache dir)
};

struct BenchRow {
  std::string model;  // "qwen2 3.09B Q4_K - Medium"
  std::string model_file;
  uint64_t model_size = 0;  // bytes of tensor data
  uint64_t model_n_params = 0;
  std::string backend;  // Backend::name()
  int32_t n_ubatch = 0;
  int32_t n_prompt = 0;  // pp rows
  int32_t n_gen = 0;     // tg rows
  int32_t n_depth = 0;   // KV positions held before the timed run (-d)
  int32_t n_pl = 0;      // parallel-decode rows: sequences per step (t/s = all of them together)
  std::string test;      // "pp512", "tg128"
  int32_t reps = 0;
  std::vector<double> samples_ts;
  double avg_ts = 0, stddev_ts = 0;
  double avg_ns = 0;                           // mean wall ns per repetition
  uint64_t peak_device_memory = 0;             // bytes, after every run of this ub
  backend::MemoryStats memory;                 // device memory by kind after the runs of this ub (Backend::stats())
  KvBytes kv_bytes;                            // the row's context's KV by kind of layer (runtime/kv_memory.hpp)
  KvBytes kv_per_token;                        // of it, one position of one sequence
  std::string type_k = "f32", type_v = "f32";  // the context's KV cache types (llama-bench's fields)
  double flops_per_token = 0;
  double tflops = 0;             // achieved (avg_ts · flops_per_token), pp and tg
  uint64_t bytes_per_token = 0;  // tg: weight bytes a decode token reads (bytes_per_token(); 0 for pp)
  double gbs = 0;                // tg: achieved GB/s of weights read (bytes_per_token · t/s / 1e9)
  std::string roof_kind;         // "int8_dot" | "fp32" | "copy" | "" (no roofline)
  double roof_pct = 0;           // % of that peak; 0 when roof_kind is ""
  std::string matmul_path;       // kernels the prefill used: "mmq" (int8 path), "mm", "basic" or "cpu"
  std::string tiles;             // the tuning profile and the tiles of its kernels ("" on the CPU)
  // The record: what built and ran this row, so a result file says what it measured.
  std::string build_commit;                      // the git commit rocky was built from (core/build_info.hpp)
  std::string driver;                            // runtime::backend_driver(): "NVIDIA 560.35.03"; "cpu"
  std::string tune_profile;                      // the tuning profile in effect (named in `tiles`; "" on the CPU)
  std::map<std::string, std::string> overrides;  // the ROCKY_* variables set (runtime::overrides_in_effect)
  nlohmann::json
      profile;  // [{op, ms, dispatches}] when BenchParams::profile (pp: last ubatch; tg: last token; -npl: last step)
  // Host wall time per ubatch (tg: per token) of the timed repetitions, ms: graph (build_graph),
  // plan (plan_arena), setup / record / submit_wait / readback (Context::stats().host; zero
  // on the CPU), other (the rest of the wall time: KV reset, sampling-free loop), dispatches.
  nlohmann::json host_ms_per_ubatch;
  // Speculative rows (BenchParams::spec): the drafter, drafted and kept tokens over the timed
  // repetitions, and avg t/s of the plain generation measured beside it (speed-up = avg_ts / it).
  std::string spec;
  int64_t draft_n = 0, draft_n_accepted = 0;
  double plain_ts = 0;
  // Constrained decode rows (BenchParams::grammar_file / json_schema_file): the file, the tokens
  // generated under it over the timed repetitions, its mask + apply time per token (ms); avg_ts is
  // the constrained t/s, plain_ts the unconstrained one.
  std::string constraint;
  int64_t constrained_tokens = 0;
  double grammar_ms_per_token = 0;
};

// Weight bytes one decode token reads, in the GGUF layout: every tensor but the token
// embedding table, plus one row of it (or all of it when it is also the output head, tied). The KV
// cache reads are not counted. Against the copy bandwidth this is the decode roofline (tg rows:
// bytes_per_token, gbs, roof_pct of "copy"; the md table's GB/s column).
uint64_t bytes_per_token(const model::Model& m);

// FLOP of one token at an average attention context of `ctx_avg` positions (see above).
double flops_per_token(const model::Model& m, double ctx_avg);

// Runs the benchmark; progress lines on stderr via `log`. rocky::Error on bad params/model.
std::vector<BenchRow> run_bench(const BenchParams& p, const std::function<void(const std::string&)>& log);

std::string bench_markdown(const std::vector<BenchRow>& rows);
std::string bench_csv(const std::vector<BenchRow>& rows);
nlohmann::json bench_json(const std::vector<BenchRow>& rows);  // a list of row objects

// Parse `rocky roofline --json` output.
BenchRoofline load_roofline_json(const std::string& path);

}  // namespace rocky::runtime
