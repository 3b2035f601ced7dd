// `rocky devices` and the clear errors when Vulkan is missing: no loader, no driver (ICD).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct Result {
  int code = -1;
  std::string out;  // stdout + stderr
};

Result run_cmd(const std::string& env_and_args) {
  const std::string cmd = env_and_args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

const std::string k_rocky = std::string(ROCKY_BINARY_DIR) + "/rocky";

TEST(VulkanCli, DevicesListsProbedLimits) {
  Result r = run_cmd(k_rocky + " devices");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* field : {"vulkan:0", "driver", "Vulkan API", "type", "fp16", "int8 dot product", "subgroup size",
                            "shared memory", "max workgroup", "maxStorageBufferRange", "memory heap 0"}) {
    EXPECT_NE(r.out.find(field), std::string::npos) << field << "\n" << r.out;
  }
  Result j = run_cmd(k_rocky + " devices --json");
  ASSERT_EQ(j.code, 0) << j.out;
  EXPECT_NE(j.out.find("\"max_storage_buffer_range\""), std::string::npos) << j.out;
}

TEST(VulkanCli, NoLoaderIsAClearError) {
  Result r = run_cmd("ROCKY_VULKAN_LOADER=/nonexistent/libvulkan.so.1 " + k_rocky + " devices");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("Vulkan loader was not found"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--device cpu"), std::string::npos) << r.out;
}

TEST(VulkanCli, NoDriverIsAClearError) {
  Result r = run_cmd("VK_ICD_FILENAMES=/nonexistent/icd.json VK_DRIVER_FILES=/nonexistent/icd.json " + k_rocky + " devices");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("mesa-vulkan-drivers"), std::string::npos) << r.out;
  Result x = run_cmd("env -u XDG_RUNTIME_DIR VK_ICD_FILENAMES=/nonexistent/icd.json VK_DRIVER_FILES=/nonexistent/icd.json " +
              k_rocky + " devices");
  EXPECT_EQ(x.code, 1) << x.out;
  EXPECT_NE(x.out.find("XDG_RUNTIME_DIR"), std::string::npos) << x.out;
}

}  // namespace
