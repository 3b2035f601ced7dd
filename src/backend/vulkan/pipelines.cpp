#include "backend/vulkan/pipelines.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "backend/vulkan/push_constants.hpp"
#include "backend/vulkan/shader_table.hpp"
#include "core/error.hpp"

namespace rocky::vulkan {

const EmbeddedShader& find_shader(std::string_view name) {
  for (size_t i = 0; i < k_embedded_shader_count; ++i)
    if (name == k_embedded_shaders[i].name) return k_embedded_shaders[i];
  fail("no embedded shader named '{}'", name);
}

std::vector<uint32_t> reflect_bindings(const uint32_t* w, size_t n) {
  constexpr uint32_t k_op_decorate = 71, k_dec_binding = 33, k_dec_set = 34;
  if (n < 5 || w[0] != 0x07230203u) fail("SPIR-V: bad magic");
  std::vector<uint32_t> out;
  for (size_t i = 5; i < n;) {
    uint32_t count = w[i] >> 16, op = w[i] & 0xFFFFu;
    if (count == 0 || i + count > n) fail("SPIR-V: malformed instruction at word {}", i);
    if (op == k_op_decorate && count >= 4) {
      if (w[i + 2] == k_dec_binding) out.push_back(w[i + 3]);
      if (w[i + 2] == k_dec_set && w[i + 3] != 0) fail("SPIR-V: descriptor set {} used (only set 0 is)", w[i + 3]);
    }
    i += count;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

std::string cache_file(const DeviceInfo& info, VkPhysicalDevice pd, const std::string& cache_dir) {
  if (cache_dir.empty()) return "";
  const std::filesystem::path dir = cache_dir;
  VkPhysicalDeviceProperties p{};
  vkGetPhysicalDeviceProperties(pd, &p);
  std::string id;
  for (uint8_t b : p.pipelineCacheUUID) id += fmt::format("{:02x}", b);
  (void)info;
  return (dir / "rocky" / fmt::format("pipelines-{:04x}-{:04x}-{}.bin", p.vendorID, p.deviceID, id)).string();
}

}  // namespace

Pipelines::Pipelines(Device& dev, bool persist, const std::string& cache_dir) : dev_(dev) {
  std::vector<char> data;
  if (persist) {
    path_ = cache_file(dev.info(), dev.physical(), cache_dir);
    // The cache is optional: a path that is a directory (or any other non-file) or a file that cannot
    // be read is said once and the run goes on without persisting.
    std::error_code ec;
    if (!path_.empty() && std::filesystem::exists(path_, ec)) {
      std::string why;
      if (!std::filesystem::is_regular_file(path_, ec)) {
        why = std::filesystem::is_directory(path_, ec) ? "it is a directory" : "it is not a regular file";
      } else {
        try {
          std::ifstream f(path_, std::ios::binary);
          if (!f) {
            why = fmt::format("cannot open it: {}", std::strerror(errno));
          } else {
            f.exceptions(std::ios::badbit);
            data.assign(std::istreambuf_iterator<char>(f), {});
          }
        } catch (const std::exception& e) {
          why = fmt::format("cannot read it: {}", e.what());
          data.clear();
        }
      }
      if (!why.empty()) {
        fmt::print(stderr, "rocky: warning: pipeline cache {}: {}; running without a pipeline cache\n", path_, why);
        path_.clear();
      }
    }
  }
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  ci.initialDataSize = data.size();
  ci.pInitialData = data.empty() ? nullptr : data.data();
  if (vkCreatePipelineCache(dev.handle(), &ci, nullptr, &vk_cache_) != VK_SUCCESS) {
    ci.initialDataSize = 0;  // a stale or corrupt file: start empty
    ci.pInitialData = nullptr;
    vk_check(vkCreatePipelineCache(dev.handle(), &ci, nullptr, &vk_cache_), "vkCreatePipelineCache");
  }
}

Pipelines::~Pipelines() {
  VkDevice d = dev_.handle();
  if (!path_.empty()) {
    size_t n = 0;
    if (vkGetPipelineCacheData(d, vk_cache_, &n, nullptr) == VK_SUCCESS && n > 0) {
      std::vector<char> data(n);
      if (vkGetPipelineCacheData(d, vk_cache_, &n, data.data()) == VK_SUCCESS) {
        // A temporary name unique to this process (mkstemp), renamed over the cache at once: two
        // processes exiting together each replace the whole file, never interleave their bytes.
        std::error_code ec;
        std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
        std::string tmp = fmt::format("{}.{}.XXXXXX", path_, static_cast<long>(getpid()));
        const int fd = mkstemp(tmp.data());
        if (fd >= 0) {
          size_t done = 0;
          while (done < n) {
            const ssize_t w = ::write(fd, data.data() + done, n - done);
            if (w <= 0) break;
            done += static_cast<size_t>(w);
          }
          const bool ok = ::close(fd) == 0 && done == n;
          if (ok) std::filesystem::rename(tmp, path_, ec);
          if (!ok || ec) std::filesystem::remove(tmp, ec);
        }
      }
    }
  }
  for (auto& [key, p] : cache_) {
    vkDestroyPipeline(d, p->pipeline, nullptr);
    vkDestroyPipelineLayout(d, p->layout, nullptr);
    vkDestroyDescriptorSetLayout(d, p->set_layout, nullptr);
  }
  vkDestroyPipelineCache(d, vk_cache_, nullptr);
}

namespace {
uint64_t spec_hash(std::string_view shader, const std::vector<SpecConst>& spec) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 1099511628211ull;
    }
  };
  for (char c : shader) mix(static_cast<unsigned char>(c));
  for (const SpecConst& s : spec) mix((uint64_t{s.id} << 32) | s.value);
  return h;
}
}  // namespace

