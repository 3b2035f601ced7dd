// Vulkan drivers known to crash (not merely misbehave) on shaders rocky builds, by driver name,
// Mesa version and host architecture. Device selection refuses them with this message (never an
// abort inside the driver), and `rocky doctor` reports them (known_issues.cpp: lavapipe-arm64-f16).
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace rocky {

#if defined(__aarch64__)
inline constexpr bool k_host_aarch64 = true;
#else
inline constexpr bool k_host_aarch64 = false;
#endif

// lavapipe (llvmpipe) compiles shaders with LLVM on the host CPU. On aarch64, Debian 12's Mesa
// 22.3.6 (LLVM 15) aborts inside LLVM on any shader with f16 data (every quantized matmul, the f16
// KV cache); Mesa 25.0.7 (Debian 12 bookworm-backports, Debian 13) works. Releases in between are
// untested on aarch64, so everything below 25.0 is refused. Returns the reason, or nullopt.
inline std::optional<std::string> known_crashing_driver(std::string_view driver_name, std::string_view driver_info,
                                                        bool host_aarch64 = k_host_aarch64) {
  if (!host_aarch64 || driver_name != "llvmpipe") return std::nullopt;
  int major = 0, minor = 0, patch = 0;
  const std::string info(driver_info);
  const int got = std::sscanf(info.c_str(), "Mesa %d.%d.%d", &major, &minor, &patch);
  if (got < 2 || major >= 25) return std::nullopt;
  const std::string version =
      got == 3 ? fmt::format("{}.{}.{}", major, minor, patch) : fmt::format("{}.{}", major, minor);
  return fmt::format(
      "lavapipe of Mesa {} on aarch64 aborts inside LLVM when it compiles shaders with f16 data (every quantized "
      "matmul, the f16 KV cache); rocky refuses it. Fix: install Mesa 25.0 or newer (Debian 12: sudo apt install -t "
      "bookworm-backports mesa-vulkan-drivers; Debian 13 ships 25.0.7), or use --device cpu",
      version);
}

}  // namespace rocky
