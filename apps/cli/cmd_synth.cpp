// rocky synth --preset NAME -o OUT.gguf [--type TYPE] [--layers N] [--seed S] — a real-shape model
// with seeded random weights and a generated tokenizer (src/synth/synth.hpp).
#include <fmt/format.h>

#include "commands.hpp"
#include "synth/synth.hpp"

namespace rocky::cli {
namespace {

struct SynthCliOpts {
  std::string preset, out, type = "q4_k_m";
  uint32_t layers = 0, vocab = 0;
  uint64_t seed = 0;
  unsigned threads = 0;
  bool quiet = false;
};

int run_synth(const SynthCliOpts& c) {
  synth::SynthOptions o;
  o.preset = c.preset;
  o.out = c.out;
  o.type = synth::parse_file_type(c.type);
  if (c.layers) o.layers = c.layers;
  if (c.vocab) o.vocab = c.vocab;
  o.seed = c.seed;
  o.threads = c.threads;
  o.progress = !c.quiet;
  const synth::WriteSummary s = synth::synth_model(o);
  fmt::print(stderr, "rocky synth: {} ({}): {} tensors, {:.3f} B params, {:.2f} bits/weight, {:.1f} MiB\n", c.out,
             synth::file_type_name(o.type), s.n_tensors, static_cast<double>(s.n_params) / 1e9,
             8.0 * static_cast<double>(s.tensor_bytes) / static_cast<double>(s.n_params),
             static_cast<double>(s.file_bytes) / 1048576.0);
  return 0;
}

}  // namespace

void add_synth(CLI::App& app, Runner& run) {
  auto o = std::make_shared<SynthCliOpts>();
  std::string names;
  for (const auto& p : synth::presets()) names += (names.empty() ? "" : ", ") + std::string(p.name);
  auto* sub = app.add_subcommand("synth", "Write a real-shape model with seeded random weights (no download)");
  sub->add_option("--preset", o->preset, "Model shape: " + names)->required();
  sub->add_option("-o,--output", o->out, "Output GGUF file")->required();
  sub->add_option("--type", o->type, "f32, f16, bf16, q8_0, q6_k, q4_k_m or q5_k_m")->capture_default_str();
  sub->add_option("--layers", o->layers, "Number of blocks (default: the preset's)")->check(CLI::Range(1, 1024));
  sub->add_option("--vocab", o->vocab, "Override the vocab size (tests: small files); default: the preset's")
      ->check(CLI::Range(512u, 16777216u));
  sub->add_option("--seed", o->seed, "Weight seed")->capture_default_str();
  sub->add_option("-t,--threads", o->threads, "Worker threads (0: all)");
  sub->add_flag("-q,--quiet", o->quiet, "No progress bar");
  sub->callback([&run, o] { run = [o] { return run_synth(*o); }; });
}

}  // namespace rocky::cli
