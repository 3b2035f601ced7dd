// `rocky doctor` end to end: runs the built binary on this machine (Mesa lavapipe, no GPU) with
// XDG_RUNTIME_DIR set (as CTest sets it) and unset, as JSON, and on a --sysroot fixture tree.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "fixtures.hpp"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Outcome {
  int rc = -1;
  std::string out;  // stdout only
};

// Runs `<env_prefix> rocky <args>` through the shell; stderr goes to /dev/null (lavapipe prints
// loader noise there when XDG_RUNTIME_DIR is unset).
Outcome rocky(const std::string& env_prefix, const std::string& args) {
  std::string cmd = env_prefix + " '" ROCKY_BINARY_DIR "/rocky' " + args + " 2>/dev/null";
  Outcome r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A private 0700 runtime directory, in case the test runs outside CTest.
std::string runtime_dir() {
  std::string d = rocky::test::scratch_dir("doctor-cli-xdg");
  std::filesystem::permissions(d, std::filesystem::perms::owner_all);
  return d;
}

TEST(DoctorCli, ExitsZeroAndNamesTheCpuRasterizer) {
  Outcome r = rocky("env XDG_RUNTIME_DIR='" + runtime_dir() + "'", "doctor");
  SCOPED_TRACE(r.out);
  EXPECT_EQ(r.rc, 0);
  EXPECT_THAT(r.out, HasSubstr("✔ Vulkan loader libvulkan.so.1"));
  EXPECT_THAT(r.out, HasSubstr("llvmpipe"));
  EXPECT_THAT(r.out, HasSubstr("  ! CPU rasterizer: rocky runs on it but slowly"));
  EXPECT_THAT(r.out, HasSubstr("      fix: install the Vulkan driver for your GPU"));
  EXPECT_THAT(r.out, HasSubstr("! rocky can use only a CPU rasterizer: device"));
  EXPECT_THAT(r.out, HasSubstr("✔ XDG_RUNTIME_DIR="));
  EXPECT_THAT(r.out, Not(HasSubstr("XDG_RUNTIME_DIR is not set")));
}

TEST(DoctorCli, ExplainsTheFixWhenXdgRuntimeDirIsUnset) {
  Outcome r = rocky("env -u XDG_RUNTIME_DIR", "doctor");
  SCOPED_TRACE(r.out);
  EXPECT_EQ(r.rc, 0);  // lavapipe still works; the exit code follows the usable devices
  EXPECT_THAT(r.out, HasSubstr("  ✘ XDG_RUNTIME_DIR is not set (panvk fails without it"));
  EXPECT_THAT(r.out, HasSubstr("      fix: export XDG_RUNTIME_DIR=/run/user/" + std::to_string(::getuid())));
}

TEST(DoctorCli, JsonOutput) {
  Outcome r = rocky("env XDG_RUNTIME_DIR='" + runtime_dir() + "'", "doctor --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["exit_code"], 0);
  ASSERT_TRUE(j["usable_device"].is_string());
  EXPECT_THAT(j["usable_device"].get<std::string>(), HasSubstr("llvmpipe"));
  bool cpu_warning = false;
  for (const auto& c : j["checks"]) {
    if (c["id"].get<std::string>().rfind("issue.cpu-rasterizer.", 0) == 0) {
      cpu_warning = true;
      EXPECT_EQ(c["status"], "warn");
      EXPECT_FALSE(c["fix"].get<std::string>().empty());
      EXPECT_FALSE(c["source"].get<std::string>().empty());
    }
  }
  EXPECT_TRUE(cpu_warning);
}

TEST(DoctorCli, SysrootRedirectsTheFileProbes) {
  rocky::test::Tree t("cli_kbase");
  rocky::test::rk3588_kbase(t);
  Outcome r = rocky("env XDG_RUNTIME_DIR=/run/user/1000", "doctor --sysroot '" + t.root() + "'");
  SCOPED_TRACE(r.out);
  EXPECT_EQ(r.rc, 0);  // the loader and instance stay real: lavapipe is usable
  EXPECT_THAT(r.out,
              HasSubstr("✘ fb000000.gpu (arm,mali-bifrost): RK3588 Mali-G610 MC4 (GPU id 0xa867), kernel driver mali"));
  EXPECT_THAT(r.out, HasSubstr("fix: boot a kernel with panthor"));
  EXPECT_THAT(r.out, HasSubstr("kernel 5.10.160-rockchip"));
  EXPECT_THAT(r.out, HasSubstr("panfrost_icd.aarch64.json"));
  EXPECT_THAT(r.out, HasSubstr("llvmpipe"));
}

TEST(DoctorCli, BadSysrootIsAUsageError) {
  Outcome r = rocky("", "doctor --sysroot /no/such/dir");
  EXPECT_EQ(r.rc, 2);
}

}  // namespace
