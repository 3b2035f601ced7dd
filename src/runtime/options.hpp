// The program's environment, read once at its boundary (apps/cli main, tests that set variables):
// the one place in rocky's engine that calls getenv. Nothing under src/backend/ reads the
// environment; what it needs arrives as options (vulkan::VulkanOptions, vulkan::InstanceOptions).
//
// Precedence, for every setting that has a flag: a ROCKY_* lab override (environment) > the flag >
// the default. The lab overrides are for tuning experiments and lab scripts; a bad value is an
// error (exit 1) when the backend that uses it is made (the README lists them):
//   ROCKY_MATMUL=auto|mmq|mm|basic        prefill matmul kernels (wins over --matmul)
//   ROCKY_MATMUL_TILE=bm,bn,bk,tm,tn      matmul.comp tile
//   ROCKY_TUNE=FILE                       mul_mmq / mul_mm tiles, JSON (src/tune/tile.hpp)
//   ROCKY_ATTN=flash|simple               attention kernel
//   ROCKY_ATTN_TILE=WG,BR,TR,TC[,…]       flash-attention tile (fields: ops/attention.cpp)
//   ROCKY_FUSE_EPILOGUE=0|1               mul_mmq bias / residual epilogues
//   ROCKY_MMV_SHAPE=WG,ROWS               matvec_mmq shape
//   ROCKY_DEVICE_MEMORY_LIMIT=BYTES       cap on device memory (0 or unset: none)
//   ROCKY_VULKAN_TIMEOUT_S=S              fence wait before a GPU counts as hung (default 1800)
//   ROCKY_VULKAN_LOADER=PATH              the Vulkan loader to dlopen (default libvulkan.so.1)
// Paths: the VkPipelineCache lives under $XDG_CACHE_HOME/rocky (else $HOME/.cache/rocky; neither
// set: not persisted); XDG_RUNTIME_DIR is only checked to explain a failed device creation.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "backend/vulkan/device.hpp"
#include "backend/vulkan/lab_options.hpp"
#include "backend/vulkan/vulkan_backend.hpp"

namespace rocky::runtime {

struct EnvOptions {
  vulkan::LabOptions lab;       // the ROCKY_* lab overrides as set ("" = unset)
  std::string vulkan_loader;    // ROCKY_VULKAN_LOADER ("" = the default)
  std::string cache_dir;        // $XDG_CACHE_HOME, else $HOME/.cache, else ""
  std::string xdg_runtime_dir;  // XDG_RUNTIME_DIR ("" = unset)
  // --no-profile (any command): skip the tuning profile `rocky tune` wrote for the device
  // (src/tune/store.hpp). Set by main from the flag, not from the environment.
  bool no_profile = false;
};

// Reads every variable above now.
EnvOptions read_env();

// What the Vulkan backend and the device tools take from it.
void apply_env(const EnvOptions& e, vulkan::VulkanOptions& o);  // lab, cache_dir, loader, xdg_runtime_dir, no_profile
vulkan::InstanceOptions instance_options(const EnvOptions& e);  // loader, xdg_runtime_dir

// The ROCKY_* variables of `e` that are set, name → value: the overrides in effect, as a record
// states them (`rocky bench -o json`'s "overrides").
std::map<std::string, std::string> overrides_in_effect(const EnvOptions& e);

// ROCKY_DEVICE_MEMORY_LIMIT as bytes (0 when unset); rocky::Error when set but not a byte count.
uint64_t device_memory_limit_from_env();

}  // namespace rocky::runtime
