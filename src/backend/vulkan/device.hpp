// Vulkan instance and device: creation, optional validation, and probing of every limit rocky
// relies on (nothing is assumed: see ../shared/PLATFORMS.md for measured values).
//
// Errors: rocky::Error whose message says what to fix — no Vulkan driver (ICD) installed, no
// device, XDG_RUNTIME_DIR missing (panvk needs an existing 0700 directory).
#pragma once

#include "backend/vulkan/vk.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace rocky::vulkan {

struct MemoryHeapInfo {
  uint64_t size = 0;  // bytes
  bool device_local = false;
  bool host_visible = false;  // some memory type of this heap is host-visible
};

// Everything `rocky devices` prints and the backend decides on.
struct DeviceInfo {
  uint32_t index = 0;           // position in vkEnumeratePhysicalDevices
  std::string name;             // "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string driver_name;      // "llvmpipe", "NVIDIA", "panvk" (VkPhysicalDeviceDriverProperties)
  std::string driver_info;      // "Mesa 22.3.6 (LLVM 15.0.6)"
  uint32_t vendor_id = 0;       // PCI vendor id (0x13B5 Arm, 0x10DE NVIDIA, …) [M5 profiles]
  uint32_t api_version = 0;     // VK_MAKE_API_VERSION
  uint32_t device_id = 0;       // VkPhysicalDeviceProperties::deviceID (tuning profiles' key)
  uint32_t driver_version = 0;  // VkPhysicalDeviceProperties::driverVersion (vendor-encoded)
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  bool uma = false;                             // a device-local heap is also host-visible (no staging needed)
  bool fp16 = false;                            // shaderFloat16
  bool int8 = false;                            // shaderInt8
  bool storage16 = false;                       // storageBuffer16BitAccess
  bool int8_dot = false;                        // shaderIntegerDotProduct (1.3 or VK_KHR_shader_integer_dot_product)
  bool int8_dot_accelerated = false;            // integerDotProduct4x8BitPackedSignedAccelerated
  bool pipeline_stats = false;                  // VK_KHR_pipeline_executable_properties (enabled when present)
  uint32_t subgroup_size = 0;                   // default subgroup size
  uint32_t subgroup_min = 0, subgroup_max = 0;  // subgroup size control range (= default if absent)
  bool subgroup_arith = false;                  // subgroup arithmetic (subgroupAdd, …) in compute shaders
  uint32_t shared_memory = 0;                   // maxComputeSharedMemorySize, bytes
  uint32_t max_workgroup_invocations = 0;
  std::array<uint32_t, 3> max_workgroup_size{};
  std::array<uint32_t, 3> max_workgroup_count{};
  uint64_t max_storage_buffer_range = 0;  // bytes one storage binding may span
  uint64_t max_allocation = 0;            // maxMemoryAllocationSize
  uint64_t min_storage_offset_alignment = 0;
  uint32_t max_push_constants = 0;
  bool timestamps = false;  // compute queue supports timestamps
  float timestamp_period_ns = 0;
  std::vector<MemoryHeapInfo> heaps;

  std::string type_name() const;   // "discrete GPU", "integrated GPU", "CPU", …
  std::string api_string() const;  // "1.3.230"
};

struct InstanceOptions {
  // Enable VK_LAYER_KHRONOS_validation with synchronization validation, and count error messages.
  bool validation = false;
  // Print validation messages to stderr as they arrive.
  bool print_messages = true;
  // The Vulkan loader to dlopen (ROCKY_VULKAN_LOADER; "" = libvulkan.so.1). Process-wide: the first
  // instance's choice counts.
  std::string loader;
  // XDG_RUNTIME_DIR as the program's environment has it ("" = unset), to explain a failed instance
  // or device creation (panvk needs an existing 0700 directory); nullopt = not known (no hint).
  std::optional<std::string> xdg_runtime_dir;
};

class Instance {
 public:
  explicit Instance(const InstanceOptions& opts = {});
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance handle() const { return instance_; }
  bool validation() const { return validation_; }
  // Validation errors (and warnings) reported through the debug-utils messenger so far.
  uint32_t error_count() const { return errors_.load(); }
  uint32_t warning_count() const { return warnings_.load(); }
  const std::vector<VkPhysicalDevice>& physical_devices() const { return physical_; }
  // Probe device `index` (rocky::Error when out of range).
  DeviceInfo probe(uint32_t index) const;
  // " XDG_RUNTIME_DIR is unset or not a directory: …" when that may be why Vulkan failed, else "".
  std::string xdg_hint() const;

 private:
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT types,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data, void* user);
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  bool validation_ = false;
  bool print_ = true;
  std::optional<std::string> xdg_runtime_dir_;
  std::atomic<uint32_t> errors_{0}, warnings_{0};
  std::vector<VkPhysicalDevice> physical_;
};

// A logical device with one compute queue.
class Device {
 public:
  Device(std::shared_ptr<Instance> instance, uint32_t index);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  VkDevice handle() const { return device_; }
  VkPhysicalDevice physical() const { return physical_; }
  VkQueue queue() const { return queue_; }
  // vkQueueSubmit needs the queue externally synchronized: every submit holds this (several
  // contexts of one backend may submit from different threads).
  std::mutex& queue_mutex() const { return queue_mutex_; }
  uint32_t queue_family() const { return family_; }
  const DeviceInfo& info() const { return info_; }
  Instance& instance() const { return *instance_; }
  const VkPhysicalDeviceMemoryProperties& memory_properties() const { return mem_props_; }

 private:
  std::shared_ptr<Instance> instance_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
  DeviceInfo info_;
  VkPhysicalDeviceMemoryProperties mem_props_{};
  mutable std::mutex queue_mutex_;
};

// "vulkan" → 0, "vulkan:N" → N, any other name → nullopt; rocky::Error for a malformed index.
std::optional<uint32_t> parse_vulkan_device(const std::string& spec);

// Index of the first Vulkan device that is a GPU (not a CPU driver such as lavapipe), for
// `--device auto`; nullopt when there is none or Vulkan is unavailable (`why` then says which).
// `io`: the instance options to probe with (loader, XDG_RUNTIME_DIR; messages are not printed).
std::optional<uint32_t> first_gpu(std::string* why, const InstanceOptions& io = {});

// rocky::Error with `what` and the VkResult's name unless r == VK_SUCCESS. Device loss says so.
void vk_check(VkResult r, const char* what);
const char* vk_result_name(VkResult r);

}  // namespace rocky::vulkan
