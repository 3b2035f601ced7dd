// rocky tune --offline mali-g610 (see tune_offline.hpp).
//
// The model: every mul_mmq candidate within the G610's limits (32 KiB shared memory, 256
// invocations, the mali-valhall register budget of 16 accumulator registers) is compiled for q4_K
// (the bulk of a q4_K_M model) by the offline Valhall compiler; a candidate that spills, fills or
// needs thread-local storage is denied. The rest are ranked by the compiler's static cycle estimate
// per multiply-accumulate of one invocation's inner loop, cycles / (TM · TN · BK), times 1.25 when
// the shader needs more than 32 work registers (half occupancy: less latency hiding); equal costs
// go to the tile with less global traffic per multiply-add (1/BM + 1/BN), then more rows. The
// estimate counts each loop body once, so it compares variants of one shader; it predicts no run
// time.
// The best candidate must then compile spill-free for every mul_mmq weight type (both repack
// layouts, no / bias / residual epilogue) with and without the int8 dot (mul_mmq, mul_mmq_nodot),
// else the next one is taken. mul_mm the same way (f32 tiles, budget: TM · TN ≤ 16).
// Small tiles (few accumulators) are candidates too: only they fit in 32 work registers, and the
// run prints (and the profile's "occupancy" records) the best of those against the chosen tile,
// with the half-occupancy penalty at which they would win. The matvec rule and the flash-attention
// tiles stay the mali-valhall profile's (its own offline checks: tests/fast/test_mali.cpp).
#include "lab/tune_offline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "backend/vulkan/shader_table.hpp"
#include "backend/vulkan/shaders/abi.h"
#include "backend/vulkan/shaders/fast_abi.h"
#include "core/error.hpp"
#include "tune/search.hpp"
#include "tune/store.hpp"

