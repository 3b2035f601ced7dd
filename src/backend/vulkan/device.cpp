#include "backend/vulkan/device.hpp"

#include "core/driver_quirks.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>

#include "core/error.hpp"

namespace rocky::vulkan {

const char* vk_result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VkResult(other)";
  }
}

void vk_check(VkResult r, const char* what) {
  if (r == VK_SUCCESS) return;
  if (r == VK_ERROR_DEVICE_LOST) {
    throw DeviceLostError(
        fmt::format("Vulkan device lost during {} (VK_ERROR_DEVICE_LOST: driver reset or a kernel fault); rerun "
                    "with --device cpu to compare, or check the kernel log (dmesg)",
                    what));
  }
  fail("Vulkan: {} failed: {}", what, vk_result_name(r));
}

std::string DeviceInfo::type_name() const {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

std::string DeviceInfo::api_string() const {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(api_version), VK_API_VERSION_MINOR(api_version),
                     VK_API_VERSION_PATCH(api_version));
}

namespace {

bool has_layer(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> v(n);
  vkEnumerateInstanceLayerProperties(&n, v.data());
  for (auto& l : v)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

bool has_device_extension(VkPhysicalDevice pd, const char* name) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> v(n);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, v.data());
  for (auto& e : v)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

std::string xdg_hint(const std::optional<std::string>& dir) {
  if (!dir) return "";
  const char* x = dir->c_str();
  struct stat st {};
  if (*x == '\0' || stat(x, &st) != 0 || !S_ISDIR(st.st_mode)) {
    return " XDG_RUNTIME_DIR is unset or not a directory: set it to an existing 0700 directory "
           "(e.g. export XDG_RUNTIME_DIR=/run/user/$(id -u)); some drivers (panvk) fail without it.";
  }
  return "";
}

uint32_t compute_family(VkPhysicalDevice pd, bool* timestamps) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> q(n);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q.data());
  uint32_t best = UINT32_MAX;
  for (uint32_t i = 0; i < n; ++i) {
    if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    // Prefer a compute queue family (graphics families work too).
    if (best == UINT32_MAX || !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) best = i;
  }
  if (best == UINT32_MAX) return best;
  if (timestamps) *timestamps = q[best].timestampValidBits > 0;
  return best;
}

}  // namespace

std::optional<uint32_t> parse_vulkan_device(const std::string& spec) {
  if (spec == "vulkan") return 0u;
  if (spec.rfind("vulkan:", 0) != 0) return std::nullopt;
  const std::string n = spec.substr(7);
  if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos) {
    fail("--device {}: expected vulkan:N with N a device index (see `rocky devices`)", spec);
  }
  return static_cast<uint32_t>(std::stoul(n));
}

std::optional<uint32_t> first_gpu(std::string* why, const InstanceOptions& base) {
  try {
    InstanceOptions io = base;
    io.print_messages = false;
    Instance inst(io);
    for (uint32_t i = 0; i < inst.physical_devices().size(); ++i) {
      DeviceInfo d = inst.probe(i);
      if (d.type != VK_PHYSICAL_DEVICE_TYPE_CPU && d.type != VK_PHYSICAL_DEVICE_TYPE_OTHER) return i;
    }
    if (why) *why = inst.physical_devices().empty() ? "no Vulkan device" : "only CPU Vulkan drivers (e.g. lavapipe)";
  } catch (const Error& e) {
    if (why) *why = e.what();
  }
  return std::nullopt;
}

std::string Instance::xdg_hint() const { return vulkan::xdg_hint(xdg_runtime_dir_); }