const Pipeline& Pipelines::get(std::string_view shader, std::vector<SpecConst> spec) {
  std::lock_guard<std::mutex> lock(mu_);  // contexts of one backend record from several threads
  const uint64_t h = spec_hash(shader, spec);
  if (auto f = fast_.find(h);
      f != fast_.end() && f->second.shader == shader && f->second.spec.size() == spec.size() &&
      std::equal(spec.begin(), spec.end(), f->second.spec.begin(),
                 [](const SpecConst& a, const SpecConst& b) { return a.id == b.id && a.value == b.value; })) {
    return *f->second.p;
  }
  const Pipeline& p = get_slow(shader, spec);
  fast_[h] = FastEntry{std::string(shader), std::move(spec), &p};
  return p;
}

const Pipeline& Pipelines::get_slow(std::string_view shader, std::vector<SpecConst> spec) {
  std::sort(spec.begin(), spec.end(), [](const SpecConst& a, const SpecConst& b) { return a.id < b.id; });
  std::vector<std::pair<uint32_t, uint32_t>> key_spec;
  uint32_t wg = 0;
  for (auto& s : spec) {
    key_spec.emplace_back(s.id, s.value);
    if (s.id == ROCKY_SC_WG) wg = s.value;
  }
  auto key = std::make_pair(std::string(shader), key_spec);
  if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  if (wg == 0 || wg > dev_.info().max_workgroup_invocations || wg > dev_.info().max_workgroup_size[0]) {
    fail("shader {}: workgroup size {} outside the device's limit {}", shader, wg,
         std::min(dev_.info().max_workgroup_invocations, dev_.info().max_workgroup_size[0]));
  }

  const EmbeddedShader& es = find_shader(shader);
  std::vector<uint32_t> words(es.size / 4);
  std::memcpy(words.data(), es.code, words.size() * 4);
  std::vector<uint32_t> bindings = reflect_bindings(words.data(), words.size());

  auto p = std::make_unique<Pipeline>();
  p->shader = std::string(shader);
  p->workgroup = wg;
  p->n_bindings = bindings.empty() ? 0 : bindings.back() + 1;
  p->push_bytes = std::min(abi::k_max_push_constant_bytes, dev_.info().max_push_constants);
  VkDevice d = dev_.handle();

  std::vector<VkDescriptorSetLayoutBinding> lb;
  for (uint32_t b : bindings) {
    VkDescriptorSetLayoutBinding x{};
    x.binding = b;
    x.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    x.descriptorCount = 1;
    x.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    lb.push_back(x);
  }
  VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  li.bindingCount = static_cast<uint32_t>(lb.size());
  li.pBindings = lb.data();
  vk_check(vkCreateDescriptorSetLayout(d, &li, nullptr, &p->set_layout), "vkCreateDescriptorSetLayout");
  VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, p->push_bytes};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &p->set_layout;
  pli.pushConstantRangeCount = 1;
  pli.pPushConstantRanges = &pr;
  vk_check(vkCreatePipelineLayout(d, &pli, nullptr, &p->layout), "vkCreatePipelineLayout");

  VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = words.size() * 4;
  mi.pCode = words.data();
  VkShaderModule module;
  vk_check(vkCreateShaderModule(d, &mi, nullptr, &module), "vkCreateShaderModule");

  std::vector<VkSpecializationMapEntry> entries;
  std::vector<uint32_t> values;
  for (size_t i = 0; i < spec.size(); ++i) {
    entries.push_back({spec[i].id, static_cast<uint32_t>(i * 4), 4});
    values.push_back(spec[i].value);
  }
  VkSpecializationInfo si{};
  si.mapEntryCount = static_cast<uint32_t>(entries.size());
  si.pMapEntries = entries.data();
  si.dataSize = values.size() * 4;
  si.pData = values.data();
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = &si;
  ci.layout = p->layout;
  if (capture_stats_) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;  // --pipeline-stats
  const auto t0 = std::chrono::steady_clock::now();
  VkResult r = vkCreateComputePipelines(d, vk_cache_, 1, &ci, nullptr, &p->pipeline);
  create_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  vkDestroyShaderModule(d, module, nullptr);
  vk_check(r, "vkCreateComputePipelines");
  return *cache_.emplace(std::move(key), std::move(p)).first->second;
}

}  // namespace rocky::vulkan
