#include "tune/tile.hpp"

#include <fmt/format.h>

#include <fstream>
#include <string_view>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "tune/profile_table.hpp"

namespace rocky::tune {

uint32_t MatmulTile::derived_invocations() const {
  if (!wm || !wn || !tm || !tn) return 0;
  return (bm / wm) * (bn / wn) * (wm / tm) * (wn / tn);
}

uint32_t MatmulTile::mmq_shared_bytes() const {
  // shaders/common/mul_mmq.glsl: values as uvec4 rows of stride 2·BB + 1, one vec2 scale pair per
  // (block, row) and per (block, token).
  const uint32_t bb = bk / 32;
  return (bm + bn) * (2 * bb + 1) * 16 + (bm + bn) * bb * 8;
}

uint32_t MatmulTile::mm_shared_bytes() const { return (bm + bn) * bk * 4; }

std::string MatmulTile::str() const {
  return fmt::format("bm{} bn{} bk{} wm{} wn{} tm{} tn{} wg{} step{} pf{}{}", bm, bn, bk, wm, wn, tm, tn, wg, bk_step,
                     prefetch, vec4 ? "" : " v1");
}

std::string MatvecRule::str() const {
  return fmt::format("wg{} rows{} groups{} split{} unroll{}{}{}{}", wg, rows, min_groups, split, unroll,
                     wg_by_k ? " byk" : "", q8 ? fmt::format(" q8≤{}", q8) : std::string(),
                     cols_wg ? fmt::format(" cols{}x{}", cols_wg, cols_rows) : std::string()) +
         (cols != 8 ? fmt::format(" ncols≤{}", cols) : std::string()) +
         (col_split != k_col_split_by_cols ? fmt::format(" csplit{}", col_split) : std::string()) +
         (q8_group != 8 ? fmt::format(" q8g{}", q8_group) : std::string()) + (q8_wouter ? " wouter" : "");
}

std::string BasicTile::str() const { return fmt::format("bm{} bn{} bk{} tm{} tn{}", bm, bn, bk, tm, tn); }

std::string FlashTile::str() const {
  return fmt::format("wg{} br{} tr{} tc{} pf{}{}{}{}", wg, br, tr, tc, prefetch, kvh ? " kvh1" : "", sg ? " sg1" : "",
                     roll ? " roll1" : "");
}

std::string DeviceProfile::tiles_str() const {
  std::string s = "mmq " + mmq.str();
  if (!mmq_alt.empty()) {
    s += " | alt";
    for (size_t i = 0; i < mmq_alt.size(); ++i) s += (i ? ", " : " ") + mmq_alt[i].str();
    s += fmt::format(" (≥ {} groups)", min_workgroups);
  }
  s += " | mm " + mm.str() + " | mmv " + mmv.str();
  if (!attn.empty()) s += " | attn " + attn.front().str();
  if (!attn_wide.empty() && !(attn_wide.front() == attn.front())) s += " | attn_wide " + attn_wide.front().str();
  if (!attn_split.empty()) s += " | attn_split " + attn_split.front().str();
  if (has_attn_tile()) s += " | attn_tile " + attn_tile.str();
  return s;
}

namespace {
DeviceProfile builtin_from_json(const nlohmann::json& j, const std::string& file, const std::string& where);
}  // namespace

const std::vector<DeviceProfile>& builtin_profiles() {
  // Data, not code: src/tune/profiles/<name>.json, embedded at build time (cmake/profiles.cmake),
  // each a complete profile with its "name" and a "note" saying where its values come from.
  static const std::vector<DeviceProfile> all = [] {
    std::vector<DeviceProfile> v;
    for (size_t i = 0; i < k_embedded_profile_count; ++i) {
      const EmbeddedProfile& e = k_embedded_profiles[i];
      const std::string where = fmt::format("built-in profile {}.json", e.file);
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(e.bytes, e.bytes + e.size);
      } catch (const nlohmann::json::exception& ex) {
        fail("{}: not valid JSON ({})", where, ex.what());
      }
      v.push_back(builtin_from_json(j, e.file, where));
    }
    return v;
  }();
  return all;
}

