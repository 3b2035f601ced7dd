// Tiles as data: profile selection, budgets, shared-memory limits, JSON overrides.
#include <gtest/gtest.h>

#include <fstream>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "tune/tile.hpp"

namespace rocky::tune {
namespace {

std::string write(const std::string& name, const std::string& text) {
  std::string p = rocky::test::scratch_dir("fast_tune") + "/" + name;
  std::ofstream(p) << text;
  return p;
}

TEST(Tune, ProfilesByVendorAndDriver) {
  EXPECT_EQ(select_profile(0x13B5, "panvk").name, "mali-valhall");
  EXPECT_EQ(select_profile(0, "panvk").name, "mali-valhall");
  EXPECT_EQ(select_profile(0x5143, "turnip").name, "adreno");
  EXPECT_EQ(select_profile(0x8086, "Intel open-source Mesa driver").name, "intel");
  EXPECT_EQ(select_profile(0x1002, "radv").name, "amd");
  EXPECT_EQ(select_profile(0x10DE, "NVIDIA").name, "nvidia");
  EXPECT_EQ(select_profile(0x10005, "llvmpipe").name, "llvmpipe");
  EXPECT_EQ(select_profile(0x1234, "other").name, "generic");
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
  EXPECT_EQ(pick_mmq_tile(base, 256, 512).bn, 64u);        // built-in nvidia: 32×64 for attn_k/attn_v
  EXPECT_EQ(pick_mmq_tile(base, 2048, 512).bn, 128u);      // 64 → 64×128: 128
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

}  // namespace
}  // namespace rocky::tune
