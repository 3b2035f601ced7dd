// rocky tune [-m MODEL] [--quick] [--device D] [-o FILE] [--start-profile NAME] [--tokens N] [--list]
//            [--offline mali-g610]
// Searches the tiles of mul_mmq, mul_mm, the decode matvec_mmq and flash attention for this
// device on the shapes a model uses (default: qwen2.5-3b's), and writes them as a profile
// (src/tune/store.hpp) that every later command loads for this device and driver.
//
// The search: candidates within the device's limits (invocations, shared memory) and the register
// budget (accumulators per invocation: the device class's budget, src/tune/tile.cpp), tried on every
// shape. Each candidate's output is compared with the starting profile's kernel (the reference,
// itself checked against a CPU f64 product on sampled outputs) before its time counts; it is timed
// with GPU timestamps after a warm-up, best of N (the spread, (max − best) / best, is recorded).
// A candidate that fails to compile, spills or uses scratch memory (where the driver reports
// pipeline executable statistics), loses the device, runs past the time limit or gives a wrong
// answer goes to the profile's deny list and the search goes on. The file is rewritten after every
// candidate (marked incomplete), so an interrupted run resumes where it stopped; a candidate that
// was running when the process ended is denied on resume (a hung GPU).
//
// The mul_mmq result is the configuration (main tile, up to two alternatives for small grids,
// min_workgroups) of pick_mmq_tile with the least total time over the model's shapes (weighted by
// how often each occurs); mul_mm and matvec_mmq: the one tile / shape rule with the least total;
// flash attention (an N-token prefill, f16 KV cache): the fastest tile leads the list, the starting
// profile's tiles follow as fallbacks.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "backend/vulkan/memory.hpp"
#include "backend/vulkan/ops/matmul_fast.hpp"
#include "backend/vulkan/pipeline_stats.hpp"
#include "cli/commands.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "gguf/gguf.hpp"
#include "lab/lab.hpp"
#include "lab/tune_offline.hpp"
#include "model/hparams.hpp"
#include "quant/quant.hpp"
#include "tune/store.hpp"

namespace rocky::lab {
using cli::process_env;
using cli::Runner;
using cli::vulkan_device_index;

namespace {

struct TuneOpts {
  std::string model, out, start_profile, offline, compiler;
  bool quick = false, list = false, fresh = false;
  uint32_t device = 0;
  uint32_t tokens = 512;
  uint32_t reps = 0;           // 0: 3 with --quick, else 5
  uint32_t time_limit_s = 20;  // one command buffer (fence wait) before the candidate counts as hung
  uint32_t max_accumulators = 0;
};

// One weight shape of the model: M rows (output features) × K (inner), `count` matrices of it.
struct Shape {
  DType type = DType::Q4_K;
  uint32_t m = 0, k = 0, count = 1;
  std::string str(uint32_t n) const { return fmt::format("{} {}×{}×{}", dtype_name(type), m, n, k); }
};

// qwen2.5-3b q4_K_M (36 layers): q/o 2048×2048, k/v 256×2048, gate/up 11008×2048, down 2048×11008
// (v and down are q6_K in half the layers).
std::vector<Shape> default_shapes() {
  return {{DType::Q4_K, 2048, 2048, 72},  {DType::Q4_K, 256, 2048, 54},   {DType::Q6_K, 256, 2048, 18},
          {DType::Q4_K, 11008, 2048, 72}, {DType::Q4_K, 2048, 11008, 18}, {DType::Q6_K, 2048, 11008, 18}};
}

// The 2-D weights of the model's blocks (blk.*) the int8 path takes, by (type, M, K).
std::vector<Shape> model_shapes(const std::string& path) {
  gguf::GgufFile f = gguf::GgufFile::open(path);
  std::map<std::tuple<int, uint64_t, uint64_t>, uint32_t> n;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.name.rfind("blk.", 0) != 0 || t.n_dims != 2 || !vulkan::fast::mmq_supports(t.type)) continue;
    if (t.ne[0] % 256 != 0 && t.ne[0] % 32 != 0) continue;
    ++n[{static_cast<int>(t.type), t.ne[1], t.ne[0]}];
  }
  std::vector<Shape> v;
  for (const auto& [key, c] : n)
    v.push_back({static_cast<DType>(std::get<0>(key)), static_cast<uint32_t>(std::get<1>(key)),
                 static_cast<uint32_t>(std::get<2>(key)), c});
  if (v.empty()) fail("{}: no block weight the int8 path takes (q4_0, q8_0, q4_K, q6_K, …): nothing to tune", path);
  return v;
}

// The attention a model's prefill runs: head_dim, heads, KV heads, layers (0 heads: none).
struct AttnShape {
  uint32_t head_dim = 0, n_head = 0, n_head_kv = 0, layers = 0;
  std::string str(uint32_t n) const {
    return fmt::format("hd{} heads {}/{} × {} tokens", head_dim, n_head, n_head_kv, n);
  }
};

AttnShape model_attention(const std::string& path) {
  if (path.empty()) return {128, 16, 2, 36};  // qwen2.5-3b
  const gguf::GgufFile f = gguf::GgufFile::open(path);
  try {
    const model::HParams h = model::read_hparams(f);
    if (h.n_head <= 0 || h.head_dim <= 0) return {};
    return {static_cast<uint32_t>(h.head_dim), static_cast<uint32_t>(h.n_head), static_cast<uint32_t>(h.n_head_kv),
            static_cast<uint32_t>(h.n_layer)};
  } catch (const Error& e) {
    fmt::print(stderr, "tune: {}: no attention shape ({}); attention tiles stay the starting profile's\n", path,
               e.what());
    return {};
  }
}

// Flash-attention tiles within the device's limits at `hd` with an f16 cache (the seeds first;
// quick: fewer; full: also 8 keys per invocation, K/V blocks as f16 in shared memory, and the
// rolled q·k loop (roll 1) for the tiles of 4 rows per invocation, which spill unrolled on NVIDIA).
std::vector<tune::FlashTile> attn_candidates(const vulkan::DeviceInfo& d, uint32_t hd,
                                             const std::vector<tune::FlashTile>& seeds, bool quick) {
  std::vector<tune::FlashTile> v;
  auto fits = [&](const tune::FlashTile& t) {
    return t.br % t.tr == 0 && t.wg % (t.br / t.tr) == 0 && t.wg <= d.max_workgroup_invocations &&
           t.shared_bytes(hd, true) <= d.shared_memory && t.ct() > 0;
  };
  auto add = [&](const tune::FlashTile& t) {
    if (fits(t) && std::find(v.begin(), v.end(), t) == v.end()) v.push_back(t);
  };
  for (const auto& t : seeds) add(t);
  const size_t limit = quick ? v.size() + 4 : 96;
  for (uint32_t wg : {128u, 64u, 256u})
    for (uint32_t br : {16u, 32u, 8u, 64u})
      for (uint32_t tr : {1u, 2u, 4u})
        for (uint32_t tc : {2u, 1u, 4u, 8u})
          for (uint32_t pf : {1u, 0u})
            for (uint32_t kvh : {0u, 1u}) {
              if (quick && (wg == 256 || br == 64 || tr == 4 || tc >= 4 || pf != seeds.front().prefetch || kvh))
                continue;
              if (v.size() < limit) add({wg, br, tr, tc, pf, kvh});
            }
  if (!quick) {
    const size_t n = v.size();
    for (size_t i = 0; i < n; ++i)
      if (v[i].tr >= 4 && !v[i].sg && !v[i].roll) {
        tune::FlashTile t = v[i];
        t.roll = 1;
        add(t);
      }
  }
  return v;
}