const MatmulTile& pick_mmq_tile(const DeviceProfile& p, uint32_t m, uint32_t n) {
  auto groups = [&](const MatmulTile& t) -> uint64_t {
    if (!t.bm || !t.bn) return 0;
    return uint64_t{(m + t.bm - 1) / t.bm} * ((n + t.bn - 1) / t.bn);
  };
  // Padded work of a tile: a short ubatch (an agent's next message: 50 tokens) in 128-token
  // tiles computes 78 empty columns of every 128. Only below one column of `mmq`'s tiles (N < BN):
  // the alternatives are tuned for small grids and slower per FLOP on full ones (the H200's 16×64
  // 8×2: 2.45 against 1.84 ms at q4_K 11008×512×2048), so a 442-token tail keeps `mmq`.
  auto padded = [&](const MatmulTile& t) -> uint64_t {
    return uint64_t{(m + t.bm - 1) / t.bm} * t.bm * ((n + t.bn - 1) / t.bn) * t.bn;
  };
  const MatmulTile* pick = groups(p.mmq) >= p.min_workgroups ? &p.mmq : nullptr;
  for (const MatmulTile& t : p.mmq_alt)
    if (groups(t) >= p.min_workgroups && (pick == nullptr || (n < p.mmq.bn && padded(t) < padded(*pick)))) pick = &t;
  if (pick) return *pick;
  const MatmulTile* best = &p.mmq;
  for (const MatmulTile& t : p.mmq_alt)
    if (groups(t) > groups(*best)) best = &t;
  return *best;
}

const DeviceProfile& builtin_profile(const std::string& name) {
  std::string names;
  for (const auto& p : builtin_profiles()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  fail("unknown tuning profile '{}' (built in: {})", name, names);
}

const DeviceProfile& select_profile(uint32_t vendor_id, const std::string& driver_name, bool cpu) {
  if (cpu || driver_name.find("llvmpipe") != std::string::npos || driver_name.find("lavapipe") != std::string::npos)
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

uint32_t json_uint(const nlohmann::json& v, uint64_t lo, uint64_t hi, const std::string& where) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() < lo || v.get<uint64_t>() > hi)
    fail("{}: expected an integer in {}..{}", where, lo, hi);
  return v.get<uint32_t>();
}

MatvecRule mmv_from_json(const nlohmann::json& j, const MatvecRule& base, const std::string& where) {
  if (!j.is_object()) fail("{}: expected an object", where);
  MatvecRule r = base;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const std::string w = where + "." + k;
    if (k == "wg") {
      r.wg = json_uint(it.value(), 4, 1024, w);
      if (r.wg & (r.wg - 1)) fail("{}: expected a power of two", w);
    } else if (k == "rows") {
      r.rows = json_uint(it.value(), 1, 1024, w);
    } else if (k == "min_groups") {
      r.min_groups = json_uint(it.value(), 0, 1000000, w);
    } else if (k == "split") {
      r.split = json_uint(it.value(), 0, 2, w);
    } else if (k == "unroll") {
      r.unroll = json_uint(it.value(), 1, 2, w);
    } else if (k == "wg_by_k") {
      r.wg_by_k = json_uint(it.value(), 0, 1, w);
    } else if (k == "q8") {
      r.q8 = json_uint(it.value(), 0, 64, w);
    } else if (k == "cols_wg") {
      r.cols_wg = json_uint(it.value(), 0, 1024, w);
      if (r.cols_wg & (r.cols_wg - 1)) fail("{}: expected 0 or a power of two ≥ 4", w);
      if (r.cols_wg != 0 && r.cols_wg < 4) fail("{}: expected 0 or a power of two ≥ 4", w);
    } else if (k == "cols_rows") {
      r.cols_rows = json_uint(it.value(), 0, 1024, w);
    } else if (k == "cols") {
      r.cols = json_uint(it.value(), 1, 8, w);
    } else if (k == "col_split") {
      r.col_split = json_uint(it.value(), 0, MatvecRule::k_col_split_by_cols, w);
    } else if (k == "q8_group") {
      r.q8_group = json_uint(it.value(), 1, 16, w);
    } else if (k == "q8_wouter") {
      r.q8_wouter = json_uint(it.value(), 0, 1, w);
    } else {
      fail(
          "{}: unknown field '{}' (wg, rows, min_groups, split, unroll, wg_by_k, q8, cols_wg, cols_rows, cols, "
          "col_split, q8_group, q8_wouter)",
          where, k);
    }
  }
  if (r.rows > r.wg) fail("{}: rows {} > wg {}", where, r.rows, r.wg);
  if ((r.cols_wg == 0) != (r.cols_rows == 0) || r.cols_rows > r.cols_wg)
    fail("{}: cols_wg {} and cols_rows {}: both 0, or 1 ≤ cols_rows ≤ cols_wg", where, r.cols_wg, r.cols_rows);
  return r;
}

