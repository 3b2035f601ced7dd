// The measured roofline of a Vulkan device: peak FP32 FMA, FP16 FMA (f16vec4), packed int8
// dot (OpSDot + add, counted as 8 ops per dot) and copy bandwidth (bytes read + bytes written).
//
// Method: simple micro-benchmarks (shaders/roofline_*.comp): every invocation runs CHAINS
// independent dependent chains, so latency is hidden by chains × resident threads; the iteration
// count is calibrated so one dispatch runs ≈ target_ms; one warm-up dispatch, then the best of
// `reps` dispatches, each timed with GPU timestamps around the single dispatch of its command
// buffer. Every later figure (bench-op, PERF.md) is given as a % of these.
#pragma once

#include <cstdint>
#include <string>

#include "backend/vulkan/device.hpp"

namespace rocky::vulkan {

struct RooflineOptions {
  uint32_t reps = 3;          // timed repetitions after the warm-up (best is kept)
  double target_ms = 0;       // per-dispatch time to calibrate to (0: 4 ms on a GPU, 30 ms on a CPU device)
  uint64_t copy_bytes = 0;    // per buffer (0: 512 MiB on a GPU, 32 MiB on a CPU device; clamped to limits)
  uint64_t timeout_s = 1800;  // fence waits (ROCKY_VULKAN_TIMEOUT_S: LabOptions::vulkan_timeout_s)
};

struct Roofline {
  std::string device;
  std::string driver;
  double fp32_tflops = 0;    // 2 FLOP per FMA
  double fp16_tflops = 0;    // 0 when the device lacks shaderFloat16
  double int8_dot_tops = 0;  // 0 when the device lacks shaderIntegerDotProduct
  bool int8_dot_accelerated = false;
  double copy_gbs = 0;  // GB/s (1e9 B/s), read + write
};

// Runs the four benchmarks on `dev` (rocky::Error on device failure or missing timestamps).
Roofline measure_roofline(Device& dev, const RooflineOptions& opts = {});

}  // namespace rocky::vulkan