namespace rocky::lab {
namespace {

struct Stats {
  bool ok = false;
  std::string error;
  double cycles = 0;
  int work_regs = 0, spills = 0, fills = 0, tls = 0;
};

std::string quote(const std::string& s) { return "'" + s + "'"; }

Stats compile(const std::string& compiler, const std::string& spv, const std::vector<std::pair<int, uint32_t>>& spec) {
  std::string cmd = quote(compiler) + " " + quote(spv);
  for (auto [id, v] : spec) cmd += fmt::format(" -s {}={}", id, v);
  cmd += " --json 2>&1";
  Stats s;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) fail("tune --offline: cannot run {}", compiler);
  std::string out;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int st = pclose(p);
  const size_t b = out.find('{');
  if (st != 0 || b == std::string::npos) {
    if (st != 0 && WIFEXITED(st) && WEXITSTATUS(st) == 2)
      fail("tune --offline: {} is not set up (exit 2): {}", compiler, out.substr(0, 400));
    if (st != 0 && WIFEXITED(st) && WEXITSTATUS(st) == 127)
      fail(
          "tune --offline: cannot run the compiler '{}' (not found): put ../shared/mali on PATH or pass --compiler "
          "PATH/TO/g610-stats",
          compiler);
    s.error = fmt::format("did not compile: {}", out.substr(0, 200));
    return s;
  }
  try {
    const nlohmann::json j = nlohmann::json::parse(out.substr(b, out.find('\n', b) - b));
    s.cycles = j.at("cycles").get<double>();
    s.work_regs = j.at("work_regs").get<int>();
    s.spills = j.at("spills").get<int>();
    s.fills = j.at("fills").get<int>();
    s.tls = j.at("tls_bytes").get<int>();
  } catch (const std::exception& e) {
    s.error = fmt::format("unreadable compiler statistics ({}): {}", e.what(), out.substr(0, 200));
    return s;
  }
  if (s.spills || s.fills || s.tls)
    s.error = fmt::format("spills {}:{}, tls {} B", s.spills, s.fills, s.tls);
  else
    s.ok = true;
  return s;
}

std::vector<std::pair<int, uint32_t>> mmq_spec(const tune::MatmulTile& t, uint32_t type, bool nib) {
  return {{ROCKY_SC_WG, t.wg},
          {ROCKY_SC_WTYPE, type},
          {ROCKY_SC_BM, t.bm},
          {ROCKY_SC_BN, t.bn},
          {ROCKY_SC_BK, t.bk},
          {ROCKY_SC_WM, t.wm},
          {ROCKY_SC_WN, t.wn},
          {ROCKY_SC_TM, t.tm},
          {ROCKY_SC_TN, t.tn},
          {ROCKY_SC_BK_STEP, t.bk_step},
          {ROCKY_SC_PREFETCH, t.prefetch},
          {ROCKY_SC_MMQ_NIB, nib ? 1u : 0u},
          {ROCKY_SC_MMQ_VEC4, t.vec4}};
}

std::vector<std::pair<int, uint32_t>> mm_spec(const tune::MatmulTile& t, uint32_t type) {
  return {{ROCKY_SC_WG, t.wg}, {ROCKY_SC_WTYPE, type}, {ROCKY_SC_BM, t.bm}, {ROCKY_SC_BN, t.bn}, {ROCKY_SC_BK, t.bk},
          {ROCKY_SC_WM, t.wm}, {ROCKY_SC_WN, t.wn},    {ROCKY_SC_TM, t.tm}, {ROCKY_SC_TN, t.tn}};
}

// A ranked candidate: its modeled cost per multiply-add and the compiler's figures behind it.
struct Ranked {
  tune::MatmulTile t;
  double cost;
  double cycles;
  int work_regs;
  bool other_layout;  // mul_mmq compiled with the other q4_K layout: compared, never chosen
};

// One compiled candidate into the results (and the deny list, or the ranking).
void record(const std::string& kernel, const tune::MatmulTile& t, const Stats& s, bool other_layout,
            const std::string& what, nlohmann::json& results, tune::DeviceProfile& prof, std::vector<Ranked>& ranked) {
  nlohmann::json r{{"kernel", kernel}, {"type", "q4_K"}, {"tile", t.str()}};
  if (other_layout) r["layout"] = "other";
  if (!s.ok) {
    r["status"] = "denied";
    r["reason"] = s.error;
    prof.deny.push_back({kernel, t.str(), "mali-g610 q4_K: " + s.error});
    fmt::print(stderr, "tune --offline: {}: denied: {}\n", what, s.error);
  } else {
    const double cost = tune::modeled_cost_per_mac(t, s.cycles, s.work_regs);
    r["status"] = "ok";
    r["cycles"] = s.cycles;
    r["work_regs"] = s.work_regs;
    r["cost"] = cost;
    ranked.push_back({t, cost, s.cycles, s.work_regs, other_layout});
    fmt::print(stderr, "tune --offline: {}: {} cycles, {} work registers: {:.4f} per MAC\n", what, s.cycles,
               s.work_regs, cost);
  }
  results.push_back(r);
}

// Full occupancy (≤ 32 work registers) against the chosen tile: the best such candidate, its
// modeled cost, and the half-occupancy penalty above which it would win (its cost over the chosen
// tile's cycles per multiply-add) — the model's one guessed factor is 1.25.
nlohmann::json occupancy_note(const std::string& kernel, const Ranked& chosen, const std::vector<Ranked>& ranked) {
  auto row = [](const Ranked& r) {
    nlohmann::json j{{"tile", r.t.str()}, {"cycles", r.cycles}, {"work_regs", r.work_regs}, {"cost", r.cost}};
    if (r.other_layout) j["q4_K_layout"] = "the profile's other one";
    return j;
  };
  nlohmann::json j{{"chosen", row(chosen)}};
  if (chosen.work_regs <= 32) {
    fmt::print(stderr, "tune --offline: {}: the chosen tile runs at full occupancy ({} work registers)\n", kernel,
               chosen.work_regs);
    return j;
  }
  const Ranked* full = nullptr;
  for (const Ranked& r : ranked)  // ranked is sorted by cost
    if (r.work_regs <= 32) {
      full = &r;
      break;
    }
  if (!full) {
    fmt::print(stderr, "tune --offline: {}: no candidate compiles spill-free in ≤ 32 work registers\n", kernel);
    j["full"] = nullptr;
    return j;
  }
  const double raw = tune::cycles_per_mac(chosen.t, chosen.cycles);
  j["full"] = row(*full);
  j["break_even_penalty"] = full->cost / raw;
  fmt::print(stderr,
             "tune --offline: {}: the best full-occupancy tile, {}{} ({} work registers), models at {:.4f} per MAC "
             "against the chosen {:.4f} ({} work registers): half occupancy would have to cost more than {:.2f}x "
             "(the model assumes 1.25x) for it to win\n",
             kernel, full->t.str(), full->other_layout ? " in the other q4_K layout" : "", full->work_regs, full->cost,
             chosen.cost, chosen.work_regs, full->cost / raw);
  return j;
}

}  // namespace

