// diagnose(): the doctor's checks, a pure function of a Probe. See doctor.hpp for the check ids.
#include "doctor/doctor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <set>

#include "doctor/known_issues.hpp"
#include "core/driver_quirks.hpp"

namespace rocky::doctor {
namespace {

// VkDriverId values (Vulkan spec, VkDriverId); the core does not include vulkan.h.
constexpr uint32_t k_driver_swiftshader = 10;
constexpr uint32_t k_driver_llvmpipe = 13;
constexpr uint32_t k_driver_panvk = 20;
// Mesa's drivers report "Mesa <version>" in driverInfo: RADV 3, ANV 6, llvmpipe 13, turnip 18,
// v3dv 19, panvk 20, venus 22, dozen 23, NVK 24, PowerVR 25.
constexpr std::array<uint32_t, 10> k_mesa_drivers = {3, 6, 13, 18, 19, 20, 22, 23, 24, 25};

// Kernel drivers that drive a display controller only (no 3D/compute engine).
constexpr std::array<std::string_view, 6> k_display_only = {"rockchip-drm", "simple-framebuffer", "simpledrm",
                                                            "vkms",         "display-subsystem",  "efi-framebuffer"};

const std::array<std::string_view, 2> k_firmware_roots = {"/lib/firmware", "/usr/lib/firmware"};

std::string base_name(const std::string& p) {
  auto s = p;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  auto pos = s.rfind('/');
  return pos == std::string::npos ? s : s.substr(pos + 1);
}

std::string dir_name(const std::string& p) {
  auto pos = p.rfind('/');
  if (pos == std::string::npos) return ".";
  return pos == 0 ? "/" : p.substr(0, pos);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\0' || s.back() == '\r')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view e) {
  return s.size() >= e.size() && s.substr(s.size() - e.size()) == e;
}
bool contains(std::string_view s, std::string_view x) { return s.find(x) != std::string_view::npos; }

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string api_string(uint32_t v) { return fmt::format("{}.{}.{}", (v >> 22) & 0x7f, (v >> 12) & 0x3ff, v & 0xfff); }

// "Mesa 22.3.6 (LLVM 15.0.6)" → {22, 3}; nullopt when the text does not start with "Mesa X.Y".
std::optional<std::pair<int, int>> mesa_version(const std::string& info) {
  int major = 0, minor = 0;
  if (std::sscanf(info.c_str(), "Mesa %d.%d", &major, &minor) == 2) return std::make_pair(major, minor);
  return std::nullopt;
}

// "6.10.0-rockchip" → {6, 10}.
std::optional<std::pair<int, int>> kernel_version(const std::string& release) {
  int major = 0, minor = 0;
  if (std::sscanf(release.c_str(), "%d.%d", &major, &minor) == 2) return std::make_pair(major, minor);
  return std::nullopt;
}

bool is_cpu_device(const VulkanDevice& d) {
  return d.is_cpu || (d.has_driver_props && (d.driver_id == k_driver_llvmpipe || d.driver_id == k_driver_swiftshader));
}

bool is_panvk(const VulkanDevice& d) {
  return (d.has_driver_props && d.driver_id == k_driver_panvk) || lower(d.driver_name) == "panvk";
}

bool is_kbase(const std::string& driver) { return driver == "mali" || contains(driver, "kbase"); }

// PAN_ARCH major from device-tree compatible strings; -1 when none names a Mali family.
int mali_arch_from_compatible(const std::vector<std::string>& compat) {
  for (const auto& c : compat) {
    if (c == "arm,mali-valhall-csf" || c == "rockchip,rk3588-mali") return 10;
    if (c == "arm,mali-valhall-jm") return 9;
    if (c == "arm,mali-bifrost") return 7;
    if (c == "arm,mali-midgard" || starts_with(c, "arm,mali-t")) return 5;
  }
  return -1;
}

bool mentions_mali(const GpuNode& g) {
  if (is_kbase(g.driver) || g.driver == "panthor" || g.driver == "panfrost") return true;
  for (const auto& c : g.compatible) {
    if (contains(c, "mali")) return true;
  }
  return false;
}

struct Manifest {
  std::string path;
  std::string library;  // resolved as the loader would: absolute, manifest-relative, or bare soname
  std::string error;    // parse error; empty when fine
};

// A library under another architecture's multiarch directory (/usr/lib/aarch64-linux-gnu/ on an
// x86-64 host, e.g. mesa-vulkan-drivers:arm64 installed for a cross build): glibc's dlopen says
// "No such file or directory" for it, but the loader merely skips it. Not under a sysroot, whose
// libraries are another machine's (only their presence is checked there).
bool foreign_multiarch(const std::string& library) {
#if defined(__x86_64__)
  constexpr std::string_view k_own = "/x86_64-linux-gnu/";
#elif defined(__aarch64__)
  constexpr std::string_view k_own = "/aarch64-linux-gnu/";
#else
  constexpr std::string_view k_own = "";
#endif
  if (k_own.empty() || library.find(k_own) != std::string::npos) return false;
  for (std::string_view t : {"/x86_64-linux-gnu/", "/aarch64-linux-gnu/", "/arm-linux-gnueabihf/", "/i386-linux-gnu/",
                             "/riscv64-linux-gnu/"})
    if (library.find(t) != std::string::npos) return true;
  return false;
}

class Doctor {
 public:
  Doctor(const Probe& p, Report& r) : p_(p), r_(r) {}

