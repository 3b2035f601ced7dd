// `mali` label: every shipped mali-valhall variant (quantize_q8_1; matvec_mmq and
// matvec_mmq_shared with their epilogues, rms_norm_vec ; mul_mmq and
// mul_mmq_nodot, with and without their bias / residual epilogues, for
// q4_0, q8_0, q4_K, q6_K with the profile's q4_K repack layout, plus q4_K's other layout; mul_mm
// and mul_mm_f16 for f16, q4_0, q8_0, q4_K, q6_K; the mali-valhall profile's tiles) compiled by Mesa 25.0.7's Mali-G610
// compiler through ../shared/mali/g610-stats must have 0 spills and tls_bytes 0; work_regs is
// reported (32 = full occupancy). A missing tool or compiler FAILS (never skips): run
// `MALI_G610_HOME=/opt/mali-g610-offline bash ../shared/mali/setup.sh` once.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "backend/vulkan/shaders/fast_abi.h"
#include "common/shared.hpp"
#include "tune/search.hpp"
#include "tune/tile.hpp"

namespace {

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    *status = -1;
    return out;
  }
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  *status = pclose(p);
  return out;
}

struct Variant {
  std::string shader;
  std::string spec;
  bool full_occupancy = false;  // decode kernels: ≤ 32 work registers
};

