// The known-problem table (see known_issues.hpp). Keep one row per problem, sources checkable.
#include "doctor/known_issues.hpp"

#include <array>

#include "core/error.hpp"

namespace rocky::doctor {
namespace {

constexpr std::string_view k_mesa_panfrost_doc = "https://docs.mesa3d.org/drivers/panfrost.html";

constexpr std::array k_issues = {
    KnownIssue{"cpu-rasterizer", Severity::warn,
               "a Vulkan device of type CPU, or driver llvmpipe (lavapipe) / SwiftShader",
               "CPU rasterizer: rocky runs on it but slowly (lavapipe: 2.3 GFLOPS on a q4_K matmul where the "
               "CPU backend does 48); use it for correctness checks only",
               "install the Vulkan driver for your GPU (Mali-G610: Mesa's panvk on the panthor kernel driver)",
               "Vulkan spec VK_PHYSICAL_DEVICE_TYPE_CPU; https://docs.mesa3d.org/drivers/llvmpipe.html; "
               "rocky shared/PLATFORMS.md (lavapipe measurement)"},
    KnownIssue{"lavapipe-arm64-f16", Severity::fail,
               "lavapipe (driver llvmpipe) of Mesa older than 25.0 on an aarch64 host",
               "this lavapipe aborts inside LLVM when it compiles any shader with f16 data (Debian 12's Mesa "
               "22.3.6, LLVM 15, on aarch64): rocky refuses the device rather than crash",
               "install Mesa 25.0 or newer (Debian 12: sudo apt install -t bookworm-backports mesa-vulkan-drivers; "
               "Debian 13 ships 25.0.7), or run with --device cpu",
               "rocky's arm64 build under qemu-user: Mesa 22.3.6 lavapipe aborts on f16 shaders, Mesa 25.0.7 works; "
               "src/core/driver_quirks.hpp"},
    KnownIssue{"panvk-pre-v10-gated", Severity::fail,
               "a Mali GPU older than v10 (Midgard, Bifrost, Valhall-JM), panvk installed, "
               "PAN_I_WANT_A_BROKEN_VULKAN_DRIVER unset and no panvk device enumerated",
               "panvk refuses Mali GPUs older than v10 (it is conformant only on v10, the Mali-G610) unless "
               "PAN_I_WANT_A_BROKEN_VULKAN_DRIVER is set",
               "export PAN_I_WANT_A_BROKEN_VULKAN_DRIVER=1 (panvk is not conformant on this GPU: expect bugs)",
               "https://docs.mesa3d.org/drivers/panfrost.html; Mesa src/panfrost/vulkan/panvk_physical_device.c "
               "(returns VK_ERROR_INCOMPATIBLE_DRIVER without the variable)"},
    KnownIssue{"panvk-pre-v10-nonconformant", Severity::warn, "a panvk device on a Mali GPU older than v10",
               "panvk is not a conformant Vulkan driver on Mali GPUs older than v10; results may be wrong",
               "compare against the CPU backend before trusting results (rocky's verify path)", k_mesa_panfrost_doc},
    KnownIssue{"panvk-no-fp16", Severity::warn,
               "a panvk device whose VkPhysicalDeviceShaderFloat16Int8Features.shaderFloat16 is false",
               "this panvk has no fp16 arithmetic (shaderFloat16): rocky falls back to its fp32 kernels "
               "(slower, more registers)",
               "upgrade Mesa to 25.1 or newer: panvk reports shaderFloat16 (VK_KHR_shader_float16_int8) from "
               "Mesa 25.1",
               "rocky shared/PLATFORMS.md (panvk: shaderFloat16 from Mesa 25.1; Mesa release notes); Vulkan spec "
               "VkPhysicalDeviceShaderFloat16Int8Features"},
    KnownIssue{"panvk-no-int-dot", Severity::warn, "a panvk device whose shaderIntegerDotProduct feature is false",
               "this panvk has no integer dot product (shaderIntegerDotProduct): rocky uses its non-dot int8 "
               "kernels (slower)",
               "upgrade Mesa to 25.2 or newer: panvk reports shaderIntegerDotProduct "
               "(VK_KHR_shader_integer_dot_product) from Mesa 25.2",
               "rocky shared/PLATFORMS.md (panvk: shaderIntegerDotProduct and VK_ARM_shader_core_properties from "
               "Mesa 25.2; Mesa release notes); Vulkan 1.3 spec VkPhysicalDeviceShaderIntegerDotProductFeatures"},
    // The version rule, apart from what the device reports: below these releases panvk is known
    // to lack the features (a backport may report them; the feature rows above judge what it reports).
    KnownIssue{"panvk-mesa-old", Severity::warn,
               "a panvk device whose driverInfo says Mesa older than 25.2 (shaderFloat16 from 25.1, "
               "shaderIntegerDotProduct from 25.2)",
               "this Mesa's panvk predates features rocky's fast kernels use (shaderFloat16 came with Mesa 25.1, "
               "shaderIntegerDotProduct with 25.2)",
               "upgrade Mesa to 25.2 or newer (a distribution backport or a Mesa build with "
               "-Dvulkan-drivers=panfrost)",
               "rocky shared/PLATFORMS.md (Mali-G610: features differ by Mesa version; Mesa release notes)"},
    KnownIssue{"driver-version-unknown", Severity::warn,
               "a Mesa driver whose driverInfo does not start with \"Mesa <major>.<minor>\", or a device "
               "without VkPhysicalDeviceDriverProperties",
               "cannot tell this driver's version; rocky relies on the features the device reports, and "
               "the doctor makes no version-based judgement",
               "nothing to do if the features listed look right; otherwise report `vulkaninfo --summary` with "
               "the problem",
               "Vulkan spec VkPhysicalDeviceDriverProperties (driverInfo is free-form text)"},
    KnownIssue{"panvk-missing", Severity::fail,
               "a Mali GPU on panthor/panfrost, and no ICD manifest names libvulkan_panfrost.so",
               "Mesa's Vulkan driver for Mali (panvk, libvulkan_panfrost.so) is not installed or was built "
               "without it",
               "install Mesa's Vulkan drivers built with panvk (Debian/Ubuntu: sudo apt install "
               "mesa-vulkan-drivers from a release recent enough to ship panvk), or build Mesa with "
               "-Dvulkan-drivers=panfrost",
               "https://docs.mesa3d.org/drivers/panfrost.html; https://docs.mesa3d.org/meson.html "
               "(vulkan-drivers option)"},
    KnownIssue{"panvk-no-device", Severity::fail,
               "a Mali GPU on panthor/panfrost and panvk installed, but panvk enumerated no device",
               "panvk is installed but exposes no device",
               "fix the failed checks in this report first; then run `VK_LOADER_DEBUG=driver vulkaninfo "
               "--summary` to see why panvk declined the GPU",
               "https://github.com/KhronosGroup/Vulkan-Loader/blob/main/docs/LoaderInterfaceArchitecture.md "
               "(VK_LOADER_DEBUG)"},
    KnownIssue{"kbase-bound", Severity::fail, "a Mali GPU bound to Arm's vendor kernel driver (mali / mali_kbase)",
               "the GPU is driven by Arm's vendor kbase driver, which Mesa's panvk cannot use (panvk needs "
               "panthor or panfrost)",
               "boot a kernel with panthor (mainline Linux >= 6.10, CONFIG_DRM_PANTHOR, device tree GPU node "
               "\"rockchip,rk3588-mali\") instead of the vendor BSP kernel",
               "https://docs.mesa3d.org/drivers/panfrost.html; https://kernelnewbies.org/Linux_6.10 "
               "(panthor: DRM driver for Mali CSF GPUs)"},
    KnownIssue{"panfrost-on-csf", Severity::fail, "a Mali v10+ (CSF) GPU bound to panfrost",
               "panfrost drives only job-manager Mali GPUs; this CSF GPU needs panthor",
               "enable panthor (CONFIG_DRM_PANTHOR=m, Linux >= 6.10) and let it bind the GPU (modprobe panthor)",
               "Linux drivers/gpu/drm/panthor/Kconfig (\"DRM support for ARM Mali CSF-based GPUs\"); "
               "https://kernelnewbies.org/Linux_6.10"},
    KnownIssue{"gpu-unbound", Severity::fail, "a Mali GPU device node with no kernel driver bound",
               "the GPU has no kernel driver bound",
               "load the driver (RK3588: sudo modprobe panthor) and check `dmesg | grep -i -e panthor -e mali` "
               "for why it did not bind",
               "Linux Documentation/driver-api/driver-model/binding.rst"},
    KnownIssue{"csf-firmware-missing", Severity::fail,
               "a Mali CSF GPU (RK3588's G610 or panthor) and no CSF firmware file (.bin, .bin.zst or .bin.xz) "
               "under /lib/firmware or /usr/lib/firmware",
               "the CSF firmware panthor loads is missing, so panthor cannot start the GPU",
               "install a current linux-firmware package, or copy mali_csffw.bin from linux-firmware.git "
               "(arm/mali/<arch>/) to /lib/firmware/arm/mali/<arch>/, then reboot",
               "https://git.kernel.org/pub/scm/linux/kernel/git/firmware/linux-firmware.git/tree/arm/mali; "
               "Linux drivers/gpu/drm/panthor/panthor_fw.c (requests arm/mali/arch<major>.<minor>/mali_csffw.bin)"},
    KnownIssue{"kernel-pre-panthor", Severity::warn, "an RK3588 running a kernel older than 6.10",
               "this kernel predates panthor (merged in Linux 6.10): the open GPU stack needs a newer kernel",
               "boot Linux >= 6.10 with CONFIG_DRM_PANTHOR (a mainline or distribution 'edge' kernel)",
               "https://kernelnewbies.org/Linux_6.10"},
};

constexpr std::array k_socs = {
    KnownSoc{"rockchip,rk3588", "RK3588", "Mali-G610 MC4", 0xa867, 10, "arm/mali/arch10.8/mali_csffw.bin",
             "rocky shared/PLATFORMS.md (GPU id 0xa867, arch 10.8); linux-firmware.git arm/mali/arch10.8"},
};

}  // namespace

std::span<const KnownIssue> known_issues() { return k_issues; }

const KnownIssue& known_issue(std::string_view id) {
  for (const auto& k : k_issues) {
    if (k.id == id) return k;
  }
  fail("doctor: no known-issue row with id '{}'", id);
}

std::span<const KnownSoc> known_socs() { return k_socs; }

}  // namespace rocky::doctor
