#include "tune/search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/error.hpp"

namespace rocky::tune {

// ---- shapes ----

std::string Shape::str(uint32_t n) const { return fmt::format("{} {}×{}×{}", dtype_name(type), m, n, k); }

// qwen2.5-3b q4_K_M (36 layers): q/o 2048×2048, k/v 256×2048, gate/up 11008×2048, down 2048×11008
// (v and down are q6_K in half the layers).
std::vector<Shape> default_shapes() {
  return {{DType::Q4_K, 2048, 2048, 72},  {DType::Q4_K, 256, 2048, 54},   {DType::Q6_K, 256, 2048, 18},
          {DType::Q4_K, 11008, 2048, 72}, {DType::Q4_K, 2048, 11008, 18}, {DType::Q6_K, 2048, 11008, 18}};
}

size_t primary_shape(const std::vector<Shape>& shapes) {
  size_t prim = 0;
  for (size_t si = 1; si < shapes.size(); ++si)
    if (uint64_t{shapes[si].count} * shapes[si].m * shapes[si].k >
        uint64_t{shapes[prim].count} * shapes[prim].m * shapes[prim].k)
      prim = si;
  return prim;
}

// ---- candidates ----

std::vector<FlashTile> attn_candidates(const DeviceLimits& d, uint32_t hd, const std::vector<FlashTile>& seeds,
                                       bool quick) {
  std::vector<FlashTile> v;
  auto fits = [&](const FlashTile& t) {
    return t.br % t.tr == 0 && t.wg % (t.br / t.tr) == 0 && t.wg <= d.max_invocations &&
           t.shared_bytes(hd, true) <= d.shared_memory && t.ct() > 0;
  };
  auto add = [&](const FlashTile& t) {
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
        FlashTile t = v[i];
        t.roll = 1;
        add(t);
      }
  }
  return v;
}