FlashTile flash_from_json(const nlohmann::json& j, const std::string& w) {
  if (!j.is_object()) fail("{}: expected an object", w);
  FlashTile t;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k == "wg")
      t.wg = json_uint(it.value(), 1, 1024, w + ".wg");
    else if (k == "br")
      t.br = json_uint(it.value(), 1, 1024, w + ".br");
    else if (k == "tr")
      t.tr = json_uint(it.value(), 1, 1024, w + ".tr");
    else if (k == "tc")
      t.tc = json_uint(it.value(), 1, 1024, w + ".tc");
    else if (k == "prefetch")
      t.prefetch = json_uint(it.value(), 0, 1, w + ".prefetch");
    else if (k == "kvh")
      t.kvh = json_uint(it.value(), 0, 1, w + ".kvh");
    else if (k == "sg")
      t.sg = json_uint(it.value(), 0, 1, w + ".sg");
    else if (k == "roll")
      t.roll = json_uint(it.value(), 0, 1, w + ".roll");
    else
      fail("{}: unknown field '{}' (wg, br, tr, tc, prefetch, kvh, sg, roll)", w, k);
  }
  if (t.br % t.tr || t.wg % (t.br / t.tr)) fail("{}: want BR % TR == 0 and WG % (BR / TR) == 0", w);
  if (t.sg && t.roll) fail("{}: roll 1 needs sg 0 (attention_flash_roll reduces rows through shared memory)", w);
  return t;
}

std::vector<FlashTile> attn_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array()) fail("{}: expected an array of tiles", where);
  std::vector<FlashTile> v;
  for (size_t i = 0; i < j.size(); ++i) v.push_back(flash_from_json(j[i], fmt::format("{}[{}]", where, i)));
  return v;
}

AttnRule attn_rule_from_json(const nlohmann::json& j, const AttnRule& base, const std::string& where) {
  if (!j.is_object()) fail("{}: expected an object", where);
  AttnRule r = base;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const std::string w = where + "." + k;
    if (k == "flash_min_tokens") {
      r.flash_min_tokens = json_uint(it.value(), 0, 1u << 20, w);
    } else if (k == "decode") {
      r.decode = json_uint(it.value(), 0, 1, w);
    } else if (k == "decode_tokens") {
      r.decode_tokens = json_uint(it.value(), 1, 64, w);
    } else if (k == "split") {
      r.split = json_uint(it.value(), 0, 1, w);
    } else if (k == "split_chunk") {
      r.split_chunk = json_uint(it.value(), 0, 1u << 24, w);
      if (r.split_chunk % 32) fail("{}: expected 0 (the kernel's chunk) or a multiple of 32 key positions", w);
    } else if (k == "fa_groups") {
      r.fa_groups = json_uint(it.value(), 0, 1u << 24, w);
    } else if (k == "dim_pairs") {
      r.dim_pairs = json_uint(it.value(), 0, 1, w);
    } else if (k == "vec_f32") {
      r.vec_f32 = json_uint(it.value(), 0, 1, w);
    } else {
      fail(
          "{}: unknown field '{}' (flash_min_tokens, decode, decode_tokens, split, split_chunk, fa_groups, dim_pairs, "
          "vec_f32)",
          where, k);
    }
  }
  return r;
}

