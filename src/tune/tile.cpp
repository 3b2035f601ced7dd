#include "tune/tile.hpp"

#include <fmt/format.h>

#include <fstream>
#include <string_view>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace rocky::tune {

uint32_t MatmulTile::derived_invocations() const {
  if (!wm || !wn || !tm || !tn) return 0;
  return (bm / wm) * (bn / wn) * (wm / tm) * (wn / tn);
}

uint32_t MatmulTile::mmq_shared_bytes() const {
  const uint32_t bb = bk / 32;
  return bb * 8 * bm * 4 + bb * bm * 16 + bb * 8 * bn * 4 + bb * bn * 8;
}

uint32_t MatmulTile::mm_shared_bytes() const { return (bm + bn) * bk * 4; }

std::string MatmulTile::str() const {
  return fmt::format("bm{} bn{} bk{} wm{} wn{} tm{} tn{} wg{} step{} pf{}", bm, bn, bk, wm, wn, tm, tn, wg, bk_step,
                     prefetch);
}

namespace {

MatmulTile tile(uint32_t bm, uint32_t bn, uint32_t bk, uint32_t wm, uint32_t wn, uint32_t tm, uint32_t tn,
                uint32_t prefetch = 1) {
  MatmulTile t{bm, bn, bk, wm, wn, tm, tn, 0, 1, prefetch};
  t.wg = t.derived_invocations();
  return t;
}

}  // namespace

const std::vector<DeviceProfile>& builtin_profiles() {
  // Budgets: Mali-Valhall 16 (anchors.md: 16 accumulators spill-free, 32 halve occupancy); Adreno
  // and Intel keep to 32; AMD/NVIDIA desktop GPUs have 128–255 registers per thread: 64.
  static const std::vector<DeviceProfile> all = {
      // mul_mmq 4×2 → 16 accumulator registers: 0 spills, tls 0 with Mesa 25.0.7's G610 compiler
      // (4×4 → 32 spilled 13:68, 200 B: docs/tuning-log.md).
      {"mali-valhall", 16, tile(64, 32, 32, 32, 16, 4, 2, 0), tile(64, 32, 32, 32, 16, 4, 4)},
      {"adreno", 32, tile(64, 64, 32, 32, 32, 4, 4), tile(64, 64, 32, 32, 32, 4, 8)},
      {"intel", 32, tile(64, 64, 32, 32, 32, 4, 4), tile(64, 64, 32, 32, 32, 4, 8)},
      {"amd", 64, tile(128, 64, 32, 64, 32, 8, 4), tile(128, 64, 32, 64, 32, 8, 4)},
      // H200: 8×4 was the fastest of 8 tiles and does not spill; 8×8 spilled (tuning-log #1).
      // (sweep 4: 64×256, 4×8 per invocation, BK 64, 512 invocations: 36.1 TFLOPS at q4_K
      // 4096×512×14336, the fastest of 31 configurations: docs/tuning-log.md).
      {"nvidia", 64, tile(64, 256, 64, 32, 64, 4, 8), tile(128, 64, 32, 64, 32, 8, 4)},
      {"llvmpipe", 32, tile(32, 32, 32, 16, 16, 4, 4), tile(32, 32, 32, 16, 16, 4, 4)},
      {"generic", 16, tile(64, 32, 32, 32, 16, 4, 2, 0), tile(64, 32, 32, 32, 16, 4, 4)},
  };
  return all;
}

