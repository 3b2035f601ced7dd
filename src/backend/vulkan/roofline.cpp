#include "backend/vulkan/roofline.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/vulkan/memory.hpp"
#include "backend/vulkan/pipelines.hpp"
#include "backend/vulkan/recorder.hpp"
#include "core/error.hpp"
#include "backend/vulkan/shaders/fast_abi.h"

namespace rocky::vulkan {
namespace {

constexpr uint32_t k_wg = 256;
constexpr uint32_t k_chains = 8;

// Best GPU time (ms) of `reps` single-dispatch submits after one warm-up.
double time_dispatch(Recorder& rec, const Pipeline& p, std::span<const Bound> b, const abi::RooflinePC& pc, uint32_t gx,
                     uint32_t gy, uint32_t reps) {
  double best = 1e30;
  for (uint32_t r = 0; r <= reps; ++r) {
    rec.begin(true);
    rec.dispatch(p, b, &pc, sizeof pc, gx, gy, 1, p.shader);
    rec.submit_and_wait();
    if (rec.timings().empty()) fail("roofline: the device returned no timestamps");
    double ms = rec.timings()[0].ms;
    if (r > 0) best = std::min(best, ms);
  }
  return best;
}

// Ops per second (×1e12) of a chain benchmark: ops_per_iter per invocation per iteration.
double chain_rate(Recorder& rec, Pipelines& pipes, const char* shader, Buffer& out, uint64_t invocations,
                  double ops_per_iter, double target_ms, uint32_t reps) {
  const Pipeline& p = pipes.get(shader, {{ROCKY_SC_WG, k_wg}, {ROCKY_SC_CHAINS, k_chains}});
  Bound b[] = {rec.bind(out, 0, out.size(), true)};
  auto grid = rec.grid_1d(invocations / k_wg);
  abi::RooflinePC pc{};
  pc.seed = 0.999f;
  pc.iters = 64;
  double ms = time_dispatch(rec, p, b, pc, grid[0], grid[1], 1);
  // Calibrate so one dispatch runs ≈ target_ms.
  double scale = target_ms / std::max(ms, 1e-3);
  pc.iters = static_cast<uint32_t>(std::clamp(64.0 * scale, 64.0, 1.0e6));
  ms = time_dispatch(rec, p, b, pc, grid[0], grid[1], reps);
  const double ops = static_cast<double>(grid[0]) * grid[1] * k_wg * pc.iters * ops_per_iter;
  return ops / (ms * 1e-3) / 1e12;
}

}  // namespace

Roofline measure_roofline(Device& dev, const RooflineOptions& opts) {
  const DeviceInfo& info = dev.info();
  if (!info.timestamps) fail("roofline: device {} has no compute-queue timestamps", info.name);
  const bool cpu = info.type == VK_PHYSICAL_DEVICE_TYPE_CPU;
  const double target = opts.target_ms > 0 ? opts.target_ms : (cpu ? 30.0 : 4.0);
  const uint32_t reps = std::max<uint32_t>(opts.reps, 1);
  const uint64_t invocations = cpu ? 16 * 1024 : 1024 * 1024;

  Memory mem(dev, 0);
  Pipelines pipes(dev, false);
  Recorder rec(dev, info.max_storage_buffer_range, opts.timeout_s);
  Roofline r;
  r.device = info.name;
  r.driver = info.driver_name + " " + info.driver_info;
  r.int8_dot_accelerated = info.int8_dot_accelerated;

  Buffer out = mem.create("roofline output", invocations * 16, BufferKind::DEVICE);
  r.fp32_tflops = chain_rate(rec, pipes, "roofline_fp32", out, invocations, 2.0 * 4 * k_chains, target, reps);
  if (info.fp16)
    r.fp16_tflops = chain_rate(rec, pipes, "roofline_fp16", out, invocations, 2.0 * 4 * k_chains, target, reps);
  if (info.int8_dot)
    r.int8_dot_tops = chain_rate(rec, pipes, "roofline_dot", out, invocations, 8.0 * k_chains, target, reps);

  uint64_t bytes = opts.copy_bytes ? opts.copy_bytes : (cpu ? (32ull << 20) : (512ull << 20));
  bytes = std::min({bytes, info.max_storage_buffer_range, info.max_allocation});
  bytes &= ~uint64_t{255};
  Buffer src = mem.create("roofline copy src", bytes, BufferKind::DEVICE);
  Buffer dst = mem.create("roofline copy dst", bytes, BufferKind::DEVICE);
  const Pipeline& p = pipes.get("roofline_copy", {{ROCKY_SC_WG, k_wg}});
  Bound b[] = {rec.bind(src, 0, bytes, false), rec.bind(dst, 0, bytes, true)};
  abi::RooflinePC pc{};
  pc.n_vec4 = static_cast<uint32_t>(bytes / 16);
  // Enough workgroups to fill the device; each invocation strides over the rest.
  auto grid = rec.grid_1d(std::min<uint64_t>(pc.n_vec4 / k_wg, cpu ? 256 : 65536));
  double ms = time_dispatch(rec, p, b, pc, grid[0], grid[1], reps);
  r.copy_gbs = 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
  return r;
}

}  // namespace rocky::vulkan