BasicTile basic_from_json(const nlohmann::json& j, const BasicTile& base, const std::string& where) {
  if (!j.is_object()) fail("{}: expected an object", where);
  BasicTile t = base;
  const std::pair<const char*, uint32_t*> fields[] = {
      {"bm", &t.bm}, {"bn", &t.bn}, {"bk", &t.bk}, {"tm", &t.tm}, {"tn", &t.tn}};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const auto& [name, dst] : fields)
      if (it.key() == name) {
        *dst = json_uint(it.value(), 1, 1024, where + "." + name);
        known = true;
      }
    if (!known) fail("{}: unknown field '{}' (bm, bn, bk, tm, tn)", where, it.key());
  }
  if (t.bm % t.tm || t.bn % t.tn) fail("{}: want TM | BM and TN | BN", where);
  if (t.invocations() > 1024) fail("{}: {} invocations per workgroup (BM/TM · BN/TN) > 1024", where, t.invocations());
  return t;
}

MatmulTile tile_from_json(const nlohmann::json& j, const MatmulTile& base, const std::string& where) {
  MatmulTile t = base;
  if (!j.is_object()) fail("{}: expected an object", where);
  const std::pair<const char*, uint32_t*> fields[] = {
      {"bm", &t.bm},    {"bn", &t.bn}, {"bk", &t.bk}, {"wm", &t.wm},           {"wn", &t.wn},
      {"tm", &t.tm},    {"tn", &t.tn}, {"wg", &t.wg}, {"bk_step", &t.bk_step}, {"prefetch", &t.prefetch},
      {"vec4", &t.vec4}};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const auto& [name, dst] : fields) {
      if (it.key() != name) continue;
      known = true;
      const bool flag = std::string_view(name) == "prefetch" || std::string_view(name) == "vec4";
      const uint64_t lo = flag ? 0 : 1, hi = flag ? 1 : 4096;
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
  DeviceProfile p = apply_profile_json(j, base, path);
  p.path = path;
  return p;
}

namespace {

uint32_t flag01(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() > 1) fail("{}: expected 0 or 1", where);
  return v.get<uint32_t>();
}

// One field of a profile object (the format of tile.hpp); false when `k` is not a profile field.
bool apply_field(DeviceProfile& p, const std::string& k, const nlohmann::json& v, const std::string& where) {
  const std::string w = where + ": " + k;
  if (k == "max_accumulators") {
    p.max_accumulators = json_uint(v, 1, 1024, w);
  } else if (k == "mmq") {
    p.mmq = tile_from_json(v, p.mmq, w);
  } else if (k == "mm") {
    p.mm = tile_from_json(v, p.mm, w);
  } else if (k == "mmq_alt") {
    if (!v.is_array()) fail("{}: expected an array of tiles", w);
    p.mmq_alt.clear();
    for (size_t i = 0; i < v.size(); ++i) p.mmq_alt.push_back(tile_from_json(v[i], p.mmq, fmt::format("{}[{}]", w, i)));
  } else if (k == "min_workgroups") {
    p.min_workgroups = json_uint(v, 0, 1000000, w);
  } else if (k == "mmq_q4k_nibbles") {
    p.mmq_q4k_nibbles = flag01(v, w) == 1;
  } else if (k == "mmq_q6k_nibbles") {
    p.mmq_q6k_nibbles = flag01(v, w) == 1;
  } else if (k == "mmv") {
    p.mmv = mmv_from_json(v, p.mmv, w);
  } else if (k == "attn") {
    p.attn = attn_from_json(v, w);
  } else if (k == "attn_wide") {
    p.attn_wide = attn_from_json(v, w);
  } else if (k == "attn_split") {
    p.attn_split = attn_from_json(v, w);
  } else if (k == "attn_tile") {
    p.attn_tile = v.is_null() ? FlashTile{0, 0, 0, 0} : flash_from_json(v, w);
  } else if (k == "attn_rule") {
    p.attn_rule = attn_rule_from_json(v, p.attn_rule, w);
  } else if (k == "matmul") {
    p.matmul = basic_from_json(v, p.matmul, w);
  } else if (k == "delta_chunk") {
    p.delta_chunk = json_uint(v, 0, 128, w);
    if (p.delta_chunk == 1 || p.delta_chunk % 2) fail("{}: expected 0 (the serial kernel) or an even 2 … 128", w);
  } else if (k == "norm_q8_wg") {
    p.norm_q8_wg = json_uint(v, 0, 1024, w);
    if (p.norm_q8_wg & (p.norm_q8_wg - 1)) fail("{}: expected 0 (by the device) or a power of two", w);
  } else if (k == "modeled") {
    p.modeled = json_uint(v, 0, 1, w) == 1;
  } else if (k == "deny") {
    if (!v.is_array()) fail("{}: expected an array", w);
    p.deny.clear();
    for (size_t i = 0; i < v.size(); ++i) {
      const nlohmann::json& d = v[i];
      if (!d.is_object() || !d.contains("kernel") || !d["kernel"].is_string() || !d.contains("tile") ||
          !d["tile"].is_string())
        fail("{}[{}]: expected {{\"kernel\": …, \"tile\": …, \"reason\": …}}", w, i);
      p.deny.push_back(
          {d["kernel"].get<std::string>(), d["tile"].get<std::string>(), d.value("reason", std::string())});
    }
  } else if (k == "device" || k == "tune" || k == "results" || k == "note" || k == "name") {
    // rocky tune's record (src/tune/store.hpp; the device key is checked where profiles are looked
    // up), a note, a built-in profile's name: no tuning value.
    if (k == "device" && !v.is_object()) fail("{}: expected an object", w);
  } else {
    return false;
  }
  return true;
}

