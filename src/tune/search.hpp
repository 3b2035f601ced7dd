// The autotuner's search (`rocky tune`, apps/lab/cmd_tune.cpp), the parts that need no device:
//   shapes      — the matrices a model multiplies (the default: qwen2.5-3b's);
//   candidates  — tiles within a device's limits and the register budget, and their neighbours;
//   choose      — the profile with the least total time from the measured tables;
//   write       — the profile file being written, resumable (TuneRecord).
// Measuring is the tool's: a Vulkan rig (apps/lab/tune_rig.hpp) times each candidate.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "tune/store.hpp"
#include "tune/tile.hpp"

namespace rocky::tune {

// ---- shapes ----

// One weight shape of a model: M rows (output features) × K (inner), `count` matrices of it.
struct Shape {
  DType type = DType::Q4_K;
  uint32_t m = 0, k = 0, count = 1;
  std::string str(uint32_t n) const;  // "q4_K 2048×512×2048" (M × N × K)
};

// qwen2.5-3b q4_K_M's block matrices (36 layers).
std::vector<Shape> default_shapes();

// The shape with the most multiply-adds over the model (count · M · K): the search explores on it.
size_t primary_shape(const std::vector<Shape>& shapes);

// ---- candidates ----

// The device limits a candidate must fit.
struct DeviceLimits {
  uint32_t max_invocations = 0;  // maxComputeWorkGroupInvocations
  uint32_t shared_memory = 0;    // maxComputeSharedMemorySize, bytes
};

// Flash-attention tiles within the limits at `hd` with an f16 cache (the seeds first; quick: fewer;
// full: also 8 keys per invocation, K/V blocks as f16 in shared memory, and the rolled q·k loop
// (roll 1) for the tiles of 4 rows per invocation, which spill unrolled on NVIDIA).
std::vector<FlashTile> attn_candidates(const DeviceLimits& d, uint32_t hd, const std::vector<FlashTile>& seeds,
                                       bool quick);

// A matmul tile with two warps along each side, as every built-in tile.
MatmulTile make_tile(uint32_t bm, uint32_t bn, uint32_t bk, uint32_t tm, uint32_t tn, uint32_t pf, uint32_t v4);
bool same_tile(const MatmulTile& a, const MatmulTile& b);
// Within the device's limits and `budget` accumulators per invocation (mul_mmq's or mul_mm's rules).
bool tile_fits(bool mmq, const MatmulTile& t, const DeviceLimits& d, uint32_t budget);

// The offline Mali model's cost of a matmul tile (rocky tune --offline): the compiler's static cycle
// estimate per multiply-add of one invocation's inner loop, cycles / (TM · TN · BK) (cycles_per_mac),
// times 1.25 when the shader needs more than 32 work registers (half occupancy on Valhall: less
// latency hiding).
double cycles_per_mac(const MatmulTile& t, double cycles);
double modeled_cost_per_mac(const MatmulTile& t, double cycles, int work_regs);

// Every tile within the device's limits and the register budget (two warps along each side; mul_mmq:
// prefetch and vec4 both ways when `vary_flags`, else those of `flags`, the starting tile).
std::vector<MatmulTile> all_tiles(bool mmq, const DeviceLimits& d, uint32_t budget, bool vary_flags,
                                  const MatmulTile& flags);

// The exploration set: the seeds (the starting profile's tiles), then per workgroup size (64, 128,
// 256, 512 invocations) and accumulator level (the budget, half, a quarter) the tile with the
// largest area, BK 64 before 32, TM ≥ TN first — spread over the space rather than its corner.
std::vector<MatmulTile> explore_set(bool mmq, const std::vector<MatmulTile>& all, const std::vector<MatmulTile>& seeds,
                                    const DeviceLimits& d, uint32_t budget, size_t limit);

// Tiles of `all` one step from `t`: BK, vec4, prefetch flipped; TM/TN and BM/BN swapped; BM or BN
// halved or doubled (same per-invocation tile).
std::vector<MatmulTile> neighbours(const MatmulTile& t, const std::vector<MatmulTile>& all);

// Decode matvec rules within the limits (the seed first; quick: fewer).
std::vector<MatvecRule> matvec_candidates(const DeviceLimits& d, const MatvecRule& seed, bool quick);

// ---- choose ----

// Measured times: by candidate (its str()), ms per shape (HUGE_VAL: failed or not measured).
using Times = std::map<std::string, std::vector<double>>;

// Σ time · count over the shapes; HUGE_VAL when a shape was not measured.
double total_time(const std::vector<double>& v, const std::vector<Shape>& shapes);

// The candidate with the least finite total ("" when none).
std::string least_total(const Times& t, const std::vector<Shape>& shapes);

// mul_mmq's total over the shapes with `p`'s configuration (pick_mmq_tile per shape at N = n).
double mmq_total(const DeviceProfile& p, const Times& t_mmq, const std::vector<Shape>& shapes, uint32_t n);

// mul_mmq: pick_mmq_tile's configuration (main tile of the 5 best totals, up to two alternatives of
// the per-shape winners, min_workgroups at each grid-size threshold) with the least total, over
// `base`. nullopt when no candidate ran correctly on every shape.
struct MmqChoice {
  DeviceProfile prof;
  double total = 0;
};
std::optional<MmqChoice> choose_mmq(const DeviceProfile& base, const Times& t_mmq,
                                    const std::map<std::string, MatmulTile>& tiles, const std::vector<Shape>& shapes,
                                    uint32_t n);

// Flash attention: the fastest finite tile of `cands` by `times` (nullptr when none).
const FlashTile* fastest_attn(const std::vector<FlashTile>& cands, const std::map<std::string, double>& times);
// `best` leads the profile's list for head_dim hd (attn, or attn_wide over 128 — the starting
// profile's attn when it has none), the other tiles following as fallbacks.
void lead_attn(DeviceProfile& prof, const DeviceProfile& start, uint32_t hd, const FlashTile& best);

// ---- write ----

// The profile file being written: results by key, deny list; saved after every candidate (marked
// incomplete until the end), so an interrupted run resumes where it stopped.
struct TuneRecord {
  std::string path;
  nlohmann::json base;  // device, tune
  std::map<std::string, nlohmann::json> results;
  std::vector<DenyEntry> deny;
  DeviceProfile prof;  // the best so far
  std::string base_name;

  bool denied(const std::string& kernel, const std::string& tile) const;
  void save(bool complete);
  // Resume from the file at `path`: the same device keeps its deny list; an incomplete run of the
  // same search (quick, tokens, start profile) keeps its measurements, and the candidate it was
  // running when it ended is denied. Says what it kept (or why not) on stderr.
  void resume(const DeviceKey& key, bool quick, uint32_t tokens, const std::string& start_name);
};

}  // namespace rocky::tune
