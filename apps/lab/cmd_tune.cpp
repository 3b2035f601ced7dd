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
//
// The stages: shapes (the model's matrices; tune::default_shapes) → candidates (src/tune/search.hpp)
// → measure (tune_rig.hpp: a Vulkan rig) → choose (tune::choose_mmq, least_total, fastest_attn) →
// write (tune::TuneRecord, saved after every candidate).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
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
#include "lab/tune_rig.hpp"
#include "model/hparams.hpp"
#include "quant/quant.hpp"
#include "tune/search.hpp"
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

// The 2-D weights of the model's blocks (blk.*) the int8 path takes, by (type, M, K).
std::vector<tune::Shape> model_shapes(const std::string& path) {
  gguf::GgufFile f = gguf::GgufFile::open(path);
  std::map<std::tuple<int, uint64_t, uint64_t>, uint32_t> n;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.name.rfind("blk.", 0) != 0 || t.n_dims != 2 || !vulkan::fast::mmq_supports(t.type)) continue;
    if (t.ne[0] % 256 != 0 && t.ne[0] % 32 != 0) continue;
    ++n[{static_cast<int>(t.type), t.ne[1], t.ne[0]}];
  }
  std::vector<tune::Shape> v;
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
using KernelFn = std::function<void(vulkan::ops::Env&)>;

// One run of `rocky tune` on a device, stage by stage (run()).
class TuneRun {
 public:
  explicit TuneRun(const TuneOpts& o);
  int run();

 private:
  // write: the profile file's path, its header, and what a previous run left in it.
  void open_record();
  // measure: one candidate through the record (a result already there is reused; a failure is
  // denied) — ms, or HUGE_VAL.
  double run_one(const std::string& kernel, const std::string& tile, const tune::Shape& s, uint32_t n,
                 const std::function<Measure()>& fn, const std::string& what_in = {});
  Bufs& bufs(size_t si);
  KernelFn mmq_fn(size_t si, const tune::DeviceProfile& p);
  KernelFn mm_fn(size_t si, const tune::DeviceProfile& p);
  KernelFn mv_fn(size_t si, const tune::DeviceProfile& p);
  const std::vector<float>& ref_mmq(size_t si);
  const std::vector<float>& ref_of(size_t si, std::optional<std::vector<float>>& slot, const char* what,
                                   const KernelFn& fn, size_t ny);
  double mmq_time(size_t si, const tune::MatmulTile& c);
  double mm_time(size_t si, const tune::MatmulTile& c);
  double mv_time(size_t si, const tune::MatvecRule& c);
  // Pipelines whose labels start with `prefix` and spill (where the driver reports statistics), and
  // whether a candidate's measurement created a new one: a candidate is refused for its own
  // pipelines' spills, not for those of candidates measured before it.
  std::set<std::string> spilled(const char* prefix);
  bool spills_new(const char* prefix, const std::set<std::string>& before);
  // candidates → measure, a matmul family: explore on the primary shape, refine around the best,
  // then time the finalists (and the seeds: the baseline) on every other shape.
  std::vector<tune::MatmulTile> search(bool mmq, const std::vector<tune::MatmulTile>& seeds, size_t n_explore,
                                       size_t n_refine, size_t n_final);
  // candidates → measure, flash attention of an N-token prefill (f16 KV cache, the backend's default).
  void measure_attention();
  // choose → write.
  int choose_and_write();

  const TuneOpts& o_;
  const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  const std::vector<tune::Shape> shapes_;
  const uint32_t N_;
  Tuner tu_;
  tune::DeviceKey key_;
  tune::DeviceProfile dev_class_, start_, ref_p_;
  tune::DeviceLimits limits_;
  uint32_t budget_ = 0;
  size_t prim_ = 0;
  tune::TuneRecord rec_;
  std::string out_;
  size_t done_ = 0;
  std::mt19937 rng_{4242};
  std::vector<ShapeState> st_;
  // T[kernel][tile] per shape (ms; HUGE_VAL = failed or not measured).
  tune::Times t_mmq_, t_mm_, t_mmv_;
  std::map<std::string, tune::MatmulTile> mmq_tiles_, mm_tiles_;  // by str()
  std::vector<tune::MatvecRule> mmv_c_;
  AttnShape as_;
  std::map<std::string, double> t_attn_;
  std::vector<tune::FlashTile> attn_c_;
};

