// The program's environment, read once at its boundary (apps/cli main, tests that set variables):
// the one place in rocky's engine that calls getenv, and the one that parses what it read into
// typed values (vulkan::LabOptions). Nothing under src/backend/ reads the environment or parses a
// variable; what it needs arrives as options (vulkan::VulkanOptions, vulkan::InstanceOptions).
//
// The variables (the README lists them with examples). A bad value — an unreadable or malformed
// file or fragment, an unknown profile field or switch, a value out of range — is a rocky::Error
// naming the variable (exit 1), never a silent default:
//   ROCKY_TUNE=FILE | {JSON}    a tuning-profile fragment applied over the device's profile:
//                               tiles, attention tiles and rule, matvec shapes, delta chunk, the
//                               matmul.comp tile … (the format of src/tune/tile.hpp)
//   ROCKY_SWITCH=K=V,…          the A/B kill switches: matmul=auto|mmq|mm|basic,
//                               attn=auto|flash|simple|decode, fuse_epilogue=0|1, decode_replay=0|1,
//                               fuse_decode=0|1, fold_norm=0|1 (they win over the flags)
//   ROCKY_PIPELINE_STATS=PREFIX the driver's statistics of the pipelines named PREFIX… ("all")
//   ROCKY_DEVICE_MEMORY_LIMIT=BYTES  cap on device memory (0 or unset: none)
//   ROCKY_VULKAN_TIMEOUT_S=S    fence wait before a GPU counts as hung (default 1800)
//   ROCKY_VULKAN_LOADER=PATH    the Vulkan loader to dlopen (default libvulkan.so.1)
//   ROCKY_FAULT=RULE,…          the fault injector (core/fault.hpp), for recovery tests: a rule is
//                               KIND@N (the Nth event only) or KIND%N (every Nth), KIND one of
//                               alloc (a device allocation fails), lost (a step's submit reports
//                               VK_ERROR_DEVICE_LOST), disk (a prefix-cache disk write stops
//                               half-way), kill (the process kills itself -9 mid disk write)
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
#include "core/fault.hpp"

namespace rocky::runtime {

struct EnvOptions {
  vulkan::LabOptions lab;       // ROCKY_TUNE, ROCKY_SWITCH, ROCKY_PIPELINE_STATS, the memory cap, the timeout
  std::string vulkan_loader;    // ROCKY_VULKAN_LOADER ("" = the default)
  fault::Plan fault;            // ROCKY_FAULT (empty: no injection); main installs it (fault::install)
  std::string cache_dir;        // $XDG_CACHE_HOME, else $HOME/.cache, else ""
  std::string xdg_runtime_dir;  // XDG_RUNTIME_DIR ("" = unset)
  std::map<std::string, std::string> set;  // the ROCKY_* variables set, name → value as given
  // --no-profile (any command): skip the tuning profile `rocky tune` wrote for the device
  // (src/tune/store.hpp). Set by main from the flag, not from the environment.
  bool no_profile = false;
};

// Reads and parses every variable above now (rocky::Error naming the one that is bad).
EnvOptions read_env();

// The parsers read_env uses, one per variable (tests call them with a value):
// ROCKY_TUNE: "{…}" is an inline JSON object, anything else a file; checked by applying it to the
// generic built-in profile (unknown fields, ranges); into lab.tune / lab.tune_source.
void parse_tune(const std::string& value, vulkan::LabOptions& lab);
// ROCKY_SWITCH: "key=value,…" into lab's switches (an unknown or repeated key is an error).
void parse_switches(const std::string& value, vulkan::LabOptions& lab);
// ROCKY_DEVICE_MEMORY_LIMIT: bytes, digits only ("" = 0, none).
uint64_t parse_device_memory_limit(const std::string& value);
// ROCKY_VULKAN_TIMEOUT_S: a positive count of seconds ("" = 1800).
uint64_t parse_timeout_s(const std::string& value);
// ROCKY_FAULT: "kind@N" / "kind%N" rules joined by commas ("" = none); rocky::Error naming the
// variable and the bad rule.
fault::Plan parse_fault(const std::string& value);

// The lab options ROCKY_TUNE = `tune` and ROCKY_SWITCH = `switches` give (tests, tools).
vulkan::LabOptions parse_lab(const std::string& tune, const std::string& switches);

// What the Vulkan backend and the device tools take from it.
void apply_env(const EnvOptions& e, vulkan::VulkanOptions& o);  // lab, cache_dir, loader, xdg_runtime_dir, no_profile
vulkan::InstanceOptions instance_options(const EnvOptions& e);  // loader, xdg_runtime_dir

// The ROCKY_* variables of `e` that are set, name → value: the overrides in effect, as a record
// states them (`rocky bench -o json`'s "overrides").
std::map<std::string, std::string> overrides_in_effect(const EnvOptions& e);

// ROCKY_DEVICE_MEMORY_LIMIT as bytes (0 when unset); rocky::Error when set but not a byte count.
uint64_t device_memory_limit_from_env();

}  // namespace rocky::runtime
