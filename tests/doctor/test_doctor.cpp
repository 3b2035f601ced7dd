// rocky doctor: each scenario's verdict AND fix text, on fixture sysroots (see fixtures.hpp), plus
// the known-issue table's integrity and the real Vulkan probe on this machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>

#include "core/driver_quirks.hpp"
#include "core/error.hpp"
#include "doctor/doctor.hpp"
#include "doctor/known_issues.hpp"
#include "fixtures.hpp"

namespace rocky::doctor {
namespace {

using rocky::test::FakeProbe;
using rocky::test::Tree;
using ::testing::HasSubstr;

// The check with this id; fails the test (with the whole report) when it is absent.
const Check& need(const Report& r, const std::string& id) {
  const Check* c = r.find(id);
  if (c == nullptr) {
    ADD_FAILURE() << "no check '" << id << "' in report:\n" << render_text(r);
    static const Check missing{};
    return missing;
  }
  return *c;
}

std::vector<std::string> ids_with_status(const Report& r, Status s) {
  std::vector<std::string> out;
  for (const auto& c : r.checks) {
    if (c.status == s) out.push_back(c.id);
  }
  return out;
}

FakeProbe board(const Tree& t, VulkanFacts facts) {
  FakeProbe p(t.root());
  p.env_vars["XDG_RUNTIME_DIR"] = "/run/user/1000";
  p.facts = std::move(facts);
  return p;
}

TEST(DoctorFixture, Rk3588OnPanthorIsHealthy) {
  Tree t("panthor_ok");
  rocky::test::rk3588_panthor(t);
  auto p = board(t, rocky::test::facts_with({rocky::test::panvk_g610()}));
  Report r = diagnose(p);
  SCOPED_TRACE(render_text(r));

  EXPECT_EQ(r.exit_code(), 0);
  EXPECT_EQ(r.soc, "RK3588");
  EXPECT_TRUE(ids_with_status(r, Status::fail).empty());
  EXPECT_TRUE(ids_with_status(r, Status::warn).empty());
  const Check& gpu = need(r, "gpu.driver.fb000000.gpu");
  EXPECT_EQ(gpu.status, Status::ok);
  EXPECT_THAT(gpu.title, HasSubstr("kernel driver panthor"));
  EXPECT_THAT(gpu.title, HasSubstr("0xa867"));
  EXPECT_EQ(need(r, "gpu.driver.display-subsystem").status, Status::info);
  const Check& fw = need(r, "gpu.firmware");
  EXPECT_EQ(fw.status, Status::ok);
  EXPECT_THAT(fw.title, HasSubstr("/lib/firmware/arm/mali/arch10.8/mali_csffw.bin.zst"));
  EXPECT_EQ(need(r, "gpu.render.renderD128").status, Status::ok);
  EXPECT_THAT(need(r, "gpu.render.renderD128").title, HasSubstr("read/write OK"));
  EXPECT_EQ(need(r, "vulkan.icd.panfrost_icd.aarch64.json").status, Status::ok);
  EXPECT_EQ(need(r, "kernel.version").status, Status::ok);
  EXPECT_THAT(need(r, "kernel.version").title, HasSubstr("6.12.0-rockchip"));
  EXPECT_EQ(need(r, "env.xdg_runtime_dir").status, Status::ok);
  const Check& res = need(r, "result");
  EXPECT_EQ(res.status, Status::ok);
  EXPECT_THAT(res.title, HasSubstr("Mali-G610"));
  for (const auto& c : r.checks) EXPECT_NE(c.id.rfind("issue.", 0), 0u) << c.id;
  // Only one GPU, even though sysfs shows it three ways (drm card1, platform device, of_node).
  EXPECT_EQ(r.gpus.size(), 2u);  // display-subsystem + fb000000.gpu
}

TEST(DoctorFixture, Rk3588OnVendorKbase) {
  Tree t("kbase");
  rocky::test::rk3588_kbase(t);
  auto p = board(t, rocky::test::facts_with({rocky::test::lavapipe()}));
  Report r = diagnose(p);
  SCOPED_TRACE(render_text(r));

  const Check& gpu = need(r, "gpu.driver.fb000000.gpu");
  EXPECT_EQ(gpu.status, Status::fail);
  EXPECT_THAT(gpu.title, HasSubstr("kernel driver mali (Arm's vendor kbase)"));
  const Check& kb = need(r, "issue.kbase-bound.fb000000.gpu");
  EXPECT_EQ(kb.status, Status::fail);
  EXPECT_THAT(kb.title, HasSubstr("vendor kbase driver"));
  EXPECT_THAT(kb.fix, HasSubstr("boot a kernel with panthor (mainline Linux >= 6.10"));
  EXPECT_FALSE(kb.source.empty());
  // The vendor kernel is too old for panthor, and the vendor firmware is not the one panthor loads.
  const Check& k = need(r, "issue.kernel-pre-panthor");
  EXPECT_EQ(k.status, Status::warn);
  EXPECT_THAT(k.title, HasSubstr("5.10.160-rockchip"));
  EXPECT_THAT(k.fix, HasSubstr("Linux >= 6.10"));
  EXPECT_EQ(need(r, "gpu.firmware").status, Status::fail);
  const Check& rn = need(r, "gpu.render");
  EXPECT_EQ(rn.status, Status::fail);
  EXPECT_THAT(rn.title, HasSubstr("/dev/mali0"));
  // panvk is installed; the problem is the kernel driver, so no panvk verdict is given.
  EXPECT_EQ(r.find("issue.panvk-missing.fb000000.gpu"), nullptr);
  EXPECT_EQ(r.find("issue.panvk-no-device.fb000000.gpu"), nullptr);
  // lavapipe still works: exit 0 with a warning.
  EXPECT_EQ(r.exit_code(), 0);
  EXPECT_EQ(need(r, "result").status, Status::warn);
  EXPECT_EQ(need(r, "issue.cpu-rasterizer.0").status, Status::warn);
}

TEST(DoctorFixture, MissingCsfFirmware) {
  Tree t("no_firmware");
  rocky::test::rk3588_panthor(t);
  // Without its firmware panthor fails to probe: no driver bound, no DRM card, no render node.
  t.remove("lib/firmware/arm/mali/arch10.8");
  t.remove("sys/devices/platform/fb000000.gpu/driver");
  t.remove("sys/devices/platform/fb000000.gpu/uevent");
  t.remove("sys/class/drm/card1");
  t.remove("dev/dri/renderD128");
  t.file("lib/firmware/arm/mali/arch10.10/mali_csffw.bin", "fixture: firmware for another GPU\n");
  auto p = board(t, rocky::test::facts_with({rocky::test::lavapipe()}));
  Report r = diagnose(p);
  SCOPED_TRACE(render_text(r));

  const Check& fw = need(r, "gpu.firmware");
  EXPECT_EQ(fw.status, Status::fail);
  EXPECT_THAT(fw.title, HasSubstr("arm/mali/arch10.8/mali_csffw.bin not found"));
  const Check& iss = need(r, "issue.csf-firmware-missing");
  EXPECT_EQ(iss.status, Status::fail);
  EXPECT_THAT(iss.title, HasSubstr("present: arm/mali/arch10.10"));
  EXPECT_THAT(iss.fix, HasSubstr("copy mali_csffw.bin from linux-firmware.git (arm/mali/arch10.8/) to "
                                 "/lib/firmware/arm/mali/arch10.8/"));
  const Check& unbound = need(r, "issue.gpu-unbound.fb000000.gpu");
  EXPECT_EQ(unbound.status, Status::fail);
  EXPECT_THAT(unbound.fix, HasSubstr("sudo modprobe panthor"));
  EXPECT_EQ(need(r, "gpu.render").status, Status::fail);
}

TEST(DoctorFixture, XzAndUsrLibFirmwareCount) {
  Tree t("firmware_xz");
  rocky::test::rk3588_panthor(t);
  t.remove("lib/firmware/arm/mali/arch10.8");
  t.file("usr/lib/firmware/arm/mali/arch10.8/mali_csffw.bin.xz", "fixture\n");
  auto p = board(t, rocky::test::facts_with({rocky::test::panvk_g610()}));
  Report r = diagnose(p);
  const Check& fw = need(r, "gpu.firmware");
  EXPECT_EQ(fw.status, Status::ok);
  EXPECT_THAT(fw.title, HasSubstr("/usr/lib/firmware/arm/mali/arch10.8/mali_csffw.bin.xz"));
}

TEST(DoctorFixture, NoIcdManifest) {
  Tree t("no_icd");
  rocky::test::rk3588_panthor(t);
  t.remove("usr/share/vulkan");
  VulkanFacts f = rocky::test::facts_with({});
  f.instance_ok = false;
  f.instance_error = "vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER (-9)";
  auto p = board(t, f);
  Report r = diagnose(p);
  SCOPED_TRACE(render_text(r));

  const Check& icd = need(r, "vulkan.icd");
  EXPECT_EQ(icd.status, Status::fail);
  EXPECT_THAT(icd.title, HasSubstr("no Vulkan driver (ICD) manifest found in"));
  EXPECT_THAT(icd.title, HasSubstr("/usr/share/vulkan/icd.d"));
  EXPECT_THAT(icd.title, HasSubstr("/etc/vulkan/icd.d"));
  EXPECT_THAT(icd.fix, HasSubstr("sudo apt install mesa-vulkan-drivers"));
  const Check& inst = need(r, "vulkan.instance");
  EXPECT_EQ(inst.status, Status::fail);
  EXPECT_THAT(inst.fix, HasSubstr("VK_LOADER_DEBUG=all"));
  EXPECT_EQ(r.exit_code(), 1);
  const Check& res = need(r, "result");
  EXPECT_EQ(res.status, Status::fail);
  EXPECT_EQ(res.title, "no Vulkan device rocky can use");
}

TEST(DoctorFixture, PanthorWithoutPanvk) {
  Tree t("no_panvk");
  rocky::test::rk3588_panthor(t);
  t.remove("usr/share/vulkan/icd.d/panfrost_icd.aarch64.json");
  t.file("usr/share/vulkan/icd.d/lvp_icd.aarch64.json",
         R"({"file_format_version": "1.0.0", "ICD": {"library_path": "libvulkan_lvp.so", "api_version": "1.3.230"}})");
  t.file("usr/lib/aarch64-linux-gnu/libvulkan_lvp.so", "fixture\n");
  auto p = board(t, rocky::test::facts_with({rocky::test::lavapipe()}));
  Report r = diagnose(p);
  SCOPED_TRACE(render_text(r));
  const Check& lvp = need(r, "vulkan.icd.lvp_icd.aarch64.json");
  EXPECT_EQ(lvp.status, Status::ok);
  EXPECT_THAT(lvp.title, HasSubstr("present at /usr/lib/aarch64-linux-gnu/libvulkan_lvp.so (not loaded: --sysroot)"));
  const Check& m = need(r, "issue.panvk-missing.fb000000.gpu");
  EXPECT_EQ(m.status, Status::fail);
  EXPECT_THAT(m.fix, HasSubstr("-Dvulkan-drivers=panfrost"));
  EXPECT_EQ(r.exit_code(), 0);  // lavapipe
}

TEST(DoctorFixture, IcdLibraryMissingAndBrokenManifest) {
  Tree t("icd_broken");
  rocky::test::rk3588_panthor(t);
  t.remove("usr/lib/aarch64-linux-gnu/libvulkan_panfrost.so");
  t.file("etc/vulkan/icd.d/broken.json", "{ not json");
  auto p = board(t, rocky::test::facts_with({}));
  Report r = diagnose(p);
  SCOPED_TRACE(render_text(r));
  const Check& lib = need(r, "vulkan.icd.panfrost_icd.aarch64.json");
  EXPECT_EQ(lib.status, Status::fail);
  EXPECT_THAT(lib.title, HasSubstr("does not load"));
  EXPECT_THAT(lib.fix,
              HasSubstr("reinstall the package that owns libvulkan_panfrost.so (dpkg -S libvulkan_panfrost.so)"));
  const Check& bad = need(r, "vulkan.icd.broken.json");
  EXPECT_EQ(bad.status, Status::fail);
  EXPECT_THAT(bad.title, HasSubstr("is not valid JSON"));
  EXPECT_THAT(bad.fix, HasSubstr("dpkg -S /etc/vulkan/icd.d/broken.json"));
  EXPECT_EQ(need(r, "vulkan.devices").status, Status::fail);
  EXPECT_EQ(r.exit_code(), 1);
}

TEST(DoctorFixture, VkDriverFilesIsHonoured) {
  Tree t("vk_driver_files");
  rocky::test::rk3588_panthor(t);
  t.file("opt/icd/custom.json",
         R"({"file_format_version": "1.0.0", "ICD": {"library_path": "../lib/libvulkan_panfrost.so"}})");
  t.file("opt/lib/libvulkan_panfrost.so", "fixture\n");
  auto p = board(t, rocky::test::facts_with({rocky::test::panvk_g610()}));
  p.env_vars["VK_DRIVER_FILES"] = "/opt/icd/custom.json:/opt/icd/gone.json";
  p.env_vars["VK_ICD_FILENAMES"] = "/ignored/when/VK_DRIVER_FILES/is/set.json";
  Report r = diagnose(p);
  SCOPED_TRACE(render_text(r));
  EXPECT_EQ(need(r, "vulkan.icd.env").status, Status::info);
  const Check& custom = need(r, "vulkan.icd.custom.json");
  EXPECT_EQ(custom.status, Status::ok);
  EXPECT_THAT(custom.title, HasSubstr("/opt/icd/../lib/libvulkan_panfrost.so"));  // manifest-relative
  // The standard folders are not searched when the variable is set.
  EXPECT_EQ(r.find("vulkan.icd.panfrost_icd.aarch64.json"), nullptr);
  const Check& gone = need(r, "vulkan.icd.env.gone.json");
  EXPECT_EQ(gone.status, Status::fail);
  EXPECT_THAT(gone.fix, HasSubstr("unset VK_DRIVER_FILES or point it at an existing manifest"));

  // VK_ADD_DRIVER_FILES adds to the standard folders instead of replacing them.
  p.env_vars.erase("VK_DRIVER_FILES");
  p.env_vars.erase("VK_ICD_FILENAMES");
  p.env_vars["VK_ADD_DRIVER_FILES"] = "/opt/icd";
  Report r3 = diagnose(p);
  EXPECT_EQ(need(r3, "vulkan.icd.custom.json").status, Status::ok);
  EXPECT_EQ(need(r3, "vulkan.icd.panfrost_icd.aarch64.json").status, Status::ok);
  EXPECT_THAT(need(r3, "vulkan.icd").title, HasSubstr("2 Vulkan driver manifest(s)"));
  p.env_vars.erase("VK_ADD_DRIVER_FILES");

  // VK_ICD_FILENAMES (the older name) alone is honoured too.
  p.env_vars.erase("VK_DRIVER_FILES");
  p.env_vars["VK_ICD_FILENAMES"] = "/opt/icd/custom.json";
  Report r2 = diagnose(p);
  EXPECT_THAT(need(r2, "vulkan.icd.env").title, HasSubstr("VK_ICD_FILENAMES is set"));
  EXPECT_EQ(need(r2, "vulkan.icd.custom.json").status, Status::ok);
}

TEST(DoctorFixture, XdgRuntimeDirUnset) {
  Tree t("xdg_unset");
  rocky::test::rk3588_panthor(t);
  auto p = board(t, rocky::test::facts_with({rocky::test::panvk_g610()}));
  p.env_vars.erase("XDG_RUNTIME_DIR");
  Report r = diagnose(p);
  const Check& x = need(r, "env.xdg_runtime_dir");
  EXPECT_EQ(x.status, Status::fail);
  EXPECT_THAT(x.title, HasSubstr("XDG_RUNTIME_DIR is not set"));
  EXPECT_THAT(x.fix, HasSubstr("export XDG_RUNTIME_DIR=/run/user/" + std::to_string(::getuid())));
  EXPECT_THAT(x.fix, HasSubstr("install -d -m 0700"));
  EXPECT_EQ(r.exit_code(), 0);  // the exit code follows the devices only
}

TEST(DoctorFixture, XdgRuntimeDirMissing) {
  Tree t("xdg_missing");
  rocky::test::rk3588_panthor(t);
  auto p = board(t, rocky::test::facts_with({rocky::test::panvk_g610()}));
  p.env_vars["XDG_RUNTIME_DIR"] = "/run/user/4242";
  Report r = diagnose(p);
  const Check& x = need(r, "env.xdg_runtime_dir");
  EXPECT_EQ(x.status, Status::fail);
  EXPECT_THAT(x.title, HasSubstr("XDG_RUNTIME_DIR=/run/user/4242 does not exist"));
  EXPECT_THAT(x.fix, HasSubstr("create it: install -d -m 0700 /run/user/4242"));
}

TEST(DoctorFixture, XdgRuntimeDirWorldReadable) {
  Tree t("xdg_world");
  rocky::test::rk3588_panthor(t);
  t.dir("run/user/1000", std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                             std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                             std::filesystem::perms::others_exec);
  auto p = board(t, rocky::test::facts_with({rocky::test::panvk_g610()}));
  Report r = diagnose(p);
  const Check& x = need(r, "env.xdg_runtime_dir");
  EXPECT_EQ(x.status, Status::fail);
  EXPECT_THAT(x.title, HasSubstr("has mode 0755; it must be 0700"));
  EXPECT_EQ(x.fix, "chmod 0700 /run/user/1000");
}

TEST(DoctorFixture, RenderNodeNotAccessible) {
  Tree t("render_denied");
  rocky::test::rk3588_panthor(t);
  auto p = board(t, rocky::test::facts_with({rocky::test::panvk_g610()}));
  p.denied.insert("/dev/dri/renderD128");
  // Make the node's group the fixture's "render" group when we may (root); else the gid is shown.
  bool chowned = ::chown((t.root() + "/dev/dri/renderD128").c_str(), static_cast<uid_t>(-1), 992) == 0;
  Report r = diagnose(p);
  const Check& n = need(r, "gpu.render.renderD128");
  EXPECT_EQ(n.status, Status::fail);
  EXPECT_THAT(n.title, HasSubstr("cannot open it read/write"));
  EXPECT_THAT(n.fix, HasSubstr("sudo usermod -aG "));
  EXPECT_THAT(n.fix, HasSubstr(" $USER, then log out and back in"));
  if (chowned) {
    EXPECT_THAT(n.fix, HasSubstr("usermod -aG render $USER"));
  }
  EXPECT_EQ(r.find("gpu.render"), nullptr);  // no "all accessible" summary
}

TEST(DoctorFixture, PreV10MaliNeedsTheBrokenDriverVariable) {
  Tree t("bifrost");
  // An RK3568-class board: Mali-G52 (Bifrost, v7) on panfrost; panvk installed, no panvk device.
  t.file("proc/device-tree/compatible", std::string("vendor,board\0rockchip,rk3568\0", 29));
  t.file("proc/version", "Linux version 6.6.0 (b@h) #1\n");
  t.file("sys/firmware/devicetree/base/gpu@fde60000/compatible",
         std::string("rockchip,rk3568-mali\0arm,mali-bifrost\0", 38));
  t.dir("sys/devices/platform/fde60000.gpu");
  t.link("sys/devices/platform/fde60000.gpu/of_node", "../../../firmware/devicetree/base/gpu@fde60000");
  t.dir("sys/bus/platform/drivers/panfrost");
  t.link("sys/devices/platform/fde60000.gpu/driver", "../../../bus/platform/drivers/panfrost");
  t.link("sys/class/drm/card1/device", "../../../devices/platform/fde60000.gpu");
  t.file("dev/dri/renderD128", "");
  t.dir("run/user/1000");
  t.file("usr/share/vulkan/icd.d/panfrost_icd.aarch64.json",
         R"({"ICD": {"library_path": "/usr/lib/libvulkan_panfrost.so"}})");
  t.file("usr/lib/libvulkan_panfrost.so", "fixture\n");
  auto p = board(t, rocky::test::facts_with({}));
  Report r = diagnose(p);
  SCOPED_TRACE(render_text(r));
  EXPECT_EQ(need(r, "gpu.driver.fde60000.gpu").status, Status::ok);
  EXPECT_EQ(r.find("gpu.firmware"), nullptr);  // no CSF firmware on Bifrost
  const Check& g = need(r, "issue.panvk-pre-v10-gated.fde60000.gpu");
  EXPECT_EQ(g.status, Status::fail);
  EXPECT_THAT(g.title, HasSubstr("Mali arch v7"));
  EXPECT_THAT(g.fix, HasSubstr("export PAN_I_WANT_A_BROKEN_VULKAN_DRIVER=1"));
  EXPECT_THAT(g.source, HasSubstr("docs.mesa3d.org/drivers/panfrost.html"));
  EXPECT_EQ(r.exit_code(), 1);

  // With the variable set, panvk shows the GPU and the doctor warns it is not conformant.
  auto dev = rocky::test::panvk_g610();
  dev.name = "Mali-G52 r1";
  dev.conformance = "0.0.0.0";
  p.env_vars["PAN_I_WANT_A_BROKEN_VULKAN_DRIVER"] = "1";
  p.facts = rocky::test::facts_with({dev});
  Report r2 = diagnose(p);
  EXPECT_EQ(r2.find("issue.panvk-pre-v10-gated.fde60000.gpu"), nullptr);
  EXPECT_EQ(need(r2, "issue.panvk-pre-v10-nonconformant.0").status, Status::warn);
  EXPECT_THAT(need(r2, "vulkan.device.0").title, HasSubstr("not conformant"));
  EXPECT_EQ(r2.exit_code(), 0);
}

TEST(DoctorFixture, PanvkWithoutFp16OrIntDotWarnsFromFeatures) {
  Tree t("panvk_old");
  rocky::test::rk3588_panthor(t);
  auto p = board(t, rocky::test::facts_with({rocky::test::panvk_g610(false, false, "Mesa 24.1.3")}));
  Report r = diagnose(p);
  SCOPED_TRACE(render_text(r));
  const Check& f16 = need(r, "issue.panvk-no-fp16.0");
  EXPECT_EQ(f16.status, Status::warn);
  EXPECT_THAT(f16.title, HasSubstr("rocky falls back to its fp32 kernels"));
  EXPECT_THAT(f16.fix, HasSubstr("upgrade Mesa"));
  const Check& dot = need(r, "issue.panvk-no-int-dot.0");
  EXPECT_EQ(dot.status, Status::warn);
  EXPECT_THAT(dot.fix, HasSubstr("VK_KHR_shader_integer_dot_product"));
  EXPECT_THAT(need(r, "vulkan.device.0").title, HasSubstr("fp16 no, int8 dot no"));
  EXPECT_EQ(r.find("issue.driver-version-unknown.0"), nullptr);  // "Mesa 24.1.3" parses
  EXPECT_EQ(need(r, "result").status, Status::ok);               // usable, just slower
}

// The panvk version rule (../shared/PLATFORMS.md): shaderFloat16 from Mesa 25.1,
// shaderIntegerDotProduct from 25.2; below them a warning naming the version, whatever the device
// reports; at 25.2 none.
TEST(DoctorFixture, PanvkVersionRuleFollowsPlatforms) {
  Tree t("panvk_versions");
  rocky::test::rk3588_panthor(t);
  {
    Report r = diagnose(board(t, rocky::test::facts_with({rocky::test::panvk_g610(true, true, "Mesa 25.0.7")})));
    const Check& c = need(r, "issue.panvk-mesa-old.0");
    EXPECT_EQ(c.status, Status::warn);
    EXPECT_THAT(c.title, HasSubstr("Mesa 25.0, below 25.1 (shaderFloat16) and 25.2 (shaderIntegerDotProduct)"));
    EXPECT_THAT(c.fix, HasSubstr("25.2 or newer"));
    EXPECT_THAT(c.source, HasSubstr("PLATFORMS.md"));
    EXPECT_EQ(r.find("issue.panvk-no-fp16.0"), nullptr);  // what the device reports is judged apart
  }
  {
    Report r = diagnose(board(t, rocky::test::facts_with({rocky::test::panvk_g610(true, false, "Mesa 25.1.5")})));
    EXPECT_THAT(need(r, "issue.panvk-mesa-old.0").title, HasSubstr("Mesa 25.1, below 25.2 (shaderIntegerDotProduct)"));
    EXPECT_THAT(need(r, "issue.panvk-no-int-dot.0").fix, HasSubstr("Mesa 25.2"));
    EXPECT_EQ(r.find("issue.panvk-no-fp16.0"), nullptr);
  }
  for (const char* ok : {"Mesa 25.2.0", "Mesa 26.0.1"}) {
    Report r = diagnose(board(t, rocky::test::facts_with({rocky::test::panvk_g610(true, true, ok)})));
    EXPECT_EQ(r.find("issue.panvk-mesa-old.0"), nullptr) << ok;
    EXPECT_TRUE(ids_with_status(r, Status::warn).empty()) << ok;
  }
  {
    Report r = diagnose(board(t, rocky::test::facts_with({rocky::test::panvk_g610(false, false, "Mesa 24.0.9")})));
    EXPECT_THAT(need(r, "issue.panvk-no-fp16.0").fix, HasSubstr("Mesa 25.1"));
    EXPECT_EQ(need(r, "issue.panvk-mesa-old.0").status, Status::warn);
  }
}

TEST(DoctorFixture, UnknownDriverVersionIsAWarningNotAGuess) {
  Tree t("version_unknown");
  rocky::test::rk3588_panthor(t);
  auto p = board(t, rocky::test::facts_with({rocky::test::panvk_g610(true, true, "git-4f2a9c1")}));
  Report r = diagnose(p);
  const Check& v = need(r, "issue.driver-version-unknown.0");
  EXPECT_EQ(v.status, Status::warn);
  EXPECT_THAT(v.title, HasSubstr("driverInfo \"git-4f2a9c1\""));
  EXPECT_THAT(v.fix, HasSubstr("vulkaninfo --summary"));
  // No feature warnings are invented from the missing version.
  EXPECT_EQ(r.find("issue.panvk-no-fp16.0"), nullptr);
  EXPECT_EQ(r.find("issue.panvk-no-int-dot.0"), nullptr);
}

TEST(DoctorFixture, MissingLoader) {
  Tree t("no_loader");
  rocky::test::rk3588_panthor(t);
  VulkanFacts f;
  f.loader_error = "libvulkan.so.1: cannot open shared object file: No such file or directory";
  auto p = board(t, f);
  Report r = diagnose(p);
  const Check& l = need(r, "vulkan.loader");
  EXPECT_EQ(l.status, Status::fail);
  EXPECT_THAT(l.title, HasSubstr("cannot open shared object file"));
  EXPECT_THAT(l.fix, HasSubstr("sudo apt install libvulkan1"));
  EXPECT_EQ(r.find("vulkan.instance"), nullptr);  // nothing to create it with
  EXPECT_EQ(r.exit_code(), 1);
}

TEST(DoctorFixture, TextAndJsonOutput) {
  Tree t("output");
  rocky::test::rk3588_kbase(t);
  auto p = board(t, rocky::test::facts_with({rocky::test::lavapipe()}));
  Report r = diagnose(p);
  std::string text = render_text(r);
  EXPECT_THAT(text, HasSubstr("  ✘ the GPU is driven by Arm's vendor kbase driver"));
  EXPECT_THAT(text, HasSubstr("      fix: boot a kernel with panthor"));
  EXPECT_THAT(text, HasSubstr("  ! CPU rasterizer"));
  EXPECT_THAT(text, HasSubstr("  ✔ XDG_RUNTIME_DIR=/run/user/1000"));
  auto j = to_json(r);
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["soc"], "RK3588");
  EXPECT_EQ(j["usable_device"], "llvmpipe (LLVM 15.0.6, 256 bits)");
  bool found = false;
  for (const auto& c : j["checks"]) {
    if (c["id"] == "issue.kbase-bound.fb000000.gpu") {
      found = true;
      EXPECT_EQ(c["status"], "fail");
      EXPECT_THAT(c["fix"].get<std::string>(), HasSubstr("panthor"));
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(j["gpus"].size(), 2u);
}

TEST(KnownIssues, EveryRowHasProblemFixAndSource) {
  std::set<std::string_view> ids;
  for (const auto& k : known_issues()) {
    EXPECT_TRUE(ids.insert(k.id).second) << "duplicate id " << k.id;
    EXPECT_FALSE(k.when.empty()) << k.id;
    EXPECT_FALSE(k.problem.empty()) << k.id;
    EXPECT_FALSE(k.fix.empty()) << k.id;
    EXPECT_FALSE(k.source.empty()) << k.id;
  }
  EXPECT_GE(ids.size(), 10u);
  EXPECT_THAT(std::string(known_issue("panvk-pre-v10-gated").fix), HasSubstr("PAN_I_WANT_A_BROKEN_VULKAN_DRIVER"));
  EXPECT_THROW(known_issue("no-such-row"), rocky::Error);
  ASSERT_FALSE(known_socs().empty());
  EXPECT_EQ(known_socs()[0].gpu_id, 0xa867u);
  EXPECT_EQ(known_socs()[0].csf_firmware, "arm/mali/arch10.8/mali_csffw.bin");
}

// Debian 12's lavapipe (Mesa 22.3.6) aborts inside LLVM on f16 shaders on aarch64 hosts only: the
// rule names the Mesa version and the fix, and leaves x86-64, newer Mesa and other drivers alone.
TEST(KnownIssues, LavapipeF16AbortOnAarch64) {
  const auto bad = rocky::known_crashing_driver("llvmpipe", "Mesa 22.3.6 (LLVM 15.0.6)", true);
  ASSERT_TRUE(bad.has_value());
  EXPECT_THAT(*bad, HasSubstr("Mesa 22.3.6"));
  EXPECT_THAT(*bad, HasSubstr("bookworm-backports"));
  EXPECT_TRUE(rocky::known_crashing_driver("llvmpipe", "Mesa 24.2.8-1ubuntu1~24.04.1 (LLVM 19.1.1)", true));
  EXPECT_FALSE(rocky::known_crashing_driver("llvmpipe", "Mesa 22.3.6 (LLVM 15.0.6)", false));
  EXPECT_FALSE(rocky::known_crashing_driver("llvmpipe", "Mesa 25.0.7-2 (LLVM 19.1.7)", true));
  EXPECT_FALSE(rocky::known_crashing_driver("llvmpipe", "Mesa 26.1.0 (LLVM 21.1.2)", true));
  EXPECT_FALSE(rocky::known_crashing_driver("panvk", "Mesa 22.3.6", true));
  EXPECT_FALSE(rocky::known_crashing_driver("llvmpipe", "git-4f2a9c1", true));  // no version: no guess
  const KnownIssue& k = known_issue("lavapipe-arm64-f16");
  EXPECT_EQ(k.severity, Severity::fail);
  EXPECT_THAT(std::string(k.fix), HasSubstr("bookworm-backports"));
  // On this host the doctor flags the fixture's Mesa 22.3.6 lavapipe exactly when it is aarch64.
  Tree t("lavapipe_arm64");
  rocky::test::rk3588_panthor(t);
  Report r = diagnose(board(t, rocky::test::facts_with({rocky::test::lavapipe()})));
  EXPECT_EQ(r.find("issue.lavapipe-arm64-f16.0") != nullptr, rocky::k_host_aarch64) << render_text(r);
  EXPECT_EQ(r.usable_device.has_value(), !rocky::k_host_aarch64);
}

// The real loader on this machine (Mesa lavapipe): the dlopen path finds it and reads the driver
// properties and features through the pNext chains.
TEST(VulkanProbe, FindsLavapipeOnThisMachine) {
  VulkanFacts f = probe_vulkan();
  ASSERT_TRUE(f.loader_loaded) << f.loader_error;
  EXPECT_NE(f.loader_path.find("libvulkan.so"), std::string::npos) << f.loader_path;
  ASSERT_TRUE(f.instance_ok) << f.instance_error;
  EXPECT_GE(f.instance_version, (1u << 22) | (1u << 12));
  const VulkanDevice* lvp = nullptr;
  for (const auto& d : f.devices) {
    if (d.driver_name == "llvmpipe") lvp = &d;
  }
  ASSERT_NE(lvp, nullptr) << "no llvmpipe device (is mesa-vulkan-drivers installed?)";
  EXPECT_TRUE(lvp->is_cpu);
  EXPECT_EQ(lvp->driver_id, 13u);
  EXPECT_EQ(lvp->driver_info.rfind("Mesa ", 0), 0u) << lvp->driver_info;
  EXPECT_TRUE(lvp->features_known);
  EXPECT_TRUE(lvp->shader_float16);  // PLATFORMS.md: lavapipe supports fp16 arithmetic and int dot
  EXPECT_TRUE(lvp->integer_dot);
  EXPECT_TRUE(lvp->has_compute_queue);
  EXPECT_TRUE(device_usable(*lvp));
}

// A machine without the loader: probe_vulkan() reports it instead of failing.
TEST(VulkanProbe, MissingLoaderIsReported) {
  VulkanFacts f = probe_vulkan({"libvulkan-rocky-test-absent.so.1"});
  EXPECT_FALSE(f.loader_loaded);
  EXPECT_THAT(f.loader_error, HasSubstr("libvulkan-rocky-test-absent.so.1"));
  EXPECT_FALSE(f.instance_ok);
  EXPECT_TRUE(f.devices.empty());
}

}  // namespace
}  // namespace rocky::doctor