  void run() {
    r_.vulkan = p_.vulkan();
    discover_soc();
    discover_gpus();
    vulkan_section();
    gpu_section();
    environment_section();
    result_section();
  }

 private:
  const Probe& p_;
  Report& r_;
  const KnownSoc* soc_ = nullptr;
  std::vector<Manifest> manifests_;

  Check& add(std::string section, std::string id, Status st, std::string title, std::string fix = {},
             std::string source = {}) {
    r_.checks.push_back(
        Check{std::move(id), std::move(section), st, std::move(title), std::move(fix), std::move(source)});
    return r_.checks.back();
  }

  // A hit of a known-issue row. `subject` distinguishes repeated hits ("0" for device 0);
  // `context` is appended to the problem text.
  Check& issue(const std::string& section, std::string_view row_id, const std::string& subject = {},
               const std::string& context = {}) {
    const KnownIssue& k = known_issue(row_id);
    std::string id = fmt::format("issue.{}", k.id);
    if (!subject.empty()) id += "." + subject;
    std::string title(k.problem);
    if (!context.empty()) title += " (" + context + ")";
    return add(section, id, k.severity == Severity::fail ? Status::fail : Status::warn, title, std::string(k.fix),
               std::string(k.source));
  }

  // ---- discovery -------------------------------------------------------------------------------

  std::vector<std::string> read_compatible(const std::string& path) {
    auto t = p_.read_file(path);
    if (!t) return {};
    return split(*t, '\0');
  }

  void discover_soc() {
    auto compat = read_compatible("/proc/device-tree/compatible");
    if (compat.empty()) compat = read_compatible("/sys/firmware/devicetree/base/compatible");
    for (const auto& c : compat) {
      for (const auto& s : known_socs()) {
        if (starts_with(c, s.compatible_prefix)) {
          soc_ = &s;
          r_.soc = std::string(s.soc);
          return;
        }
      }
    }
  }

  void add_gpu(const std::string& sysfs_dir, const std::string& fallback_name) {
    GpuNode g;
    g.sysfs = sysfs_dir;
    auto link = p_.read_link(sysfs_dir);  // sysfs device entries are symlinks to /sys/devices/...
    g.name = link ? base_name(*link) : fallback_name;
    for (const auto& existing : r_.gpus) {
      if (existing.name == g.name) return;
    }
    if (auto drv = p_.read_link(sysfs_dir + "/driver")) g.driver = base_name(*drv);
    g.compatible = read_compatible(sysfs_dir + "/of_node/compatible");
    if (auto ue = p_.read_file(sysfs_dir + "/uevent")) {
      for (const auto& line : split(*ue, '\n')) {
        if (g.driver.empty() && starts_with(line, "DRIVER=")) g.driver = trim(line.substr(7));
        if (starts_with(line, "OF_COMPATIBLE_") && line.find('=') != std::string::npos) {
          auto v = trim(line.substr(line.find('=') + 1));
          if (std::find(g.compatible.begin(), g.compatible.end(), v) == g.compatible.end()) g.compatible.push_back(v);
        }
      }
    }
    g.display_only = std::find(k_display_only.begin(), k_display_only.end(), g.driver) != k_display_only.end();
    if (mentions_mali(g)) {
      g.mali_arch = mali_arch_from_compatible(g.compatible);
      if (soc_ != nullptr) g.mali_arch = soc_->mali_arch_major;  // the SoC fixes the GPU
      if (g.mali_arch < 0 && g.driver == "panthor") g.mali_arch = 10;
    }
    r_.gpus.push_back(std::move(g));
  }

