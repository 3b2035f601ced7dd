// The `rocky` subcommands. Each add_<name>() registers a CLI11 subcommand on `app`; when the user
// picks it, the subcommand's callback stores its work in `run`, which main() calls after parsing.
// A command returns the process exit code; it throws rocky::Error for bad input (main prints it,
// exit 1). Usage errors are CLI11 parse errors (exit 2).
#pragma once

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "runtime/options.hpp"
#include "runtime/sampler.hpp"

namespace rocky::cli {

using Runner = std::function<int()>;

// The environment as main() read it once at start (runtime::read_env): the ROCKY_* lab overrides,
// the pipeline cache directory, the loader, XDG_RUNTIME_DIR. Commands pass it down as options.
const runtime::EnvOptions& process_env();

void add_info(CLI::App& app, Runner& run);
void add_devices(CLI::App& app, Runner& run);
void add_verify(CLI::App& app, Runner& run);
void add_tokenize(CLI::App& app, Runner& run);
void add_run(CLI::App& app, Runner& run);
void add_doctor(CLI::App& app, Runner& run);
void add_synth(CLI::App& app, Runner& run);
void add_quantize(CLI::App& app, Runner& run);
void add_bench(CLI::App& app, Runner& run);
void add_serve(CLI::App& app, Runner& run);
void add_bench_grammar(CLI::App& app, Runner& run);
void add_report(CLI::App& app, Runner& run);

// llama.cpp flags without a meaning in rocky (-ngl: the whole model is on the device; -t: the GPU
// does the work): accepted so that a llama.cpp command line runs, and named in a note on stderr
// by print_ignored(). `whose` says which tool's flag it is ("llama-server", "llama-bench", ...).
inline void add_ignored(CLI::App* sub, std::initializer_list<const char*> options,
                        std::initializer_list<const char*> flags, const std::string& whose) {
  static std::vector<std::string> values;  // parsed and dropped (CLI11 options need a target)
  for (const char* f : options)
    sub->add_option(f, values, "(" + whose + " flag; ignored)")
        ->expected(0, 1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  for (const char* f : flags) sub->add_flag(std::string(f))->description("(" + whose + " flag; ignored)");
}
inline std::vector<std::string> ignored_given(const CLI::App* sub) {
  std::vector<std::string> notes;
  for (const auto* opt : sub->get_options())
    if (opt->count() > 0 && opt->get_description().find("flag; ignored)") != std::string::npos)
      notes.push_back(opt->get_name());
  return notes;
}
inline void print_ignored(const std::vector<std::string>& notes) {
  for (const auto& n : notes) fmt::print(stderr, "rocky: note: {} does not apply to rocky; ignored\n", n);
}

// The GPU's KV cache element type, as llama.cpp names the flags: -ctk/--cache-type-k and
// -ctv/--cache-type-v f32|f16 (default f16, llama.cpp's default; the CPU oracle keeps f32 whatever
// they say), and the older --kv-f16 (both f16). K and V share one element type in rocky's cache:
// different values are a rocky::Error.
struct KvCacheFlags {
  std::string k = "f16", v = "f16";
  bool kv_f16 = false;
};
inline void add_kv_cache_flags(CLI::App* sub, KvCacheFlags& f) {
  sub->add_option("--ctk,--cache-type-k", f.k,
                  "KV cache type for K on the GPU: f32 | f16 (-ctk also works; the CPU keeps f32)")
      ->check(CLI::IsMember({"f32", "f16"}))
      ->capture_default_str();
  sub->add_option("--ctv,--cache-type-v", f.v, "KV cache type for V on the GPU: f32 | f16 (-ctv also works)")
      ->check(CLI::IsMember({"f32", "f16"}))
      ->capture_default_str();
  sub->add_flag("--kv-f16", f.kv_f16, "Same as -ctk f16 -ctv f16 (the default)");
}
inline bool kv_cache_f16(const KvCacheFlags& f) {
  if (f.kv_f16) return true;
  if (f.k != f.v)
    fail("-ctk {} -ctv {}: K and V share one KV cache element type here; give both the same type", f.k, f.v);
  return f.k == "f16";
}

// llama.cpp's flags of the samplers beyond temperature / top-k / top-p / min-p / penalties (common/arg.cpp
// names): --typical, --top-nsigma, --xtc-*, --dry-*, --mirostat*, --samplers, --sampling-seq.
inline void add_sampler_flags(CLI::App* sub, runtime::SamplerParams& sp, const std::string& what) {
  sub->add_option("--typical", sp.typical_p, what + "locally typical sampling p (1 = off)")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--top-nsigma,--top-n-sigma", sp.top_n_sigma,
                  what + "top-n-sigma: keep logits within n standard deviations of the largest (-1 = off)")
      ->check(CLI::Range(-1.0, 1.0e4));
  sub->add_option("--xtc-probability", sp.xtc_probability,
                  what + "XTC: chance per token of removing the top choices (0 = off)")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--xtc-threshold", sp.xtc_threshold,
                  what + "XTC: the probability a top choice has (0.1; > 0.5 = off)")
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--dry-multiplier", sp.dry_multiplier, what + "DRY multiplier (0 = off)")
      ->check(CLI::Range(0.0, 1.0e4));
  sub->add_option("--dry-base", sp.dry_base, what + "DRY base (1.75)")->check(CLI::Range(1.0, 1.0e4));
  sub->add_option("--dry-allowed-length", sp.dry_allowed_length, what + "DRY: repeats this long are free (2)")
      ->check(CLI::Range(0, INT32_MAX));
  sub->add_option("--dry-penalty-last-n", sp.dry_penalty_last_n,
                  what + "DRY: tokens it looks back (-1 = the context; 0 = off)")
      ->check(CLI::Range(-1, INT32_MAX));
  sub->add_option_function<std::vector<std::string>>(
         "--dry-sequence-breaker",
         [&sp](const std::vector<std::string>& v) {
           sp.dry_sequence_breakers.clear();
           for (const std::string& raw : v) {
             if (raw == "none") continue;  // llama.cpp: "none" = no breakers
             std::string b;                // \n, \t, \\, \" as llama.cpp's escapes
             for (size_t i = 0; i < raw.size(); ++i) {
               if (raw[i] == '\\' && i + 1 < raw.size()) {
                 const char c = raw[++i];
                 b += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
               } else {
                 b += raw[i];
               }
             }
             if (!b.empty()) sp.dry_sequence_breakers.push_back(b);
           }
         },
         what + "DRY sequence breaker (repeatable; replaces the defaults \\n : \" *; \"none\" = no breakers)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--mirostat", sp.mirostat, what + "Mirostat: 0 off, 1 Mirostat, 2 Mirostat 2.0 (replaces the chain)")
      ->check(CLI::Range(0, 2));
  sub->add_option("--mirostat-lr", sp.mirostat_eta, what + "Mirostat learning rate eta (0.1)")
      ->check(CLI::Range(0.0, 1.0e4));
  sub->add_option("--mirostat-ent", sp.mirostat_tau, what + "Mirostat target entropy tau (5.0)")
      ->check(CLI::Range(0.0, 1.0e4));
  sub->add_option_function<std::string>(
      "--samplers",
      [&sp](const std::string& v) {
        std::vector<runtime::SamplerKind> order;
        size_t start = 0;
        for (;;) {
          const size_t end = v.find(';', start);
          const std::string name = v.substr(start, end == std::string::npos ? std::string::npos : end - start);
          if (!name.empty()) {
            const auto k = runtime::sampler_from_name(name);
            if (!k)
              throw CLI::ValidationError("--samplers", "'" + name +
                                                           "' is not a sampler (penalties, dry, top_n_sigma, "
                                                           "top_k, typ_p, top_p, min_p, xtc, temperature)");
            order.push_back(*k);
          }
          if (end == std::string::npos) break;
          start = end + 1;
        }
        sp.order = order;
      },
      what +
          "the samplers in order, ';'-separated (default "
          "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature)");
  sub->add_option_function<std::string>(
      "--sampling-seq,--sampler-seq",
      [&sp](const std::string& v) {
        std::vector<runtime::SamplerKind> order;
        for (char c : v) {
          const auto k = runtime::sampler_from_char(c);
          if (!k)
            throw CLI::ValidationError("--sampling-seq",
                                       std::string("'") + c + "' is not a sampler letter (edskypmxt)");
          order.push_back(*k);
        }
        sp.order = order;
      },
      what + "the samplers in order as letters (default edskypmxt)");
}

