// rocky roofline [--device N] [--json] [--reps R] [--target-ms T] — the device's measured peaks (FP32 FMA, FP16 FMA,
// packed int8 dot, copy bandwidth); see backend/vulkan/roofline.hpp for the method.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "backend/vulkan/roofline.hpp"
#include "cli/commands.hpp"
#include "lab/lab.hpp"

namespace rocky::lab {
using cli::process_env;
using cli::Runner;
using cli::vulkan_device_index;

namespace {

struct RooflineOpts {
  uint32_t device = 0;
  bool json = false;
  uint32_t reps = 3;
  double target_ms = 0;
};

int run_roofline(const RooflineOpts& o) {
  auto inst = std::make_shared<vulkan::Instance>(runtime::instance_options(process_env()));
  vulkan::Device dev(inst, o.device);
  vulkan::RooflineOptions ro;
  ro.timeout_s = process_env().lab.vulkan_timeout_s;
  ro.reps = o.reps;
  ro.target_ms = o.target_ms;
  vulkan::Roofline r = vulkan::measure_roofline(dev, ro);
  if (o.json) {
    nlohmann::json j{{"device", r.device},
                     {"driver", r.driver},
                     {"fp32_tflops", r.fp32_tflops},
                     {"fp16_tflops", r.fp16_tflops},
                     {"int8_dot_tops", r.int8_dot_tops},
                     {"int8_dot_accelerated", r.int8_dot_accelerated},
                     {"copy_gbs", r.copy_gbs}};
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("roofline of vulkan:{}  {} ({})\n", o.device, r.device, r.driver);
  fmt::print("  FP32 FMA            {:10.3f} TFLOPS\n", r.fp32_tflops);
  fmt::print("  FP16 FMA (f16vec4)  {:10.3f} TFLOPS{}\n", r.fp16_tflops,
             r.fp16_tflops > 0 ? "" : "  (no shaderFloat16)");
  fmt::print(
      "  int8 dot (OpSDot)   {:10.3f} TOPS{}\n", r.int8_dot_tops,
      r.int8_dot_tops > 0 ? (r.int8_dot_accelerated ? "  (accelerated)" : "  (not accelerated)") : "  (no int8 dot)");
  fmt::print("  copy (read+write)   {:10.1f} GB/s\n", r.copy_gbs);
  return 0;
}

}  // namespace

void add_roofline(CLI::App& app, Runner& run) {
  auto o = std::make_shared<RooflineOpts>();
  auto* sub = app.add_subcommand("roofline", "Measure the device's FP32/FP16/int8-dot peaks and memory bandwidth");
  sub->add_option("--device", o->device, "Vulkan device: N or vulkan:N (see `rocky devices`)")
      ->transform(vulkan_device_index());
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->add_option("--reps", o->reps, "Timed repetitions per benchmark (best is kept)")->check(CLI::Range(1, 100));
  sub->add_option("--target-ms", o->target_ms,
                  "Calibrate each dispatch to this many ms (default 4 on a GPU, 30 on a CPU)")
      ->check(CLI::Range(0.1, 10000.0));
  sub->callback([&run, o] { run = [o] { return run_roofline(*o); }; });
}

}  // namespace rocky::lab