TuneRun::TuneRun(const TuneOpts& o)
    : o_(o),
      shapes_(o.model.empty() ? tune::default_shapes() : model_shapes(o.model)),
      N_(o.tokens),
      tu_(o.device, o.time_limit_s, o.reps ? o.reps : (o.quick ? 3 : 5)) {
  const vulkan::DeviceInfo& info = tu_.info();
  key_ = {info.vendor_id, info.device_id, info.driver_version, info.name, info.driver_name, info.driver_info};
  dev_class_ = tune::select_profile(info.vendor_id, info.driver_name, info.type == VK_PHYSICAL_DEVICE_TYPE_CPU);
  start_ = o.start_profile.empty() ? dev_class_ : tune::builtin_profile(o.start_profile);
  budget_ = o.max_accumulators ? o.max_accumulators : std::max(dev_class_.max_accumulators, start_.max_accumulators);
  limits_ = {info.max_workgroup_invocations, info.shared_memory};
  if (!info.int8_dot)
    fail("tune: {} has no shaderIntegerDotProduct: the int8 path (mul_mmq) does not run there", info.name);
}

void TuneRun::open_record() {
  rec_.base_name = start_.name;
  out_ = o_.out;
  if (out_.empty()) {
    const std::string dir = tune::profiles_dir(process_env().cache_dir);
    if (dir.empty()) fail("tune: neither XDG_CACHE_HOME nor HOME is set; give -o FILE");
    out_ = (std::filesystem::path(dir) / tune::profile_file_name(key_)).string();
  }
  rec_.path = out_;
  rec_.prof = start_;
  rec_.prof.name = start_.name;
  rec_.prof.max_accumulators = budget_;
  rec_.prof.path.clear();
  rec_.prof.modeled = false;
  rec_.prof.deny.clear();
  rec_.base["device"] = tune::key_to_json(key_);
  rec_.base["tune"] = {{"tool", "rocky tune"},
                       {"quick", o_.quick ? 1 : 0},
                       {"model", o_.model.empty() ? "qwen2.5-3b shapes (default)" : o_.model},
                       {"tokens", N_},
                       {"start_profile", start_.name},
                       {"reps", o_.reps ? o_.reps : (o_.quick ? 3 : 5)}};
  // Resume: the same file for the same device keeps its deny list; an incomplete run of the same
  // search keeps its measurements, and the candidate it was running when it ended is denied.
  if (!o_.fresh) rec_.resume(key_, o_.quick, N_, start_.name);
}

double TuneRun::run_one(const std::string& kernel, const std::string& tile, const tune::Shape& s, uint32_t n,
                        const std::function<Measure()>& fn, const std::string& what_in) {
  const double inf = HUGE_VAL;
  ++done_;
  if (rec_.denied(kernel, tile)) return inf;
  const std::string what = what_in.empty() ? s.str(n) : what_in;
  const std::string k = fmt::format("{}|{}|{}", kernel, what, tile);
  auto it = rec_.results.find(k);
  if (it != rec_.results.end()) {
    if (it->second.value("status", "") == "ok") return it->second.value("ms", inf);
    return inf;
  }
  nlohmann::json r{{"key", k},
                   {"kernel", kernel},
                   {"type", what_in.empty() ? std::string(dtype_name(s.type)) : "f16"},
                   {"shape", what_in.empty() ? nlohmann::json{s.m, n, s.k} : nlohmann::json(what)},
                   {"tile", tile},
                   {"status", "running"}};
  rec_.results[k] = r;
  rec_.save(false);
  const Measure m = fn();
  if (!m.error.empty()) {
    r["status"] = "denied";
    r["reason"] = m.error;
    rec_.deny.push_back({kernel, tile, fmt::format("{}: {}", what, m.error)});
    fmt::print(stderr, "tune: [{}] {} {} {}: denied: {}\n", done_, kernel, what, tile, m.error);
  } else {
    r["status"] = "ok";
    r["ms"] = m.ms;
    r["spread"] = m.spread;
    fmt::print(stderr, "tune: [{}] {} {} {}: {:.4f} ms (spread {:.1f} %)\n", done_, kernel, what, tile, m.ms,
               100 * m.spread);
  }
  rec_.results[k] = r;
  rec_.save(false);
  return m.error.empty() ? m.ms : inf;
}