// Random weights: quantized from random floats where rocky has a quantizer for the type, else random
// blocks with small finite f16 scales at the offsets of the usual layouts.
std::vector<uint8_t> random_weights(DType type, uint32_t m, uint32_t k, std::mt19937& rng) {
  const uint64_t rb = row_bytes(type, k);
  std::vector<uint8_t> w(rb * m);
  if (quant::can_quantize(type)) {
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> row(k);
    for (uint32_t r = 0; r < m; ++r) {
      for (auto& v : row) v = g(rng);
      quant::quantize_row(type, row.data(), w.data() + rb * r, k);
    }
    return w;
  }
  fail("tune: no quantizer for weight type {} (the random test weights are made by quantizing)", dtype_name(type));
}

// ---- candidates ----

tune::MatmulTile make_tile(uint32_t bm, uint32_t bn, uint32_t bk, uint32_t tm, uint32_t tn, uint32_t pf, uint32_t v4) {
  tune::MatmulTile t;
  t.bm = bm;
  t.bn = bn;
  t.bk = bk;
  t.tm = tm;
  t.tn = tn;
  t.wm = bm / 2 >= tm ? bm / 2 : bm;  // two warps along each side, as every built-in tile
  t.wn = bn / 2 >= tn ? bn / 2 : bn;
  t.prefetch = pf;
  t.vec4 = v4;
  t.wg = t.derived_invocations();
  return t;
}

bool same_tile(const tune::MatmulTile& a, const tune::MatmulTile& b) { return a.str() == b.str(); }

bool tile_fits(bool mmq, const tune::MatmulTile& t, const vulkan::DeviceInfo& d, uint32_t budget) {
  const uint32_t acc = mmq ? t.mmq_accumulators() : t.accumulators();
  const uint32_t shared = mmq ? t.mmq_shared_bytes() : t.mm_shared_bytes();
  return tune::check_tile(t, acc, shared, budget, d.shared_memory, d.max_workgroup_invocations).empty();
}

// Every tile within the device's limits and the register budget (two warps along each side; mul_mmq:
// prefetch and vec4 both ways when `vary_flags`, else those of `flags`, the starting tile).
std::vector<tune::MatmulTile> all_tiles(bool mmq, const vulkan::DeviceInfo& d, uint32_t budget, bool vary_flags,
                                        const tune::MatmulTile& flags) {
  std::vector<tune::MatmulTile> v;
  for (uint32_t bm : {16u, 32u, 64u, 128u})
    for (uint32_t bn : {16u, 32u, 64u, 128u})
      for (uint32_t bk : {32u, 64u})
        for (uint32_t tm : {1u, 2u, 4u, 8u})
          for (uint32_t tn : {1u, 2u, 4u, 8u})
            for (uint32_t pf : {1u, 0u})
              for (uint32_t v4 : {0u, 1u}) {
                if (!mmq && (pf != 1 || v4 != 1)) continue;  // mul_mm has neither
                if (mmq && !vary_flags && (pf != flags.prefetch || v4 != flags.vec4)) continue;
                const tune::MatmulTile t = make_tile(bm, bn, bk, tm, tn, pf, v4);
                if (t.wg < 32 || bm < tm || bn < tn || !tile_fits(mmq, t, d, budget)) continue;
                v.push_back(t);
              }
  return v;
}

// The exploration set: the seeds (the starting profile's tiles), then per workgroup size (64, 128,
// 256, 512 invocations) and accumulator level (the budget, half, a quarter) the tile with the
// largest area, BK 64 before 32, TM ≥ TN first — spread over the space rather than its corner.
std::vector<tune::MatmulTile> explore_set(bool mmq, const std::vector<tune::MatmulTile>& all,
                                          const std::vector<tune::MatmulTile>& seeds, const vulkan::DeviceInfo& d,
                                          uint32_t budget, size_t limit) {
  std::vector<tune::MatmulTile> out;
  auto add = [&](const tune::MatmulTile& t) {
    if (std::none_of(out.begin(), out.end(), [&](const tune::MatmulTile& o) { return same_tile(o, t); }))
      out.push_back(t);
  };
  for (const auto& s : seeds)
    if (tile_fits(mmq, s, d, budget)) add(s);
  const uint32_t top = mmq ? budget / 2 : budget;  // tm · tn at the budget
  std::vector<tune::MatmulTile> sorted = all;
  std::stable_sort(sorted.begin(), sorted.end(), [](const tune::MatmulTile& a, const tune::MatmulTile& b) {
    if (a.bm * a.bn != b.bm * b.bn) return a.bm * a.bn > b.bm * b.bn;
    if (a.bk != b.bk) return a.bk > b.bk;
    return a.tm > b.tm;
  });
  for (uint32_t level : {top, top / 2, top / 4})
    for (uint32_t wg : {256u, 64u, 128u, 512u}) {
      if (out.size() >= limit) return out;
      for (const auto& t : sorted)
        if (t.wg == wg && t.tm * t.tn == level) {
          add(t);
          break;
        }
    }
  return out;
}

// Tiles one step from `t`: BK, vec4, prefetch flipped; TM/TN and BM/BN swapped; BM or BN halved
// or doubled (same per-invocation tile).
std::vector<tune::MatmulTile> neighbours(const tune::MatmulTile& t, const std::vector<tune::MatmulTile>& all) {
  std::vector<tune::MatmulTile> v;
  auto want = [&](uint32_t bm, uint32_t bn, uint32_t bk, uint32_t tm, uint32_t tn, uint32_t pf, uint32_t v4) {
    const tune::MatmulTile c = make_tile(bm, bn, bk, tm, tn, pf, v4);
    for (const auto& a : all)
      if (same_tile(a, c)) v.push_back(c);
  };
  want(t.bm, t.bn, t.bk == 32 ? 64 : 32, t.tm, t.tn, t.prefetch, t.vec4);
  want(t.bm, t.bn, t.bk, t.tm, t.tn, t.prefetch, 1 - t.vec4);
  want(t.bm, t.bn, t.bk, t.tm, t.tn, 1 - t.prefetch, t.vec4);
  want(t.bm, t.bn, t.bk, t.tn, t.tm, t.prefetch, t.vec4);
  want(t.bn, t.bm, t.bk, t.tm, t.tn, t.prefetch, t.vec4);
  want(t.bm * 2, t.bn, t.bk, t.tm, t.tn, t.prefetch, t.vec4);
  want(t.bm, t.bn * 2, t.bk, t.tm, t.tn, t.prefetch, t.vec4);
  want(t.bm / 2, t.bn, t.bk, t.tm, t.tn, t.prefetch, t.vec4);
  want(t.bm, t.bn / 2, t.bk, t.tm, t.tn, t.prefetch, t.vec4);
  return v;
}