TEST(Mali, EveryShippedVariantIsSpillFree) {
  const std::string tool = rocky::test::shared_path("mali/g610-stats");
  const char* home_env = std::getenv("MALI_G610_HOME");
  const std::string home = home_env ? home_env : "/opt/mali-g610-offline";
  const std::string spv_dir = std::string(ROCKY_BINARY_DIR) + "/src/backend/vulkan/shaders/";
  const rocky::tune::MatmulTile& t = rocky::tune::builtin_profile("mali-valhall").mmq;
  std::vector<Variant> vs;
  vs.push_back({"quantize_q8_1", "-s 0=64"});
  vs.push_back({"rms_norm_q8_1", "-s 0=64"});
  vs.push_back({"silu_mul_q8_1", "-s 0=64"});
  vs.push_back({"gelu_mul", "-s 0=128"});  // gemma3's GeGLU and embedding scale (ops::Env's wg)
  vs.push_back({"scale", "-s 0=128"});
  // qwen35's linear-attention kernels: take_rows, sigmoid_mul, ssm_conv (ops::Env's wg) and
  // gated_delta at the tiles DeltaTile allows for d_k = 128: (columns, rows per invocation) =
  // (16, 16) the default (8 parts, 128 invocations), (32, 16), (16, 8). (Rows 32 put the state in
  // thread-local storage on the G610: 512 tls bytes.)
  vs.push_back({"take_rows", "-s 0=128"});
  vs.push_back({"sigmoid_mul", "-s 0=128"});
  vs.push_back({"ssm_conv", "-s 0=128"});
  for (auto [cols, rows] : {std::pair{16, 16}, std::pair{32, 16}, std::pair{16, 8}})
    vs.push_back({"gated_delta", "-s " + std::to_string(ROCKY_SC_WG) + "=" + std::to_string(cols * (128 / rows)) +
                                     " -s " + std::to_string(ROCKY_SC_DELTA_COLS) + "=" + std::to_string(cols) +
                                     " -s " + std::to_string(ROCKY_SC_DELTA_ROWS) + "=" + std::to_string(rows)});
  // gated_delta_chunk (the chunked prefill kernel) at the same tiles and chunks of 16, 32
  // (VulkanOptions::delta_chunk's default) and 64 tokens.
  for (auto [cols, rows] : {std::pair{16, 16}, std::pair{32, 16}, std::pair{16, 8}})
    for (int chunk : {16, 32, 64})
      vs.push_back({"gated_delta_chunk", "-s " + std::to_string(ROCKY_SC_WG) + "=" +
                                             std::to_string(cols * (128 / rows)) + " -s " +
                                             std::to_string(ROCKY_SC_DELTA_COLS) + "=" + std::to_string(cols) + " -s " +
                                             std::to_string(ROCKY_SC_DELTA_ROWS) + "=" + std::to_string(rows) + " -s " +
                                             std::to_string(ROCKY_SC_DELTA_CHUNK) + "=" + std::to_string(chunk)});
  for (const char* sh : {"mul_mmq", "mul_mmq_nodot"}) {
    for (int type : {2, 6, 7, 8, 12, 13, 14}) {  // q5_0, q5_1, q5_K too
      std::string spec = "-s " + std::to_string(ROCKY_SC_WG) + "=" + std::to_string(t.wg);
      auto add = [&](int id, uint32_t v) { spec += " -s " + std::to_string(id) + "=" + std::to_string(v); };
      add(ROCKY_SC_WTYPE, static_cast<uint32_t>(type));
      add(ROCKY_SC_BM, t.bm);
      add(ROCKY_SC_BN, t.bn);
      add(ROCKY_SC_BK, t.bk);
      add(ROCKY_SC_WM, t.wm);
      add(ROCKY_SC_WN, t.wn);
      add(ROCKY_SC_TM, t.tm);
      add(ROCKY_SC_TN, t.tn);
      add(ROCKY_SC_BK_STEP, t.bk_step);
      add(ROCKY_SC_PREFETCH, t.prefetch);
      add(ROCKY_SC_MMQ_VEC4, t.vec4);
      const bool nib = rocky::tune::builtin_profile("mali-valhall").mmq_nibbles(static_cast<rocky::DType>(type));
      vs.push_back({sh, spec + " -s " + std::to_string(ROCKY_SC_MMQ_NIB) + "=" + (nib ? "1" : "0")});
      // The bias and residual epilogues (VulkanOptions::fuse_epilogue) ship too.
      for (int epi : {ROCKY_MMQ_EPI_BIAS, ROCKY_MMQ_EPI_RESIDUAL})
        vs.push_back({sh, spec + " -s " + std::to_string(ROCKY_SC_MMQ_NIB) + "=" + (nib ? "1" : "0") + " -s " +
                              std::to_string(ROCKY_SC_MMQ_EPI) + "=" + std::to_string(epi)});
      if (type == 12)  // q4_K's other repack layout (not shipped; reported for the layout choice)
        vs.push_back({sh, spec + " -s " + std::to_string(ROCKY_SC_MMQ_NIB) + "=" + (nib ? "0" : "1")});
    }
  }
  // matvec_mmq (decode) with the Mali shape of fast::matvec_shape (64 invocations, 1 row,
  // quarter-block steps), both reductions, every mmq type and both q4_K layouts, x as vec4 and scalar,
  // and the bias / residual epilogues; rms_norm_vec (the decode norm) for 2,048 … 8,192 floats.
  for (const char* sh : {"matvec_mmq", "matvec_mmq_shared"})
    for (int type : {2, 6, 7, 8, 12, 13, 14})
      for (int nib : {0, 1}) {
        if (nib && type != 12 && type != 14) continue;  // q6_K ships as nibbles + high bits too
        for (int xv4 : {1, 0})
          for (int epi : {0, 1, 2}) {
            if (!xv4 && epi) continue;
            auto id = [](int i, int v) { return " -s " + std::to_string(i) + "=" + std::to_string(v); };
            vs.push_back({sh,
                          id(ROCKY_SC_WG, 64) + id(ROCKY_SC_WTYPE, type) + id(ROCKY_SC_BM, 1) +
                              id(ROCKY_SC_MMQ_NIB, nib) + id(ROCKY_SC_MMV_HALF, 2) + id(ROCKY_SC_MMV_XVEC4, xv4) +
                              id(ROCKY_SC_MMQ_EPI, epi),
                          true});
          }
      }
  // get_rows_mmq: the embedding lookup over the repack (every mmq type, both layouts).
  for (int type : {2, 6, 7, 8, 12, 13, 14})
    for (int nib : {0, 1})
      vs.push_back({"get_rows_mmq", "-s " + std::to_string(ROCKY_SC_WG) + "=128 -s " + std::to_string(ROCKY_SC_WTYPE) +
                                        "=" + std::to_string(type) + " -s " + std::to_string(ROCKY_SC_MMQ_NIB) + "=" +
                                        std::to_string(nib)});
  for (auto [wg, per] : {std::pair{512, 1}, std::pair{1024, 1}, std::pair{1024, 2}})
    vs.push_back({"rms_norm_vec",
                  "-s " + std::to_string(ROCKY_SC_WG) + "=" + std::to_string(wg) + " -s " +
                      std::to_string(ROCKY_SC_RMS_PER) + "=" + std::to_string(per),
                  true});
  // the decode step's kernels (branch step): rope_kv (rope Q + K, K and V stores in one
  // dispatch), rope and kv_store with n_past from the push constant or the step buffer
  // (ROCKY_SC_POS_BUF), f32 and f16 caches; attention / attention_step (the decode attention on
  // GPUs, n_past from the push constant / the step buffer) as ops/attention.cpp builds them.
  {
    auto id = [](int i, int v) { return " -s " + std::to_string(i) + "=" + std::to_string(v); };
    for (int pos : {0, 1}) {
      vs.push_back({"rope", id(ROCKY_SC_WG, 64) + id(ROCKY_SC_POS_BUF, pos), true});
      for (int f16 : {0, 1}) {
        vs.push_back({"rope_kv", id(ROCKY_SC_WG, 64) + id(ROCKY_SC_KV_F16, f16) + id(ROCKY_SC_POS_BUF, pos), true});
        vs.push_back({"kv_store", id(ROCKY_SC_WG, 128) + id(ROCKY_SC_KV_F16, f16) + id(ROCKY_SC_POS_BUF, pos), true});
      }
    }
    // ROCKY_SC_ATTN_HD: the element loop (0) and the 16-byte q·k loop at head_dim 128 (f16 caches
    // only: ops/attention.cpp keeps the element loop for f32 caches on Mali).
    for (const char* sh : {"attention", "attention_step"})
      for (int f16 : {0, 1})
        for (int hd : f16 ? std::vector<int>{0, 128} : std::vector<int>{0})
          vs.push_back(
              {sh, id(ROCKY_SC_WG, 64) + id(ROCKY_SC_KV_F16, f16) + id(ROCKY_SC_HD_MAX, 512) + id(ROCKY_SC_ATTN_HD, hd),
               true});
    // The split decode attention (decode at depth): both n_past sources, and its merge.
    for (int pos : {0, 1})
      for (int f16 : {0, 1})
        for (int hd : f16 ? std::vector<int>{0, 128} : std::vector<int>{0})
          vs.push_back({"attention_split",
                        id(ROCKY_SC_WG, 64) + id(ROCKY_SC_KV_F16, f16) + id(ROCKY_SC_HD_MAX, 512) +
                            id(ROCKY_SC_POS_BUF, pos) + id(ROCKY_SC_ATTN_HD, hd),
                        true});
    vs.push_back({"attention_merge", id(ROCKY_SC_WG, 64), true});
    // attention_flash with the step buffer (CPU drivers' decode only; the Arm tile of head_dim 128).
    for (int f16 : {0, 1})
      vs.push_back({"attention_flash",
                    id(ROCKY_SC_WG, 128) + id(ROCKY_SC_KV_F16, f16) + id(ROCKY_SC_FA_BR, 16) + id(ROCKY_SC_FA_TR, 1) +
                        id(ROCKY_SC_FA_TC, 2) + id(ROCKY_SC_FA_HD, 128) + id(ROCKY_SC_POS_BUF, 1),
                    false});
  }
  const rocky::tune::MatmulTile& m = rocky::tune::builtin_profile("mali-valhall").mm;
  for (int type : {1, 2, 8, 12, 14}) {  // mul_mm: f32 and f16 tiles
    std::string spec;
    auto add = [&](int id, uint32_t v) {
      spec += (spec.empty() ? "-s " : " -s ") + std::to_string(id) + "=" + std::to_string(v);
    };
    add(ROCKY_SC_WG, m.wg);
    add(ROCKY_SC_WTYPE, static_cast<uint32_t>(type));
    add(ROCKY_SC_BM, m.bm);
    add(ROCKY_SC_BN, m.bn);
    add(ROCKY_SC_BK, m.bk);
    add(ROCKY_SC_WM, m.wm);
    add(ROCKY_SC_WN, m.wn);
    add(ROCKY_SC_TM, m.tm);
    add(ROCKY_SC_TN, m.tn);
    vs.push_back({"mul_mm", spec});
    vs.push_back({"mul_mm_f16", spec});
  }
  for (const auto& v : vs) {
    int status = 0;
    std::string cmd =
        "MALI_G610_HOME='" + home + "' '" + tool + "' '" + spv_dir + v.shader + ".spv' " + v.spec + " --json 2>&1";
    std::string out = run(cmd, &status);
    ASSERT_EQ(status, 0) << "g610-stats failed (is the compiler built? MALI_G610_HOME=" << home
                         << " bash ../shared/mali/setup.sh):\n"
                         << cmd << "\n"
                         << out;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(out.substr(out.find('{'), out.find('\n', out.find('{')) - out.find('{')));
    } catch (const std::exception& e) {
      FAIL() << "unparsable g610-stats output for " << v.shader << ": " << out;
    }
    std::printf("mali-g610 %-14s %-120s work_regs %d threads %d spills %d fills %d tls_bytes %d inst %d\n",
                v.shader.c_str(), v.spec.c_str(), j["work_regs"].get<int>(), j["threads"].get<int>(),
                j["spills"].get<int>(), j["fills"].get<int>(), j["tls_bytes"].get<int>(), j["inst"].get<int>());
    EXPECT_EQ(j["spills"].get<int>(), 0) << v.shader << " " << v.spec;
    EXPECT_EQ(j["fills"].get<int>(), 0) << v.shader << " " << v.spec;
    EXPECT_EQ(j["tls_bytes"].get<int>(), 0) << v.shader << " " << v.spec;
    if (v.full_occupancy) {
      EXPECT_LE(j["work_regs"].get<int>(), 32) << v.shader << " " << v.spec;
    }
  }
}