constexpr const char* k_profile_fields =
    "profile, max_accumulators, mmq, mm, mmq_alt, min_workgroups, mmq_q4k_nibbles, mmq_q6k_nibbles, mmv, attn, "
    "attn_wide, attn_split, attn_tile, attn_rule, matmul, delta_chunk, norm_q8_wg, modeled, deny, device, tune, "
    "results, note, name";

// A built-in profile file: an object with every field of a profile, named by its file's stem;
// "name" and "profile" (the one a search started from: rocky tune writes it), when present, are
// that name too.
DeviceProfile builtin_from_json(const nlohmann::json& j, const std::string& file, const std::string& where) {
  if (!j.is_object()) fail("{}: expected a JSON object", where);
  for (const char* k : {"name", "profile"})
    if (j.contains(k) && j[k] != file) fail("{}: \"{}\" must be \"{}\" (the file's name)", where, k, file);
  DeviceProfile p;
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "profile" && it.key() != "name" && !apply_field(p, it.key(), it.value(), where))
      fail("{}: unknown field '{}' ({})", where, it.key(), k_profile_fields);
  p.name = file;
  return p;
}

}  // namespace

DeviceProfile apply_profile_json(const nlohmann::json& j, const DeviceProfile& base, const std::string& where) {
  if (!j.is_object()) fail("{}: expected a JSON object", where);
  DeviceProfile p = base;
  if (j.contains("profile")) {
    if (!j["profile"].is_string()) fail("{}: profile: expected a name", where);
    p = builtin_profile(j["profile"].get<std::string>());
  }
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "profile" && !apply_field(p, it.key(), it.value(), where))
      fail("{}: unknown field '{}' ({})", where, it.key(), k_profile_fields);
  p.name += " (override " + where + ")";
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
  if (t.wg > max_invocations)
    return fmt::format("tile {}: {} invocations > the device's {}", t.str(), t.wg, max_invocations);
  if (accumulators > max_accumulators)
    return fmt::format("tile {}: {} accumulator registers per invocation > the profile's budget {}", t.str(),
                       accumulators, max_accumulators);
  if (shared_bytes > shared_limit)
    return fmt::format("tile {}: {} bytes of shared memory > the device's {}", t.str(), shared_bytes, shared_limit);
  return {};
}

}  // namespace rocky::tune