  void discover_gpus() {
    for (const auto& n : p_.list_dir("/sys/class/drm")) {
      if (!starts_with(n, "card") || n.size() == 4) continue;
      if (!std::all_of(n.begin() + 4, n.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
      add_gpu("/sys/class/drm/" + n + "/device", n);
    }
    // Mali platform devices, bound or not (a GPU without a driver has no DRM card).
    for (const auto& n : p_.list_dir("/sys/bus/platform/devices")) {
      std::string dir = "/sys/bus/platform/devices/" + n;
      auto compat = read_compatible(dir + "/of_node/compatible");
      bool mali = std::any_of(compat.begin(), compat.end(), [](const std::string& c) { return contains(c, "mali"); });
      if (mali) add_gpu(dir, n);
    }
    // Arm's kbase registers a misc device (/dev/mali0) instead of a DRM card.
    for (const auto& n : p_.list_dir("/sys/class/misc")) {
      if (starts_with(n, "mali")) add_gpu("/sys/class/misc/" + n + "/device", n);
    }
  }

  // ---- Vulkan ----------------------------------------------------------------------------------

  std::vector<std::string> icd_search_dirs() {
    std::vector<std::string> dirs;
    auto push = [&](const std::string& d) {
      if (!d.empty() && std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
    };
    // Vulkan-Loader docs/LoaderDriverInterface.md, "Driver Discovery on Linux".
    for (const auto& d : split(p_.env("XDG_CONFIG_DIRS").value_or("/etc/xdg"), ':')) push(d + "/vulkan/icd.d");
    push("/etc/vulkan/icd.d");
    if (auto h = p_.env("XDG_DATA_HOME")) {
      push(*h + "/vulkan/icd.d");
    } else if (auto home = p_.env("HOME")) {
      push(*home + "/.local/share/vulkan/icd.d");
    }
    for (const auto& d : split(p_.env("XDG_DATA_DIRS").value_or("/usr/local/share:/usr/share"), ':')) {
      push(d + "/vulkan/icd.d");
    }
    push("/usr/local/share/vulkan/icd.d");
    push("/usr/share/vulkan/icd.d");
    return dirs;
  }

  Manifest read_manifest(const std::string& path) {
    Manifest m;
    m.path = path;
    auto text = p_.read_file(path);
    if (!text) {
      m.error = "cannot be read";
      return m;
    }
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded()) {
      m.error = "is not valid JSON";
      return m;
    }
    if (!j.is_object() || !j.contains("ICD") || !j["ICD"].is_object() || !j["ICD"].contains("library_path") ||
        !j["ICD"]["library_path"].is_string()) {
      m.error = "has no ICD.library_path string";
      return m;
    }
    std::string lib = j["ICD"]["library_path"].get<std::string>();
    // A relative path with a slash is relative to the manifest; a bare name goes to dlopen's search.
    if (!lib.empty() && lib.front() != '/' && lib.find('/') != std::string::npos) lib = dir_name(path) + "/" + lib;
    m.library = lib;
    return m;
  }

  void manifests_check() {
    const std::string sec = "Vulkan";
    std::vector<std::string> files;
    std::string var;
    for (const char* v : {"VK_DRIVER_FILES", "VK_ICD_FILENAMES"}) {
      auto val = p_.env(v);
      if (val && !val->empty()) {
        var = v;
        break;
      }
    }
    std::string searched;
    if (!var.empty()) {
      auto list = split(*p_.env(var), ':');
      add(sec, "vulkan.icd.env", Status::info,
          fmt::format("{} is set: the loader uses only {}", var, fmt::join(list, ", ")));
      for (const auto& e : list) {
        auto st = p_.stat(e);
        if (!st) {
          add(sec, "vulkan.icd.env." + base_name(e), Status::fail,
              fmt::format("{} names {}, which does not exist", var, e),
              fmt::format("unset {} or point it at an existing manifest (see /usr/share/vulkan/icd.d)", var));
        } else if (st->is_dir) {
          for (const auto& n : p_.list_dir(e)) {
            if (ends_with(n, ".json")) files.push_back(e + "/" + n);
          }
        } else {
          files.push_back(e);
        }
      }
      searched = var;
    } else {
      auto dirs = icd_search_dirs();
      for (const auto& d : dirs) {
        for (const auto& n : p_.list_dir(d)) {
          if (ends_with(n, ".json")) files.push_back(d + "/" + n);
        }
      }
      searched = fmt::format("{}", fmt::join(dirs, ", "));
      // VK_ADD_DRIVER_FILES adds manifests to the standard search (Vulkan-Loader >= 1.3.207).
      if (auto add_files = p_.env("VK_ADD_DRIVER_FILES"); add_files && !add_files->empty()) {
        add(sec, "vulkan.icd.env", Status::info, fmt::format("VK_ADD_DRIVER_FILES adds {}", *add_files));
        for (const auto& e : split(*add_files, ':')) {
          auto st = p_.stat(e);
          if (!st) {
            add(sec, "vulkan.icd.env." + base_name(e), Status::fail,
                fmt::format("VK_ADD_DRIVER_FILES names {}, which does not exist", e),
                "unset VK_ADD_DRIVER_FILES or point it at an existing manifest");
          } else if (st->is_dir) {
            for (const auto& n : p_.list_dir(e)) {
              if (ends_with(n, ".json")) files.push_back(e + "/" + n);
            }
          } else {
            files.push_back(e);
          }
        }
      }
    }
    if (files.empty()) {
      add(sec, "vulkan.icd", Status::fail, fmt::format("no Vulkan driver (ICD) manifest found in {}", searched),
          "install a Vulkan driver: Debian/Ubuntu `sudo apt install mesa-vulkan-drivers` (Mali: a Mesa "
          "with panvk)");
      return;
    }
    add(sec, "vulkan.icd", Status::ok, fmt::format("{} Vulkan driver manifest(s) found", files.size()));
    for (const auto& f : files) {
      Manifest m = read_manifest(f);
      std::string id = "vulkan.icd." + base_name(f);
      if (!m.error.empty()) {
        add(sec, id, Status::fail, fmt::format("{} {}", f, m.error),
            fmt::format("reinstall the package that owns it (dpkg -S {}) or remove it", f));
      } else {
        LibraryLoad ld = p_.load_library(m.library);
        if (ld.ok) {
          add(sec, id, Status::ok,
              ld.file_only ? fmt::format("{} → {} present{} (not loaded: --sysroot)", f, m.library,
                                         ld.resolved == m.library ? "" : " at " + ld.resolved)
                           : fmt::format("{} → {} loads", f, m.library));
        } else if (contains(ld.error, "wrong ELF class") || contains(ld.error, "wrong architecture") ||
                   (!ld.file_only && foreign_multiarch(m.library))) {
          add(sec, id, Status::warn,
              fmt::format("{} → {} is for another architecture (the loader skips it): {}", f, m.library, ld.error),
              "nothing to do unless this is your GPU's driver; then install the package for this "
              "machine's architecture");
        } else {
          add(sec, id, Status::fail, fmt::format("{} → {} does not load: {}", f, m.library, ld.error),
              fmt::format("reinstall the package that owns {} (dpkg -S {}) or remove the stale manifest {}",
                          base_name(m.library), base_name(m.library), f));
        }
      }
      manifests_.push_back(std::move(m));
    }
  }

  bool panvk_installed() const {
    return std::any_of(manifests_.begin(), manifests_.end(),
                       [](const Manifest& m) { return m.error.empty() && contains(base_name(m.library), "panfrost"); });
  }

  void device_checks() {
    const std::string sec = "Vulkan";
    const auto& devs = r_.vulkan.devices;
    if (devs.empty()) {
      add(sec, "vulkan.devices", Status::fail, "the Vulkan loader enumerated no device",
          "fix the failed checks below (kernel driver, firmware, render node, XDG_RUNTIME_DIR)");
    }
    for (size_t i = 0; i < devs.size(); ++i) {
      const auto& d = devs[i];
      std::string drv =
          d.has_driver_props ? fmt::format("{} ({})", d.driver_name, d.driver_info) : "driver properties unavailable";
      std::string conf = d.has_driver_props
                             ? (d.conformance == "0.0.0.0" ? "not conformant" : "conformance " + d.conformance)
                             : "conformance unknown";
      std::string feats =
          d.features_known
              ? fmt::format(
                    "fp16 {}, int8 dot {}", d.shader_float16 ? "yes" : "no",
                    d.integer_dot ? (d.integer_dot_accelerated ? "yes (accelerated)" : "yes (not accelerated)") : "no")
              : "features unknown (Vulkan 1.0 device)";
      std::string title = fmt::format("device {}: {} [{}] — {}, Vulkan {}, {}; {}", i, d.name, d.type, drv,
                                      api_string(d.api_version), conf, feats);
      std::string sub = std::to_string(i);
      if (!device_usable(d)) {
        add(sec, "vulkan.device." + sub, Status::warn, title + "; not usable by rocky",
            d.has_driver_props && known_crashing_driver(d.driver_name, d.driver_info)
                ? "this driver crashes on rocky's shaders: see issue.lavapipe-arm64-f16 below"
                : "rocky needs Vulkan 1.1 and a compute queue: update this device's driver");
      } else {
        add(sec, "vulkan.device." + sub, Status::ok, title);
      }
      if (is_cpu_device(d)) issue(sec, "cpu-rasterizer", sub, d.name);
      if (d.has_driver_props && known_crashing_driver(d.driver_name, d.driver_info))
        issue(sec, "lavapipe-arm64-f16", sub, fmt::format("{}: {}", d.name, d.driver_info));
      if (is_panvk(d) && d.features_known) {
        if (!d.shader_float16) issue(sec, "panvk-no-fp16", sub, d.name);
        if (!d.integer_dot) issue(sec, "panvk-no-int-dot", sub, d.name);
      }
      // ../shared/PLATFORMS.md: panvk reports shaderFloat16 from Mesa 25.1 and
      // shaderIntegerDotProduct from 25.2; below them, say so whatever the device reports.
      if (is_panvk(d) && d.has_driver_props) {
        if (auto v = mesa_version(d.driver_info); v && *v < std::make_pair(25, 2)) {
          const bool pre_fp16 = *v < std::make_pair(25, 1);
          issue(sec, "panvk-mesa-old", sub,
                fmt::format("{}: Mesa {}.{}, below {}", d.name, v->first, v->second,
                            pre_fp16 ? "25.1 (shaderFloat16) and 25.2 (shaderIntegerDotProduct)"
                                     : "25.2 (shaderIntegerDotProduct)"));
        }
      }
      bool mesa = d.has_driver_props &&
                  std::find(k_mesa_drivers.begin(), k_mesa_drivers.end(), d.driver_id) != k_mesa_drivers.end();
      if (!d.has_driver_props) {
        issue(sec, "driver-version-unknown", sub, d.name + ": no VkPhysicalDeviceDriverProperties");
      } else if (mesa && !mesa_version(d.driver_info)) {
        issue(sec, "driver-version-unknown", sub, fmt::format("{}: driverInfo \"{}\"", d.name, d.driver_info));
      }
      if (is_panvk(d)) {
        for (const auto& g : r_.gpus) {
          if (g.mali_arch >= 0 && g.mali_arch < 10) issue(sec, "panvk-pre-v10-nonconformant", sub, g.name);
        }
      }
    }
    // Mali on the open kernel drivers: is panvk there, and did it take the GPU?
    bool have_panvk_device = std::any_of(devs.begin(), devs.end(), is_panvk);
    for (const auto& g : r_.gpus) {
      if (g.mali_arch < 0 || (g.driver != "panthor" && g.driver != "panfrost")) continue;
      if (!panvk_installed()) {
        issue(sec, "panvk-missing", g.name, fmt::format("{} on {}", g.name, g.driver));
      } else if (r_.vulkan.instance_ok && !have_panvk_device) {
        if (g.mali_arch < 10 && !p_.env("PAN_I_WANT_A_BROKEN_VULKAN_DRIVER")) {
          issue(sec, "panvk-pre-v10-gated", g.name, fmt::format("{}: Mali arch v{}", g.name, g.mali_arch));
        } else {
          issue(sec, "panvk-no-device", g.name, fmt::format("{} on {}", g.name, g.driver));
        }
      }
    }
  }

  void vulkan_section() {
    const std::string sec = "Vulkan";
    const auto& v = r_.vulkan;
    if (v.loader_loaded) {
      add(sec, "vulkan.loader", Status::ok,
          fmt::format("Vulkan loader {}{} (instance API {})", v.loader_name,
                      v.loader_path.empty() || v.loader_path == v.loader_name ? "" : " at " + v.loader_path,
                      api_string(v.instance_version)));
    } else {
      add(sec, "vulkan.loader", Status::fail, fmt::format("Vulkan loader libvulkan.so.1 not found: {}", v.loader_error),
          "install the Vulkan loader: Debian/Ubuntu `sudo apt install libvulkan1`");
    }
    manifests_check();
    if (!v.loader_loaded) return;
    if (v.instance_ok) {
      add(sec, "vulkan.instance", Status::ok, "Vulkan instance created");
    } else {
      add(sec, "vulkan.instance", Status::fail, fmt::format("Vulkan instance creation failed: {}", v.instance_error),
          "run `VK_LOADER_DEBUG=all vulkaninfo --summary` to see which driver fails, and reinstall it");
      return;
    }
    device_checks();
  }

  // ---- Linux GPU -------------------------------------------------------------------------------

  void gpu_section() {
    const std::string sec = "Linux GPU";
    bool any_gpu = false;
    for (const auto& g : r_.gpus) {
      std::string what = g.compatible.empty() ? g.name : fmt::format("{} ({})", g.name, g.compatible.front());
      std::string id = "gpu.driver." + g.name;
      if (g.display_only) {
        add(sec, id, Status::info, fmt::format("{}: display controller, driver {}", what, g.driver));
        continue;
      }
      any_gpu = true;
      if (g.mali_arch >= 0) {
        std::string arch = fmt::format("Mali arch v{}", g.mali_arch);
        if (soc_ != nullptr) arch = fmt::format("{} {} (GPU id {:#x})", soc_->soc, soc_->gpu, soc_->gpu_id);
        if (g.driver.empty()) {
          add(sec, id, Status::fail, fmt::format("{}: {}, no kernel driver bound", what, arch));
          issue(sec, "gpu-unbound", g.name, g.name);
        } else if (is_kbase(g.driver)) {
          add(sec, id, Status::fail,
              fmt::format("{}: {}, kernel driver {} (Arm's vendor kbase)", what, arch, g.driver));
          issue(sec, "kbase-bound", g.name, g.name);
        } else if (g.driver == "panfrost" && g.mali_arch >= 10) {
          add(sec, id, Status::fail, fmt::format("{}: {}, kernel driver panfrost", what, arch));
          issue(sec, "panfrost-on-csf", g.name, g.name);
        } else if (g.driver == "panthor" || g.driver == "panfrost") {
          add(sec, id, Status::ok, fmt::format("{}: {}, kernel driver {}", what, arch, g.driver));
        } else {
          add(sec, id, Status::warn, fmt::format("{}: {}, unexpected kernel driver {}", what, arch, g.driver),
              "panvk needs panthor (Mali v10+) or panfrost (older Mali)");
        }
      } else if (g.driver.empty()) {
        add(sec, id, Status::warn, fmt::format("{}: no kernel driver bound", what),
            "load this GPU's kernel driver (see `dmesg` for why it did not bind)");
      } else {
        add(sec, id, Status::ok, fmt::format("{}: kernel driver {}", what, g.driver));
      }
    }
    if (!any_gpu) {
      add(sec, "gpu.driver", Status::warn, "no GPU found in /sys/class/drm or as a Mali platform device",
          "if this machine has a GPU, load its kernel driver (`lsmod`, `dmesg | grep -i -e drm -e mali`); "
          "until then only CPU Vulkan devices work");
    }
    firmware_check();
    render_nodes_check(any_gpu);
    kernel_check();
  }

  std::optional<std::string> find_firmware(const std::string& rel) {
    for (auto root : k_firmware_roots) {
      for (const char* ext : {"", ".zst", ".xz"}) {
        std::string p = fmt::format("{}/{}{}", root, rel, ext);
        if (auto st = p_.stat(p); st && !st->is_dir) return p;
      }
    }
    return std::nullopt;
  }

  void firmware_check() {
    const std::string sec = "Linux GPU";
    bool csf = soc_ != nullptr && !soc_->csf_firmware.empty();
    for (const auto& g : r_.gpus) {
      if (g.driver == "panthor" || g.mali_arch >= 10) csf = true;
    }
    if (!csf) return;
    if (soc_ != nullptr && !soc_->csf_firmware.empty()) {
      std::string rel(soc_->csf_firmware);
      if (auto found = find_firmware(rel)) {
        add(sec, "gpu.firmware", Status::ok, fmt::format("CSF firmware for {}: {}", soc_->gpu, *found));
        return;
      }
      // Other arch folders present (a board may carry e.g. arch10.10) help the user see the mix-up.
      std::vector<std::string> others;
      for (auto root : k_firmware_roots) {
        for (const auto& n : p_.list_dir(std::string(root) + "/arm/mali")) others.push_back(n);
      }
      std::string ctx =
          fmt::format("{} needs {}{{,.zst,.xz}} under /lib/firmware or /usr/lib/firmware", soc_->gpu, rel);
      if (!others.empty()) ctx += fmt::format("; present: arm/mali/{}", fmt::join(others, ", arm/mali/"));
      add(sec, "gpu.firmware", Status::fail, fmt::format("CSF firmware {} not found", rel));
      Check& c = issue(sec, "csf-firmware-missing", {}, ctx);
      std::string arch = base_name(dir_name(rel));
      for (size_t pos; (pos = c.fix.find("<arch>")) != std::string::npos;) c.fix.replace(pos, 6, arch);
      return;
    }
    // panthor on a SoC the table does not know: accept any arm/mali/arch*/mali_csffw.bin*.
    for (auto root : k_firmware_roots) {
      for (const auto& n : p_.list_dir(std::string(root) + "/arm/mali")) {
        if (auto found = find_firmware("arm/mali/" + n + "/mali_csffw.bin")) {
          add(sec, "gpu.firmware", Status::warn,
              fmt::format("CSF firmware present ({}), but the doctor does not know which arch this GPU needs", *found),
              "check `dmesg | grep -i panthor` for a firmware load error");
          return;
        }
      }
    }
    add(sec, "gpu.firmware", Status::fail, "no CSF firmware (arm/mali/arch*/mali_csffw.bin) found");
    issue(sec, "csf-firmware-missing");
  }

  std::string group_name(uint32_t gid) {
    if (auto g = p_.read_file("/etc/group")) {
      for (const auto& line : split(*g, '\n')) {
        // name:password:gid:members; the password field may be empty.
        auto a = line.find(':');
        auto b = a == std::string::npos ? a : line.find(':', a + 1);
        auto c = b == std::string::npos ? b : line.find(':', b + 1);
        if (c == std::string::npos) continue;
        if (line.substr(b + 1, c - b - 1) == std::to_string(gid)) return line.substr(0, a);
      }
    }
    return std::to_string(gid);
  }

  void render_nodes_check(bool any_gpu) {
    const std::string sec = "Linux GPU";
    std::vector<std::string> nodes;
    for (const auto& n : p_.list_dir("/dev/dri")) {
      if (starts_with(n, "renderD")) nodes.push_back(n);
    }
    if (nodes.empty()) {
      bool kbase = std::any_of(r_.gpus.begin(), r_.gpus.end(), [](const GpuNode& g) { return is_kbase(g.driver); });
      add(sec, "gpu.render", any_gpu ? Status::fail : Status::warn,
          kbase
              ? "no /dev/dri/renderD* node (the vendor kbase driver exposes /dev/mali0 instead, which panvk cannot use)"
              : "no /dev/dri/renderD* node",
          any_gpu ? "bind the GPU to a DRM driver (see the driver check above); check that udev populated /dev/dri"
                  : "a GPU needs a DRM kernel driver to get a render node; only CPU Vulkan devices work without one");
      return;
    }
    int bad = 0;
    for (const auto& n : nodes) {
      std::string path = "/dev/dri/" + n;
      auto st = p_.stat(path);
      std::string owner = st ? fmt::format("group {}, mode {:04o}", group_name(st->gid), st->mode) : "cannot stat";
      if (p_.can_read_write(path)) {
        add(sec, "gpu.render." + n, Status::ok, fmt::format("{} ({}): read/write OK", path, owner));
      } else {
        ++bad;
        std::string grp = st ? group_name(st->gid) : "render";
        add(sec, "gpu.render." + n, Status::fail,
            fmt::format("{} ({}): uid {} cannot open it read/write", path, owner, p_.uid()),
            fmt::format("sudo usermod -aG {} $USER, then log out and back in", grp));
      }
    }
    if (bad == 0) add(sec, "gpu.render", Status::ok, fmt::format("{} render node(s) accessible", nodes.size()));
  }

  void kernel_check() {
    const std::string sec = "Linux GPU";
    std::string rel = p_.kernel_release();
    if (rel.empty()) {
      add(sec, "kernel.version", Status::warn, "kernel version unknown (no uname / proc/version)",
          "run `uname -r` and compare with the driver requirements (panthor: Linux >= 6.10)");
      return;
    }
    auto v = kernel_version(rel);
    if (!v) {
      add(sec, "kernel.version", Status::warn, fmt::format("kernel release \"{}\" not understood", rel),
          "run `uname -r` and compare with the driver requirements (panthor: Linux >= 6.10)");
      return;
    }
    bool old = *v < std::make_pair(6, 10);
    if (soc_ != nullptr && soc_->mali_arch_major >= 10 && old) {
      add(sec, "kernel.version", Status::warn, fmt::format("kernel {}", rel));
      issue(sec, "kernel-pre-panthor", {}, fmt::format("running {}", rel));
    } else {
      add(sec, "kernel.version", Status::ok, fmt::format("kernel {}", rel));
    }
  }

  // ---- Environment -----------------------------------------------------------------------------

  void environment_section() {
    const std::string sec = "Environment";
    const std::string id = "env.xdg_runtime_dir";
    uint32_t uid = p_.uid();
    std::string std_dir = fmt::format("/run/user/{}", uid);
    auto v = p_.env("XDG_RUNTIME_DIR");
    if (!v || v->empty()) {
      add(sec, id, Status::fail,
          "XDG_RUNTIME_DIR is not set (panvk fails without it; lavapipe prints an error per call)",
          fmt::format(
              "export XDG_RUNTIME_DIR={0} (log in through systemd-logind, or create it: sudo install -d -m 0700 "
              "-o $(id -un) {0})",
              std_dir));
      return;
    }
    auto st = p_.stat(*v);
    if (!st) {
      add(sec, id, Status::fail, fmt::format("XDG_RUNTIME_DIR={} does not exist", *v),
          fmt::format("create it: install -d -m 0700 {} (or export XDG_RUNTIME_DIR={})", *v, std_dir));
    } else if (!st->is_dir) {
      add(sec, id, Status::fail, fmt::format("XDG_RUNTIME_DIR={} is not a directory", *v),
          fmt::format("export XDG_RUNTIME_DIR={} (an existing 0700 directory you own)", std_dir));
    } else if (st->uid != uid) {
      add(sec, id, Status::fail,
          fmt::format("XDG_RUNTIME_DIR={} is owned by uid {}, not by you (uid {})", *v, st->uid, uid),
          fmt::format("sudo chown {} {} (or export XDG_RUNTIME_DIR={})", uid, *v, std_dir));
    } else if ((st->mode & 0777) != 0700) {
      add(sec, id, Status::fail,
          fmt::format("XDG_RUNTIME_DIR={} has mode {:04o}; it must be 0700 (private to you)", *v, st->mode & 07777),
          fmt::format("chmod 0700 {}", *v));
    } else {
      add(sec, id, Status::ok, fmt::format("XDG_RUNTIME_DIR={} (mode 0700, yours)", *v));
    }
  }

  // ---- Result ----------------------------------------------------------------------------------

  void result_section() {
    const auto& devs = r_.vulkan.devices;
    std::optional<size_t> cpu, gpu;
    for (size_t i = 0; i < devs.size(); ++i) {
      if (!device_usable(devs[i])) continue;
      if (is_cpu_device(devs[i])) {
        if (!cpu) cpu = i;
      } else if (!gpu) {
        gpu = i;
      }
    }
    r_.usable_device = gpu ? gpu : cpu;
    if (gpu) {
      add("Result", "result", Status::ok, fmt::format("rocky can use device {}: {}", *gpu, devs[*gpu].name));
    } else if (cpu) {
      add("Result", "result", Status::warn,
          fmt::format("rocky can use only a CPU rasterizer: device {}: {} (slow)", *cpu, devs[*cpu].name),
          std::string(known_issue("cpu-rasterizer").fix));
    } else {
      add("Result", "result", Status::fail, "no Vulkan device rocky can use", "fix the ✘ items above, in order");
    }
  }
};

}  // namespace

std::string_view status_symbol(Status s) {
  switch (s) {
    case Status::ok:
    case Status::info: return "✔";
    case Status::warn: return "!";
    case Status::fail: return "✘";
  }
  return "?";
}

std::string_view status_name(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::info: return "info";
    case Status::warn: return "warn";
    case Status::fail: return "fail";
  }
  return "?";
}

const Check* Report::find(std::string_view id) const {
  for (const auto& c : checks) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

bool device_usable(const VulkanDevice& d) {
  return d.api_version >= (1u << 22 | 1u << 12) && d.has_compute_queue &&
         !(d.has_driver_props && known_crashing_driver(d.driver_name, d.driver_info));
}

Report diagnose(const Probe& probe) {
  Report r;
  Doctor(probe, r).run();
  return r;
}

std::string render_text(const Report& r) {
  std::string out = "rocky doctor\n";
  std::vector<std::string> sections;
  for (const auto& c : r.checks) {
    if (std::find(sections.begin(), sections.end(), c.section) == sections.end()) sections.push_back(c.section);
  }
  for (const auto& s : sections) {
    out += fmt::format("\n{}\n", s);
    for (const auto& c : r.checks) {
      if (c.section != s) continue;
      out += fmt::format("  {} {}\n", status_symbol(c.status), c.title);
      if (!c.fix.empty() && c.status != Status::ok) out += fmt::format("      fix: {}\n", c.fix);
      if (!c.source.empty()) out += fmt::format("      source: {}\n", c.source);
    }
  }
  return out;
}

nlohmann::json to_json(const Report& r) {
  nlohmann::json j;
  j["exit_code"] = r.exit_code();
  j["soc"] = r.soc.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.soc);
  j["usable_device"] =
      r.usable_device ? nlohmann::json(r.vulkan.devices[*r.usable_device].name) : nlohmann::json(nullptr);
  auto& checks = j["checks"] = nlohmann::json::array();
  for (const auto& c : r.checks) {
    checks.push_back({{"id", c.id},
                      {"section", c.section},
                      {"status", status_name(c.status)},
                      {"title", c.title},
                      {"fix", c.fix},
                      {"source", c.source}});
  }
  auto& devs = j["devices"] = nlohmann::json::array();
  for (const auto& d : r.vulkan.devices) {
    devs.push_back({{"name", d.name},
                    {"type", d.type},
                    {"api_version", api_string(d.api_version)},
                    {"driver_name", d.driver_name},
                    {"driver_info", d.driver_info},
                    {"conformance", d.conformance},
                    {"shader_float16", d.shader_float16},
                    {"integer_dot", d.integer_dot},
                    {"integer_dot_accelerated", d.integer_dot_accelerated},
                    {"usable", device_usable(d)}});
  }
  auto& gpus = j["gpus"] = nlohmann::json::array();
  for (const auto& g : r.gpus) {
    gpus.push_back({{"name", g.name},
                    {"driver", g.driver},
                    {"compatible", g.compatible},
                    {"mali_arch", g.mali_arch},
                    {"display_only", g.display_only}});
  }
  return j;
}

}  // namespace rocky::doctor
