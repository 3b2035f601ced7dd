// Vulkan entry points, loaded at run time from the Vulkan loader (libvulkan.so.1) with dlopen, so
// the `rocky` binary starts (and --device cpu works) on machines without Vulkan, and a missing
// loader is a clear rocky::Error instead of a dynamic-linker failure.
//
// Every file of rocky_vulkan includes this instead of <vulkan/vulkan.h> (VK_NO_PROTOTYPES is a
// public compile definition of the library). The functions are rocky::vulkan::vkXxx pointers.
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include <string>

// Resolved without an instance.
// The X-macro lists stay as written (clang-format 14 reflows them differently on every pass).
// clang-format off
#define ROCKY_VK_GLOBAL_FUNCTIONS(X) \
  X(vkCreateInstance)                \
  X(vkEnumerateInstanceVersion)      \
  X(vkEnumerateInstanceLayerProperties)

// Resolved through vkGetInstanceProcAddr(instance, …) (device functions via the loader's
// trampolines, valid for every instance and device).
#define ROCKY_VK_INSTANCE_FUNCTIONS(X)                                                             \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkEnumerateDeviceExtensionProperties)       \
  X(vkGetPhysicalDeviceProperties) X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures2) \
  X(vkGetPhysicalDeviceMemoryProperties) X(vkGetPhysicalDeviceQueueFamilyProperties)               \
  X(vkCreateDevice) X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkDeviceWaitIdle)                    \
  X(vkAllocateCommandBuffers) X(vkFreeCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer) \
  X(vkResetCommandBuffer) X(vkCreateCommandPool) X(vkDestroyCommandPool)                          \
  X(vkAllocateDescriptorSets) X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool)                \
  X(vkResetDescriptorPool) X(vkUpdateDescriptorSets) X(vkCreateDescriptorSetLayout)               \
  X(vkDestroyDescriptorSetLayout) X(vkAllocateMemory) X(vkFreeMemory) X(vkMapMemory)              \
  X(vkUnmapMemory) X(vkCreateBuffer) X(vkDestroyBuffer) X(vkBindBufferMemory)                     \
  X(vkGetBufferMemoryRequirements) X(vkCmdBindDescriptorSets) X(vkCmdBindPipeline)                \
  X(vkCmdCopyBuffer) X(vkCmdDispatch) X(vkCmdPipelineBarrier) X(vkCmdPushConstants)               \
  X(vkCmdResetQueryPool) X(vkCmdWriteTimestamp) X(vkCreateQueryPool) X(vkDestroyQueryPool)        \
  X(vkGetQueryPoolResults) X(vkCreateComputePipelines) X(vkDestroyPipeline)                       \
  X(vkCreatePipelineCache) X(vkDestroyPipelineCache) X(vkGetPipelineCacheData)                    \
  X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) X(vkCreateShaderModule)                    \
  X(vkDestroyShaderModule) X(vkCreateFence) X(vkDestroyFence) X(vkResetFences)                    \
  X(vkWaitForFences) X(vkQueueSubmit)

namespace rocky::vulkan {

// clang-format on
#define ROCKY_VK_DECLARE(name) extern PFN_##name name;
ROCKY_VK_GLOBAL_FUNCTIONS(ROCKY_VK_DECLARE)
ROCKY_VK_INSTANCE_FUNCTIONS(ROCKY_VK_DECLARE)
extern PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
#undef ROCKY_VK_DECLARE

// dlopen the loader ($ROCKY_VULKAN_LOADER, else libvulkan.so.1, else libvulkan.so) once and
// resolve the global functions. rocky::Error naming the library and the fix when it is missing.
// `path`: ROCKY_VULKAN_LOADER as the program read it ("" = libvulkan.so.1, then libvulkan.so). The
// loader is process-wide: only the first call's path counts.
void load_vulkan_loader(const std::string& path = {});
// Resolve the instance-level functions through `instance` (once; idempotent).
void load_instance_functions(VkInstance instance);

}  // namespace rocky::vulkan
