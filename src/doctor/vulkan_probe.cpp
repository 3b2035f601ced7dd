// probe_vulkan(): loader, instance and physical devices, through dlopen("libvulkan.so.1").
//
// The doctor must run on a machine without the Vulkan loader (that is one of the problems it
// reports), so this file uses the Vulkan headers only (VK_NO_PROTOTYPES) and resolves every entry
// point through vkGetInstanceProcAddr. Structures are chained only when the device's API version or
// extension list says they are supported (Vulkan spec, "Valid Usage" of VkPhysicalDeviceFeatures2).
#define VK_NO_PROTOTYPES
#include <dlfcn.h>
#include <link.h>
#include <fmt/format.h>
#include <vulkan/vulkan.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "doctor/probe.hpp"

namespace rocky::doctor {
namespace {

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    default: return "VkResult";
  }
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

template <typename Fn>
Fn load(PFN_vkGetInstanceProcAddr gipa, VkInstance inst, const char* name) {
  return reinterpret_cast<Fn>(gipa(inst, name));
}

}  // namespace

VulkanFacts probe_vulkan(const std::vector<std::string>& sonames) {
  VulkanFacts f;
  void* lib = nullptr;
  for (const auto& soname : sonames) {
    lib = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) {
      f.loader_name = soname;
      break;
    }
    const char* e = ::dlerror();
    if (f.loader_error.empty() && e != nullptr) f.loader_error = e;
  }
  if (lib == nullptr) return f;
  f.loader_loaded = true;
  f.loader_error.clear();
  struct link_map* lm = nullptr;
  if (::dlinfo(lib, RTLD_DI_LINKMAP, &lm) == 0 && lm != nullptr && lm->l_name != nullptr) f.loader_path = lm->l_name;
  // The loader stays loaded: drivers may own threads until process exit.

  auto gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(::dlsym(lib, "vkGetInstanceProcAddr"));
  if (gipa == nullptr) {
    f.loader_loaded = false;
    f.loader_error = fmt::format("{} has no vkGetInstanceProcAddr", f.loader_name);
    return f;
  }
  f.instance_version = VK_API_VERSION_1_0;
  if (auto eiv = load<PFN_vkEnumerateInstanceVersion>(gipa, VK_NULL_HANDLE, "vkEnumerateInstanceVersion")) {
    eiv(&f.instance_version);
  }
  auto create = load<PFN_vkCreateInstance>(gipa, VK_NULL_HANDLE, "vkCreateInstance");
  if (create == nullptr) {
    f.instance_error = "loader has no vkCreateInstance";
    return f;
  }
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "rocky doctor";
  app.apiVersion = std::min<uint32_t>(f.instance_version, VK_API_VERSION_1_3);
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  VkInstance inst = VK_NULL_HANDLE;
  VkResult r = create(&ci, nullptr, &inst);
  if (r != VK_SUCCESS) {
    f.instance_error = fmt::format("vkCreateInstance: {} ({})", result_name(r), static_cast<int>(r));
    return f;
  }
  f.instance_ok = true;
  bool inst11 = app.apiVersion >= VK_API_VERSION_1_1;

  auto destroy = load<PFN_vkDestroyInstance>(gipa, inst, "vkDestroyInstance");
  auto enum_devs = load<PFN_vkEnumeratePhysicalDevices>(gipa, inst, "vkEnumeratePhysicalDevices");
  auto get_props = load<PFN_vkGetPhysicalDeviceProperties>(gipa, inst, "vkGetPhysicalDeviceProperties");
  auto get_props2 = load<PFN_vkGetPhysicalDeviceProperties2>(gipa, inst, "vkGetPhysicalDeviceProperties2");
  auto get_feats2 = load<PFN_vkGetPhysicalDeviceFeatures2>(gipa, inst, "vkGetPhysicalDeviceFeatures2");
  auto get_queues =
      load<PFN_vkGetPhysicalDeviceQueueFamilyProperties>(gipa, inst, "vkGetPhysicalDeviceQueueFamilyProperties");
  auto enum_exts = load<PFN_vkEnumerateDeviceExtensionProperties>(gipa, inst, "vkEnumerateDeviceExtensionProperties");
  uint32_t n = 0;
  r = enum_devs ? enum_devs(inst, &n, nullptr) : VK_ERROR_INITIALIZATION_FAILED;
  std::vector<VkPhysicalDevice> pds(n);
  if (r == VK_SUCCESS && n > 0) r = enum_devs(inst, &n, pds.data());
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    f.instance_error = fmt::format("vkEnumeratePhysicalDevices: {} ({})", result_name(r), static_cast<int>(r));
    pds.clear();
  }
  pds.resize(std::min<size_t>(pds.size(), n));

  for (VkPhysicalDevice pd : pds) {
    VulkanDevice d;
    VkPhysicalDeviceProperties p{};
    get_props(pd, &p);
    d.name = p.deviceName;
    d.type = type_name(p.deviceType);
    d.is_cpu = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    d.vendor_id = p.vendorID;
    d.device_id = p.deviceID;
    d.api_version = p.apiVersion;
    d.driver_version = p.driverVersion;

    std::vector<std::string> exts;
    if (enum_exts != nullptr) {
      uint32_t ne = 0;
      if (enum_exts(pd, nullptr, &ne, nullptr) == VK_SUCCESS) {
        std::vector<VkExtensionProperties> ep(ne);
        if (enum_exts(pd, nullptr, &ne, ep.data()) == VK_SUCCESS) {
          for (uint32_t i = 0; i < ne; ++i) exts.emplace_back(ep[i].extensionName);
        }
      }
    }
    auto has_ext = [&](const char* e) { return std::find(exts.begin(), exts.end(), e) != exts.end(); };
    bool dev11 = inst11 && p.apiVersion >= VK_API_VERSION_1_1;
    bool dev12 = dev11 && p.apiVersion >= VK_API_VERSION_1_2;
    bool dev13 = dev11 && p.apiVersion >= VK_API_VERSION_1_3;

    if (dev11 && get_props2 != nullptr && get_feats2 != nullptr) {
      VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
      VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
      VkPhysicalDeviceShaderIntegerDotProductProperties dotp{
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
      bool want_drv = dev12 || has_ext(VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);
      bool want_dot = dev13 || has_ext(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
      void** next = &p2.pNext;
      if (want_drv) {
        *next = &drv;
        next = &drv.pNext;
      }
      if (want_dot) {
        *next = &dotp;
        next = &dotp.pNext;
      }
      get_props2(pd, &p2);
      if (want_drv) {
        d.has_driver_props = true;
        d.driver_id = static_cast<uint32_t>(drv.driverID);
        d.driver_name = drv.driverName;
        d.driver_info = drv.driverInfo;
        const auto& c = drv.conformanceVersion;
        d.conformance = fmt::format("{}.{}.{}.{}", c.major, c.minor, c.subminor, c.patch);
      }

      VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
      VkPhysicalDevice16BitStorageFeatures s16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
      VkPhysicalDeviceShaderFloat16Int8Features f16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
      VkPhysicalDeviceShaderIntegerDotProductFeatures dotf{
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
      bool want_f16 = dev12 || has_ext(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
      next = &f2.pNext;
      *next = &s16;
      next = &s16.pNext;
      if (want_f16) {
        *next = &f16;
        next = &f16.pNext;
      }
      if (want_dot) {
        *next = &dotf;
        next = &dotf.pNext;
      }
      get_feats2(pd, &f2);
      d.features_known = true;
      d.storage_16bit = s16.storageBuffer16BitAccess == VK_TRUE;
      d.shader_float16 = want_f16 && f16.shaderFloat16 == VK_TRUE;
      d.shader_int8 = want_f16 && f16.shaderInt8 == VK_TRUE;
      d.integer_dot = want_dot && dotf.shaderIntegerDotProduct == VK_TRUE;
      d.integer_dot_accelerated = want_dot && dotp.integerDotProduct4x8BitPackedSignedAccelerated == VK_TRUE;
    }

    if (get_queues != nullptr) {
      uint32_t nq = 0;
      get_queues(pd, &nq, nullptr);
      std::vector<VkQueueFamilyProperties> q(nq);
      get_queues(pd, &nq, q.data());
      for (uint32_t i = 0; i < nq; ++i) {
        if ((q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) != 0 && q[i].queueCount > 0) d.has_compute_queue = true;
      }
    }
    f.devices.push_back(std::move(d));
  }
  if (destroy != nullptr) destroy(inst, nullptr);
  return f;
}

}  // namespace rocky::doctor
