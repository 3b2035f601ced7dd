// Fixture trees for the doctor tests: fake sysroots built with std::filesystem (text files and
// relative symlinks, shaped like the real sysfs of an RK3588 board) and a Probe whose environment,
// uid and Vulkan facts the test chooses.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "common/shared.hpp"
#include "doctor/probe.hpp"

namespace rocky::test {

namespace fs = std::filesystem;

// A fresh directory tree under the build's scratch folder.
class Tree {
 public:
  explicit Tree(const std::string& name) : root_(scratch_dir("doctor/" + name)) {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  const std::string& root() const { return root_; }

  void file(const std::string& rel, const std::string& text) {
    fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }
  void dir(const std::string& rel, fs::perms mode = fs::perms::owner_all) {
    fs::path p = fs::path(root_) / rel;
    fs::create_directories(p);
    fs::permissions(p, mode);
  }
  // A symlink at `rel` whose (relative) target is `target`, as sysfs has them.
  void link(const std::string& rel, const std::string& target) {
    fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    fs::create_symlink(target, p);
  }
  void remove(const std::string& rel) { fs::remove_all(fs::path(root_) / rel); }

 private:
  std::string root_;
};

// SystemProbe on a fixture tree, with the environment, uid, render-node access and Vulkan facts
// chosen by the test. uid() is the real uid so files the test creates count as the user's own.
class FakeProbe : public doctor::SystemProbe {
 public:
  explicit FakeProbe(const std::string& root) : SystemProbe(root) {}

  std::map<std::string, std::string> env_vars;
  std::set<std::string> denied;  // paths can_read_write() refuses
  doctor::VulkanFacts facts;