const DeviceProfile& builtin_profile(const std::string& name) {
  std::string names;
  for (const auto& p : builtin_profiles()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  fail("unknown tuning profile '{}' (built in: {})", name, names);
}

const DeviceProfile& select_profile(uint32_t vendor_id, const std::string& driver_name) {
  if (driver_name.find("llvmpipe") != std::string::npos || driver_name.find("lavapipe") != std::string::npos)
    return builtin_profile("llvmpipe");
  switch (vendor_id) {
    case 0x13B5: return builtin_profile("mali-valhall");
    case 0x5143: return builtin_profile("adreno");
    case 0x8086: return builtin_profile("intel");
    case 0x1002: return builtin_profile("amd");
    case 0x10DE: return builtin_profile("nvidia");
    default: break;
  }
  if (driver_name.find("panvk") != std::string::npos) return builtin_profile("mali-valhall");
  return builtin_profile("generic");
}

namespace {

MatmulTile tile_from_json(const nlohmann::json& j, const MatmulTile& base, const std::string& where) {
  MatmulTile t = base;
  if (!j.is_object()) fail("{}: expected an object", where);
  const std::pair<const char*, uint32_t*> fields[] = {{"bm", &t.bm}, {"bn", &t.bn}, {"bk", &t.bk},
                                                      {"wm", &t.wm}, {"wn", &t.wn}, {"tm", &t.tm},
                                                      {"tn", &t.tn}, {"wg", &t.wg}, {"bk_step", &t.bk_step},
                                                      {"prefetch", &t.prefetch}};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const auto& [name, dst] : fields) {
      if (it.key() != name) continue;
      known = true;
      const uint64_t lo = std::string_view(name) == "prefetch" ? 0 : 1, hi = std::string_view(name) == "prefetch" ? 1 : 4096;
      if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() < lo || it.value().get<uint64_t>() > hi)
        fail("{}.{}: expected an integer in {}..{}", where, name, lo, hi);
      *dst = it.value().get<uint32_t>();
    }
    if (!known) fail("{}: unknown field '{}'", where, it.key());
  }
  if (!j.contains("wg")) t.wg = t.derived_invocations();
  return t;
}

}  // namespace

DeviceProfile load_profile_override(const std::string& path, const DeviceProfile& base) {
  std::ifstream f(path);
  if (!f) fail("{}: cannot open the tuning profile", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON ({})", path, e.what());
  }
  if (!j.is_object()) fail("{}: expected a JSON object", path);
  DeviceProfile p = base;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k == "profile") {
      if (!it.value().is_string()) fail("{}: profile: expected a name", path);
      std::string keep_name = it.value().get<std::string>();
      p = builtin_profile(keep_name);
    }
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k == "profile") continue;
    if (k == "max_accumulators") {
      if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() == 0 || it.value().get<uint64_t>() > 1024)
        fail("{}: max_accumulators: expected an integer in 1..1024", path);
      p.max_accumulators = it.value().get<uint32_t>();
    } else if (k == "mmq") {
      p.mmq = tile_from_json(it.value(), p.mmq, path + ": mmq");
    } else if (k == "mm") {
      p.mm = tile_from_json(it.value(), p.mm, path + ": mm");
    } else {
      fail("{}: unknown field '{}' (profile, max_accumulators, mmq, mm)", path, k);
    }
  }
  p.name += " (override " + path + ")";
  return p;
}

std::string check_tile(const MatmulTile& t, uint32_t accumulators, uint32_t shared_bytes, uint32_t max_accumulators,
                       uint32_t shared_limit, uint32_t max_invocations) {
  if (t.bk % 32) return fmt::format("BK {} is not a multiple of 32 (the q8_1 block)", t.bk);
  if (!t.wm || !t.wn || !t.tm || !t.tn || t.bm % t.wm || t.bn % t.wn || t.wm % t.tm || t.wn % t.tn)
    return fmt::format("tile {}: BM/WM, BN/WN, WM/TM, WN/TN must divide exactly", t.str());
  if (t.derived_invocations() != t.wg)
    return fmt::format("tile {}: workgroup size {} ≠ (BM/WM)(BN/WN)(WM/TM)(WN/TN) = {}", t.str(), t.wg,
                       t.derived_invocations());
  if (t.wg > max_invocations) return fmt::format("tile {}: {} invocations > the device's {}", t.str(), t.wg, max_invocations);
  if (accumulators > max_accumulators)
    return fmt::format("tile {}: {} accumulator registers per invocation > the profile's budget {}", t.str(),
                       accumulators, max_accumulators);
  if (shared_bytes > shared_limit)
    return fmt::format("tile {}: {} bytes of shared memory > the device's {}", t.str(), shared_bytes, shared_limit);
  return {};
}

}  // namespace rocky::tune
