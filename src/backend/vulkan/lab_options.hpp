// The lab overrides of the Vulkan backend (tuning experiments, A/B runs, lab scripts), typed, as
// the program's boundary parsed them once (runtime::read_env, src/runtime/options.hpp: the ROCKY_*
// variables; a bad value is a rocky::Error there, naming the variable). The backend and its ops
// never read the environment nor parse these. Precedence: a lab override > the option (flag) >
// the tuning profile > the default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace rocky::vulkan {

// Which kernels run the prefill matmuls (ops::MatmulPath; ops/ops.hpp says what each one is).
enum class MatmulPath { AUTO, MMQ, MM, BASIC };

// Which attention kernel runs (ops/attention.cpp): AUTO = the profile's rule; the others force one
// wherever it can run (tests, benchmarks).
enum class AttnKernel { AUTO, FLASH, SIMPLE, DECODE };

struct LabOptions {
  // ROCKY_TUNE: a tuning-profile fragment (a file's contents or the inline JSON object) applied over
  // the device's profile (tune::apply_profile_json); null = unset. `tune_source` names it in errors
  // and in the profile's name ("ROCKY_TUNE" or the file).
  nlohmann::json tune;
  std::string tune_source;
  // ROCKY_SWITCH: the A/B kill switches (unset = the option).
  std::optional<MatmulPath> matmul;    // matmul=auto|mmq|mm|basic (wins over VulkanOptions::matmul)
  AttnKernel attn = AttnKernel::AUTO;  // attn=auto|flash|simple|decode
  std::optional<bool> fuse_epilogue;   // fuse_epilogue=0|1 (VulkanOptions::fuse_epilogue)
  std::optional<bool> decode_replay;   // decode_replay=0|1 (VulkanOptions::replay_decode)
  std::optional<bool> fuse_decode;     // fuse_decode=0|1 (VulkanOptions::fuse_decode)
  std::optional<bool> fold_norm;       // fold_norm=0|1 (VulkanOptions::fold_norm)
  uint64_t device_memory_limit = 0;    // ROCKY_DEVICE_MEMORY_LIMIT=BYTES (when VulkanOptions::memory_limit is 0)
  uint64_t vulkan_timeout_s = 1800;    // ROCKY_VULKAN_TIMEOUT_S=S (fence waits)
  // ROCKY_PIPELINE_STATS=PREFIX: capture the driver's statistics of every pipeline (registers,
  // local memory, …; pipeline_stats.hpp) and print those whose name starts with PREFIX ("all":
  // every one) on stderr when the backend closes. Where the driver has no statistics: nothing.
  std::string pipeline_stats;
};

}  // namespace rocky::vulkan
