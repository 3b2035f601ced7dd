// rocky quantize IN.gguf OUT.gguf TYPE — F32/F16/BF16 model → q8_0, q6_K, q4_K_M or q5_K_M with llama.cpp's
// per-tensor type rule (src/synth/plan.hpp), streamed with a progress bar on stderr.
#include <fmt/format.h>

#include "commands.hpp"
#include "core/error.hpp"
#include "synth/synth.hpp"

namespace rocky::cli {
namespace {

struct QuantizeCliOpts {
  std::string in, out, type;
  unsigned threads = 0;
  bool quiet = false;
};

int run_quantize(const QuantizeCliOpts& c) {
  synth::QuantizeOptions o;
  o.in = c.in;
  o.out = c.out;
  o.type = synth::parse_file_type(c.type);
  if (o.type != synth::FileType::Q8_0 && o.type != synth::FileType::Q6_K && o.type != synth::FileType::Q4_K_M &&
      o.type != synth::FileType::Q5_K_M)
    rocky::fail("rocky quantize: type '{}' is not a quantized type (q8_0, q6_k, q4_k_m or q5_k_m)", c.type);
  o.threads = c.threads;
  o.progress = !c.quiet;
  const synth::WriteSummary s = synth::quantize_model(o);
  fmt::print(stderr, "rocky quantize: {} ({}): {} tensors, {:.2f} bits/weight, {:.1f} MiB\n", c.out,
             synth::file_type_name(o.type), s.n_tensors,
             8.0 * static_cast<double>(s.tensor_bytes) / static_cast<double>(s.n_params),
             static_cast<double>(s.file_bytes) / 1048576.0);
  return 0;
}

}  // namespace

void add_quantize(CLI::App& app, Runner& run) {
  auto o = std::make_shared<QuantizeCliOpts>();
  auto* sub = app.add_subcommand("quantize", "Quantize an F32/F16/BF16 GGUF model to q8_0, q6_k, q4_k_m or q5_k_m");
  sub->add_option("input", o->in, "Input GGUF (F32, F16 or BF16 tensors)")->required();
  sub->add_option("output", o->out, "Output GGUF")->required();
  sub->add_option("type", o->type, "q8_0, q6_k, q4_k_m or q5_k_m (case-insensitive)")->required();
  sub->add_option("-t,--threads", o->threads, "Worker threads (0: all)");
  sub->add_flag("-q,--quiet", o->quiet, "No progress bar");
  sub->callback([&run, o] { run = [o] { return run_quantize(*o); }; });
}

}  // namespace rocky::cli