// attention_flash with the Arm tiles of ops/attention.cpp (WG, BR, TR, TC): head_dim 64, 80,
// 128 (16 rows × 16 keys) and 256 (8 rows × 16 keys), f32 and f16 KV cache, whole key range and
// split keys (ROCKY_SC_FA_SPLIT, few query rows at depth): 0 spills, tls 0. The same for
// attention_flash_roll (tile field roll; not in the Mali profile: on the G610 it changes nothing at
// these tiles, docs/tuning-log.md #46), so a profile or `rocky tune` that picks it stays spill-free.
TEST(Mali, AttentionFlashIsSpillFree) {
  const std::string tool = rocky::test::shared_path("mali/g610-stats");
  const char* home_env = std::getenv("MALI_G610_HOME");
  const std::string home = home_env ? home_env : "/opt/mali-g610-offline";
  int n = 0;
  for (const char* shader : {"attention_flash", "attention_flash_roll"})
    for (uint32_t split : {0u, 1u})
      for (uint32_t kv_f16 : {0u, 1u}) {
        for (auto [hd, wg, br, tr, tc] : {std::array<uint32_t, 5>{64, 128, 16, 1, 2},
                                          {80, 128, 16, 1, 2},
                                          {128, 128, 16, 1, 2},
                                          {256, 128, 8, 1, 1}}) {
          std::string spec;
          auto add = [&](int id, uint32_t v) { spec += " -s " + std::to_string(id) + "=" + std::to_string(v); };
          add(ROCKY_SC_WG, wg);
          add(ROCKY_SC_KV_F16, kv_f16);
          add(ROCKY_SC_FA_BR, br);
          add(ROCKY_SC_FA_TR, tr);
          add(ROCKY_SC_FA_TC, tc);
          add(ROCKY_SC_FA_HD, hd);
          if (split) add(ROCKY_SC_FA_SPLIT, 1);
          int status = 0;
          const std::string spv = std::string(ROCKY_BINARY_DIR) + "/src/backend/vulkan/shaders/" + shader + ".spv";
          const std::string cmd = "MALI_G610_HOME='" + home + "' '" + tool + "' '" + spv + "'" + spec + " --json 2>&1";
          const std::string out = run(cmd, &status);
          ASSERT_EQ(status, 0) << "g610-stats failed:\n" << cmd << "\n" << out;
          const size_t b = out.find('{');
          ASSERT_NE(b, std::string::npos) << out;
          const nlohmann::json j = nlohmann::json::parse(out.substr(b, out.find('\n', b) - b));
          std::printf("mali-g610 %-20s %-60s work_regs %d spills %d fills %d tls_bytes %d inst %d\n", shader,
                      spec.c_str(), j["work_regs"].get<int>(), j["spills"].get<int>(), j["fills"].get<int>(),
                      j["tls_bytes"].get<int>(), j["inst"].get<int>());
          EXPECT_EQ(j["spills"].get<int>(), 0) << spec;
          EXPECT_EQ(j["fills"].get<int>(), 0) << spec;
          EXPECT_EQ(j["tls_bytes"].get<int>(), 0) << spec;
          ++n;
        }
      }
  EXPECT_EQ(n, 32);
}