// --device of the single-device tools (roofline, bench-op): accepts `N`, `vulkan:N` and `vulkan` (= 0),
// the spelling run/verify/bench use, and leaves the index for the uint32_t option.
inline CLI::Validator vulkan_device_index() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s == "vulkan")
          s = "0";
        else if (s.rfind("vulkan:", 0) == 0)
          s = s.substr(7);
        return {};
      },
      "N or vulkan:N");
}

// A CLI11 check: a finite number, > `bound` (or ≥ it, `inclusive`) when that is finite.
// CLI::Range/PositiveNumber let NaN through (every comparison with NaN is false) and print an
// unbounded side as a 300-digit number.
inline CLI::Validator finite_bounded(double bound, bool inclusive) {
  const std::string desc =
      std::isfinite(bound) ? (inclusive ? " ≥ " : " > ") + CLI::detail::to_string(bound) : std::string();
  return CLI::Validator(
      [bound, inclusive, desc](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || !(inclusive ? v >= bound : v > bound))
          return "value " + s + " is not a finite number" + desc;
        return {};
      },
      "finite" + desc);
}
inline CLI::Validator finite_number(double above = -HUGE_VAL) { return finite_bounded(above, false); }
inline CLI::Validator finite_at_least(double lo) { return finite_bounded(lo, true); }

// A CLI11 check: a whole number ≥ lo. CLI::NonNegativeNumber / PositiveNumber say "Value 0 not in
// range 0.000000 to 1797…" (DBL_MAX written out) and call a word "not in range".
inline CLI::Validator whole_at_least(long long lo) {
  const std::string desc = " ≥ " + std::to_string(lo);
  return CLI::Validator(
      [lo, desc](std::string& s) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE) return "value " + s + " is not a whole number";
        if (v < lo) return "value " + s + " is not" + desc;
        return {};
      },
      "whole" + desc);
}

}  // namespace rocky::cli
