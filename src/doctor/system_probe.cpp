// SystemProbe: file, environment and library probes of the real system (optionally under a sysroot).
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "doctor/probe.hpp"

namespace rocky::doctor {

namespace fs = std::filesystem;

SystemProbe::SystemProbe(std::string sysroot) : sysroot_(std::move(sysroot)) {
  while (sysroot_.size() > 1 && sysroot_.back() == '/') sysroot_.pop_back();
}

std::string SystemProbe::host_path(const std::string& path) const {
  if (sysroot_.empty()) return path;
  if (!path.empty() && path.front() == '/') return sysroot_ + path;
  return sysroot_ + "/" + path;
}

std::optional<std::string> SystemProbe::read_file(const std::string& path) const {
  std::ifstream f(host_path(path), std::ios::binary);
  if (!f) return std::nullopt;
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return std::nullopt;
  return s;
}

std::vector<std::string> SystemProbe::list_dir(const std::string& path) const {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(host_path(path), ec);
  if (ec) return names;
  for (const auto& e : it) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<std::string> SystemProbe::read_link(const std::string& path) const {
  std::error_code ec;
  fs::path target = fs::read_symlink(host_path(path), ec);
  if (ec) return std::nullopt;
  return target.string();
}

std::optional<FileStat> SystemProbe::stat(const std::string& path) const {
  struct ::stat st {};
  if (::stat(host_path(path).c_str(), &st) != 0) return std::nullopt;
  FileStat r;
  r.is_dir = S_ISDIR(st.st_mode);
  r.mode = static_cast<uint32_t>(st.st_mode & 07777);
  r.uid = st.st_uid;
  r.gid = st.st_gid;
  return r;
}

bool SystemProbe::can_read_write(const std::string& path) const {
  return ::access(host_path(path).c_str(), R_OK | W_OK) == 0;
}

std::optional<std::string> SystemProbe::env(const std::string& name) const {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

uint32_t SystemProbe::uid() const { return static_cast<uint32_t>(::getuid()); }

std::string SystemProbe::kernel_release() const {
  if (sysroot_.empty()) {
    struct utsname u {};
    if (::uname(&u) != 0) return {};
    return u.release;
  }
  // /proc/version: "Linux version 6.10.0-rockchip (builder@host) (gcc ...) #1 SMP ..."
  auto text = read_file("/proc/version");
  if (!text) return {};
  std::istringstream in(*text);
  std::string linux_word, version_word, release;
  in >> linux_word >> version_word >> release;
  if (linux_word != "Linux" || version_word != "version") return {};
  return release;
}

LibraryLoad SystemProbe::load_library(const std::string& path) const {
  LibraryLoad r;
  if (sysroot_.empty()) {
    r.resolved = path;
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = ::dlerror();
      r.error = e ? e : "dlopen failed";
      return r;
    }
    // ICDs are not unloaded: some register atexit handlers or start threads on load.
    r.ok = true;
    return r;
  }
  // A sysroot's libraries may be for another architecture: check the file exists instead.
  std::vector<std::string> candidates;
  if (path.find('/') != std::string::npos) {
    candidates.push_back(path);
  } else {
    std::vector<std::string> dirs = {"/lib", "/usr/lib", "/usr/local/lib", "/lib64", "/usr/lib64"};
    for (const char* base : {"/lib", "/usr/lib"}) {
      for (const auto& n : list_dir(base)) {
        if (n.find("-linux-") != std::string::npos) dirs.push_back(std::string(base) + "/" + n);
      }
    }
    for (const auto& d : dirs) candidates.push_back(d + "/" + path);
  }
  for (const auto& c : candidates) {
    std::error_code ec;
    if (fs::exists(host_path(c), ec)) {
      r.ok = true;
      r.file_only = true;
      r.resolved = c;
      return r;
    }
  }
  r.resolved = path;
  r.file_only = true;
  r.error = "not found under " + sysroot_;
  return r;
}

VulkanFacts SystemProbe::vulkan() const { return probe_vulkan(); }

}  // namespace rocky::doctor
