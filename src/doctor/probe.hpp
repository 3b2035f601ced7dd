// The probe interface `rocky doctor` diagnoses through, and the real implementation of it.
//
// diagnose() (doctor.hpp) is a pure function of what a Probe answers: every file, environment,
// library and Vulkan fact goes through this interface, so tests drive the whole diagnosis from a
// fixture tree (SystemProbe with a sysroot) plus a few overridden answers (env, uid, Vulkan facts).
//
// Paths passed to a Probe are absolute paths as they appear on the diagnosed system
// ("/sys/class/drm/card0/device/driver"); SystemProbe prefixes them with its sysroot.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rocky::doctor {

struct FileStat {
  bool is_dir = false;
  uint32_t mode = 0;  // permission bits (st_mode & 07777)
  uint32_t uid = 0;
  uint32_t gid = 0;
};

// Result of trying to load a shared library (dlopen), or under a sysroot of finding its file.
struct LibraryLoad {
  bool ok = false;
  bool file_only = false;  // true: only the file's presence was checked (sysroot), not dlopen'ed (also on failure)
  std::string resolved;    // the file that was found (sysroot) or the name dlopen was given
  std::string error;       // dlerror() text or "not found under <sysroot>"
};

// One Vulkan physical device as the loader reports it.
struct VulkanDevice {
  std::string name;
  std::string type;  // "integrated GPU", "discrete GPU", "virtual GPU", "CPU", "other"
  bool is_cpu = false;
  uint32_t vendor_id = 0, device_id = 0;
  uint32_t api_version = 0;     // VK_MAKE_API_VERSION encoding
  uint32_t driver_version = 0;  // vendor-specific encoding, shown raw
  // VkPhysicalDeviceDriverProperties (Vulkan 1.2 / VK_KHR_driver_properties); has_driver_props is
  // false when the device exposes neither.
  bool has_driver_props = false;
  uint32_t driver_id = 0;   // VkDriverId
  std::string driver_name;  // e.g. "llvmpipe", "panvk"
  std::string driver_info;  // e.g. "Mesa 22.3.6 (LLVM 15.0.6)"
  std::string conformance;  // "major.minor.subminor.patch"; "0.0.0.0" = not conformant
  // Features rocky's kernels choose between (fp32 / non-dot fallbacks always exist).
  bool features_known = false;  // false: the device could not be queried with Features2
  bool shader_float16 = false;
  bool shader_int8 = false;
  bool storage_16bit = false;
  bool integer_dot = false;              // shaderIntegerDotProduct
  bool integer_dot_accelerated = false;  // integerDotProduct4x8BitPackedSignedAccelerated
  bool has_compute_queue = false;
};

struct VulkanFacts {
  bool loader_loaded = false;
  std::string loader_name;   // the soname that was dlopen'ed
  std::string loader_path;   // the file it resolved to (dlinfo), when known
  std::string loader_error;  // dlerror() when it failed
  uint32_t instance_version = 0;
  bool instance_ok = false;
  std::string instance_error;  // VkResult name and context when creation failed
  std::vector<VulkanDevice> devices;
};

class Probe {
 public:
  virtual ~Probe() = default;

  // Files. All return nullopt / empty when the path does not exist or cannot be read.
  virtual std::optional<std::string> read_file(const std::string& path) const = 0;
  virtual std::vector<std::string> list_dir(const std::string& path) const = 0;  // names, sorted
  virtual std::optional<std::string> read_link(const std::string& path) const = 0;
  virtual std::optional<FileStat> stat(const std::string& path) const = 0;  // follows symlinks
  // Whether the current user may open `path` for reading and writing (access(R_OK|W_OK)).
  virtual bool can_read_write(const std::string& path) const = 0;

  // Process environment and identity.
  virtual std::optional<std::string> env(const std::string& name) const = 0;
  virtual uint32_t uid() const = 0;
  // Kernel release ("6.10.0-rockchip"), from uname or <sysroot>/proc/version; empty if unknown.
  virtual std::string kernel_release() const = 0;

  // Loads (or under a sysroot: finds) the library an ICD manifest names. `path` is as written in
  // the manifest after resolving manifest-relative paths: absolute, or a bare soname.
  virtual LibraryLoad load_library(const std::string& path) const = 0;

  // Loader, instance and devices of the real environment (never redirected by a sysroot).
  virtual VulkanFacts vulkan() const = 0;
};

// The real system. With a non-empty sysroot, the file probes read <sysroot>/<path>, the kernel
// release comes from <sysroot>/proc/version and load_library() only checks that the named file
// exists in the tree (a foreign tree's libraries cannot be dlopen'ed); env, uid and vulkan() stay
// on the real environment.
class SystemProbe : public Probe {
 public:
  explicit SystemProbe(std::string sysroot = {});

  std::optional<std::string> read_file(const std::string& path) const override;
  std::vector<std::string> list_dir(const std::string& path) const override;
  std::optional<std::string> read_link(const std::string& path) const override;
  std::optional<FileStat> stat(const std::string& path) const override;
  bool can_read_write(const std::string& path) const override;
  std::optional<std::string> env(const std::string& name) const override;
  uint32_t uid() const override;
  std::string kernel_release() const override;
  LibraryLoad load_library(const std::string& path) const override;
  VulkanFacts vulkan() const override;

  const std::string& sysroot() const { return sysroot_; }

 protected:
  std::string host_path(const std::string& path) const;  // <sysroot><path>

 private:
  std::string sysroot_;
};

// Queries the Vulkan loader through dlopen (first of `sonames` that loads), so a missing loader
// is reported instead of stopping the program. Never throws.
VulkanFacts probe_vulkan(const std::vector<std::string>& sonames = {"libvulkan.so.1", "libvulkan.so"});

}  // namespace rocky::doctor
