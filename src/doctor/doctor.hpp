// rocky doctor: diagnose the Vulkan / Linux GPU stack and say how to fix each problem.
//
// diagnose() is a pure function of a Probe (probe.hpp): the same code runs against the real system
// (SystemProbe) and against fixture trees in the tests. It never throws for anything it finds on
// the system; a problem becomes a Check with status fail/warn and a one-line fix.
//
// Check ids are stable and tests match them:
//   vulkan.loader, vulkan.icd (summary), vulkan.icd.<manifest file name>, vulkan.instance,
//   vulkan.device.<i>, issue.<known-issue id>[.<subject>], gpu.driver (summary),
//   gpu.driver.<device>, gpu.firmware, gpu.render (summary), gpu.render.<node>,
//   env.xdg_runtime_dir, kernel.version, result.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/probe.hpp"

namespace rocky::doctor {

enum class Status { ok, info, warn, fail };

std::string_view status_symbol(Status s);  // ✔ (ok, info) ! (warn) ✘ (fail)
std::string_view status_name(Status s);    // "ok" "info" "warn" "fail"

struct Check {
  std::string id;
  std::string section;  // "Vulkan", "Linux GPU", "Environment", "Result"
  Status status = Status::ok;
  std::string title;   // one line: what was found
  std::string fix;     // one line; empty when nothing needs doing
  std::string source;  // known-issue rows: where the fact comes from
};

// A GPU-like device found in sysfs (a DRM card, a Mali platform device or kbase's misc device).
struct GpuNode {
  std::string name;                     // platform/PCI device name ("fb000000.gpu") or "card0"
  std::string sysfs;                    // where it was found
  std::string driver;                   // bound kernel driver; empty when none
  std::vector<std::string> compatible;  // device-tree compatible strings, most specific first
  int mali_arch = -1;                   // PAN_ARCH major for Mali (5, 7, 9, 10); -1 not Mali / unknown
  bool display_only = false;            // a display controller (no 3D engine)
};

struct Report {
  std::vector<Check> checks;
  VulkanFacts vulkan;
  std::vector<GpuNode> gpus;
  std::string soc;                      // "RK3588" when known
  std::optional<size_t> usable_device;  // index into vulkan.devices of the device rocky would pick

  // 0 when a Vulkan device rocky can use exists (a CPU rasterizer counts), else 1.
  int exit_code() const { return usable_device ? 0 : 1; }
  const Check* find(std::string_view id) const;
};

// A device rocky can use: Vulkan >= 1.1 with a compute queue.
bool device_usable(const VulkanDevice& d);

Report diagnose(const Probe& probe);

// The checklist: one line per check ("  ✔ title"), then "      fix: ..." under problems.
std::string render_text(const Report& r);
nlohmann::json to_json(const Report& r);

}  // namespace rocky::doctor