Bufs& TuneRun::bufs(size_t si) {
  ShapeState& ss = st_[si];
  const tune::Shape& s = shapes_[si];
  if (ss.b) return *ss.b;
  Rig& rig = tu_.rig_;
  vulkan::Memory& mem = *rig.mem;
  auto b = std::make_unique<Bufs>();
  b->wbuf = mem.create("tune weight", ss.wbytes.size(), vulkan::BufferKind::DEVICE);
  mem.upload(b->wbuf, 0, ss.wbytes.data(), ss.wbytes.size());
  b->xbuf = mem.create("tune x", ss.x.size() * 4, vulkan::BufferKind::DEVICE);
  mem.upload(b->xbuf, 0, ss.x.data(), ss.x.size() * 4);
  b->qbuf = mem.create("tune q8_1 qs", vulkan::fast::q8_1_qs_bytes(s.k, N_), vulkan::BufferKind::DEVICE);
  b->dbuf = mem.create("tune q8_1 ds", vulkan::fast::q8_1_ds_bytes(s.k, N_), vulkan::BufferKind::DEVICE);
  b->ybuf = mem.create("tune y", uint64_t{s.m} * N_ * 4, vulkan::BufferKind::DEVICE);
  b->w = vulkan::ops::Weight{&b->wbuf, s.type, s.k, s.m, row_bytes(s.type, s.k), "tune weight"};
  b->mmq = vulkan::fast::upload_for_mmq(mem, b->w, ss.wbytes.data(), start_.mmq_nibbles(s.type));
  b->w.mmq_buf = &b->mmq;
  vulkan::ops::Env env{*rig.rec, *rig.pipes, rig.dev->info(), {}, 128, false};
  rig.rec->begin(false);
  vulkan::fast::quantize_q8_1(env, {&b->xbuf, 0, b->xbuf.size()}, s.k, N_, {&b->qbuf, 0, b->qbuf.size()},
                              {&b->dbuf, 0, b->dbuf.size()}, "quantize_q8_1");
  rig.rec->submit_and_wait();
  ss.b = std::move(b);
  return *ss.b;
}

KernelFn TuneRun::mmq_fn(size_t si, const tune::DeviceProfile& p) {
  return [this, si, p](vulkan::ops::Env& env) {
    Bufs& bb = *st_[si].b;
    env.prof = &p;
    vulkan::fast::mul_mmq(env, p, bb.w, {&bb.qbuf, 0, bb.qbuf.size()}, {&bb.dbuf, 0, bb.dbuf.size()}, N_,
                          {&bb.ybuf, 0, bb.ybuf.size()}, true, "mul_mmq");
  };
}

KernelFn TuneRun::mm_fn(size_t si, const tune::DeviceProfile& p) {
  return [this, si, p](vulkan::ops::Env& env) {
    Bufs& bb = *st_[si].b;
    vulkan::fast::mul_mm(env, p, bb.w, {&bb.xbuf, 0, bb.xbuf.size()}, N_, {&bb.ybuf, 0, bb.ybuf.size()}, false,
                         "mul_mm");
  };
}

