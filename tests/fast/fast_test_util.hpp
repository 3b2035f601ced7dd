// Shared pieces of the fast-kernel tests (mul_mmq, its epilogues, matvec_mmq):
//  - FastHarness: a validating Vulkan instance on device 0 with memory, pipelines, a recorder and an
//    ops::Env (max_binding 0 = the device's maxStorageBufferRange);
//  - random ggml weight rows: random bytes with finite small f16 scales (both signs, except q4_K's d
//    and dmin, which stay positive), and their values as quant::dequantize_row gives them (the
//    reference the GPU results are held to);
//  - mmv_profile: the device's built-in profile with a fixed matvec shape, as a lab's ROCKY_TUNE
//    fragment {"mmv": {…}} sets one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/vulkan/device.hpp"
#include "backend/vulkan/memory.hpp"
#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/pipelines.hpp"
#include "backend/vulkan/recorder.hpp"
#include "core/dtype.hpp"
#include "quant/quant.hpp"
#include "tune/tile.hpp"

#include <nlohmann/json.hpp>

namespace rocky::test {

struct FastHarness {
  std::shared_ptr<vulkan::Instance> inst;
  std::unique_ptr<vulkan::Device> dev;
  std::unique_ptr<vulkan::Memory> mem;
  std::unique_ptr<vulkan::Pipelines> pipes;
  std::unique_ptr<vulkan::Recorder> rec;
  std::unique_ptr<vulkan::ops::Env> env;
  // capture_statistics: pipelines keep VK_KHR_pipeline_executable_properties (a no-op on lavapipe).
  explicit FastHarness(uint64_t max_binding = 0, bool capture_statistics = false) {
    vulkan::InstanceOptions io;
    io.validation = true;
    inst = std::make_shared<vulkan::Instance>(io);
    dev = std::make_unique<vulkan::Device>(inst, 0);
    mem = std::make_unique<vulkan::Memory>(*dev, 0);
    pipes = std::make_unique<vulkan::Pipelines>(*dev, false);
    pipes->set_capture_statistics(capture_statistics);
    rec = std::make_unique<vulkan::Recorder>(*dev, max_binding ? max_binding : dev->info().max_storage_buffer_range);
    env = std::make_unique<vulkan::ops::Env>(vulkan::ops::Env{*rec, *pipes, dev->info(), {}, 128, false});
  }
};

// Byte offsets of the f16 scale fields inside one block of `t` (ggml's block layouts).
inline std::vector<int> f16_fields(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0: return {0};
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: return {0, 2};
    case DType::Q6_K: return {208};
    default: return {};
  }
}

// m rows of k values of type t; `deq` receives the m × k dequantized values (row-major).
inline std::vector<uint8_t> random_weights(DType t, uint32_t k, uint32_t m, std::mt19937& rng,
                                           std::vector<float>& deq) {
  const auto& di = dtype_info(t);
  std::vector<uint8_t> w(row_bytes(t, k) * m);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> sc(0.002f, 0.03f), sgn(-1, 1);
  for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
  for (size_t blk = 0; blk < w.size() / di.block_bytes; ++blk)
    for (int f : f16_fields(t)) {
      uint16_t h = quant::f32_to_f16(sc(rng) * (sgn(rng) < 0 && t != DType::Q4_K && t != DType::Q5_K ? -1.0f : 1.0f));
      std::memcpy(&w[blk * di.block_bytes + static_cast<size_t>(f)], &h, 2);
    }
  deq.resize(static_cast<size_t>(k) * m);
  for (uint32_t r = 0; r < m; ++r)
    quant::dequantize_row(t, w.data() + row_bytes(t, k) * r, deq.data() + size_t{r} * k, k);
  return w;
}

// The device's built-in profile (tune::select_profile) with its matvec rule set to
// "WG,ROWS[,SPLIT[,UNROLL]]" for every M and K (min_groups 0, wg_by_k 0) through the profile parser
// (rocky::Error naming the shape when it is not a valid rule); nullptr: the profile unchanged.
inline tune::DeviceProfile mmv_profile(const vulkan::DeviceInfo& d, const char* shape) {
  tune::DeviceProfile p = tune::select_profile(d.vendor_id, d.driver_name, d.type == VK_PHYSICAL_DEVICE_TYPE_CPU);
  if (shape == nullptr) return p;
  unsigned v[4] = {0, 0, 0, 1};
  if (std::sscanf(shape, "%u,%u,%u,%u", &v[0], &v[1], &v[2], &v[3]) < 2) return p;
  const nlohmann::json mmv = {{"wg", v[0]},    {"rows", v[1]},  {"min_groups", 0u},
                              {"wg_by_k", 0u}, {"split", v[2]}, {"unroll", v[3]}};
  return tune::apply_profile_json({{"mmv", mmv}}, p, shape);
}

}  // namespace rocky::test
