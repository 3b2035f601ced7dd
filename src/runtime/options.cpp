// Environment reader (see options.hpp).
#include "runtime/options.hpp"

#include <cstdlib>
#include <filesystem>

namespace rocky::runtime {

namespace {
std::string var(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}
}  // namespace

EnvOptions read_env() {
  EnvOptions e;
  e.lab.matmul = var("ROCKY_MATMUL");
  e.lab.matmul_tile = var("ROCKY_MATMUL_TILE");
  e.lab.tune = var("ROCKY_TUNE");
  e.lab.attn = var("ROCKY_ATTN");
  e.lab.attn_tile = var("ROCKY_ATTN_TILE");
  e.lab.attn_split = var("ROCKY_ATTN_SPLIT");
  e.lab.attn_fa_grid = var("ROCKY_ATTN_FA_GRID");
  e.lab.fuse_epilogue = var("ROCKY_FUSE_EPILOGUE");
  e.lab.mmv_shape = var("ROCKY_MMV_SHAPE");
  e.lab.decode_replay = var("ROCKY_DECODE_REPLAY");
  e.lab.fuse_decode = var("ROCKY_FUSE_DECODE");
  e.lab.fold_norm = var("ROCKY_FOLD_NORM");
  e.lab.delta_chunk = var("ROCKY_DELTA_CHUNK");
  e.lab.mmv_cols = var("ROCKY_MMV_COLS");
  e.lab.mmv_col_split = var("ROCKY_MMV_COL_SPLIT");
  e.lab.mmv_q8 = var("ROCKY_MMV_Q8");
  e.lab.mmv_cols_shape = var("ROCKY_MMV_COLS_SHAPE");
  e.lab.device_memory_limit = var("ROCKY_DEVICE_MEMORY_LIMIT");
  e.lab.vulkan_timeout_s = var("ROCKY_VULKAN_TIMEOUT_S");
  e.lab.pipeline_stats = var("ROCKY_PIPELINE_STATS");
  e.vulkan_loader = var("ROCKY_VULKAN_LOADER");
  if (const std::string x = var("XDG_CACHE_HOME"); !x.empty()) {
    e.cache_dir = x;
  } else if (const std::string h = var("HOME"); !h.empty()) {
    e.cache_dir = (std::filesystem::path(h) / ".cache").string();
  }
  e.xdg_runtime_dir = var("XDG_RUNTIME_DIR");
  return e;
}

std::map<std::string, std::string> overrides_in_effect(const EnvOptions& e) {
  const std::pair<const char*, const std::string*> vars[] = {{"ROCKY_MATMUL", &e.lab.matmul},
                                                             {"ROCKY_MATMUL_TILE", &e.lab.matmul_tile},
                                                             {"ROCKY_TUNE", &e.lab.tune},
                                                             {"ROCKY_ATTN", &e.lab.attn},
                                                             {"ROCKY_ATTN_TILE", &e.lab.attn_tile},
                                                             {"ROCKY_ATTN_SPLIT", &e.lab.attn_split},
                                                             {"ROCKY_ATTN_FA_GRID", &e.lab.attn_fa_grid},
                                                             {"ROCKY_FUSE_EPILOGUE", &e.lab.fuse_epilogue},
                                                             {"ROCKY_MMV_SHAPE", &e.lab.mmv_shape},
                                                             {"ROCKY_DECODE_REPLAY", &e.lab.decode_replay},
                                                             {"ROCKY_FUSE_DECODE", &e.lab.fuse_decode},
                                                             {"ROCKY_FOLD_NORM", &e.lab.fold_norm},
                                                             {"ROCKY_DELTA_CHUNK", &e.lab.delta_chunk},
                                                             {"ROCKY_MMV_COLS", &e.lab.mmv_cols},
                                                             {"ROCKY_MMV_COL_SPLIT", &e.lab.mmv_col_split},
                                                             {"ROCKY_MMV_Q8", &e.lab.mmv_q8},
                                                             {"ROCKY_MMV_COLS_SHAPE", &e.lab.mmv_cols_shape},
                                                             {"ROCKY_DEVICE_MEMORY_LIMIT", &e.lab.device_memory_limit},
                                                             {"ROCKY_VULKAN_TIMEOUT_S", &e.lab.vulkan_timeout_s},
                                                             {"ROCKY_PIPELINE_STATS", &e.lab.pipeline_stats},
                                                             {"ROCKY_VULKAN_LOADER", &e.vulkan_loader}};
  std::map<std::string, std::string> set;
  for (const auto& [name, value] : vars)
    if (!value->empty()) set.emplace(name, *value);
  return set;
}

void apply_env(const EnvOptions& e, vulkan::VulkanOptions& o) {
  o.lab = e.lab;
  o.cache_dir = e.cache_dir;
  o.loader = e.vulkan_loader;
  o.xdg_runtime_dir = e.xdg_runtime_dir;
  o.no_profile = e.no_profile;
}

vulkan::InstanceOptions instance_options(const EnvOptions& e) {
  vulkan::InstanceOptions io;
  io.loader = e.vulkan_loader;
  io.xdg_runtime_dir = e.xdg_runtime_dir;
  return io;
}

uint64_t device_memory_limit_from_env() { return vulkan::parse_device_memory_limit(var("ROCKY_DEVICE_MEMORY_LIMIT")); }

}  // namespace rocky::runtime