MatmulTile make_tile(uint32_t bm, uint32_t bn, uint32_t bk, uint32_t tm, uint32_t tn, uint32_t pf, uint32_t v4) {
  MatmulTile t;
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

double cycles_per_mac(const MatmulTile& t, double cycles) { return cycles / (double(t.tm) * t.tn * t.bk); }

double modeled_cost_per_mac(const MatmulTile& t, double cycles, int work_regs) {
  return cycles_per_mac(t, cycles) * (work_regs > 32 ? 1.25 : 1.0);
}

bool same_tile(const MatmulTile& a, const MatmulTile& b) { return a.str() == b.str(); }

bool tile_fits(bool mmq, const MatmulTile& t, const DeviceLimits& d, uint32_t budget) {
  const uint32_t acc = mmq ? t.mmq_accumulators() : t.accumulators();
  const uint32_t shared = mmq ? t.mmq_shared_bytes() : t.mm_shared_bytes();
  return check_tile(t, acc, shared, budget, d.shared_memory, d.max_invocations).empty();
}

std::vector<MatmulTile> all_tiles(bool mmq, const DeviceLimits& d, uint32_t budget, bool vary_flags,
                                  const MatmulTile& flags) {
  std::vector<MatmulTile> v;
  for (uint32_t bm : {16u, 32u, 64u, 128u})
    for (uint32_t bn : {16u, 32u, 64u, 128u})
      for (uint32_t bk : {32u, 64u})
        for (uint32_t tm : {1u, 2u, 4u, 8u})
          for (uint32_t tn : {1u, 2u, 4u, 8u})
            for (uint32_t pf : {1u, 0u})
              for (uint32_t v4 : {0u, 1u}) {
                if (!mmq && (pf != 1 || v4 != 1)) continue;  // mul_mm has neither
                if (mmq && !vary_flags && (pf != flags.prefetch || v4 != flags.vec4)) continue;
                const MatmulTile t = make_tile(bm, bn, bk, tm, tn, pf, v4);
                if (t.wg < 32 || bm < tm || bn < tn || !tile_fits(mmq, t, d, budget)) continue;
                v.push_back(t);
              }
  return v;
}

std::vector<MatmulTile> explore_set(bool mmq, const std::vector<MatmulTile>& all, const std::vector<MatmulTile>& seeds,
                                    const DeviceLimits& d, uint32_t budget, size_t limit) {
  std::vector<MatmulTile> out;
  auto add = [&](const MatmulTile& t) {
    if (std::none_of(out.begin(), out.end(), [&](const MatmulTile& o) { return same_tile(o, t); })) out.push_back(t);
  };
  for (const auto& s : seeds)
    if (tile_fits(mmq, s, d, budget)) add(s);
  const uint32_t top = mmq ? budget / 2 : budget;  // tm · tn at the budget
  std::vector<MatmulTile> sorted = all;
  std::stable_sort(sorted.begin(), sorted.end(), [](const MatmulTile& a, const MatmulTile& b) {
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

std::vector<MatmulTile> neighbours(const MatmulTile& t, const std::vector<MatmulTile>& all) {
  std::vector<MatmulTile> v;
  auto want = [&](uint32_t bm, uint32_t bn, uint32_t bk, uint32_t tm, uint32_t tn, uint32_t pf, uint32_t v4) {
    const MatmulTile c = make_tile(bm, bn, bk, tm, tn, pf, v4);
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

std::vector<MatvecRule> matvec_candidates(const DeviceLimits& d, const MatvecRule& seed, bool quick) {
  std::vector<MatvecRule> v{seed};
  for (uint32_t wg : {32u, 64u, 128u, 256u})
    for (uint32_t rows : {1u, 2u, 4u, 8u})
      for (uint32_t split : {0u, 1u, 2u})
        for (uint32_t unroll : {1u, 2u}) {
          if (wg > d.max_invocations || uint64_t{rows} * wg * 4 > d.shared_memory) continue;
          if (quick && (unroll != 1 || split != seed.split || (rows != 1 && rows != 4) || wg == 256)) continue;
          MatvecRule r{wg, rows, seed.min_groups, split, unroll, 0};
          if (std::find(v.begin(), v.end(), r) == v.end()) v.push_back(r);
        }
  return v;
}

// ---- choose ----

namespace {
uint64_t groups_of(const MatmulTile& t, uint32_t m, uint32_t n) {
  return uint64_t{(m + t.bm - 1) / t.bm} * ((n + t.bn - 1) / t.bn);
}
// A shape's time of `key`, HUGE_VAL when not measured.
double time_of(const Times& t, const std::string& key, size_t si) {
  const auto it = t.find(key);
  return it != t.end() && si < it->second.size() ? it->second[si] : HUGE_VAL;
}
}  // namespace

double total_time(const std::vector<double>& v, const std::vector<Shape>& shapes) {
  double t = 0;
  for (size_t i = 0; i < v.size() && i < shapes.size(); ++i) t += v[i] * shapes[i].count;
  return v.size() < shapes.size() ? HUGE_VAL : t;
}

std::string least_total(const Times& t, const std::vector<Shape>& shapes) {
  std::string b;
  for (const auto& [k, v] : t)
    if (std::isfinite(total_time(v, shapes)) && (b.empty() || total_time(v, shapes) < total_time(t.at(b), shapes)))
      b = k;
  return b;
}

double mmq_total(const DeviceProfile& p, const Times& t_mmq, const std::vector<Shape>& shapes, uint32_t n) {
  double t = 0;
  for (size_t si = 0; si < shapes.size(); ++si)
    t += time_of(t_mmq, pick_mmq_tile(p, shapes[si].m, n).str(), si) * shapes[si].count;
  return t;
}

std::optional<MmqChoice> choose_mmq(const DeviceProfile& base, const Times& t_mmq,
                                    const std::map<std::string, MatmulTile>& tiles, const std::vector<Shape>& shapes,
                                    uint32_t n) {
  std::vector<std::string> mains;
  for (const auto& [k, v] : t_mmq)
    if (std::isfinite(total_time(v, shapes))) mains.push_back(k);
  if (mains.empty()) return std::nullopt;
  std::sort(mains.begin(), mains.end(),
            [&](auto& a, auto& b) { return total_time(t_mmq.at(a), shapes) < total_time(t_mmq.at(b), shapes); });
  // The fastest tile of each shape: the alternatives pick_mmq_tile may take for small grids.
  std::set<std::string> winners;
  for (size_t si = 0; si < shapes.size(); ++si) {
    std::string best;
    for (const auto& [k, v] : t_mmq)
      if (std::isfinite(v[si]) && (best.empty() || v[si] < t_mmq.at(best)[si])) best = k;
    if (!best.empty()) winners.insert(best);
  }
  MmqChoice best{base, HUGE_VAL};
  auto eval = [&](const MatmulTile& main, const std::vector<MatmulTile>& alts, uint32_t minwg) {
    DeviceProfile p = base;
    p.mmq = main;
    p.mmq_alt = alts;
    p.min_workgroups = minwg;
    const double t = mmq_total(p, t_mmq, shapes, n);
    if (t < best.total) best = {p, t};
  };
  for (size_t mi = 0; mi < std::min<size_t>(mains.size(), 5); ++mi) {
    const MatmulTile& main = tiles.at(mains[mi]);
    std::vector<MatmulTile> alts;
    for (const auto& w : winners)
      if (w != mains[mi]) alts.push_back(tiles.at(w));
    std::set<uint32_t> thresholds{0};
    for (const auto& s : shapes) {
      thresholds.insert(static_cast<uint32_t>(groups_of(main, s.m, n) + 1));
      for (const auto& a : alts) thresholds.insert(static_cast<uint32_t>(groups_of(a, s.m, n) + 1));
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
  if (best.prof.mmq_alt.empty()) best.prof.min_workgroups = 0;
  return best;
}

const FlashTile* fastest_attn(const std::vector<FlashTile>& cands, const std::map<std::string, double>& times) {
  const FlashTile* b = nullptr;
  auto t = [&](const FlashTile& c) {
    const auto it = times.find(c.str());
    return it != times.end() ? it->second : 0.0;
  };
  for (const auto& c : cands)
    if (std::isfinite(t(c)) && (!b || t(c) < t(*b))) b = &c;
  return b;
}

void lead_attn(DeviceProfile& prof, const DeviceProfile& start, uint32_t hd, const FlashTile& best) {
  std::vector<FlashTile>& list = hd > 128 ? prof.attn_wide : prof.attn;
  if (hd > 128 && list.empty()) list = start.attn;
  list.erase(std::remove(list.begin(), list.end(), best), list.end());
  list.insert(list.begin(), best);
}

// ---- write ----

bool TuneRecord::denied(const std::string& kernel, const std::string& tile) const {
  return std::any_of(deny.begin(), deny.end(),
                     [&](const DenyEntry& d) { return d.kernel == kernel && d.tile == tile; });
}

void TuneRecord::save(bool complete) {
  nlohmann::json j = profile_to_json(prof, base_name);
  for (auto it = base.begin(); it != base.end(); ++it) j[it.key()] = it.value();
  j["tune"]["complete"] = complete ? 1 : 0;
  j["deny"] = nlohmann::json::array();
  for (const auto& d : deny) j["deny"].push_back({{"kernel", d.kernel}, {"tile", d.tile}, {"reason", d.reason}});
  j["results"] = nlohmann::json::array();
  for (const auto& [k, v] : results) j["results"].push_back(v);
  write_json_file(path, j);
}

void TuneRecord::resume(const DeviceKey& key, bool quick, uint32_t tokens, const std::string& start_name) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  try {
    const nlohmann::json old = read_json_file(path);
    const StoredKey sk = stored_key(old);
    if (!sk.ok || sk.key.vendor_id != key.vendor_id || sk.key.device_id != key.device_id ||
        sk.key.driver_version != key.driver_version)
      return;
    if (old.contains("deny") && old["deny"].is_array())
      for (const auto& d : old["deny"])
        if (d.is_object() && d.value("kernel", "") != "")
          deny.push_back({d.value("kernel", ""), d.value("tile", ""), d.value("reason", "")});
    const bool same = old.contains("tune") && old["tune"].is_object() && old["tune"].value("complete", 1) == 0 &&
                      old["tune"].value("quick", -1) == (quick ? 1 : 0) && old["tune"].value("tokens", 0u) == tokens &&
                      old["tune"].value("start_profile", "") == start_name;
    size_t kept = 0;
    if (same && old.contains("results") && old["results"].is_array()) {
      for (const auto& r : old["results"]) {
        if (!r.is_object() || !r.contains("key")) continue;
        if (r.value("status", "") == "running") {
          deny.push_back({r.value("kernel", ""), r.value("tile", ""),
                          "did not finish: the process ended while it ran (hung GPU?)"});
          continue;
        }
        results[r["key"].get<std::string>()] = r;
        ++kept;
      }
    }
    fmt::print(stderr, "tune: {}: {} denied candidate(s) kept{}\n", path, deny.size(),
               same ? fmt::format(", resuming with {} measurement(s)", kept) : "");
  } catch (const Error& e) {
    fmt::print(stderr, "tune: {}: not resumed ({})\n", path, e.what());
  }
}

}  // namespace rocky::tune
