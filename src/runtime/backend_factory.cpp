// Backend factory (see backend_factory.hpp).
#include "runtime/backend_factory.hpp"

#include <fmt/core.h>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/vulkan/device.hpp"
#include "backend/vulkan/vulkan_backend.hpp"
#include "core/error.hpp"

namespace rocky::runtime {

std::unique_ptr<backend::Backend> make_backend(const std::string& device, const BackendOptions& bo) {
  const vulkan::ops::MatmulPath matmul = vulkan::ops::parse_matmul_path(bo.matmul, "--matmul");
  if (device == "cpu") return backend::cpu::make_cpu_backend();
  // Vulkan: vulkan[:N]; auto = the first Vulkan GPU, else the CPU (said on stderr).
  if (auto index = vulkan::parse_vulkan_device(device)) {
    vulkan::VulkanOptions o;
    o.device = *index;
    o.matmul = matmul;
    return std::make_unique<vulkan::VulkanBackend>(o);
  }
  if (device == "auto") {
    std::string why;
    if (auto gpu = vulkan::first_gpu(&why)) {
      vulkan::VulkanOptions o;
      o.device = *gpu;
      o.matmul = matmul;
      return std::make_unique<vulkan::VulkanBackend>(o);
    }
    fmt::print(stderr, "rocky: no Vulkan GPU ({}); using the CPU backend\n", why);
    return backend::cpu::make_cpu_backend();
  }
  fail("unknown device '{}' (accepted: cpu, vulkan, vulkan:N, auto)", device);
}

}  // namespace rocky::runtime