// The shipped Mali profile (src/tune/profiles/mali-valhall.json, the built-in mali-valhall) is the
// one `rocky tune --offline mali-g610` wrote — modeled, never run on a board —
// so EveryShippedVariantIsSpillFree and AttentionFlashIsSpillFree compile every variant of it; its
// tiles are compiled here once more straight from the file (every mul_mmq type, both layouts,
// every epilogue; mul_mm and mul_mm_f16) and its deny list holds only real refusals.
TEST(Mali, ShippedProfileIsModeledAndSpillFree) {
  const std::string tool = rocky::test::shared_path("mali/g610-stats");
  const char* home_env = std::getenv("MALI_G610_HOME");
  const std::string home = home_env ? home_env : "/opt/mali-g610-offline";
  const std::string spv_dir = std::string(ROCKY_BINARY_DIR) + "/src/backend/vulkan/shaders/";
  const std::string path = std::string(ROCKY_SOURCE_DIR) + "/src/tune/profiles/mali-valhall.json";
  const rocky::tune::DeviceProfile f =
      rocky::tune::load_profile_override(path, rocky::tune::builtin_profile("generic"));
  const rocky::tune::DeviceProfile& m = rocky::tune::builtin_profile("mali-valhall");
  ASSERT_TRUE(f.modeled);
  EXPECT_EQ(f.mmq.str(), m.mmq.str());
  EXPECT_EQ(f.mm.str(), m.mm.str());
  EXPECT_EQ(f.attn, m.attn);
  EXPECT_EQ(f.attn_wide, m.attn_wide);
  // The attention tiles are the ones AttentionFlashIsSpillFree compiles.
  ASSERT_FALSE(f.attn.empty());
  EXPECT_EQ(f.attn.front().str(), "wg128 br16 tr1 tc2 pf0");
  EXPECT_EQ(f.attn_tiles(256).front().str(), "wg128 br8 tr1 tc1 pf0");
  for (const auto& d : f.deny) EXPECT_NE(d.reason.find("mali-g610"), std::string::npos) << d.tile;
  auto stats = [&](const std::string& shader, const std::string& spec) {
    int status = 0;
    const std::string cmd =
        "MALI_G610_HOME='" + home + "' '" + tool + "' '" + spv_dir + shader + ".spv' " + spec + " --json 2>&1";
    const std::string out = run(cmd, &status);
    EXPECT_EQ(status, 0) << cmd << "\n" << out;
    const size_t b = out.find('{');
    if (b == std::string::npos) return nlohmann::json();
    return nlohmann::json::parse(out.substr(b, out.find('\n', b) - b));
  };
  int n = 0;
  auto id = [](int i, uint32_t v) { return " -s " + std::to_string(i) + "=" + std::to_string(v); };
  const rocky::tune::MatmulTile& t = f.mmq;
  for (const char* sh : {"mul_mmq", "mul_mmq_nodot"})
    for (uint32_t type : {2u, 6u, 7u, 8u, 12u, 13u, 14u})
      for (uint32_t nib : {0u, 1u})
        for (uint32_t epi : {0u, 1u, 2u}) {
          const std::string spec =
              id(ROCKY_SC_WG, t.wg) + id(ROCKY_SC_WTYPE, type) + id(ROCKY_SC_BM, t.bm) + id(ROCKY_SC_BN, t.bn) +
              id(ROCKY_SC_BK, t.bk) + id(ROCKY_SC_WM, t.wm) + id(ROCKY_SC_WN, t.wn) + id(ROCKY_SC_TM, t.tm) +
              id(ROCKY_SC_TN, t.tn) + id(ROCKY_SC_BK_STEP, t.bk_step) + id(ROCKY_SC_PREFETCH, t.prefetch) +
              id(ROCKY_SC_MMQ_VEC4, t.vec4) + id(ROCKY_SC_MMQ_NIB, nib) + id(ROCKY_SC_MMQ_EPI, epi);
          const nlohmann::json j = stats(sh, spec);
          ASSERT_TRUE(j.is_object()) << sh << spec;
          EXPECT_EQ(j["spills"].get<int>(), 0) << sh << spec;
          EXPECT_EQ(j["fills"].get<int>(), 0) << sh << spec;
          EXPECT_EQ(j["tls_bytes"].get<int>(), 0) << sh << spec;
          ++n;
        }
  const rocky::tune::MatmulTile& u = f.mm;
  for (const char* sh : {"mul_mm", "mul_mm_f16"})
    for (uint32_t type : {1u, 2u, 8u, 12u, 14u}) {
      const std::string spec = id(ROCKY_SC_WG, u.wg) + id(ROCKY_SC_WTYPE, type) + id(ROCKY_SC_BM, u.bm) +
                               id(ROCKY_SC_BN, u.bn) + id(ROCKY_SC_BK, u.bk) + id(ROCKY_SC_WM, u.wm) +
                               id(ROCKY_SC_WN, u.wn) + id(ROCKY_SC_TM, u.tm) + id(ROCKY_SC_TN, u.tn);
      const nlohmann::json j = stats(sh, spec);
      ASSERT_TRUE(j.is_object()) << sh << spec;
      EXPECT_EQ(j["spills"].get<int>(), 0) << sh << spec;
      EXPECT_EQ(j["tls_bytes"].get<int>(), 0) << sh << spec;
      ++n;
    }
  EXPECT_EQ(n, 2 * 7 * 2 * 3 + 2 * 5);
}

