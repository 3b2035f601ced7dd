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
         (col_split != k_col_split_by_cols ? fmt::format(" csplit{}", col_split) : std::string());
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

MatmulTile tile(uint32_t bm, uint32_t bn, uint32_t bk, uint32_t wm, uint32_t wn, uint32_t tm, uint32_t tn,
                uint32_t prefetch = 1, uint32_t vec4 = 1) {
  MatmulTile t{bm, bn, bk, wm, wn, tm, tn, 0, 1, prefetch, vec4};
  t.wg = t.derived_invocations();
  return t;
}

}  // namespace

const std::vector<DeviceProfile>& builtin_profiles() {
  // Budgets: Mali-Valhall 16 (anchors.md: 16 accumulators spill-free, 32 halve occupancy); Adreno
  // and Intel keep to 32; AMD desktop GPUs 64; NVIDIA 128 (255 registers per thread at 256
  // invocations: mul_mmq 8×8 compiles to 234 registers without local memory on the H200).
  auto prof = [](const char* name, uint32_t budget, MatmulTile mmq, MatmulTile mm) {
    DeviceProfile p;
    p.name = name;
    p.max_accumulators = budget;
    p.mmq = mmq;
    p.mm = mm;
    return p;
  };
  static const std::vector<DeviceProfile> all = [&] {
    std::vector<DeviceProfile> v;
    // Modeled, never run on a board: `rocky tune --offline mali-g610` (src/tune/profiles/mali-g610.json,
    // which tests/fast/test_tune.cpp keeps equal to this and the mali label compiles) ranked every
    // candidate with Mesa 25.0.7's G610 compiler: mul_mmq 64×32, BK 64, 2×4 per invocation (16
    // accumulator registers; 0.151 static cycles per MAC against 0.215 for the hand-made 64×32 BK 32
    // 4×2, whose BK 64 form spills for q6_K) and mul_mm 16×64, BK 64, 8×2 (64 invocations). 0 spills,
    // tls 0 for every type, layout and epilogue. (4×4 → 32 registers spilled 13:68, 200 B: docs/tuning-log.md.)
    v.push_back(prof("mali-valhall", 16, tile(64, 32, 64, 32, 16, 2, 4, 0, 0), tile(16, 64, 64, 8, 32, 8, 2)));
    v.push_back(prof("adreno", 32, tile(64, 64, 32, 32, 32, 4, 4), tile(64, 64, 32, 32, 32, 4, 8)));
    v.push_back(prof("intel", 32, tile(64, 64, 32, 32, 32, 4, 4), tile(64, 64, 32, 32, 32, 4, 8)));
    v.push_back(prof("amd", 64, tile(128, 64, 32, 64, 32, 8, 4), tile(128, 64, 32, 64, 32, 8, 4)));
    // H200: the full `rocky tune` from the generic profile (docs/tuning-log.md #26; session 4,
    // lab/h200-tune.sh STAGE=full): mul_mmq 32×128, BK 64, 4×8 per invocation, 128 invocations,
    // word-by-word shared reads, no register prefetch — 1.84 against 2.09 ms for the earlier
    // hand-made 128×128 8×8 (tuning-log #8-#9) at q4_K 11008×512×2048; grids under 33 workgroups
    // (attn_k/attn_v: 256 rows) take 16×64 8×2 (64 invocations). mul_mm 128×128 BK 32 8×4 (512).
    // pp512 of qwen2.5-3b q4_K_M 10,321 against 9,209 t/s with the hand-made tiles, same call.
    v.push_back(prof("nvidia", 128, tile(32, 128, 64, 16, 64, 4, 8, 0, 0), tile(128, 128, 32, 64, 64, 8, 4)));
    v.back().mmq_alt = {tile(16, 64, 64, 8, 32, 8, 2, 1, 0)};
    // q4_K as nibble pairs (the default): 75.1 against 75.9 TFLOPS with int8 values (−1 %), for
    // 0.5 byte less per weight (pp512 peak memory of qwen2.5-3b q4_K_M: 5.50 GiB with int8).
    v.back().min_workgroups = 33;
    v.push_back(prof("llvmpipe", 32, tile(32, 32, 32, 16, 16, 4, 4), tile(32, 32, 32, 16, 16, 4, 4)));
    v.push_back(prof("generic", 16, tile(64, 32, 32, 32, 16, 4, 2, 0, 0), tile(64, 32, 32, 32, 16, 4, 4)));
    // Decode matvec_mmq shapes and flash-attention tiles per device class (moved here from
    // ops/matmul.cpp and ops/attention.cpp, where the reasons are written down; same values).
    // NVIDIA takes the int8-dot matvec (q8 ≤ 64 tokens, fast::matvec_q8): on the H200 (qwen2.5-3b
    // q4_K_M, docs/PERF.md session 6) tg128 277.3 → 343.3 t/s, 4 streams 598 → 830 t/s, pp16 @
    // d5000 589 → 885 t/s, pp50 @ d5000 1,165 → 1,207 t/s (tuning-log #30). Elsewhere unmeasured: 0.
    const MatvecRule mmv_cpu{32, 8, 1, 0, 1, 0}, mmv_nv{64, 4, 256, 0, 1, 1, 64, 32, 2}, mmv_arm{64, 1, 1, 2, 1, 0},
        mmv_gpu{64, 4, 512, 0, 1, 0};
    const std::vector<FlashTile> attn_cpu{{64, 32, 4, 4, 0}, {64, 32, 4, 1, 0}, {64, 16, 2, 2, 0}, {64, 8, 1, 1, 0}};
    const std::vector<FlashTile> attn_arm{{128, 16, 1, 2, 0}, {64, 8, 1, 1, 0}};
    const std::vector<FlashTile> attn_arm_wide{{128, 8, 1, 1, 0}, {64, 8, 1, 1, 0}};
    const std::vector<FlashTile> attn_gpu{{128, 16, 1, 2, 1}, {128, 32, 2, 4, 1}, {64, 8, 1, 1, 0}};
    // H200 (docs/tuning-log.md #38): 32 column threads × 2 × 2 scores (64 keys per block) and one
    // vec4 of O per invocation, K/V blocks as f16 in shared memory; 512 invocations × 32 rows (46.5 KB
    // at hd 128): pp4096 7,829 t/s, pp512 @ d8192 3,995; 256 × 16 rows (31.7 KB): 7,633 / 3,783 as
    // the default of call 4 (7,566 / 3,752 in call 3), against 6,507 / 2,787 for the full tune's
    // tile (128,16,4,2,1). Tiles with fewer than 32 column threads (> 1 vec4 of O each) ran 2.5×
    // slower there. With an f32 cache or at hd 256 they need more than 48 KB: the next ones.
    // Session 10 (#43): 256 × 32 rows with K/V staged as f32 (converted once, not at each
    // product; 40.4 KB, 94 registers, either cache): pp4096 7,882 / pp512 @ d8192 4,257 against
    // 7,783 / 3,973 for 512,32,2,2,1,1 in the same call. Every tile with ≥ 4 rows per invocation
    // spilled there (122-176 registers + 272-736 B of local memory).
    // Session 10 (#45, branch lab-fa-unroll): with the q·k loop rolled (attention_flash_roll),
    // 256 × 32 rows of 4 × 2 scores per invocation with K/V as f16 in shared memory (45.5 KB at hd
    // 128, an f16 cache only; 106 registers, no spill): pp4096 8,168.9 / pp512 @ d8192 4,642.5
    // (-r 2) against 7,892.8 / 4,318.5 for 256,32,2,2,0,0 on main (-r 2). Rolled, 256,32,2,2,0,0
    // itself was slower (7,832 / 4,220): the roll is that tile's only.
    const std::vector<FlashTile> attn_nv{{256, 32, 4, 2, 0, 1, 0, 1}, {256, 32, 2, 2, 0, 0}, {512, 32, 2, 2, 1, 1},
                                         {256, 16, 2, 2, 1, 1},       {128, 16, 4, 2, 1},    {128, 16, 1, 2, 1},
                                         {128, 32, 2, 4, 1},          {64, 8, 1, 1, 0}};
    // hd 256 (gemma-3), `rocky tune -m gemma-3-4b --start-profile nvidia`: 8 query rows per
    // workgroup of 256, 1.03 ms at 8/4 heads × 512 tokens against 2.44 ms for wg128 br16 tr1 tc2 pf1
    // (the tile gemma ran with before); pp512 8,230 t/s with the tuned file against 6,106 before.
    const std::vector<FlashTile> attn_nv_wide{{256, 8, 1, 1, 0}, {128, 8, 1, 1, 0}, {64, 8, 1, 1, 0}};
    for (DeviceProfile& p : v) {
      p.mmv = p.name == "llvmpipe"       ? mmv_cpu
              : p.name == "nvidia"       ? mmv_nv
              : p.name == "mali-valhall" ? mmv_arm
                                         : mmv_gpu;
      p.attn = p.name == "llvmpipe"       ? attn_cpu
               : p.name == "mali-valhall" ? attn_arm
               : p.name == "nvidia"       ? attn_nv
                                          : attn_gpu;
      if (p.name == "mali-valhall") p.attn_wide = attn_arm_wide;
      if (p.name == "nvidia") p.attn_wide = attn_nv_wide;
      // An agent's next message at depth (split keys): pp50 @ d5000 41.7 → 27.7 ms, pp16 18.3 →
      // 14.3 ms with one row per invocation and blocks of 16 keys (docs/tuning-log.md #36). Head
      // dims above 128 keep attn_wide.
      if (p.name == "nvidia") p.attn_split = {{128, 16, 1, 2, 1}};
      // matmul.comp: CPU drivers (lavapipe) run fastest with many accumulators per invocation
      // (128 × 32, 8 × 4: 32); GPUs keep to 8 (2 × 4; the Mali-G610's full-occupancy budget is 32
      // registers per thread, ../shared/PLATFORMS.md). 128 invocations either way.
      if (p.name == "llvmpipe") p.matmul = {128, 32, 8, 8, 4};
      // CPU drivers: the tiled kernel is faster at every N measured on lavapipe (1 … 512 tokens;
      // docs/tuning-log.md, entry 8); GPUs take it from 8 tokens (ops/attention.cpp).
      if (p.name == "llvmpipe") p.attn_rule.flash_min_tokens = 0;
      // attention_decode where it was measured (NVIDIA: tuning-log #33, #36); the chunked
      // gated-delta kernel everywhere but there, where the serial one is faster (H200, qwen3.5-4b
      // pp512: 6,167 against 5,908 t/s with chunks of 32; tuning-log #28).
      if (p.name == "nvidia") {
        p.attn_rule.decode = 1;
        p.delta_chunk = 0;
      }
      // Mali: V dim pairs and the f32-cache vector q·k double attention.comp's work registers (64:
      // half occupancy on the G610); rms_norm_q8_1 in workgroups of 64.
      if (p.name == "mali-valhall") {
        p.attn_rule.dim_pairs = 0;
        p.attn_rule.vec_f32 = 0;
        p.norm_q8_wg = 64;
      }
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
    } else {
      fail(
          "{}: unknown field '{}' (wg, rows, min_groups, split, unroll, wg_by_k, q8, cols_wg, cols_rows, cols, "
          "col_split)",
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
  } else if (k == "device" || k == "tune" || k == "results" || k == "note") {
    // rocky tune's record (src/tune/store.hpp): the device key is checked where profiles are looked up.
    if (k == "device" && !v.is_object()) fail("{}: expected an object", w);
  } else {
    return false;
  }
  return true;
}

constexpr const char* k_profile_fields =
    "profile, max_accumulators, mmq, mm, mmq_alt, min_workgroups, mmq_q4k_nibbles, mmq_q6k_nibbles, mmv, attn, "
    "attn_wide, attn_split, attn_tile, attn_rule, matmul, delta_chunk, norm_q8_wg, modeled, deny, device, tune, "
    "results, note";

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