KernelFn TuneRun::mv_fn(size_t si, const tune::DeviceProfile& p) {
  return [this, si, p](vulkan::ops::Env& env) {
    Bufs& bb = *st_[si].b;
    env.prof = &p;
    vulkan::ops::matvec_mmq(env, bb.w, {&bb.xbuf, 0, uint64_t{shapes_[si].k} * 4},
                            {&bb.ybuf, 0, uint64_t{shapes_[si].m} * 4}, "matvec_mmq");
  };
}

const std::vector<float>& TuneRun::ref_mmq(size_t si) {
  ShapeState& ss = st_[si];
  const tune::Shape& s = shapes_[si];
  if (ss.ref_mmq) return *ss.ref_mmq;
  Bufs& b = bufs(si);
  const Measure rm = tu_.measure(mmq_fn(si, ref_p_), b.ybuf, size_t{s.m} * N_, nullptr, 0);
  if (!rm.error.empty()) fail("tune: the starting profile's mul_mmq fails on {}: {}", s.str(N_), rm.error);
  std::vector<float> y = tu_.last_y_;
  // Against the CPU: an f64 product of the same q8_1 activations on 64 sampled outputs.
  std::vector<uint32_t> qs(b.qbuf.size() / 4);
  std::vector<float> ds(b.dbuf.size() / 4);
  tu_.rig_.mem->download(b.qbuf, 0, qs.data(), b.qbuf.size());
  tu_.rig_.mem->download(b.dbuf, 0, ds.data(), b.dbuf.size());
  std::vector<float> wrow(s.k);
  const uint32_t nblk = s.k / 32;
  double num = 0, den = 0;
  for (int i = 0; i < 64; ++i) {
    const uint32_t m = rng_() % s.m, n = rng_() % N_;
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
    fail("tune: the reference mul_mmq ({}) disagrees with the CPU on {} (NMSE {:.3e})", start_.mmq.str(), s.str(N_),
         den > 0 ? num / den : num);
  ss.ref_mmq = std::move(y);
  return *ss.ref_mmq;
}

const std::vector<float>& TuneRun::ref_of(size_t si, std::optional<std::vector<float>>& slot, const char* what,
                                          const KernelFn& fn, size_t ny) {
  if (slot) return *slot;
  Bufs& b = bufs(si);
  const Measure m = tu_.measure(fn, b.ybuf, ny, nullptr, 0);
  if (!m.error.empty()) fail("tune: the starting profile's {} fails on {}: {}", what, shapes_[si].str(N_), m.error);
  slot = tu_.last_y_;
  return *slot;
}

double TuneRun::mmq_time(size_t si, const tune::MatmulTile& c) {
  tune::DeviceProfile p = start_;
  p.max_accumulators = budget_;
  p.mmq = c;
  p.mmq_alt.clear();
  p.min_workgroups = 0;
  const std::vector<float>& ref = ref_mmq(si);
  const double ms = run_one("mul_mmq", c.str(), shapes_[si], N_, [&] {
    Bufs& b = bufs(si);
    return tu_.measure(mmq_fn(si, p), b.ybuf, size_t{shapes_[si].m} * N_, &ref, 1e-9);
  });
  mmq_tiles_[c.str()] = c;
  auto& v = t_mmq_[c.str()];
  v.resize(shapes_.size(), HUGE_VAL);
  v[si] = ms;
  return ms;
}

double TuneRun::mm_time(size_t si, const tune::MatmulTile& c) {
  tune::DeviceProfile p = start_;
  p.max_accumulators = budget_;
  p.mm = c;
  const size_t ny = size_t{shapes_[si].m} * N_;
  const std::vector<float>& ref = ref_of(si, st_[si].ref_mm, "mul_mm", mm_fn(si, ref_p_), ny);
  const double ms = run_one("mul_mm", c.str(), shapes_[si], N_, [&] {
    Bufs& b = bufs(si);
    return tu_.measure(mm_fn(si, p), b.ybuf, ny, &ref, 1e-9);
  });
  mm_tiles_[c.str()] = c;
  auto& v = t_mm_[c.str()];
  v.resize(shapes_.size(), HUGE_VAL);
  v[si] = ms;
  return ms;
}

std::set<std::string> TuneRun::spilled(const char* prefix) {
  std::set<std::string> s;
  for (const auto& ps : vulkan::collect_statistics(*tu_.rig_.pipes))
    if (ps.spills && ps.pipeline.rfind(prefix, 0) == 0) s.insert(ps.pipeline);
  return s;
}

bool TuneRun::spills_new(const char* prefix, const std::set<std::string>& before) {
  for (const auto& name : spilled(prefix))
    if (!before.count(name)) return true;
  return false;
}

double TuneRun::mv_time(size_t si, const tune::MatvecRule& c) {
  tune::DeviceProfile p = start_;
  p.mmv = c;
  const std::vector<float>& ref = ref_of(si, st_[si].ref_mv, "matvec_mmq", mv_fn(si, start_), shapes_[si].m);
  const double ms = run_one("matvec_mmq", c.str(), shapes_[si], 1, [&] {
    Bufs& b = bufs(si);
    const std::set<std::string> before = spilled("matvec");
    Measure m = tu_.measure(mv_fn(si, p), b.ybuf, shapes_[si].m, &ref, 1e-9);
    if (m.error.empty() && spills_new("matvec", before))
      m.error = "spills registers to scratch memory (pipeline statistics)";
    return m;
  });
  auto& v = t_mmv_[c.str()];
  v.resize(shapes_.size(), HUGE_VAL);
  v[si] = ms;
  return ms;
}

std::vector<tune::MatmulTile> TuneRun::search(bool mmq, const std::vector<tune::MatmulTile>& seeds, size_t n_explore,
                                              size_t n_refine, size_t n_final) {
  const auto all = tune::all_tiles(mmq, limits_, budget_, mmq && !o_.quick, seeds.front());
  auto time = [&](size_t si, const tune::MatmulTile& c) { return mmq ? mmq_time(si, c) : mm_time(si, c); };
  std::vector<std::pair<double, tune::MatmulTile>> seen;
  auto try_on_prim = [&](const tune::MatmulTile& c) {
    for (const auto& [t, x] : seen)
      if (tune::same_tile(x, c)) return;
    seen.push_back({time(prim_, c), c});
  };
  for (const auto& c : tune::explore_set(mmq, all, seeds, limits_, budget_, n_explore)) try_on_prim(c);
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
      for (const auto& nb : tune::neighbours(t, all)) try_on_prim(nb);
    by_time();
    if (seen.size() == before || o_.quick) break;
  }
  std::vector<tune::MatmulTile> finals;
  for (const auto& s : seeds)
    if (tune::tile_fits(mmq, s, limits_, budget_)) finals.push_back(s);
  for (size_t i = 0; i < seen.size() && finals.size() < n_final + seeds.size(); ++i)
    if (std::isfinite(seen[i].first) &&
        std::none_of(finals.begin(), finals.end(), [&](const auto& f) { return tune::same_tile(f, seen[i].second); }))
      finals.push_back(seen[i].second);
  // Candidates for pick_mmq_tile's small-grid alternatives: the fastest tile (on the primary
  // shape) with at most half, and at most a quarter, of the best tile's area.
  if (!seen.empty() && std::isfinite(seen.front().first)) {
    const uint32_t area = seen.front().second.bm * seen.front().second.bn;
    for (uint32_t div : {2u, 4u})
      for (const auto& [t, c] : seen)
        if (std::isfinite(t) && c.bm * c.bn * div <= area) {
          if (std::none_of(finals.begin(), finals.end(), [&](const auto& f) { return tune::same_tile(f, c); }))
            finals.push_back(c);
          break;
        }
  }
  // Small grids favour other tiles: the best few on each other shape's own terms too.
  for (size_t si = 0; si < shapes_.size(); ++si)
    if (si != prim_)
      for (const auto& c : finals) time(si, c);
  return finals;
}