  std::optional<std::string> env(const std::string& name) const override {
    auto it = env_vars.find(name);
    if (it == env_vars.end()) return std::nullopt;
    return it->second;
  }
  uint32_t uid() const override { return static_cast<uint32_t>(::getuid()); }
  bool can_read_write(const std::string& path) const override { return denied.count(path) == 0; }
  doctor::VulkanFacts vulkan() const override { return facts; }
};

inline constexpr uint32_t k_vk_1_3 = (1u << 22) | (3u << 12);
inline constexpr uint32_t k_vk_1_4 = (1u << 22) | (4u << 12);

inline doctor::VulkanDevice panvk_g610(bool fp16 = true, bool dot = true, const std::string& info = "Mesa 25.2.4") {
  doctor::VulkanDevice d;
  d.name = "Mali-G610 MC4";
  d.type = "integrated GPU";
  d.api_version = k_vk_1_4;
  d.has_driver_props = true;
  d.driver_id = 20;  // VK_DRIVER_ID_MESA_PANVK
  d.driver_name = "panvk";
  d.driver_info = info;
  d.conformance = "1.4.1.2";
  d.features_known = true;
  d.shader_float16 = fp16;
  d.shader_int8 = fp16;
  d.storage_16bit = true;
  d.integer_dot = dot;
  d.has_compute_queue = true;
  return d;
}

inline doctor::VulkanDevice lavapipe() {
  doctor::VulkanDevice d;
  d.name = "llvmpipe (LLVM 15.0.6, 256 bits)";
  d.type = "CPU";
  d.is_cpu = true;
  d.api_version = k_vk_1_3;
  d.has_driver_props = true;
  d.driver_id = 13;  // VK_DRIVER_ID_MESA_LLVMPIPE
  d.driver_name = "llvmpipe";
  d.driver_info = "Mesa 22.3.6 (LLVM 15.0.6)";
  d.conformance = "1.3.1.1";
  d.features_known = true;
  d.shader_float16 = true;
  d.integer_dot = true;
  d.has_compute_queue = true;
  return d;
}

inline doctor::VulkanFacts facts_with(std::vector<doctor::VulkanDevice> devs) {
  doctor::VulkanFacts f;
  f.loader_loaded = true;
  f.loader_name = "libvulkan.so.1";
  f.instance_version = k_vk_1_3;
  f.instance_ok = true;
  f.devices = std::move(devs);
  return f;
}

// The common part of an RK3588 board: device tree, display controller, the GPU platform device
// (compatible strings given), kernel release, /etc/group, XDG_RUNTIME_DIR, panvk's ICD manifest.
inline void rk3588_base(Tree& t, const std::string& gpu_compatible, const std::string& kernel) {
  t.file("proc/device-tree/compatible", std::string("radxa,rock-5b\0rockchip,rk3588\0", 30));
  t.file("proc/version", "Linux version " + kernel + " (builder@host) (gcc 12.2.0) #1 SMP PREEMPT\n");
  t.file("etc/group", "root:x:0:\nvideo:x:44:\nrender:x:992:\n");
  // Display controller: card0, driven by rockchip-drm (no 3D engine).
  t.dir("sys/devices/platform/display-subsystem");
  t.dir("sys/bus/platform/drivers/rockchip-drm");
  t.link("sys/devices/platform/display-subsystem/driver", "../../../bus/platform/drivers/rockchip-drm");
  t.link("sys/class/drm/card0/device", "../../../devices/platform/display-subsystem");
  t.dir("sys/class/drm/card0-HDMI-A-1");
  // The GPU platform device and its device-tree node.
  t.file("sys/firmware/devicetree/base/gpu@fb000000/compatible", gpu_compatible);
  t.dir("sys/devices/platform/fb000000.gpu");
  t.link("sys/devices/platform/fb000000.gpu/of_node", "../../../firmware/devicetree/base/gpu@fb000000");
  t.link("sys/bus/platform/devices/fb000000.gpu", "../../../devices/platform/fb000000.gpu");
  t.dir("run/user/1000", fs::perms::owner_all);
  t.file(
      "usr/share/vulkan/icd.d/panfrost_icd.aarch64.json",
      R"({"file_format_version": "1.0.0", "ICD": {"library_path": "/usr/lib/aarch64-linux-gnu/libvulkan_panfrost.so", "api_version": "1.4.305"}})");
  t.file("usr/lib/aarch64-linux-gnu/libvulkan_panfrost.so", "fixture: stands for the panvk library\n");
}

inline void bind_driver(Tree& t, const std::string& driver) {
  t.dir("sys/bus/platform/drivers/" + driver);
  t.link("sys/devices/platform/fb000000.gpu/driver", "../../../bus/platform/drivers/" + driver);
}

// RK3588 on mainline: panthor bound, DRM card1 + render node, CSF firmware (zstd-compressed).
inline void rk3588_panthor(Tree& t) {
  rk3588_base(t, std::string("rockchip,rk3588-mali\0arm,mali-valhall-csf\0", 42), "6.12.0-rockchip");
  bind_driver(t, "panthor");
  t.file("sys/devices/platform/fb000000.gpu/uevent",
         "DRIVER=panthor\nOF_NAME=gpu\nOF_COMPATIBLE_0=rockchip,rk3588-mali\nOF_COMPATIBLE_1=arm,mali-valhall-csf\n");
  t.link("sys/class/drm/card1/device", "../../../devices/platform/fb000000.gpu");
  t.dir("sys/class/drm/renderD128");
  t.file("dev/dri/card1", "");
  t.file("dev/dri/renderD128", "");
  t.file("lib/firmware/arm/mali/arch10.8/mali_csffw.bin.zst", "fixture: compressed firmware\n");
}

// RK3588 on the vendor BSP kernel: Arm's kbase ("mali") bound, /dev/mali0, no render node.
inline void rk3588_kbase(Tree& t) {
  rk3588_base(t, std::string("arm,mali-bifrost\0", 17), "5.10.160-rockchip");
  bind_driver(t, "mali");
  t.file("sys/devices/platform/fb000000.gpu/uevent", "DRIVER=mali\nOF_NAME=gpu\nOF_COMPATIBLE_0=arm,mali-bifrost\n");
  t.link("sys/class/misc/mali0/device", "../../../devices/platform/fb000000.gpu");
  t.file("dev/mali0", "");
  t.file("dev/dri/card0", "");
  t.file("lib/firmware/mali_csffw.bin", "fixture: the vendor driver's firmware (not the one panthor loads)\n");
}

}  // namespace rocky::test
