// `rocky tune`'s measuring stage: one device (instance, memory, pipelines with statistics, a
// recorder), rebuilt after a lost device or a timeout, and the timing of one candidate kernel
// against a reference output. The search around it is src/tune/search.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/vulkan/device.hpp"
#include "backend/vulkan/memory.hpp"
#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/pipelines.hpp"
#include "backend/vulkan/recorder.hpp"
#include "core/dtype.hpp"

namespace rocky::lab {

struct Rig {
  std::shared_ptr<vulkan::Instance> inst;
  std::unique_ptr<vulkan::Device> dev;
  std::unique_ptr<vulkan::Memory> mem;
  std::unique_ptr<vulkan::Pipelines> pipes;
  std::unique_ptr<vulkan::Recorder> rec;
};

// (Re)makes the rig on `device`; a command buffer past timeout_s counts as hung.
void make_rig(Rig& r, uint32_t device, uint64_t timeout_s);

struct Measure {
  double ms = 0, spread = 0;
  std::string error;   // "" = ok
  bool fatal = false;  // the device may be unusable (lost, hung): rebuild the rig
};

// NMSE of `got` against `ref`, NaN when any value of `got` is not finite.
double nmse(const std::vector<float>& got, const std::vector<float>& ref);

// Random weights: quantized from random floats (rocky's quantizer for the type; a type without one
// is an error).
std::vector<uint8_t> random_weights(DType type, uint32_t m, uint32_t k, std::mt19937& rng);

class Tuner {
 public:
  // reps: timed repetitions per candidate (after one warm-up).
  Tuner(uint32_t device, uint64_t timeout_s, uint32_t reps);

  const vulkan::DeviceInfo& info() const { return rig_.dev->info(); }

  // Times `run` (records the kernel under test into rig_.rec; best of reps, with the spread) and
  // checks y against `ref` (NaN / NMSE over tol = wrong). A fatal error rebuilds the rig (after
  // on_rebuild drops the buffers of the old device).
  Measure measure(const std::function<void(vulkan::ops::Env&)>& run, vulkan::Buffer& ybuf, size_t ny,
                  const std::vector<float>* ref, double tol);

  Rig rig_;
  std::vector<float> last_y_;  // the output of the last measure()
  std::function<void()> on_rebuild;

 private:
  uint32_t device_ = 0;
  uint64_t timeout_s_ = 20;
  uint32_t reps_ = 3;
};

}  // namespace rocky::lab