// The starting profile's tile is the reference; the fastest correct tile leads the tuned list, the
// starting ones follow as fallbacks (other head_dims, smaller devices).
void TuneRun::measure_attention() {
  as_ = model_attention(o_.model);
  const AttnShape& as = as_;
  if (!(as.n_head > 0 && as.head_dim % 4 == 0 && as.head_dim <= 256)) return;
  const uint32_t hd = as.head_dim, nkv = as.n_head_kv * hd;
  std::vector<float> qh(size_t{N_} * as.n_head * hd);
  std::vector<uint16_t> kh(size_t{N_} * nkv), vh(size_t{N_} * nkv);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (auto& x : qh) x = g(rng_);
  for (auto& x : kh) x = quant::f32_to_f16(g(rng_));
  for (auto& x : vh) x = quant::f32_to_f16(g(rng_));
  struct AttnBufs {
    vulkan::Buffer q, k, v, out;
  };
  std::unique_ptr<AttnBufs> ab;
  auto prev = tu_.on_rebuild;
  tu_.on_rebuild = [&] {
    prev();
    ab.reset();
  };
  auto abufs = [&]() -> AttnBufs& {
    if (ab) return *ab;
    vulkan::Memory& mem = *tu_.rig_.mem;
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
  const vulkan::ops::AttnArgs args{hd, as.n_head, as.n_head_kv, N_, 0, nkv, 1.0f / std::sqrt(float(hd))};
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
  const Measure rm = tu_.measure(attn_fn(start_), ab->out, qh.size(), nullptr, 0);
  if (!rm.error.empty()) fail("tune: the starting profile's attention fails on {}: {}", as.str(N_), rm.error);
  const std::vector<float> ref = tu_.last_y_;
  const tune::Shape dummy{DType::F16, as.n_head, hd, as.layers};
  attn_c_ = tune::attn_candidates(limits_, hd, start_.attn_tiles(hd), o_.quick);
  for (const auto& c : attn_c_) {
    tune::DeviceProfile p = start_;
    p.attn = {c};
    p.attn_wide = {c};
    t_attn_[c.str()] = run_one(
        "attention", c.str(), dummy, N_,
        [&] {
          abufs();
          // A tile whose pipeline spills (H200: 64,32,4,8 → 255 registers + 816 B of local
          // memory, 2.5× slower; docs/tuning-log.md #39) is refused, as spilling matvecs are.
          const std::set<std::string> before = spilled("attention_flash");
          Measure m = tu_.measure(attn_fn(p), ab->out, qh.size(), &ref, 1e-8);
          if (m.error.empty() && spills_new("attention_flash", before))
            m.error = "spills registers to local memory (pipeline statistics)";
          return m;
        },
        as.str(N_));
  }
  ab.reset();
  tu_.on_rebuild = prev;
}

int TuneRun::choose_and_write() {
  // mul_mmq: pick_mmq_tile's configuration with the least total.
  const std::optional<tune::MmqChoice> best = tune::choose_mmq(rec_.prof, t_mmq_, mmq_tiles_, shapes_, N_);
  if (!best) fail("tune: no mul_mmq candidate ran correctly on every shape (deny list in {})", out_);
  rec_.prof = best->prof;
  // Baseline: the starting profile's own choice (its tiles were measured as seeds).
  const double start_total = tune::mmq_total(start_, t_mmq_, shapes_, N_);
  // mul_mm and matvec: the least total.
  if (const std::string b = tune::least_total(t_mm_, shapes_); !b.empty()) rec_.prof.mm = mm_tiles_[b];
  if (const std::string b = tune::least_total(t_mmv_, shapes_); !b.empty())
    for (const auto& c : mmv_c_)
      if (c.str() == b) rec_.prof.mmv = c;
  if (!t_attn_.empty()) {
    if (const tune::FlashTile* b = tune::fastest_attn(attn_c_, t_attn_)) {
      const uint32_t hd = as_.head_dim;
      tune::lead_attn(rec_.prof, start_, hd, *b);
      // The starting list's first tile may not fit this head_dim (then it was never measured).
      const std::string st = start_.attn_tiles(hd).front().str();
      const auto st_it = t_attn_.find(st);
      fmt::print(stderr, "tune: attention {}: {} {:.3f} ms, the starting {} {}\n", as_.str(N_), b->str(),
                 t_attn_[b->str()], st,
                 st_it != t_attn_.end() && std::isfinite(st_it->second) ? fmt::format("{:.3f} ms", st_it->second)
                                                                        : std::string("does not fit"));
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  rec_.base["tune"]["seconds"] = std::round(secs * 10) / 10;
  rec_.base["tune"]["mmq_total_ms"] = best->total;
  rec_.base["tune"]["mmq_start_total_ms"] = start_total;
  rec_.save(true);
  fmt::print(stderr,
             "tune: mul_mmq over the model's matrices: {:.3f} ms with the tuned tiles, {:.3f} ms with {} ({:+.1f} %)\n",
             best->total, start_total, start_.name, 100.0 * (start_total / best->total - 1));
  fmt::print(stderr, "tune: {} candidate(s) denied; {:.1f} s\n", rec_.deny.size(), secs);
  fmt::print("{}\n{}\n", out_, rec_.prof.tiles_str());
  return 0;
}

int TuneRun::run() {
  open_record();
  fmt::print(stderr, "tune: {} ({}, driver {:08x}), from profile {}, budget {} accumulators, {} shapes × N = {}{}\n",
             tu_.info().name, tu_.info().driver_name, tu_.info().driver_version, start_.name, budget_, shapes_.size(),
             N_, o_.quick ? ", --quick" : "");
  fmt::print(stderr, "tune: writing {}\n", out_);
  // Inputs: random weights and activations per shape (their buffers are made when first needed).
  st_.resize(shapes_.size());
  for (size_t si = 0; si < shapes_.size(); ++si) {
    st_[si].wbytes = random_weights(shapes_[si].type, shapes_[si].m, shapes_[si].k, rng_);
    st_[si].x.resize(size_t{shapes_[si].k} * N_);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto& v : st_[si].x) v = u(rng_);
  }
  tu_.on_rebuild = [this] {
    for (auto& x : st_) x.b.reset();
  };
  ref_p_ = start_;
  ref_p_.max_accumulators = std::max(budget_, start_.max_accumulators);
  prim_ = tune::primary_shape(shapes_);
  fmt::print(stderr, "tune: primary shape {} (× {})\n", shapes_[prim_].str(N_), shapes_[prim_].count);

  std::vector<tune::MatmulTile> seeds{start_.mmq};
  for (const auto& t : start_.mmq_alt) seeds.push_back(t);
  if (o_.quick) {
    search(true, seeds, 6, 1, 3);
  } else {
    search(true, seeds, 12, 3, 6);
  }
  if (vulkan::ops::gpu_supports(shapes_[prim_].type)) {
    if (o_.quick) {
      search(false, {start_.mm}, 3, 0, 1);
    } else {
      search(false, {start_.mm}, 8, 2, 3);
    }
  }
  mmv_c_ = tune::matvec_candidates(limits_, start_.mmv, o_.quick);
  for (size_t si = 0; si < shapes_.size(); ++si)
    for (const auto& c : mmv_c_) mv_time(si, c);
  measure_attention();
  return choose_and_write();
}

int run_tune(const TuneOpts& o) {
  if (o.list) return run_list();
  if (!o.offline.empty()) return run_offline_tune(o.offline, o.out, o.quick, o.compiler);
  TuneRun r(o);
  return r.run();
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