Instance::Instance(const InstanceOptions& opts) : print_(opts.print_messages), xdg_runtime_dir_(opts.xdg_runtime_dir) {
  load_vulkan_loader(opts.loader);
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "rocky";
  app.applicationVersion = VK_MAKE_API_VERSION(0, 0, 1, 0);
  app.pEngineName = "rocky";
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (vkEnumerateInstanceVersion != nullptr) vkEnumerateInstanceVersion(&loader_version);
  app.apiVersion = loader_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2;

  std::vector<const char*> layers, exts;
  const char* k_validation = "VK_LAYER_KHRONOS_validation";
  VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enables;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  if (opts.validation) {
    if (!has_layer(k_validation)) {
      fail(
          "Vulkan validation requested but {} is not installed (Debian: apt install "
          "vulkan-validationlayers)",
          k_validation);
    }
    layers.push_back(k_validation);
    exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    ci.pNext = &features;
    validation_ = true;
  }
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(exts.size());
  ci.ppEnabledExtensionNames = exts.data();
  VkResult r = vkCreateInstance(&ci, nullptr, &instance_);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_INITIALIZATION_FAILED) {
    fail(
        "no Vulkan driver found ({}): install a Vulkan ICD (Debian: apt install "
        "mesa-vulkan-drivers libvulkan1; the board: Mesa panvk) or point VK_ICD_FILENAMES at its "
        "JSON file; or run with --device cpu.{}",
        vk_result_name(r), xdg_hint());
  }
  vk_check(r, "vkCreateInstance");
  load_instance_functions(instance_);

  if (validation_) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
    if (create == nullptr) fail("Vulkan validation: vkCreateDebugUtilsMessengerEXT not available");
    VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mi.messageSeverity =
        VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mi.pfnUserCallback = &Instance::on_message;
    mi.pUserData = this;
    vk_check(create(instance_, &mi, nullptr, &messenger_), "vkCreateDebugUtilsMessengerEXT");
  }

  uint32_t n = 0;
  vk_check(vkEnumeratePhysicalDevices(instance_, &n, nullptr), "vkEnumeratePhysicalDevices");
  physical_.resize(n);
  vk_check(vkEnumeratePhysicalDevices(instance_, &n, physical_.data()), "vkEnumeratePhysicalDevices");
}

Instance::~Instance() {
  if (messenger_ != VK_NULL_HANDLE) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance_, messenger_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

VkBool32 Instance::on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
                              const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  auto* self = static_cast<Instance*>(user);
  bool error = severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  (error ? self->errors_ : self->warnings_).fetch_add(1);
  if (self->print_) {
    std::fprintf(stderr, "vulkan %s: %s\n", error ? "error" : "warning", data && data->pMessage ? data->pMessage : "");
  }
  return VK_FALSE;
}