// The prefill matmuls of the shipped Mali profile run at 64 work registers (half occupancy). Each is
// held against a full-occupancy variant actually built: the small tiles (mul_mmq: TM · TN ≤ 2 in
// either q4_K layout; mul_mm: TM · TN ≤ 8) are compiled, the one at ≤ 32 work registers with the
// least modeled cost per multiply-add (tune::modeled_cost_per_mac, the model of rocky tune
// --offline) is taken for q4_K, and then compiled for every weight type beside the shipped tile.
// The shipped tile must model cheaper for every type, and the table says by how much: the
// break-even is the half-occupancy penalty (the model assumes 1.25×) at which the full-occupancy
// variant would win.
TEST(Mali, HalfOccupancyMatmulsModelFasterThanFullOccupancyVariants) {
  const std::string tool = rocky::test::shared_path("mali/g610-stats");
  const char* home_env = std::getenv("MALI_G610_HOME");
  const std::string home = home_env ? home_env : "/opt/mali-g610-offline";
  const std::string spv_dir = std::string(ROCKY_BINARY_DIR) + "/src/backend/vulkan/shaders/";
  const rocky::tune::DeviceProfile& prof = rocky::tune::builtin_profile("mali-valhall");
  struct Job {
    std::string shader;
    rocky::tune::MatmulTile t;
    uint32_t type = 12;
    uint32_t nib = 0;
    nlohmann::json stats;
  };
  auto id = [](int i, uint32_t v) { return " -s " + std::to_string(i) + "=" + std::to_string(v); };
  auto spec_of = [&](const Job& j) {
    const auto& t = j.t;
    std::string s = id(ROCKY_SC_WG, t.wg) + id(ROCKY_SC_WTYPE, j.type) + id(ROCKY_SC_BM, t.bm) + id(ROCKY_SC_BN, t.bn) +
                    id(ROCKY_SC_BK, t.bk) + id(ROCKY_SC_WM, t.wm) + id(ROCKY_SC_WN, t.wn) + id(ROCKY_SC_TM, t.tm) +
                    id(ROCKY_SC_TN, t.tn);
    if (j.shader.rfind("mul_mmq", 0) == 0)
      s += id(ROCKY_SC_BK_STEP, t.bk_step) + id(ROCKY_SC_PREFETCH, t.prefetch) + id(ROCKY_SC_MMQ_VEC4, t.vec4) +
           id(ROCKY_SC_MMQ_NIB, j.nib);
    return s;
  };
  // Compiles every job, two at a time.
  auto compile_all = [&](std::vector<Job>& jobs) {
    for (size_t i = 0; i < jobs.size(); i += 2) {
      std::vector<std::future<void>> f;
      for (size_t k = i; k < std::min(jobs.size(), i + 2); ++k)
        f.push_back(std::async(std::launch::async, [&, k] {
          int status = 0;
          const std::string out = run("MALI_G610_HOME='" + home + "' '" + tool + "' '" + spv_dir + jobs[k].shader +
                                          ".spv'" + spec_of(jobs[k]) + " --json 2>&1",
                                      &status);
          const size_t b = out.find('{');
          if (status == 0 && b != std::string::npos)
            jobs[k].stats = nlohmann::json::parse(out.substr(b, out.find('\n', b) - b), nullptr, false);
        }));
      for (auto& x : f) x.get();
    }
  };
  auto clean = [](const Job& j) {
    return j.stats.is_object() && j.stats["spills"] == 0 && j.stats["fills"] == 0 && j.stats["tls_bytes"] == 0;
  };
  auto cost = [](const Job& j) {
    return rocky::tune::modeled_cost_per_mac(j.t, j.stats["cycles"].get<double>(), j.stats["work_regs"].get<int>());
  };
  // The cheapest job of [b, e) that compiled spill-free in ≤ 32 work registers, or null.
  auto cheapest_full = [&](const Job* b, const Job* e) {
    const Job* f = nullptr;
    for (const Job* j = b; j != e; ++j)
      if (clean(*j) && j->stats["work_regs"].get<int>() <= 32 && (!f || cost(*j) < cost(*f))) f = j;
    return f;
  };
  const rocky::tune::DeviceLimits limits{256, 32768};
  for (const bool mmq : {true, false}) {
    const rocky::tune::MatmulTile& shipped = mmq ? prof.mmq : prof.mm;
    const uint32_t small = mmq ? 2 : 8;  // TM · TN of the family that can fit in 32 registers
    // The family, for q4_K (the bulk of a Q4_K_M model), in both q4_K layouts for mul_mmq.
    std::vector<Job> family;
    for (const auto& t : rocky::tune::all_tiles(mmq, limits, prof.max_accumulators, false, shipped))
      if (t.tm * t.tn <= small && t.wg >= 64 && t.bk == shipped.bk)
        for (uint32_t nib : mmq ? std::vector<uint32_t>{0, 1} : std::vector<uint32_t>{0})
          family.push_back({mmq ? "mul_mmq_nodot" : "mul_mm", t, 12, nib, {}});
    compile_all(family);
    const Job* best = cheapest_full(family.data(), family.data() + family.size());
    ASSERT_NE(best, nullptr) << (mmq ? "mul_mmq" : "mul_mm") << ": no tile of " << family.size()
                             << " compiles spill-free in 32 work registers";
    // Every type: the shipped tile and the full-occupancy one (its layout where it fits, else the other).
    std::vector<Job> jobs;
    const std::vector<uint32_t> types =
        mmq ? std::vector<uint32_t>{2, 6, 7, 8, 12, 13, 14} : std::vector<uint32_t>{1, 2, 8, 12, 14};
    for (const char* sh :
         mmq ? std::vector<const char*>{"mul_mmq", "mul_mmq_nodot"} : std::vector<const char*>{"mul_mm", "mul_mm_f16"})
      for (uint32_t type : types) {
        const uint32_t nib = prof.mmq_nibbles(static_cast<rocky::DType>(type)) ? 1 : 0;
        jobs.push_back({sh, shipped, type, nib, {}});
        jobs.push_back({sh, best->t, type, best->nib, {}});
        if (mmq) jobs.push_back({sh, best->t, type, 1 - best->nib, {}});
      }
    compile_all(jobs);
    const size_t per = mmq ? 3 : 2;
    for (size_t i = 0; i < jobs.size(); i += per) {
      const Job& s = jobs[i];
      ASSERT_TRUE(clean(s)) << s.shader << spec_of(s) << ": the shipped tile must compile spill-free";
      const Job* f = cheapest_full(&jobs[i + 1], &jobs[i] + per);
      auto row = [&](const char* what, const Job& j) {
        std::printf(
            "mali-g610 occupancy %-13s type %2u %-8s %-52s %s work_regs %2d threads %d spills %d tls %d "
            "cycles %5.1f cost/MAC %.4f\n",
            j.shader.c_str(), j.type, what, j.t.str().c_str(), mmq ? (j.nib ? "nibbles" : "bytes  ") : "",
            j.stats["work_regs"].get<int>(), j.stats["threads"].get<int>(), j.stats["spills"].get<int>(),
            j.stats["tls_bytes"].get<int>(), j.stats["cycles"].get<double>(), cost(j));
      };
      row("shipped", s);
      std::vector<Job> more;  // q4_K's best over 32 registers for this type: the rest of the family
      if (!f) {
        for (const auto& j : family)
          if (clean(j)) more.push_back({s.shader, j.t, s.type, j.nib, {}});
        compile_all(more);
        f = cheapest_full(more.data(), more.data() + more.size());
      }
      ASSERT_NE(f, nullptr) << s.shader << " type " << s.type << ": no tile of the family fits in 32 work registers";
      row("full", *f);
      std::printf("mali-g610 occupancy %-13s type %2u break-even half-occupancy penalty %.2fx\n", s.shader.c_str(),
                  s.type, cost(*f) / rocky::tune::cycles_per_mac(s.t, s.stats["cycles"].get<double>()));
      EXPECT_LT(cost(s), cost(*f)) << s.shader << " type " << s.type << ": the full-occupancy " << f->t.str()
                                   << " models cheaper than the shipped " << s.t.str()
                                   << " — rerun rocky tune --offline mali-g610 and ship its choice";
    }
  }
}

}  // namespace
