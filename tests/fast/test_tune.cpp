// Tiles as data: profile selection, budgets, shared-memory limits, JSON overrides.
#include <gtest/gtest.h>

#include <iterator>
#include <utility>

#include <filesystem>
#include <fstream>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "tune/store.hpp"
#include "tune/tile.hpp"

namespace rocky::tune {
namespace {

std::string write(const std::string& name, const std::string& text) {
  std::string p = rocky::test::scratch_dir("fast_tune") + "/" + name;
  std::ofstream(p) << text;
  return p;
}

TEST(Tune, ProfilesByVendorAndDriver) {
  EXPECT_EQ(select_profile(0x13B5, "panvk", false).name, "mali-valhall");
  EXPECT_EQ(select_profile(0, "panvk", false).name, "mali-valhall");
  EXPECT_EQ(select_profile(0x5143, "turnip", false).name, "adreno");
  EXPECT_EQ(select_profile(0x8086, "Intel open-source Mesa driver", false).name, "intel");
  EXPECT_EQ(select_profile(0x1002, "radv", false).name, "amd");
  EXPECT_EQ(select_profile(0x10DE, "NVIDIA", false).name, "nvidia");
  EXPECT_EQ(select_profile(0x10005, "llvmpipe", false).name, "llvmpipe");
  EXPECT_EQ(select_profile(0x1234, "other", false).name, "generic");
  EXPECT_THROW(builtin_profile("nope"), rocky::Error);
}

TEST(Tune, EveryBuiltinTileIsConsistentAndWithinItsBudget) {
  for (const auto& p : builtin_profiles()) {
    // Within the profile's accumulator budget, 32 KiB of shared memory (the smallest target:
    // Mali-G610, lavapipe) and 1024 invocations.
    EXPECT_EQ(p.mmq.derived_invocations(), p.mmq.wg) << p.name;
    EXPECT_EQ(check_tile(p.mmq, p.mmq.mmq_accumulators(), p.mmq.mmq_shared_bytes(), p.max_accumulators, 32768, 1024),
              "")
        << p.name;
    for (const MatmulTile& a : p.mmq_alt)
      EXPECT_EQ(check_tile(a, a.mmq_accumulators(), a.mmq_shared_bytes(), p.max_accumulators, 32768, 1024), "")
          << p.name << " " << a.str();
    EXPECT_EQ(p.mm.derived_invocations(), p.mm.wg) << p.name;
    EXPECT_EQ(check_tile(p.mm, p.mm.accumulators(), p.mm.mm_shared_bytes(), p.max_accumulators, 32768, 1024), "")
        << p.name;
  }
  EXPECT_EQ(builtin_profile("mali-valhall").max_accumulators, 16u);
  EXPECT_LE(builtin_profile("mali-valhall").mmq.mmq_accumulators(), 16u);
}

TEST(Tune, RefusesTilesOverBudgetOrLimits) {
  MatmulTile t{128, 128, 32, 64, 64, 8, 8, 256, 1};
  EXPECT_EQ(check_tile(t, t.mmq_accumulators(), t.mmq_shared_bytes(), 128, 49152, 1024), "");
  EXPECT_NE(check_tile(t, t.mmq_accumulators(), t.mmq_shared_bytes(), 64, 49152, 1024).find("accumulator"),
            std::string::npos);
  EXPECT_NE(check_tile(t, 64, 40000, 128, 32768, 1024).find("shared memory"), std::string::npos);
  EXPECT_NE(check_tile(t, t.mmq_accumulators(), t.mmq_shared_bytes(), 128, 49152, 128).find("invocations"),
            std::string::npos);
  MatmulTile bad = t;
  bad.wg = 128;
  EXPECT_NE(check_tile(bad, bad.mmq_accumulators(), bad.mmq_shared_bytes(), 128, 49152, 1024).find("workgroup size"),
            std::string::npos);
  bad = t;
  bad.bk = 48;
  EXPECT_NE(check_tile(bad, bad.mmq_accumulators(), bad.mmq_shared_bytes(), 128, 49152, 1024).find("multiple of 32"),
            std::string::npos);
  bad = t;
  bad.wm = 48;
  EXPECT_NE(check_tile(bad, bad.mmq_accumulators(), bad.mmq_shared_bytes(), 128, 49152, 1024).find("divide"),
            std::string::npos);
  // Shared memory of mul_mmq: per row and per token, 2·BK/32 + 1 uvec4 (values, padded) and
  // BK/32 scale pairs (8 B).
  EXPECT_EQ(t.mmq_shared_bytes(), (128u + 128) * 3 * 16 + (128 + 128) * 8);
}

TEST(Tune, JsonOverride) {
  const DeviceProfile& base = builtin_profile("nvidia");
  auto p = load_profile_override(
      write(
          "a.json",
          R"({"profile": "mali-valhall", "max_accumulators": 32, "mmq": {"bm": 64, "bn": 64, "wm": 32, "wn": 32, "tm": 4, "tn": 8}})"),
      base);
  EXPECT_EQ(p.max_accumulators, 32u);
  EXPECT_EQ(p.mmq.bm, 64u);
  EXPECT_EQ(p.mmq.tn, 8u);
  EXPECT_EQ(p.mmq.wg, p.mmq.derived_invocations());  // wg derived when not given
  EXPECT_EQ(p.mm.bm, builtin_profile("mali-valhall").mm.bm);
  EXPECT_NE(p.name.find("override"), std::string::npos);
  auto err = [&](const std::string& text, const std::string& needle) {
    try {
      load_profile_override(write("bad.json", text), base);
      ADD_FAILURE() << "no error for " << text;
    } catch (const rocky::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // Shape-aware tile list and the q4_K repack layout.
  auto q = load_profile_override(
      write(
          "b.json",
          R"({"min_workgroups": 64, "mmq_q4k_nibbles": 0, "mmq_alt": [{"bm": 32, "bn": 64, "wm": 32, "wn": 32, "tm": 4, "tn": 4}]})"),
      base);
  EXPECT_EQ(q.min_workgroups, 64u);
  EXPECT_TRUE(base.mmq_q4k_nibbles);  // the default layout
  EXPECT_FALSE(q.mmq_q4k_nibbles);
  ASSERT_EQ(q.mmq_alt.size(), 1u);
  EXPECT_EQ(q.mmq_alt[0].bm, 32u);
  EXPECT_EQ(q.mmq_alt[0].bk, base.mmq.bk);  // fields not given come from the main mmq tile
  EXPECT_EQ(q.mmq_alt[0].wg, 128u);
  EXPECT_EQ(pick_mmq_tile(q, 4096, 512).bm, base.mmq.bm);  // 64×256: 128 workgroups ≥ 64
  EXPECT_EQ(pick_mmq_tile(q, 256, 512).bm, 32u);           // 8 → the alternative: 64
  EXPECT_EQ(pick_mmq_tile(base, 256, 512).bn, 64u);        // built-in nvidia: 16×64 for attn_k/attn_v
  EXPECT_EQ(pick_mmq_tile(base, 2048, 512).bn, 128u);      // 32×128: 256 workgroups
  EXPECT_EQ(pick_mmq_tile(base, 2048, 50).bn, 64u);        // 50 tokens: 16×64 pads 14 columns, 32×128 78
  EXPECT_EQ(pick_mmq_tile(base, 11008, 130).bn, 128u);     // N ≥ BN: the main tile (faster per FLOP)
  err(R"({"mmq_alt": {}})", "mmq_alt");
  err(R"({"mmq_alt": [{"bz": 1}]})", "mmq_alt[0]");
  err(R"({"min_workgroups": -3})", "min_workgroups");
  err(R"({"mmq_q4k_nibbles": 2})", "mmq_q4k_nibbles");
  err("{", "not valid JSON");
  err("[]", "expected a JSON object");
  err(R"({"mmq": {"bm": -1}})", "mmq.bm");
  err(R"({"mmq": {"bq": 4}})", "unknown field 'bq'");
  err(R"({"tile": 1})", "unknown field 'tile'");
  err(R"({"max_accumulators": 0})", "max_accumulators");
  err(R"({"profile": "nope"})", "unknown tuning profile");
  EXPECT_THROW(load_profile_override("/nonexistent/x.json", base), rocky::Error);
}

// A profile written as rocky tune writes it loads back with every field: tiles, the matvec rule,
// the flash-attention tiles, the deny list, modeled; rocky tune's own record is accepted.
TEST(Tune, ProfileFileRoundTrip) {
  DeviceProfile p = builtin_profile("nvidia");
  p.mmq.bm = 64;
  p.mmq.wg = p.mmq.derived_invocations();
  p.mmv = {128, 2, 64, 1, 2, 0, 12};  // q8: the int8-dot matvec up to 12 tokens
  p.attn = {{128, 16, 1, 2, 1}, {64, 8, 1, 1, 0}, {256, 32, 4, 2, 0, 1, 0, 1}};  // a rolled tile
  p.attn_wide = {{64, 8, 1, 1, 0}};
  p.attn_split = {{128, 16, 2, 2, 1}, {64, 8, 1, 1, 1}};  // the split-key tiles
  p.modeled = true;
  p.deny = {{"mul_mmq", "bm128 …", "spills"}};
  p.mmv.cols = 4;
  p.mmv.col_split = 1;
  p.attn_tile = {64, 16, 2, 2, 1, 0, 0, 0};
  p.attn_rule = {4, 0, 12, 0, 64, 100, 0, 0};
  p.matmul = {64, 32, 16, 4, 4};
  p.delta_chunk = 16;
  p.norm_q8_wg = 128;
  nlohmann::json j = profile_to_json(p, "nvidia");
  j["device"] = key_to_json({0x10DE, 0x2335, 0x12345678, "H200", "NVIDIA", "580"});
  j["tune"] = {{"tool", "rocky tune"}, {"complete", 1}};
  j["results"] = nlohmann::json::array({{{"kernel", "mul_mmq"}, {"ms", 1.5}}});
  const std::string path = rocky::test::scratch_dir("fast_tune") + "/round.json";
  write_json_file(path, j);
  const DeviceProfile q = load_profile_override(path, builtin_profile("generic"));
  EXPECT_EQ(q.mmq.str(), p.mmq.str());
  EXPECT_EQ(q.mm.str(), p.mm.str());
  ASSERT_EQ(q.mmq_alt.size(), p.mmq_alt.size());
  for (size_t i = 0; i < q.mmq_alt.size(); ++i) EXPECT_EQ(q.mmq_alt[i].str(), p.mmq_alt[i].str());
  EXPECT_EQ(q.min_workgroups, p.min_workgroups);
  EXPECT_EQ(q.max_accumulators, p.max_accumulators);
  EXPECT_TRUE(q.mmv == p.mmv) << q.mmv.str();
  EXPECT_EQ(q.attn, p.attn);
  EXPECT_EQ(q.attn_wide, p.attn_wide);
  EXPECT_EQ(q.attn_split, p.attn_split);
  EXPECT_EQ(q.attn_tile, p.attn_tile);
  EXPECT_TRUE(q.attn_rule == p.attn_rule);
  EXPECT_EQ(q.matmul, p.matmul);
  EXPECT_EQ(q.delta_chunk, 16u);
  EXPECT_EQ(q.norm_q8_wg, 128u);
  EXPECT_TRUE(q.modeled);
  ASSERT_EQ(q.deny.size(), 1u);
  EXPECT_EQ(q.deny[0].reason, "spills");
  EXPECT_EQ(q.path, path);
  const StoredKey k = stored_key(read_json_file(path));
  ASSERT_TRUE(k.ok);
  EXPECT_EQ(k.key.device_id, 0x2335u);
  EXPECT_EQ(profile_file_name(k.key), "10de-2335-12345678.json");
  // Bad new fields name themselves.
  auto err = [&](const std::string& text, const std::string& want) {
    try {
      load_profile_override(write("bad2.json", text), builtin_profile("generic"));
      ADD_FAILURE() << "no error for " << text;
    } catch (const rocky::Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  err(R"({"mmv": {"wg": 48}})", "mmv.wg: expected a power of two");
  err(R"({"mmv": {"rows": 8, "wg": 4}})", "rows 8 > wg 4");
  err(R"({"mmv": {"q8": 65}})", "mmv.q8: expected an integer in 0..64");
  err(R"({"attn": [{"wg": 100, "br": 16, "tr": 1, "tc": 2}]})", "attn[0]: want BR % TR == 0 and WG % (BR / TR) == 0");
  err(R"({"attn": {"wg": 1}})", "attn: expected an array");
  err(R"({"attn": [{"wg": 64, "br": 16, "tr": 2, "tc": 2, "roll": 2}]})", "attn[0].roll: expected an integer in 0..1");
  err(R"({"attn": [{"wg": 64, "br": 16, "tr": 2, "tc": 2, "sg": 1, "roll": 1}]})", "attn[0]: roll 1 needs sg 0");
  err(R"({"deny": [{"kernel": 1}]})", "deny[0]");
  err(R"({"modeled": 2})", "modeled: expected an integer in 0..1");
  err(R"({"mmv": {"cols": 9}})", "mmv.cols: expected an integer in 1..8");
  err(R"({"mmv": {"col_split": 4}})", "mmv.col_split");
  err(R"({"attn_tile": [1]})", "attn_tile: expected an object");
  err(R"({"attn_tile": {"wg": 64, "br": 16, "tr": 2, "tc": 2, "sg": 1, "roll": 1}})", "attn_tile: roll 1 needs sg 0");
  err(R"({"attn_rule": {"decode": 2}})", "attn_rule.decode: expected an integer in 0..1");
  err(R"({"attn_rule": {"split_chunk": 48}})", "attn_rule.split_chunk: expected 0");
  err(R"({"attn_rule": {"window": 1}})", "attn_rule: unknown field 'window'");
  err(R"({"matmul": {"bm": 32, "tm": 3}})", "matmul: want TM | BM");
  err(R"({"matmul": {"bm": 1024, "bn": 1024, "tm": 1, "tn": 1}})", "invocations per workgroup");
  err(R"({"delta_chunk": 9})", "delta_chunk: expected 0");
  err(R"({"norm_q8_wg": 96})", "norm_q8_wg: expected 0");
}

// ROCKY_TUNE's inline fragment goes over a profile the way a file does; null attn_tile clears one.
TEST(Tune, InlineFragmentOverProfile) {
  const DeviceProfile& base = builtin_profile("nvidia");
  const DeviceProfile p =
      apply_profile_json(nlohmann::json::parse(R"({"mmv": {"q8": 0}, "attn_rule": {"decode": 0}, "delta_chunk": 32,
                                "attn_tile": {"wg": 64, "br": 8, "tr": 1, "tc": 1}})"),
                         base, "ROCKY_TUNE");
  EXPECT_EQ(p.mmv.q8, 0u);
  EXPECT_EQ(p.mmv.wg, base.mmv.wg);  // fields not given keep the base's
  EXPECT_EQ(p.attn_rule.decode, 0u);
  EXPECT_EQ(p.attn_rule.decode_tokens, base.attn_rule.decode_tokens);
  EXPECT_EQ(p.delta_chunk, 32u);
  EXPECT_EQ(p.attn_tile.str(), "wg64 br8 tr1 tc1 pf0");
  EXPECT_EQ(p.name, "nvidia (override ROCKY_TUNE)");
  EXPECT_FALSE(apply_profile_json(nlohmann::json::parse(R"({"attn_tile": null})"), p, "x").has_attn_tile());
}

// Lookup by device key: the file named by the key; files of the same device under another
// driver version are ignored with a note; a file whose recorded key is not the name's is not used.
TEST(Tune, FindProfileByDeviceKey) {
  namespace fs = std::filesystem;
  const std::string dir = rocky::test::scratch_dir("fast_tune") + "/profiles";
  fs::remove_all(dir);
  EXPECT_TRUE(find_profile(dir, {0x10DE, 1, 2}).path.empty());  // no directory: nothing, no error
  EXPECT_EQ(profiles_dir(""), "");
  EXPECT_EQ(profiles_dir("/c"), "/c/rocky/profiles");
  const DeviceKey mine{0x10DE, 0x2335, 0x100, "H200", "NVIDIA", ""};
  nlohmann::json j = profile_to_json(builtin_profile("nvidia"), "nvidia");
  j["device"] = key_to_json(mine);
  write_json_file(dir + "/" + profile_file_name(mine), j);
  DeviceKey older = mine;
  older.driver_version = 0x99;
  j["device"] = key_to_json(older);
  write_json_file(dir + "/" + profile_file_name(older), j);
  ProfileLookup f = find_profile(dir, mine);
  EXPECT_EQ(f.path, dir + "/10de-2335-00000100.json");
  ASSERT_EQ(f.notes.size(), 1u);
  EXPECT_NE(f.notes[0].find("made for driver version 00000099"), std::string::npos) << f.notes[0];
  // Another device: neither file.
  f = find_profile(dir, {0x10DE, 0x2336, 0x100});
  EXPECT_TRUE(f.path.empty());
  EXPECT_TRUE(f.notes.empty());
  // A copied file: the name says one driver, the record another.
  fs::copy_file(dir + "/10de-2335-00000099.json", dir + "/10de-2335-00000200.json");
  DeviceKey newer = mine;
  newer.driver_version = 0x200;
  f = find_profile(dir, newer);
  EXPECT_TRUE(f.path.empty());
  EXPECT_EQ(list_profiles(dir).size(), 3u);
}

// The matvec rule and the flash-attention tiles moved into the profiles keep their values.
TEST(Tune, MatvecAndAttentionInTheProfiles) {
  EXPECT_EQ(builtin_profile("llvmpipe").mmv.str(), "wg32 rows8 groups1 split0 unroll1");
  EXPECT_EQ(builtin_profile("nvidia").mmv.str(), "wg64 rows4 groups256 split0 unroll1 byk q8≤64 cols32x2");
  EXPECT_EQ(builtin_profile("mali-valhall").mmv.str(), "wg64 rows1 groups1 split2 unroll1");
  EXPECT_EQ(builtin_profile("amd").mmv.str(), "wg64 rows4 groups512 split0 unroll1");
  EXPECT_EQ(builtin_profile("llvmpipe").attn.front().str(), "wg64 br32 tr4 tc4 pf0");
  // NVIDIA: the rolled 4 × 2 tile (f16 staging; 45.5 KB at hd 128, so an f32 cache takes the next).
  EXPECT_EQ(builtin_profile("nvidia").attn.front().str(), "wg256 br32 tr4 tc2 pf0 kvh1 roll1");
  EXPECT_EQ(builtin_profile("nvidia").attn.at(1).str(), "wg256 br32 tr2 tc2 pf0");
  EXPECT_GT(builtin_profile("nvidia").attn.front().shared_bytes(128, false), 48u * 1024);
  EXPECT_LE(builtin_profile("nvidia").attn.front().shared_bytes(128, true), 48u * 1024);
  EXPECT_EQ(builtin_profile("mali-valhall").attn_tiles(128).front().str(), "wg128 br16 tr1 tc2 pf0");
  EXPECT_EQ(builtin_profile("nvidia").attn_tiles(256).front().str(), "wg256 br8 tr1 tc1 pf0");
  EXPECT_EQ(builtin_profile("mali-valhall").attn_tiles(256).front().str(), "wg128 br8 tr1 tc1 pf0");
  EXPECT_EQ(builtin_profile("generic").attn_tiles(256).front().str(), "wg128 br16 tr1 tc2 pf1");
  // split keys (a short ubatch over a long cache): NVIDIA's own tile, none elsewhere.
  ASSERT_EQ(builtin_profile("nvidia").attn_split.size(), 1u);
  EXPECT_EQ(builtin_profile("nvidia").attn_split.front().str(), "wg128 br16 tr1 tc2 pf1");
  EXPECT_TRUE(builtin_profile("llvmpipe").attn_split.empty());
  EXPECT_TRUE(builtin_profile("mali-valhall").attn_split.empty());
  // One selector: a CPU device is llvmpipe whatever its vendor and driver name.
  EXPECT_EQ(select_profile(0x10DE, "NVIDIA", true).name, "llvmpipe");
  EXPECT_EQ(select_profile(0x1234, "panvk", false).name, "mali-valhall");
  EXPECT_EQ(select_profile(0x1234, "x", false).name, "generic");
  EXPECT_EQ(select_profile(0x1AE0, "SwiftShader driver", true).name, "llvmpipe");
  // The choices that were vendor branches in ops code (same values).
  EXPECT_EQ(builtin_profile("nvidia").attn_rule.decode, 1u);
  EXPECT_EQ(builtin_profile("nvidia").delta_chunk, 0u);
  for (const char* n : {"mali-valhall", "adreno", "intel", "amd", "llvmpipe", "generic"}) {
    EXPECT_EQ(builtin_profile(n).attn_rule.decode, 0u) << n;
    EXPECT_EQ(builtin_profile(n).delta_chunk, 32u) << n;
    EXPECT_EQ(builtin_profile(n).attn_rule.flash_min_tokens, std::string(n) == "llvmpipe" ? 0u : 8u) << n;
    EXPECT_EQ(builtin_profile(n).matmul.str(),
              std::string(n) == "llvmpipe" ? "bm128 bn32 bk8 tm8 tn4" : "bm32 bn32 bk16 tm2 tn4")
        << n;
    const bool mali = std::string(n) == "mali-valhall";
    EXPECT_EQ(builtin_profile(n).attn_rule.dim_pairs, mali ? 0u : 1u) << n;
    EXPECT_EQ(builtin_profile(n).attn_rule.vec_f32, mali ? 0u : 1u) << n;
    EXPECT_EQ(builtin_profile(n).norm_q8_wg, mali ? 64u : 0u) << n;
    EXPECT_EQ(builtin_profile(n).mmv.cols, 8u) << n;
    EXPECT_EQ(builtin_profile(n).mmv.col_split, MatvecRule::k_col_split_by_cols) << n;
    EXPECT_FALSE(builtin_profile(n).has_attn_tile()) << n;
  }
}

// The built-in profiles are the data files src/tune/profiles/<name>.json, embedded at build time:
// each file, read from the source tree as an override, gives the built-in profile of its name (the
// build embedded the files as they are), and every profile keeps the tiles and rules it had when
// it was C++ (tiles_str of each, as the ops read them).
TEST(Tune, BuiltinProfilesAreTheDataFiles) {
  const std::pair<const char*, const char*> k_tiles[] = {
      {"mali-valhall",
       "mmq bm64 bn32 bk64 wm32 wn16 tm2 tn4 wg256 step1 pf0 v1 | mm bm16 bn64 bk64 wm8 wn32 tm8 tn2 wg64 step1 pf1 | "
       "mmv wg64 rows1 groups1 split2 unroll1 | attn wg128 br16 tr1 tc2 pf0 | attn_wide wg128 br8 tr1 tc1 pf0"},
      {"adreno",
       "mmq bm64 bn64 bk32 wm32 wn32 tm4 tn4 wg256 step1 pf1 | mm bm64 bn64 bk32 wm32 wn32 tm4 tn8 wg128 step1 pf1 | "
       "mmv wg64 rows4 groups512 split0 unroll1 | attn wg128 br16 tr1 tc2 pf1"},
      {"intel",
       "mmq bm64 bn64 bk32 wm32 wn32 tm4 tn4 wg256 step1 pf1 | mm bm64 bn64 bk32 wm32 wn32 tm4 tn8 wg128 step1 pf1 | "
       "mmv wg64 rows4 groups512 split0 unroll1 | attn wg128 br16 tr1 tc2 pf1"},
      {"amd",
       "mmq bm128 bn64 bk32 wm64 wn32 tm8 tn4 wg256 step1 pf1 | mm bm128 bn64 bk32 wm64 wn32 tm8 tn4 wg256 step1 pf1 | "
       "mmv wg64 rows4 groups512 split0 unroll1 | attn wg128 br16 tr1 tc2 pf1"},
      {"nvidia",
       "mmq bm32 bn128 bk64 wm16 wn64 tm4 tn8 wg128 step1 pf0 v1 | alt bm16 bn64 bk64 wm8 wn32 tm8 tn2 wg64 step1 pf1 "
       "v1 (≥ 33 groups) | mm bm128 bn128 bk32 wm64 wn64 tm8 tn4 wg512 step1 pf1 | mmv wg64 rows4 groups256 split0 "
       "unroll1 byk q8≤64 cols32x2 | attn wg256 br32 tr4 tc2 pf0 kvh1 roll1 | attn_wide wg256 br8 tr1 tc1 pf0 | "
       "attn_split wg128 br16 tr1 tc2 pf1"},
      {"llvmpipe",
       "mmq bm32 bn32 bk32 wm16 wn16 tm4 tn4 wg64 step1 pf1 | mm bm32 bn32 bk32 wm16 wn16 tm4 tn4 wg64 step1 pf1 | mmv "
       "wg32 rows8 groups1 split0 unroll1 | attn wg64 br32 tr4 tc4 pf0"},
      {"generic",
       "mmq bm64 bn32 bk32 wm32 wn16 tm4 tn2 wg256 step1 pf0 v1 | mm bm64 bn32 bk32 wm32 wn16 tm4 tn4 wg128 step1 pf1 "
       "| mmv wg64 rows4 groups512 split0 unroll1 | attn wg128 br16 tr1 tc2 pf1"},
  };
  EXPECT_EQ(builtin_profiles().size(), std::size(k_tiles));
  for (const auto& [name, tiles] : k_tiles) {
    SCOPED_TRACE(name);
    const DeviceProfile& b = builtin_profile(name);
    EXPECT_EQ(b.tiles_str(), tiles);
    const std::string path = std::string(ROCKY_SOURCE_DIR) + "/src/tune/profiles/" + name + ".json";
    const DeviceProfile f = load_profile_override(path, builtin_profile("generic"));
    EXPECT_EQ(f.tiles_str(), b.tiles_str());
    EXPECT_EQ(f.mmq_alt.size(), b.mmq_alt.size());
    EXPECT_TRUE(f.mmv == b.mmv);
    EXPECT_EQ(f.attn, b.attn);
    EXPECT_EQ(f.attn_wide, b.attn_wide);
    EXPECT_EQ(f.attn_split, b.attn_split);
    EXPECT_EQ(f.max_accumulators, b.max_accumulators);
    EXPECT_EQ(f.min_workgroups, b.min_workgroups);
    EXPECT_EQ(f.mmq_q4k_nibbles, b.mmq_q4k_nibbles);
    EXPECT_EQ(f.mmq_q6k_nibbles, b.mmq_q6k_nibbles);
    EXPECT_TRUE(f.attn_rule == b.attn_rule);
    EXPECT_EQ(f.matmul, b.matmul);
    EXPECT_EQ(f.delta_chunk, b.delta_chunk);
    EXPECT_EQ(f.norm_q8_wg, b.norm_q8_wg);
    EXPECT_EQ(f.modeled, b.modeled);
    EXPECT_EQ(f.deny.size(), b.deny.size());
  }
  // The Mali profile exists once: the modeled one `rocky tune --offline mali-g610` wrote (the mali
  // label compiles its variants), with the candidates the offline compiler refused.
  EXPECT_TRUE(builtin_profile("mali-valhall").modeled);
  EXPECT_FALSE(builtin_profile("mali-valhall").deny.empty());
  EXPECT_FALSE(builtin_profile("nvidia").modeled);
}

}  // namespace
}  // namespace rocky::tune