DeviceInfo Instance::probe(uint32_t index) const {
  if (index >= physical_.size()) {
    if (physical_.empty()) {
      fail(
          "no Vulkan device found: install a Vulkan driver (Debian: mesa-vulkan-drivers; the board: "
          "Mesa panvk with the panthor kernel driver) or check VK_ICD_FILENAMES; or run with "
          "--device cpu.{}",
          xdg_hint());
    }
    fail("Vulkan device {} does not exist ({} device(s); see `rocky devices`)", index, physical_.size());
  }
  VkPhysicalDevice pd = physical_[index];
  DeviceInfo d;
  d.index = index;

  VkPhysicalDeviceProperties base{};
  vkGetPhysicalDeviceProperties(pd, &base);
  d.api_version = base.apiVersion;
  const bool v13 = base.apiVersion >= VK_API_VERSION_1_3;
  const bool dot_ext = !v13 && has_device_extension(pd, "VK_KHR_shader_integer_dot_product");
  const bool sg_ext = !v13 && has_device_extension(pd, "VK_EXT_subgroup_size_control");

  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceSubgroupSizeControlProperties sg_ctrl{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
  VkPhysicalDeviceShaderIntegerDotProductProperties dot{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties maint3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  props.pNext = &driver;
  driver.pNext = &subgroup;
  subgroup.pNext = &maint3;
  void** tail = &maint3.pNext;
  if (v13 || sg_ext) {
    *tail = &sg_ctrl;
    tail = &sg_ctrl.pNext;
  }
  if (v13 || dot_ext) {
    *tail = &dot;
    tail = &dot.pNext;
  }
  vkGetPhysicalDeviceProperties2(pd, &props);

  VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceShaderIntegerDotProductFeatures fdot{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  feats.pNext = &f12;
  f12.pNext = &f11;
  if (v13 || dot_ext) f11.pNext = &fdot;
  vkGetPhysicalDeviceFeatures2(pd, &feats);

  const VkPhysicalDeviceLimits& lim = base.limits;
  d.name = base.deviceName;
  d.driver_name = driver.driverName;
  d.driver_info = driver.driverInfo;
  d.vendor_id = base.vendorID;
  d.device_id = base.deviceID;
  d.driver_version = base.driverVersion;
  d.type = base.deviceType;
  d.fp16 = f12.shaderFloat16;
  d.int8 = f12.shaderInt8;
  d.storage16 = f11.storageBuffer16BitAccess;
  d.int8_dot = (v13 || dot_ext) && fdot.shaderIntegerDotProduct;
  d.int8_dot_accelerated = d.int8_dot && dot.integerDotProduct4x8BitPackedSignedAccelerated;
  d.pipeline_stats = has_device_extension(pd, "VK_KHR_pipeline_executable_properties");
  d.subgroup_size = subgroup.subgroupSize;
  d.subgroup_min = d.subgroup_max = subgroup.subgroupSize;
  d.subgroup_arith = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
                     (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) != 0 &&
                     (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) != 0;
  if ((v13 || sg_ext) && sg_ctrl.minSubgroupSize > 0) {
    d.subgroup_min = sg_ctrl.minSubgroupSize;
    d.subgroup_max = sg_ctrl.maxSubgroupSize;
  }
  d.shared_memory = lim.maxComputeSharedMemorySize;
  d.max_workgroup_invocations = lim.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) {
    d.max_workgroup_size[i] = lim.maxComputeWorkGroupSize[i];
    d.max_workgroup_count[i] = lim.maxComputeWorkGroupCount[i];
  }
  d.max_storage_buffer_range = lim.maxStorageBufferRange;
  d.max_allocation = maint3.maxMemoryAllocationSize;
  d.min_storage_offset_alignment = lim.minStorageBufferOffsetAlignment;
  d.max_push_constants = lim.maxPushConstantsSize;
  d.timestamp_period_ns = lim.timestampPeriod;
  bool ts = false;
  compute_family(pd, &ts);
  d.timestamps = ts && lim.timestampComputeAndGraphics;

  VkPhysicalDeviceMemoryProperties mp{};
  vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  d.heaps.resize(mp.memoryHeapCount);
  for (uint32_t h = 0; h < mp.memoryHeapCount; ++h) {
    d.heaps[h].size = mp.memoryHeaps[h].size;
    d.heaps[h].device_local = mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
  }
  for (uint32_t t = 0; t < mp.memoryTypeCount; ++t) {
    const auto& mt = mp.memoryTypes[t];
    if (mt.propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
      d.heaps[mt.heapIndex].host_visible = true;
      if (mt.propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) d.uma = true;
    }
  }
  // A discrete GPU's small host-visible device-local window (resizable BAR off) is not UMA.
  if (d.type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) {
    for (const auto& h : d.heaps)
      if (h.device_local && !h.host_visible) d.uma = false;
  }
  return d;
}

Device::Device(std::shared_ptr<Instance> instance, uint32_t index) : instance_(std::move(instance)) {
  info_ = instance_->probe(index);
  // A driver that would abort the process on rocky's shaders is refused here, with the fix.
  if (auto why = known_crashing_driver(info_.driver_name, info_.driver_info))
    fail("Vulkan device {} ({}): {}", index, info_.name, *why);
  physical_ = instance_->physical_devices()[index];
  family_ = compute_family(physical_, nullptr);
  if (family_ == UINT32_MAX) fail("Vulkan device {} ({}) has no compute queue", index, info_.name);
  vkGetPhysicalDeviceMemoryProperties(physical_, &mem_props_);

  float prio = 1.0f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = family_;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  VkDeviceCreateInfo ci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &qi;
  // fast kernels: enable the arithmetic/storage features the probe found (fp16, int8, 8/16-bit
  // storage, packed int8 dot) and VK_KHR_pipeline_executable_properties for --pipeline-stats.
  VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceShaderIntegerDotProductFeatures fdot{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fexe{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  std::vector<const char*> exts;
  if (info_.api_version >= VK_API_VERSION_1_2) {
    feats.pNext = &f12;
    f12.shaderFloat16 = info_.fp16;
    f12.shaderInt8 = info_.int8;
    f12.pNext = &f11;
    f11.storageBuffer16BitAccess = info_.storage16;
    void** tail = &f11.pNext;
    if (info_.int8_dot) {
      fdot.shaderIntegerDotProduct = VK_TRUE;
      *tail = &fdot;
      tail = &fdot.pNext;
      if (info_.api_version < VK_API_VERSION_1_3) exts.push_back("VK_KHR_shader_integer_dot_product");
    }
    if (info_.pipeline_stats) {
      fexe.pipelineExecutableInfo = VK_TRUE;
      *tail = &fexe;
      exts.push_back("VK_KHR_pipeline_executable_properties");
    }
    ci.pNext = &feats;
    ci.enabledExtensionCount = static_cast<uint32_t>(exts.size());
    ci.ppEnabledExtensionNames = exts.data();
  }
  vk_check(vkCreateDevice(physical_, &ci, nullptr, &device_), "vkCreateDevice");
  vkGetDeviceQueue(device_, family_, 0, &queue_);
}

Device::~Device() {
  if (device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);
    vkDestroyDevice(device_, nullptr);
  }
}

}  // namespace rocky::vulkan