int run_offline_tune(const std::string& target, const std::string& out, bool quick, const std::string& compiler_in) {
  if (target != "mali-g610") fail("--offline {}: the offline targets are: mali-g610", target);
  const std::string compiler = compiler_in.empty() ? "g610-stats" : compiler_in;
  const auto t0 = std::chrono::steady_clock::now();
  // Mali-G610 (../shared/PLATFORMS.md): 32 KiB shared memory, ≤ 256 invocations used here.
  const tune::DeviceLimits limits{256, 32768};
  const tune::DeviceProfile& base = tune::builtin_profile("mali-valhall");
  const uint32_t budget = base.max_accumulators;
  // The SPIR-V rocky embeds, written out for the compiler.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / fmt::format("rocky-tune-{}", getpid());
  std::filesystem::create_directories(dir);
  auto spv = [&](const std::string& name) {
    const std::string path = (dir / (name + ".spv")).string();
    if (!std::filesystem::exists(path)) {
      const vulkan::EmbeddedShader& s = vulkan::find_shader(name);
      std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(s.code), static_cast<long>(s.size));
    }
    return path;
  };

  tune::DeviceProfile prof = base;
  prof.modeled = true;
  prof.deny.clear();
  nlohmann::json results = nlohmann::json::array();

  // Candidates.
  auto candidates = [&](bool mmq) {
    std::vector<tune::MatmulTile> v;
    for (uint32_t bm : {16u, 32u, 64u, 128u})
      for (uint32_t bn : {16u, 32u, 64u})
        for (uint32_t bk : {32u, 64u})
          for (uint32_t tm : {1u, 2u, 4u, 8u})
            for (uint32_t tn : {1u, 2u, 4u, 8u})
              for (uint32_t pf : {0u, 1u})
                for (uint32_t v4 : {0u, 1u}) {
                  if (!mmq && (pf != 1 || v4 != 1)) continue;
                  if (quick && (bk != 32 || (mmq && pf != v4))) continue;
                  const tune::MatmulTile t = tune::make_tile(bm, bn, bk, tm, tn, pf, v4);
                  if (t.wg < 64 || bm < tm || bn < tn || !tune::tile_fits(mmq, t, limits, budget)) continue;
                  // Tiles far below the budget are kept: they are the ones that fit in 32 work
                  // registers (full occupancy), and the model, not a rule, decides against them.
                  v.push_back(t);
                }
    // The hand-made tile first (a baseline in the results), then by tile area.
    const tune::MatmulTile& seed = mmq ? base.mmq : base.mm;
    std::stable_sort(v.begin(), v.end(),
                     [](const tune::MatmulTile& a, const tune::MatmulTile& b) { return a.bm * a.bn > b.bm * b.bn; });
    v.erase(std::remove_if(v.begin(), v.end(), [&](const tune::MatmulTile& t) { return t.str() == seed.str(); }),
            v.end());
    v.insert(v.begin(), seed);
    return v;
  };

  nlohmann::json occupancy = nlohmann::json::object();
  for (const bool mmq : {true, false}) {
    const std::string kernel = mmq ? "mul_mmq" : "mul_mm";
    const std::vector<tune::MatmulTile> cands = candidates(mmq);
    std::vector<Ranked> ranked;
    size_t i = 0;
    for (const auto& t : cands) {
      ++i;
      const std::string what = fmt::format("[{}/{}] {} {}", i, cands.size(), kernel, t.str());
      const Stats s = mmq ? compile(compiler, spv("mul_mmq"), mmq_spec(t, 12, base.mmq_q4k_nibbles))
                          : compile(compiler, spv("mul_mm"), mm_spec(t, 12));
      record(kernel, t, s, false, what, results, prof, ranked);
      // A small tile over 32 work registers in the profile's q4_K layout may fit in the other
      // layout: compared for occupancy below, never chosen (the layout is the profile's).
      if (mmq && s.ok && s.work_regs > 32 && t.mmq_accumulators() * 4 <= budget) {
        const Stats o = compile(compiler, spv("mul_mmq"), mmq_spec(t, 12, !base.mmq_q4k_nibbles));
        if (o.ok && o.work_regs <= 32) record(kernel, t, o, true, what + " (other q4_K layout)", results, prof, ranked);
      }
    }
    // Equal modeled costs (common: the estimate counts a loop body once): less global traffic per
    // multiply-add first (1/BM + 1/BN, which the static model does not see), then more weight rows.
    std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
      if (std::abs(a.cost - b.cost) > 1e-9 * std::max(a.cost, b.cost)) return a.cost < b.cost;
      const double ta = 1.0 / a.t.bm + 1.0 / a.t.bn, tb = 1.0 / b.t.bm + 1.0 / b.t.bn;
      if (ta != tb) return ta < tb;
      if (a.t.bm != b.t.bm) return a.t.bm > b.t.bm;
      return a.t.tm > b.t.tm;
    });
    // The winner must compile spill-free for every weight type and variant shipped.
    bool found = false;
    for (const Ranked& r : ranked) {
      if (r.other_layout) continue;
      std::string why;
      if (mmq) {
        for (const char* sh : {"mul_mmq", "mul_mmq_nodot"})
          for (uint32_t type : {2u, 6u, 7u, 8u, 12u, 13u, 14u})
            for (bool nib : {false, true})
              for (uint32_t epi : {0u, uint32_t{ROCKY_MMQ_EPI_BIAS}, uint32_t{ROCKY_MMQ_EPI_RESIDUAL}}) {
                if (!why.empty()) continue;
                auto spec = mmq_spec(r.t, type, nib);
                spec.push_back({ROCKY_SC_MMQ_EPI, epi});
                const Stats s = compile(compiler, spv(sh), spec);
                if (!s.ok)
                  why = fmt::format("{} type {}{} epilogue {}: {}", sh, type, nib ? " nibbles" : "", epi, s.error);
              }
      } else {
        for (const char* sh : {"mul_mm", "mul_mm_f16"})
          for (uint32_t type : {1u, 2u, 8u, 12u, 14u}) {
            if (!why.empty()) continue;
            const Stats s = compile(compiler, spv(sh), mm_spec(r.t, type));
            if (!s.ok) why = fmt::format("{} type {}: {}", sh, type, s.error);
          }
      }
      if (!why.empty()) {
        prof.deny.push_back({kernel, r.t.str(), "mali-g610: " + why});
        fmt::print(stderr, "tune --offline: {} {}: denied: {}\n", kernel, r.t.str(), why);
        continue;
      }
      (mmq ? prof.mmq : prof.mm) = r.t;
      fmt::print(stderr, "tune --offline: {}: {} (modeled cost {:.4f} per MAC; the hand-made {}: {})\n", kernel,
                 r.t.str(), r.cost, (mmq ? base.mmq : base.mm).str(), [&] {
                   for (const Ranked& x : ranked)
                     if (x.t.str() == (mmq ? base.mmq : base.mm).str()) return fmt::format("{:.4f}", x.cost);
                   return std::string("denied");
                 }());
      occupancy[kernel] = occupancy_note(kernel, r, ranked);
      found = true;
      break;
    }
    if (!found) fail("tune --offline: no {} candidate compiles spill-free for every type", kernel);
  }
  prof.mmq_alt.clear();  // one tile: the G610 fills its 4 cores with any prefill grid
  prof.min_workgroups = 0;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);

  nlohmann::json j = tune::profile_to_json(prof, base.name);
  j["tune"] = {{"tool", "rocky tune --offline"},
               {"target", "mali-g610"},
               {"compiler", "Mesa 25.0.7 Valhall (../shared/mali/g610-stats)"},
               {"quick", quick ? 1 : 0},
               {"complete", 1},
               {"seconds", std::round(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count())}};
  j["note"] =
      "modeled: ranked by the offline Mali-G610 compiler's statistics (spill-free, static cycles per MAC), never run "
      "on a board";
  j["occupancy"] = occupancy;
  j["results"] = results;
  tune::write_json_file(out, j);
  fmt::print("{}\n{}\n", out, prof.tiles_str());
  return 0;
}

}  // namespace rocky::lab