std::vector<tune::MatvecRule> matvec_candidates(const vulkan::DeviceInfo& d, const tune::MatvecRule& seed, bool quick) {
  std::vector<tune::MatvecRule> v{seed};
  for (uint32_t wg : {32u, 64u, 128u, 256u})
    for (uint32_t rows : {1u, 2u, 4u, 8u})
      for (uint32_t split : {0u, 1u, 2u})
        for (uint32_t unroll : {1u, 2u}) {
          if (wg > d.max_workgroup_invocations || uint64_t{rows} * wg * 4 > d.shared_memory) continue;
          if (quick && (unroll != 1 || split != seed.split || (rows != 1 && rows != 4) || wg == 256)) continue;
          tune::MatvecRule r{wg, rows, seed.min_groups, split, unroll, 0};
          if (std::find(v.begin(), v.end(), r) == v.end()) v.push_back(r);
        }
  return v;
}

// ---- the measuring rig (one device; rebuilt after a lost device or a timeout) ----

struct Rig {
  std::shared_ptr<vulkan::Instance> inst;
  std::unique_ptr<vulkan::Device> dev;
  std::unique_ptr<vulkan::Memory> mem;
  std::unique_ptr<vulkan::Pipelines> pipes;
  std::unique_ptr<vulkan::Recorder> rec;
};

void make_rig(Rig& r, uint32_t device, uint64_t timeout_s) {
  r.rec.reset();
  r.pipes.reset();
  r.mem.reset();
  r.dev.reset();
  const runtime::EnvOptions& penv = process_env();
  if (!r.inst) r.inst = std::make_shared<vulkan::Instance>(runtime::instance_options(penv));
  r.dev = std::make_unique<vulkan::Device>(r.inst, device);
  r.mem = std::make_unique<vulkan::Memory>(*r.dev, 0);
  r.pipes = std::make_unique<vulkan::Pipelines>(*r.dev, true, penv.cache_dir);
  r.pipes->set_capture_statistics(true);  // where the driver reports statistics: spills are refused
  r.rec = std::make_unique<vulkan::Recorder>(*r.dev, r.dev->info().max_storage_buffer_range, timeout_s);
}

struct Measure {
  double ms = 0, spread = 0;
  std::string error;   // "" = ok
  bool fatal = false;  // the device may be unusable (lost, hung): rebuild the rig
};

bool fatal_error(const std::string& what) {
  return what.find("LOST") != std::string::npos || what.find("lost") != std::string::npos ||
         what.find("did not finish") != std::string::npos || what.find("TIMEOUT") != std::string::npos;
}

// NMSE of `got` against `ref`, NaN when any value of `got` is not finite.
double nmse(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::nan("");
    const double d = double(got[i]) - ref[i];
    num += d * d;
    den += double(ref[i]) * ref[i];
  }
  return den > 0 ? num / den : num;
}

class Tuner {
 public:
  explicit Tuner(const TuneOpts& o) : o_(o) {
    timeout_s_ = o.time_limit_s;
    make_rig(rig_, o.device, timeout_s_);
    reps_ = o.reps ? o.reps : (o.quick ? 3 : 5);
  }

  const vulkan::DeviceInfo& info() const { return rig_.dev->info(); }

  // Times `run` (records the kernel under test into rig_.rec) and checks y against `ref` with
  // `check` (NaN / too large = wrong). n_timed: dispatches counted (from the end).
  Measure measure(const std::function<void(vulkan::ops::Env&)>& run, vulkan::Buffer& ybuf, size_t ny,
                  const std::vector<float>* ref, double tol) {
    Measure r;
    try {
      vulkan::ops::Env env{*rig_.rec, *rig_.pipes, info(), {}, 128, false};
      std::vector<float> poison(ny, std::nanf(""));
      rig_.mem->upload(ybuf, 0, poison.data(), ny * 4);
      std::vector<double> t;
      for (uint32_t i = 0; i <= reps_; ++i) {
        rig_.rec->begin(true);
        run(env);
        rig_.rec->submit_and_wait();
        if (rig_.rec->timings().empty()) fail("the device returned no timestamps");
        if (i == 0) continue;  // warm-up (and the pipeline's compile)
        double ms = 0;
        for (const auto& x : rig_.rec->timings()) ms += x.ms;
        t.push_back(ms);
      }
      std::sort(t.begin(), t.end());
      r.ms = t.front();
      r.spread = t.front() > 0 ? (t.back() - t.front()) / t.front() : 0;
      std::vector<float> y(ny);
      rig_.mem->download(ybuf, 0, y.data(), ny * 4);
      if (ref) {
        const double e = nmse(y, *ref);
        if (!(e <= tol)) fail("wrong output: NMSE {:.3e} against the reference kernel (> {:.0e})", e, tol);
      }
      last_y_ = std::move(y);
    } catch (const std::exception& e) {
      r.error = e.what();
      r.fatal = fatal_error(r.error);
    }
    if (r.fatal) {
      if (on_rebuild) on_rebuild();  // the buffers of the old device go first
      try {
        make_rig(rig_, o_.device, timeout_s_);
      } catch (const std::exception& e) {
        fail("tune: the device did not come back after '{}': {}", r.error, e.what());
      }
    }
    return r;
  }

  Rig rig_;
  std::vector<float> last_y_;
  std::function<void()> on_rebuild;

 private:
  const TuneOpts& o_;
  uint64_t timeout_s_ = 20;
  uint32_t reps_ = 3;
};

// The profile file being written: results by key, deny list; saved after every candidate.
struct Record {
  std::string path;
  nlohmann::json base;  // device, tune
  std::map<std::string, nlohmann::json> results;
  std::vector<tune::DenyEntry> deny;
  tune::DeviceProfile prof;  // the best so far
  std::string base_name;

  bool denied(const std::string& kernel, const std::string& tile) const {
    return std::any_of(deny.begin(), deny.end(),
                       [&](const tune::DenyEntry& d) { return d.kernel == kernel && d.tile == tile; });
  }
  void save(bool complete) {
    nlohmann::json j = tune::profile_to_json(prof, base_name);
    for (auto it = base.begin(); it != base.end(); ++it) j[it.key()] = it.value();
    j["tune"]["complete"] = complete ? 1 : 0;
    j["deny"] = nlohmann::json::array();
    for (const auto& d : deny) j["deny"].push_back({{"kernel", d.kernel}, {"tile", d.tile}, {"reason", d.reason}});
    j["results"] = nlohmann::json::array();
    for (const auto& [k, v] : results) j["results"].push_back(v);
    tune::write_json_file(path, j);
  }
};

