// Backend factory (see backend_factory.hpp).
#include "runtime/backend_factory.hpp"

#include <fmt/core.h>

#include <optional>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/vulkan/device.hpp"
#include "backend/vulkan/vulkan_backend.hpp"
#include "core/error.hpp"

namespace rocky::runtime {

std::unique_ptr<backend::Backend> make_backend(const BackendOptions& bo) {
  const vulkan::ops::MatmulPath matmul = vulkan::ops::parse_matmul_path(bo.matmul, "--matmul");
  const std::string& device = bo.device;
  auto cpu = [&](const std::string& why) {
    if (!bo.vulkan_for.empty()) {
      if (why.empty()) fail("{} needs a Vulkan device", bo.vulkan_for);
      fail("{} needs a Vulkan device ({})", bo.vulkan_for, why);
    }
    if (!why.empty()) fmt::print(stderr, "rocky: no Vulkan GPU ({}); using the CPU backend\n", why);
    return backend::cpu::make_cpu_backend();
  };
  if (device == "cpu") return cpu("");
  // Vulkan: vulkan[:N]; auto = the first Vulkan GPU, else the CPU (said on stderr).
  std::optional<uint32_t> index = vulkan::parse_vulkan_device(device);
  if (!index && device == "auto") {
    std::string why;
    index = vulkan::first_gpu(&why, instance_options(bo.env));
    if (!index) return cpu(why);
  }
  if (!index) fail("unknown device '{}' (accepted: cpu, vulkan, vulkan:N, auto)", device);
  vulkan::VulkanOptions o;
  apply_env(bo.env, o);
  o.device = *index;
  o.matmul = matmul;
  o.profile = bo.profile;
  o.kv_f16 = bo.kv_f16;
  o.validation = bo.validation;
  o.max_binding = bo.max_binding;
  return std::make_unique<vulkan::VulkanBackend>(o);
}

std::string backend_driver(const backend::Backend& b) {
  // make_backend() makes a VulkanBackend exactly when the stats say "vulkan" (and the CPU backend
  // otherwise), so the kind tells which class this is.
  if (b.stats().kind != "vulkan") return "cpu";
  const vulkan::DeviceInfo& d = static_cast<const vulkan::VulkanBackend&>(b).info();
  return d.driver_info.empty() ? d.driver_name : d.driver_name + " " + d.driver_info;
}

std::unique_ptr<backend::Backend> make_backend(const std::string& device, BackendOptions o) {
  o.device = device;
  return make_backend(o);
}

}  // namespace rocky::runtime
