#include "backend/vulkan/vk.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "core/error.hpp"

namespace rocky::vulkan {

#define ROCKY_VK_DEFINE(name) PFN_##name name = nullptr;
ROCKY_VK_GLOBAL_FUNCTIONS(ROCKY_VK_DEFINE)
ROCKY_VK_INSTANCE_FUNCTIONS(ROCKY_VK_DEFINE)
PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
#undef ROCKY_VK_DEFINE

namespace {
std::mutex g_mutex;
void* g_lib = nullptr;
bool g_instance_loaded = false;
}  // namespace

void load_vulkan_loader(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_lib != nullptr) return;
  std::string tried;
  const char* env = path.c_str();
  const char* names[] = {env != nullptr && *env != '\0' ? env : "libvulkan.so.1",
                         env != nullptr && *env != '\0' ? nullptr : "libvulkan.so"};
  for (const char* n : names) {
    if (n == nullptr) continue;
    g_lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (g_lib != nullptr) break;
    tried += tried.empty() ? n : std::string(", ") + n;
  }
  if (g_lib == nullptr) {
    fail(
        "the Vulkan loader was not found (tried {}): install it (Debian: apt install libvulkan1 "
        "mesa-vulkan-drivers), or run with --device cpu",
        tried);
  }
  vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(g_lib, "vkGetInstanceProcAddr"));
  if (vkGetInstanceProcAddr == nullptr) {
    dlclose(g_lib);
    g_lib = nullptr;
    fail("the Vulkan loader ({}) has no vkGetInstanceProcAddr: a broken libvulkan install",
         tried.empty() ? "libvulkan" : tried);
  }
#define ROCKY_VK_LOAD_GLOBAL(name) name = reinterpret_cast<PFN_##name>(vkGetInstanceProcAddr(nullptr, #name));
  ROCKY_VK_GLOBAL_FUNCTIONS(ROCKY_VK_LOAD_GLOBAL)
#undef ROCKY_VK_LOAD_GLOBAL
  if (vkCreateInstance == nullptr || vkEnumerateInstanceLayerProperties == nullptr) {
    fail("the Vulkan loader does not provide vkCreateInstance: a broken libvulkan install");
  }
}

void load_instance_functions(VkInstance instance) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_instance_loaded) return;
  std::string missing;
#define ROCKY_VK_LOAD_INSTANCE(name)                                           \
  name = reinterpret_cast<PFN_##name>(vkGetInstanceProcAddr(instance, #name)); \
  if (name == nullptr) missing += missing.empty() ? #name : ", " #name;
  ROCKY_VK_INSTANCE_FUNCTIONS(ROCKY_VK_LOAD_INSTANCE)
#undef ROCKY_VK_LOAD_INSTANCE
  if (!missing.empty()) fail("the Vulkan driver lacks required functions ({}): Vulkan 1.2 is needed", missing);
  g_instance_loaded = true;
}

}  // namespace rocky::vulkan