uint64_t groups_of(const tune::MatmulTile& t, uint32_t m, uint32_t n) {
  return uint64_t{(m + t.bm - 1) / t.bm} * ((n + t.bn - 1) / t.bn);
}

int run_list() {
  const std::string dir = tune::profiles_dir(process_env().cache_dir);
  if (dir.empty()) fail("tune --list: neither XDG_CACHE_HOME nor HOME is set: no profile directory");
  const auto v = tune::list_profiles(dir);
  fmt::print("tuning profiles in {}:\n", dir);
  if (v.empty()) fmt::print("  (none: `rocky tune` writes one for a device)\n");
  for (const auto& l : v) {
    if (!l.readable) {
      fmt::print("  {}  unreadable: {}\n", l.path, l.error);
      continue;
    }
    fmt::print("  {}  {} | {} | from {}{}{}\n", l.path, l.device.empty() ? "(no device key)" : l.device, l.driver,
               l.base.empty() ? "?" : l.base, l.modeled ? " | modeled (offline compiler)" : "",
               l.complete ? "" : " | incomplete (rerun `rocky tune` to resume)");
  }
  return 0;
}

int run_tune(const TuneOpts& o) {
  if (o.list) return run_list();
  if (!o.offline.empty()) return run_offline_tune(o.offline, o.out, o.quick, o.compiler);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Shape> shapes = o.model.empty() ? default_shapes() : model_shapes(o.model);
  const uint32_t N = o.tokens;
  Tuner tu(o);
  const vulkan::DeviceInfo& info = tu.info();
  const tune::DeviceKey key{info.vendor_id, info.device_id,   info.driver_version,
                            info.name,      info.driver_name, info.driver_info};
  const tune::DeviceProfile& dev_class =
      tune::select_profile(info.vendor_id, info.driver_name, info.type == VK_PHYSICAL_DEVICE_TYPE_CPU);
  const tune::DeviceProfile start = o.start_profile.empty() ? dev_class : tune::builtin_profile(o.start_profile);
  const uint32_t budget =
      o.max_accumulators ? o.max_accumulators : std::max(dev_class.max_accumulators, start.max_accumulators);
  if (!info.int8_dot)
    fail("tune: {} has no shaderIntegerDotProduct: the int8 path (mul_mmq) does not run there", info.name);

  Record rec;
  rec.base_name = start.name;
  std::string out = o.out;
  if (out.empty()) {
    const std::string dir = tune::profiles_dir(process_env().cache_dir);
    if (dir.empty()) fail("tune: neither XDG_CACHE_HOME nor HOME is set; give -o FILE");
    out = (std::filesystem::path(dir) / tune::profile_file_name(key)).string();
  }
  rec.path = out;
  rec.prof = start;
  rec.prof.name = start.name;
  rec.prof.max_accumulators = budget;
  rec.prof.path.clear();
  rec.prof.modeled = false;
  rec.prof.deny.clear();
  rec.base["device"] = tune::key_to_json(key);
  rec.base["tune"] = {{"tool", "rocky tune"},
                      {"quick", o.quick ? 1 : 0},
                      {"model", o.model.empty() ? "qwen2.5-3b shapes (default)" : o.model},
                      {"tokens", N},
                      {"start_profile", start.name},
                      {"reps", o.reps ? o.reps : (o.quick ? 3 : 5)}};

  // Resume: the same file for the same device keeps its deny list; an incomplete run of the same
  // search keeps its measurements, and the candidate it was running when it ended is denied.
  std::error_code ec;
  if (!o.fresh && std::filesystem::exists(out, ec)) {
    try {
      const nlohmann::json old = tune::read_json_file(out);
      const tune::StoredKey sk = tune::stored_key(old);
      if (sk.ok && sk.key.vendor_id == key.vendor_id && sk.key.device_id == key.device_id &&
          sk.key.driver_version == key.driver_version) {
        if (old.contains("deny") && old["deny"].is_array())
          for (const auto& d : old["deny"])
            if (d.is_object() && d.value("kernel", "") != "")
              rec.deny.push_back({d.value("kernel", ""), d.value("tile", ""), d.value("reason", "")});
        const bool same = old.contains("tune") && old["tune"].is_object() && old["tune"].value("complete", 1) == 0 &&
                          old["tune"].value("quick", -1) == (o.quick ? 1 : 0) && old["tune"].value("tokens", 0u) == N &&
                          old["tune"].value("start_profile", "") == start.name;
        size_t kept = 0;
        if (same && old.contains("results") && old["results"].is_array()) {
          for (const auto& r : old["results"]) {
            if (!r.is_object() || !r.contains("key")) continue;
            if (r.value("status", "") == "running") {
              rec.deny.push_back({r.value("kernel", ""), r.value("tile", ""),
                                  "did not finish: the process ended while it ran (hung GPU?)"});
              continue;
            }
            rec.results[r["key"].get<std::string>()] = r;
            ++kept;
          }
        }
        fmt::print(stderr, "tune: {}: {} denied candidate(s) kept{}\n", out, rec.deny.size(),
                   same ? fmt::format(", resuming with {} measurement(s)", kept) : "");
      }
    } catch (const Error& e) {
      fmt::print(stderr, "tune: {}: not resumed ({})\n", out, e.what());
    }
  }

  fmt::print(stderr, "tune: {} ({}, driver {:08x}), from profile {}, budget {} accumulators, {} shapes × N = {}{}\n",
             info.name, info.driver_name, info.driver_version, start.name, budget, shapes.size(), N,
             o.quick ? ", --quick" : "");
  fmt::print(stderr, "tune: writing {}\n", out);

  // T[kernel][tile] per shape (ms; inf = failed or not measured).
  std::map<std::string, std::vector<double>> t_mmq, t_mm, t_mmv;
  std::map<std::string, tune::MatmulTile> mmq_tiles, mm_tiles;  // by str()
  const double inf = HUGE_VAL;
  size_t done = 0;
  auto run_one = [&](const std::string& kernel, const std::string& tile, const Shape& s, uint32_t n,
                     const std::function<Measure()>& fn, const std::string& what_in = {}) -> double {
    ++done;
    if (rec.denied(kernel, tile)) return inf;
    const std::string what = what_in.empty() ? s.str(n) : what_in;
    const std::string k = fmt::format("{}|{}|{}", kernel, what, tile);
    auto it = rec.results.find(k);
    if (it != rec.results.end()) {
      if (it->second.value("status", "") == "ok") return it->second.value("ms", inf);
      return inf;
    }
    nlohmann::json r{{"key", k},
                     {"kernel", kernel},
                     {"type", what_in.empty() ? std::string(dtype_name(s.type)) : "f16"},
                     {"shape", what_in.empty() ? nlohmann::json{s.m, n, s.k} : nlohmann::json(what)},
                     {"tile", tile},
                     {"status", "running"}};
    rec.results[k] = r;
    rec.save(false);
    const Measure m = fn();
    if (!m.error.empty()) {
      r["status"] = "denied";
      r["reason"] = m.error;
      rec.deny.push_back({kernel, tile, fmt::format("{}: {}", what, m.error)});
      fmt::print(stderr, "tune: [{}] {} {} {}: denied: {}\n", done, kernel, what, tile, m.error);
    } else {
      r["status"] = "ok";
      r["ms"] = m.ms;
      r["spread"] = m.spread;
      fmt::print(stderr, "tune: [{}] {} {} {}: {:.4f} ms (spread {:.1f} %)\n", done, kernel, what, tile, m.ms,
                 100 * m.spread);
    }
    rec.results[k] = r;
    rec.save(false);
    return m.error.empty() ? m.ms : inf;
  };

  // Per shape: random weights and activations, their device buffers (made again after a rebuilt
  // rig: all of them belong to the old device), and the reference outputs — the starting profile's
  // kernels, mul_mmq's itself checked against the CPU.
  struct Bufs {
    vulkan::Buffer wbuf, mmq, xbuf, qbuf, dbuf, ybuf;
    vulkan::ops::Weight w;
  };
  struct ShapeState {
    std::vector<uint8_t> wbytes;
    std::vector<float> x;
    std::unique_ptr<Bufs> b;
    std::optional<std::vector<float>> ref_mmq, ref_mm, ref_mv;
  };
  std::mt19937 rng(4242);
  std::vector<ShapeState> st(shapes.size());
  for (size_t si = 0; si < shapes.size(); ++si) {
    st[si].wbytes = random_weights(shapes[si].type, shapes[si].m, shapes[si].k, rng);
    st[si].x.resize(size_t{shapes[si].k} * N);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto& v : st[si].x) v = u(rng);
  }
  Rig& rig = tu.rig_;
  tu.on_rebuild = [&] {
    for (auto& x : st) x.b.reset();
  };
  auto bufs = [&](size_t si) -> Bufs& {
    ShapeState& ss = st[si];
    const Shape& s = shapes[si];
    if (ss.b) return *ss.b;
    vulkan::Memory& mem = *rig.mem;
    auto b = std::make_unique<Bufs>();
    b->wbuf = mem.create("tune weight", ss.wbytes.size(), vulkan::BufferKind::DEVICE);
    mem.upload(b->wbuf, 0, ss.wbytes.data(), ss.wbytes.size());
    b->xbuf = mem.create("tune x", ss.x.size() * 4, vulkan::BufferKind::DEVICE);
    mem.upload(b->xbuf, 0, ss.x.data(), ss.x.size() * 4);
    b->qbuf = mem.create("tune q8_1 qs", vulkan::fast::q8_1_qs_bytes(s.k, N), vulkan::BufferKind::DEVICE);
    b->dbuf = mem.create("tune q8_1 ds", vulkan::fast::q8_1_ds_bytes(s.k, N), vulkan::BufferKind::DEVICE);
    b->ybuf = mem.create("tune y", uint64_t{s.m} * N * 4, vulkan::BufferKind::DEVICE);
    b->w = vulkan::ops::Weight{&b->wbuf, s.type, s.k, s.m, row_bytes(s.type, s.k), "tune weight"};
    b->mmq = vulkan::fast::upload_for_mmq(mem, b->w, ss.wbytes.data(), start.mmq_nibbles(s.type));
    b->w.mmq_buf = &b->mmq;
    vulkan::ops::Env env{*rig.rec, *rig.pipes, rig.dev->info(), {}, 128, false};
    rig.rec->begin(false);
    vulkan::fast::quantize_q8_1(env, {&b->xbuf, 0, b->xbuf.size()}, s.k, N, {&b->qbuf, 0, b->qbuf.size()},
                                {&b->dbuf, 0, b->dbuf.size()}, "quantize_q8_1");
    rig.rec->submit_and_wait();
    ss.b = std::move(b);
    return *ss.b;
  };
  tune::DeviceProfile ref_p = start;
  ref_p.max_accumulators = std::max(budget, start.max_accumulators);

  auto mmq_fn = [&](size_t si, const tune::DeviceProfile& p) {
    return [&, si, p](vulkan::ops::Env& env) {
      Bufs& bb = *st[si].b;
      env.prof = &p;
      vulkan::fast::mul_mmq(env, p, bb.w, {&bb.qbuf, 0, bb.qbuf.size()}, {&bb.dbuf, 0, bb.dbuf.size()}, N,
                            {&bb.ybuf, 0, bb.ybuf.size()}, true, "mul_mmq");
    };
  };
  auto mm_fn = [&](size_t si, const tune::DeviceProfile& p) {
    return [&, si, p](vulkan::ops::Env& env) {
      Bufs& bb = *st[si].b;
      vulkan::fast::mul_mm(env, p, bb.w, {&bb.xbuf, 0, bb.xbuf.size()}, N, {&bb.ybuf, 0, bb.ybuf.size()}, false,
                           "mul_mm");
    };
  };
  auto mv_fn = [&](size_t si, const tune::DeviceProfile& p) {
    return [&, si, p](vulkan::ops::Env& env) {
      Bufs& bb = *st[si].b;
      env.prof = &p;
      vulkan::ops::matvec_mmq(env, bb.w, {&bb.xbuf, 0, uint64_t{shapes[si].k} * 4},
                              {&bb.ybuf, 0, uint64_t{shapes[si].m} * 4}, "matvec_mmq");
    };
  };
  auto ref_mmq = [&](size_t si) -> const std::vector<float>& {
    ShapeState& ss = st[si];
    const Shape& s = shapes[si];
    if (ss.ref_mmq) return *ss.ref_mmq;
    Bufs& b = bufs(si);
    const Measure rm = tu.measure(mmq_fn(si, ref_p), b.ybuf, size_t{s.m} * N, nullptr, 0);
    if (!rm.error.empty()) fail("tune: the starting profile's mul_mmq fails on {}: {}", s.str(N), rm.error);
    std::vector<float> y = tu.last_y_;
    // Against the CPU: an f64 product of the same q8_1 activations on 64 sampled outputs.
    std::vector<uint32_t> qs(b.qbuf.size() / 4);
    std::vector<float> ds(b.dbuf.size() / 4);
    rig.mem->download(b.qbuf, 0, qs.data(), b.qbuf.size());
    rig.mem->download(b.dbuf, 0, ds.data(), b.dbuf.size());
    std::vector<float> wrow(s.k);
    const uint32_t nblk = s.k / 32;
    double num = 0, den = 0;
    for (int i = 0; i < 64; ++i) {
      const uint32_t m = rng() % s.m, n = rng() % N;
      quant::dequantize_row(s.type, ss.wbytes.data() + row_bytes(s.type, s.k) * m, wrow.data(), s.k);
      double r = 0;
      for (uint32_t blk = 0; blk < nblk; ++blk) {
        const double d = ds[2 * (size_t{n} * nblk + blk)];
        for (uint32_t j = 0; j < 32; ++j) {
          const uint32_t word = qs[(size_t{n} * nblk + blk) * 8 + j / 4];
          r += double(wrow[blk * 32 + j]) * d * static_cast<int8_t>((word >> (8 * (j % 4))) & 0xFF);
        }
      }
      const double g = y[size_t{n} * s.m + m];
      num += (g - r) * (g - r);
      den += r * r;
    }
    if (!(num <= 1e-6 * den))
      fail("tune: the reference mul_mmq ({}) disagrees with the CPU on {} (NMSE {:.3e})", start.mmq.str(), s.str(N),
           den > 0 ? num / den : num);
    ss.ref_mmq = std::move(y);
    return *ss.ref_mmq;
  };
  auto ref_of = [&](size_t si, std::optional<std::vector<float>>& slot, const char* what,
                    const std::function<void(vulkan::ops::Env&)>& fn, size_t ny) -> const std::vector<float>& {
    if (slot) return *slot;
    Bufs& b = bufs(si);
    const Measure m = tu.measure(fn, b.ybuf, ny, nullptr, 0);
    if (!m.error.empty()) fail("tune: the starting profile's {} fails on {}: {}", what, shapes[si].str(N), m.error);
    slot = tu.last_y_;
    return *slot;
  };

  auto mmq_time = [&](size_t si, const tune::MatmulTile& c) {
    tune::DeviceProfile p = start;
    p.max_accumulators = budget;
    p.mmq = c;
    p.mmq_alt.clear();
    p.min_workgroups = 0;
    const std::vector<float>& ref = ref_mmq(si);
    const double ms = run_one("mul_mmq", c.str(), shapes[si], N, [&] {
      Bufs& b = bufs(si);
      return tu.measure(mmq_fn(si, p), b.ybuf, size_t{shapes[si].m} * N, &ref, 1e-9);
    });
    mmq_tiles[c.str()] = c;
    auto& v = t_mmq[c.str()];
    v.resize(shapes.size(), inf);
    v[si] = ms;
    return ms;
  };
  auto mm_time = [&](size_t si, const tune::MatmulTile& c) {
    tune::DeviceProfile p = start;
    p.max_accumulators = budget;
    p.mm = c;
    const size_t ny = size_t{shapes[si].m} * N;
    const std::vector<float>& ref = ref_of(si, st[si].ref_mm, "mul_mm", mm_fn(si, ref_p), ny);
    const double ms = run_one("mul_mm", c.str(), shapes[si], N, [&] {
      Bufs& b = bufs(si);
      return tu.measure(mm_fn(si, p), b.ybuf, ny, &ref, 1e-9);
    });
    mm_tiles[c.str()] = c;
    auto& v = t_mm[c.str()];
    v.resize(shapes.size(), inf);
    v[si] = ms;
    return ms;
  };
  // Pipelines whose labels start with `prefix` and spill (where the driver reports statistics), and
  // whether a candidate's measurement created a new one: a candidate is refused for its own
  // pipelines' spills, not for those of candidates measured before it.
  auto spilled = [&](const char* prefix) {
    std::set<std::string> s;
    for (const auto& ps : vulkan::collect_statistics(*rig.pipes))
      if (ps.spills && ps.pipeline.rfind(prefix, 0) == 0) s.insert(ps.pipeline);
    return s;
  };
  auto spills_new = [&](const char* prefix, const std::set<std::string>& before) {
    for (const auto& name : spilled(prefix))
      if (!before.count(name)) return true;
    return false;
  };
  auto mv_time = [&](size_t si, const tune::MatvecRule& c) {
    tune::DeviceProfile p = start;
    p.mmv = c;
    const std::vector<float>& ref = ref_of(si, st[si].ref_mv, "matvec_mmq", mv_fn(si, start), shapes[si].m);
    const double ms = run_one("matvec_mmq", c.str(), shapes[si], 1, [&] {
      Bufs& b = bufs(si);
      const std::set<std::string> before = spilled("matvec");
      Measure m = tu.measure(mv_fn(si, p), b.ybuf, shapes[si].m, &ref, 1e-9);
      if (m.error.empty() && spills_new("matvec", before))
        m.error = "spills registers to scratch memory (pipeline statistics)";
      return m;
    });
    auto& v = t_mmv[c.str()];
    v.resize(shapes.size(), inf);
    v[si] = ms;
    return ms;
  };

  // The primary shape: the most multiply-adds over the model (count · M · K).
  size_t prim = 0;
  for (size_t si = 1; si < shapes.size(); ++si)
    if (uint64_t{shapes[si].count} * shapes[si].m * shapes[si].k >
        uint64_t{shapes[prim].count} * shapes[prim].m * shapes[prim].k)
      prim = si;
  fmt::print(stderr, "tune: primary shape {} (× {})\n", shapes[prim].str(N), shapes[prim].count);

  // A matmul family: explore on the primary shape, refine around the best, then time the finalists
  // (and the seeds: the baseline) on every other shape.
  auto search = [&](bool mmq, const std::vector<tune::MatmulTile>& seeds, size_t n_explore, size_t n_refine,
                    size_t n_final) {
    const auto all = all_tiles(mmq, info, budget, mmq && !o.quick, seeds.front());
    auto time = [&](size_t si, const tune::MatmulTile& c) { return mmq ? mmq_time(si, c) : mm_time(si, c); };
    std::vector<std::pair<double, tune::MatmulTile>> seen;
    auto try_on_prim = [&](const tune::MatmulTile& c) {
      for (const auto& [t, x] : seen)
        if (same_tile(x, c)) return;
      seen.push_back({time(prim, c), c});
    };
    for (const auto& c : explore_set(mmq, all, seeds, info, budget, n_explore)) try_on_prim(c);
    auto by_time = [&] {
      std::stable_sort(seen.begin(), seen.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    };
    by_time();
    for (size_t round = 0; round < 2; ++round) {
      const size_t before = seen.size();
      std::vector<tune::MatmulTile> top;
      for (size_t i = 0; i < std::min(n_refine, seen.size()); ++i)
        if (std::isfinite(seen[i].first)) top.push_back(seen[i].second);
      for (const auto& t : top)
        for (const auto& nb : neighbours(t, all)) try_on_prim(nb);
      by_time();
      if (seen.size() == before || o.quick) break;
    }
    std::vector<tune::MatmulTile> finals;
    for (const auto& s : seeds)
      if (tile_fits(mmq, s, info, budget)) finals.push_back(s);
    for (size_t i = 0; i < seen.size() && finals.size() < n_final + seeds.size(); ++i)
      if (std::isfinite(seen[i].first) &&
          std::none_of(finals.begin(), finals.end(), [&](const auto& f) { return same_tile(f, seen[i].second); }))
        finals.push_back(seen[i].second);
    // Candidates for pick_mmq_tile's small-grid alternatives: the fastest tile (on the primary
    // shape) with at most half, and at most a quarter, of the best tile's area.
    if (!seen.empty() && std::isfinite(seen.front().first)) {
      const uint32_t area = seen.front().second.bm * seen.front().second.bn;
      for (uint32_t div : {2u, 4u})
        for (const auto& [t, c] : seen)
          if (std::isfinite(t) && c.bm * c.bn * div <= area) {
            if (std::none_of(finals.begin(), finals.end(), [&](const auto& f) { return same_tile(f, c); }))
              finals.push_back(c);
            break;
          }
    }
    // Small grids favour other tiles: the best few on each other shape's own terms too.
    for (size_t si = 0; si < shapes.size(); ++si)
      if (si != prim)
        for (const auto& c : finals) time(si, c);
    return finals;
  };

  std::vector<tune::MatmulTile> seeds{start.mmq};
  for (const auto& t : start.mmq_alt) seeds.push_back(t);
  const std::vector<tune::MatmulTile> mmq_c = o.quick ? search(true, seeds, 6, 1, 3) : search(true, seeds, 12, 3, 6);
  std::vector<tune::MatmulTile> mm_c;
  if (vulkan::ops::gpu_supports(shapes[prim].type))
    mm_c = o.quick ? search(false, {start.mm}, 3, 0, 1) : search(false, {start.mm}, 8, 2, 3);
  const std::vector<tune::MatvecRule> mmv_c = matvec_candidates(info, start.mmv, o.quick);
  for (size_t si = 0; si < shapes.size(); ++si)
    for (const auto& c : mmv_c) mv_time(si, c);

  // Flash attention of an N-token prefill (f16 KV cache, the backend's default): the starting
  // profile's tile is the reference; the fastest correct tile leads the tuned list, the starting
  // ones follow as fallbacks (other head_dims, smaller devices).
  const AttnShape as = model_attention(o.model);
  std::map<std::string, double> t_attn;
  std::vector<tune::FlashTile> attn_c;
  if (as.n_head > 0 && as.head_dim % 4 == 0 && as.head_dim <= 256) {
    const uint32_t hd = as.head_dim, nkv = as.n_head_kv * hd;
    std::vector<float> qh(size_t{N} * as.n_head * hd);
    std::vector<uint16_t> kh(size_t{N} * nkv), vh(size_t{N} * nkv);
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (auto& x : qh) x = g(rng);
    for (auto& x : kh) x = quant::f32_to_f16(g(rng));
    for (auto& x : vh) x = quant::f32_to_f16(g(rng));
    struct AttnBufs {
      vulkan::Buffer q, k, v, out;
    };
    std::unique_ptr<AttnBufs> ab;
    auto prev = tu.on_rebuild;
    tu.on_rebuild = [&] {
      prev();
      ab.reset();
    };
    auto abufs = [&]() -> AttnBufs& {
      if (ab) return *ab;
      vulkan::Memory& mem = *rig.mem;
      ab = std::make_unique<AttnBufs>();
      ab->q = mem.create("tune q", qh.size() * 4, vulkan::BufferKind::DEVICE);
      mem.upload(ab->q, 0, qh.data(), qh.size() * 4);
      ab->k = mem.create("tune k", kh.size() * 2, vulkan::BufferKind::DEVICE);
      mem.upload(ab->k, 0, kh.data(), kh.size() * 2);
      ab->v = mem.create("tune v", vh.size() * 2, vulkan::BufferKind::DEVICE);
      mem.upload(ab->v, 0, vh.data(), vh.size() * 2);
      ab->out = mem.create("tune attn out", qh.size() * 4, vulkan::BufferKind::DEVICE);
      return *ab;
    };
    const vulkan::ops::AttnArgs args{hd, as.n_head, as.n_head_kv, N, 0, nkv, 1.0f / std::sqrt(float(hd))};
    auto attn_fn = [&](const tune::DeviceProfile& p) {
      return [&, p](vulkan::ops::Env& env) {
        AttnBufs& b = *ab;
        env.prof = &p;
        env.kv_f16 = true;
        vulkan::ops::attention(env, {&b.q, 0, b.q.size()}, {&b.k, 0, b.k.size()}, {&b.v, 0, b.v.size()}, args,
                               {&b.out, 0, b.out.size()}, "attention");
      };
    };
    abufs();
    const Measure rm = tu.measure(attn_fn(start), ab->out, qh.size(), nullptr, 0);
    if (!rm.error.empty()) fail("tune: the starting profile's attention fails on {}: {}", as.str(N), rm.error);
    const std::vector<float> ref = tu.last_y_;
    const Shape dummy{DType::F16, as.n_head, hd, as.layers};
    attn_c = attn_candidates(info, hd, start.attn_tiles(hd), o.quick);
    for (const auto& c : attn_c) {
      tune::DeviceProfile p = start;
      p.attn = {c};
      p.attn_wide = {c};
      t_attn[c.str()] = run_one(
          "attention", c.str(), dummy, N,
          [&] {
            abufs();
            // A tile whose pipeline spills (H200: 64,32,4,8 → 255 registers + 816 B of local
            // memory, 2.5× slower; docs/tuning-log.md #39) is refused, as spilling matvecs are.
            const std::set<std::string> before = spilled("attention_flash");
            Measure m = tu.measure(attn_fn(p), ab->out, qh.size(), &ref, 1e-8);
            if (m.error.empty() && spills_new("attention_flash", before))
              m.error = "spills registers to local memory (pipeline statistics)";
            return m;
          },
          as.str(N));
    }
    ab.reset();
    tu.on_rebuild = prev;
  }

  // ---- choose ----
  auto total_of = [&](const std::vector<double>& v) {
    double t = 0;
    for (size_t i = 0; i < v.size() && i < shapes.size(); ++i) t += v[i] * shapes[i].count;
    return v.size() < shapes.size() ? inf : t;
  };
  // mul_mmq: pick_mmq_tile's configuration with the least total.
  std::map<std::string, tune::MatmulTile>& by_str = mmq_tiles;
  std::vector<std::string> mains;
  for (const auto& [k, v] : t_mmq)
    if (std::isfinite(total_of(v))) mains.push_back(k);
  if (mains.empty()) fail("tune: no mul_mmq candidate ran correctly on every shape (deny list in {})", out);
  std::sort(mains.begin(), mains.end(), [&](auto& a, auto& b) { return total_of(t_mmq[a]) < total_of(t_mmq[b]); });
  std::set<std::string> winners;
  for (size_t si = 0; si < shapes.size(); ++si) {
    std::string best;
    for (const auto& [k, v] : t_mmq)
      if (std::isfinite(v[si]) && (best.empty() || v[si] < t_mmq[best][si])) best = k;
    if (!best.empty()) winners.insert(best);
  }
  double best_total = inf;
  tune::DeviceProfile best = rec.prof;
  auto eval = [&](const tune::MatmulTile& main, const std::vector<tune::MatmulTile>& alts, uint32_t minwg) {
    tune::DeviceProfile p = rec.prof;
    p.mmq = main;
    p.mmq_alt = alts;
    p.min_workgroups = minwg;
    double t = 0;
    for (size_t si = 0; si < shapes.size(); ++si) {
      const tune::MatmulTile& pick = tune::pick_mmq_tile(p, shapes[si].m, N);
      const auto& v = t_mmq[pick.str()];
      t += (si < v.size() ? v[si] : inf) * shapes[si].count;
    }
    if (t < best_total) {
      best_total = t;
      best = p;
    }
  };
  for (size_t mi = 0; mi < std::min<size_t>(mains.size(), 5); ++mi) {
    const tune::MatmulTile& main = by_str[mains[mi]];
    std::vector<tune::MatmulTile> alts;
    for (const auto& w : winners)
      if (w != mains[mi]) alts.push_back(by_str[w]);
    std::set<uint32_t> thresholds{0};
    for (const auto& s : shapes) {
      thresholds.insert(static_cast<uint32_t>(groups_of(main, s.m, N) + 1));
      for (const auto& a : alts) thresholds.insert(static_cast<uint32_t>(groups_of(a, s.m, N) + 1));
    }
    for (uint32_t th : thresholds) {
      eval(main, {}, th);
      for (size_t a = 0; a < alts.size(); ++a) {
        eval(main, {alts[a]}, th);
        for (size_t b2 = 0; b2 < alts.size(); ++b2)
          if (b2 != a) eval(main, {alts[a], alts[b2]}, th);
      }
    }
  }
  rec.prof = best;
  if (best.mmq_alt.empty()) rec.prof.min_workgroups = 0;
  // Baseline: the starting profile's own choice (its tiles were measured as seeds).
  double start_total = 0;
  for (size_t si = 0; si < shapes.size(); ++si) {
    tune::DeviceProfile p = start;
    const auto& v = t_mmq[tune::pick_mmq_tile(p, shapes[si].m, N).str()];
    start_total += (si < v.size() ? v[si] : inf) * shapes[si].count;
  }
  // mul_mm and matvec: the least total.
  auto least = [&](const std::map<std::string, std::vector<double>>& t) {
    std::string b;
    for (const auto& [k, v] : t)
      if (std::isfinite(total_of(v)) && (b.empty() || total_of(v) < total_of(t.at(b)))) b = k;
    return b;
  };
  if (const std::string b = least(t_mm); !b.empty()) rec.prof.mm = mm_tiles[b];
  if (const std::string b = least(t_mmv); !b.empty())
    for (const auto& c : mmv_c)
      if (c.str() == b) rec.prof.mmv = c;
  if (!t_attn.empty()) {
    const tune::FlashTile* b = nullptr;
    for (const auto& c : attn_c)
      if (std::isfinite(t_attn[c.str()]) && (!b || t_attn[c.str()] < t_attn[b->str()])) b = &c;
    if (b) {
      const uint32_t hd = as.head_dim;
      std::vector<tune::FlashTile>& list = hd > 128 ? rec.prof.attn_wide : rec.prof.attn;
      if (hd > 128 && list.empty()) list = start.attn;
      list.erase(std::remove(list.begin(), list.end(), *b), list.end());
      list.insert(list.begin(), *b);
      // The starting list's first tile may not fit this head_dim (then it was never measured).
      const std::string st = start.attn_tiles(hd).front().str();
      const auto st_it = t_attn.find(st);
      fmt::print(stderr, "tune: attention {}: {} {:.3f} ms, the starting {} {}\n", as.str(N), b->str(),
                 t_attn[b->str()], st,
                 st_it != t_attn.end() && std::isfinite(st_it->second) ? fmt::format("{:.3f} ms", st_it->second)
                                                                       : std::string("does not fit"));
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rec.base["tune"]["seconds"] = std::round(secs * 10) / 10;
  rec.base["tune"]["mmq_total_ms"] = best_total;
  rec.base["tune"]["mmq_start_total_ms"] = start_total;
  rec.save(true);
  fmt::print(stderr,
             "tune: mul_mmq over the model's matrices: {:.3f} ms with the tuned tiles, {:.3f} ms with {} ({:+.1f} %)\n",
             best_total, start_total, start.name, 100.0 * (start_total / best_total - 1));
  fmt::print(stderr, "tune: {} candidate(s) denied; {:.1f} s\n", rec.deny.size(), secs);
  fmt::print("{}\n{}\n", out, rec.prof.tiles_str());
  return 0;
}

}  // namespace

void add_tune(CLI::App& app, Runner& run) {
  auto o = std::make_shared<TuneOpts>();
  auto* sub =
      app.add_subcommand("tune",
                         "Search mul_mmq / mul_mm / matvec / flash-attention tiles for this device and write its "
                         "tuning profile (loaded by every later command)");
  sub->add_option("-m,--model", o->model, "GGUF model whose matrix shapes to tune (default: qwen2.5-3b's)")
      ->check(CLI::ExistingFile);
  sub->add_flag("--quick", o->quick, "Fewer candidates and repetitions (minutes)");
  sub->add_option("--device", o->device, "Vulkan device: N or vulkan:N")->transform(vulkan_device_index());
  sub->add_option("-o,--output", o->out,
                  "Profile file (default: $XDG_CACHE_HOME/rocky/profiles/VENDOR-DEVICE-DRIVER.json)");
  sub->add_option("--start-profile", o->start_profile,
                  "Built-in profile to start from (default: the device's; generic, llvmpipe, nvidia, …)");
  sub->add_option("--tokens", o->tokens, "Tokens per prefill matmul (N; pp512: 512)")
      ->check(CLI::Range(2, 8192))
      ->capture_default_str();
  sub->add_option("--reps", o->reps, "Timed repetitions per candidate (default 3 with --quick, else 5)")
      ->check(CLI::Range(1, 100));
  sub->add_option("--time-limit", o->time_limit_s, "Seconds one command buffer may take before it counts as hung")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  sub->add_option("--max-accumulators", o->max_accumulators,
                  "Register budget: accumulators per invocation (default: the device class's)")
      ->check(CLI::Range(1, 1024));
  sub->add_flag("--fresh", o->fresh, "Do not resume an incomplete run or keep the file's deny list");
  sub->add_flag("--list", o->list, "List the stored profiles");
  sub->add_option("--offline", o->offline,
                  "Rank candidates with an offline compiler instead of a device: mali-g610 (writes a modeled profile)");
  sub->add_option("--compiler", o->compiler,
                  "With --offline mali-g610: the g610-stats script (default: g610-stats on PATH; ../shared/mali/)");
  sub->callback([&run, o] {
    if (!o->offline.empty() && o->out.empty())
      throw CLI::ValidationError("--offline", "needs -o FILE (the device is not here to key the profile)");
    run = [o] { return run_tune(*o); };
  });
}

}  // namespace rocky::lab
