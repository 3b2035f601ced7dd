// The lab overrides of the Vulkan backend (tuning experiments, lab scripts), as the program's
// boundary read them (runtime::read_env, src/runtime/options.hpp: the ROCKY_* variables). The
// backend parses them itself — a bad value is a rocky::Error naming the variable — and never reads
// the environment. "" = not set. Precedence: a lab override > the option (flag) > the default.
#pragma once

#include <cstdint>
#include <string>

namespace rocky::vulkan {

struct LabOptions {
  std::string matmul;               // ROCKY_MATMUL=auto|mmq|mm|basic (wins over VulkanOptions::matmul)
  std::string matmul_tile;          // ROCKY_MATMUL_TILE=bm,bn,bk,tm,tn (wins over VulkanOptions::tile)
  std::string tune;                 // ROCKY_TUNE=FILE: mul_mmq / mul_mm tiles (src/tune/tile.hpp)
  std::string attn;                 // ROCKY_ATTN=flash|simple (ops/attention.cpp)
  std::string attn_tile;            // ROCKY_ATTN_TILE=WG,BR,TR,TC[,PREFETCH[,KVH[,SG[,ROLL]]]]
  std::string attn_split;           // ROCKY_ATTN_SPLIT=CHUNK key positions per split (0 = off; ops/attention.cpp)
  std::string attn_fa_grid;         // ROCKY_ATTN_FA_GRID=N: split flash keys below N invocations (ops/attention.cpp)
  std::string fuse_epilogue;        // ROCKY_FUSE_EPILOGUE=0|1 (wins over VulkanOptions::fuse_epilogue)
  std::string mmv_shape;            // ROCKY_MMV_SHAPE=WG,ROWS (ops/matmul.cpp, matvec_mmq)
  std::string decode_replay;        // ROCKY_DECODE_REPLAY=0|1 (wins over VulkanOptions::replay_decode)
  std::string fuse_decode;          // ROCKY_FUSE_DECODE=0|1 (wins over VulkanOptions::fuse_decode)
  std::string fold_norm;            // ROCKY_FOLD_NORM=0|1 (wins over VulkanOptions::fold_norm)
  std::string mmv_cols;             // ROCKY_MMV_COLS=1…8 (wins over VulkanOptions::matvec_max_cols)
  std::string delta_chunk;          // ROCKY_DELTA_CHUNK=0|2…128 even (wins over VulkanOptions::delta_chunk)
  std::string mmv_col_split;        // ROCKY_MMV_COL_SPLIT=0|1|2: the multi-column matvec's step (ops/matmul.cpp)
  std::string mmv_q8;               // ROCKY_MMV_Q8=0…64 (wins over VulkanOptions::matvec_q8)
  std::string mmv_cols_shape;       // ROCKY_MMV_COLS_SHAPE=WG,ROWS: matvec_q8 of 2 … 8 columns (ops/matmul.cpp)
  std::string device_memory_limit;  // ROCKY_DEVICE_MEMORY_LIMIT=BYTES (when VulkanOptions::memory_limit is 0)
  std::string vulkan_timeout_s;     // ROCKY_VULKAN_TIMEOUT_S=S (fence waits; default 1800)
  // ROCKY_PIPELINE_STATS=PREFIX: capture the driver's statistics of every pipeline (registers,
  // local memory, …; pipeline_stats.hpp) and print those whose name starts with PREFIX ("all":
  // every one) on stderr when the backend closes. Where the driver has no statistics: nothing.
  std::string pipeline_stats;
};

// ROCKY_DEVICE_MEMORY_LIMIT's value as bytes: 0 for ""; rocky::Error when not a byte count.
uint64_t parse_device_memory_limit(const std::string& v);
// ROCKY_VULKAN_TIMEOUT_S's value in seconds: a positive integer, else (unset, malformed) 1800.
uint64_t parse_timeout_s(const std::string& v);

}  // namespace rocky::vulkan
