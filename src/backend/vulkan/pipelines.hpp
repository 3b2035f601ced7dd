// Compute pipelines: created lazily on first use, cached by (shader, specialization constants),
// backed by a VkPipelineCache persisted under CACHE_DIR/rocky (the program passes $XDG_CACHE_HOME,
// else ~/.cache: runtime::read_env).
//
// Descriptor layouts come from the SPIR-V itself (reflection of the Binding decorations: every
// binding of set 0 is a storage buffer), so host code never counts bindings by hand. The push
// constant range is the ABI maximum (abi::k_max_push_constant_bytes, clamped to the device limit).
#pragma once

#include "backend/vulkan/vk.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/vulkan/device.hpp"

namespace rocky::vulkan {

// One named specialization constant: id = a ROCKY_SC_* of shaders/abi.h.
struct SpecConst {
  uint32_t id;
  uint32_t value;
};

struct Pipeline {
  std::string shader;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  uint32_t n_bindings = 0;  // storage buffers 0..n_bindings-1 of set 0
  uint32_t push_bytes = 0;  // push-constant range size
  uint32_t workgroup = 1;   // local size x (spec constant ROCKY_SC_WG)
};

// Binding numbers of set 0 in a SPIR-V module (rocky::Error on a malformed module).
std::vector<uint32_t> reflect_bindings(const uint32_t* words, size_t n_words);

class Pipelines {
 public:
  // persist: load/save the VkPipelineCache file under cache_dir/rocky (tests may turn it off; an
  // empty cache_dir persists nothing).
  Pipelines(Device& dev, bool persist, const std::string& cache_dir = {});
  ~Pipelines();
  Pipelines(const Pipelines&) = delete;
  Pipelines& operator=(const Pipelines&) = delete;

  // The pipeline for `shader` with `spec` (must set ROCKY_SC_WG). Created on first use.
  const Pipeline& get(std::string_view shader, std::vector<SpecConst> spec);
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return cache_.size();
  }
  // Wall time spent in vkCreateComputePipelines so far (ms; pipelines are created on first
  // use, so a server's first request of each shape pays it).
  double create_ms() const {
    std::lock_guard<std::mutex> lock(mu_);
    return create_ms_;
  }
  // Where the VkPipelineCache lives ("" when not persisted).
  const std::string& cache_path() const { return path_; }
  // Create later pipelines with VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR (only when the
  // device enabled VK_KHR_pipeline_executable_properties; ignored otherwise). See pipeline_stats.hpp.
  void set_capture_statistics(bool on) { capture_stats_ = on && dev_.info().pipeline_stats; }
  bool capture_statistics() const { return capture_stats_; }
  // Every pipeline created so far with its specialization constants (for statistics).
  std::vector<std::pair<std::vector<std::pair<uint32_t, uint32_t>>, const Pipeline*>> all() const {
    std::vector<std::pair<std::vector<std::pair<uint32_t, uint32_t>>, const Pipeline*>> v;
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, p] : cache_) v.emplace_back(k.second, p.get());
    return v;
  }
  Device& device() const { return dev_; }

 private:
  const Pipeline& get_slow(std::string_view shader, std::vector<SpecConst> spec);
  Device& dev_;
  mutable std::mutex mu_;  // cache_, fast_ (get() is called from every context's recording thread)
  VkPipelineCache vk_cache_ = VK_NULL_HANDLE;
  std::string path_;
  bool capture_stats_ = false;
  double create_ms_ = 0;  // guarded by mu_
  std::map<std::pair<std::string, std::vector<std::pair<uint32_t, uint32_t>>>, std::unique_ptr<Pipeline>> cache_;
  // Per-dispatch lookup without allocation: a hash of (shader, spec as the caller ordered it) →
  // the pipeline, verified against the stored key on a hit (collisions fall back to cache_).
  struct FastEntry {
    std::string shader;
    std::vector<SpecConst> spec;  // caller's order
    const Pipeline* p = nullptr;
  };
  std::unordered_map<uint64_t, FastEntry> fast_;
};

}  // namespace rocky::vulkan
