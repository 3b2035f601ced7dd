// Both attention kernels (shaders/attention_flash.comp, the tiled prefill kernel, and
// shaders/attention.comp, the per-(head, token) kernel; forced with the attn switch) against the CPU
// oracle's attention (backend/cpu/ops.hpp: f64 dot products, softmax and sums) on random data of
// awkward shapes: n_tokens 1, 3, 37, 130 × n_past 0, 5, 77 (the cache filled by an earlier
// ubatch) × head_dim 64, 128 × GQA groups 1, 2, 7 × f32 and f16 KV cache; half the shapes use
// scale 1 (peaked softmax), half 1/√head_dim; the tiled kernel also with other tiles (register
// prefetch on, keys per block 8 … 32) through the profile's attn_tile. With an f16 cache the oracle reads the same
// f16-rounded K and V, so both caches are held to the f32-arithmetic bound: NMSE ≤ 1e-10.
// Validation layer + synchronization validation on; zero errors asserted.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <random>
#include <vector>

#include "backend/cpu/ops.hpp"
#include "core/error.hpp"
#include "quant/quant.hpp"
#include "runtime/options.hpp"
#include "tune/store.hpp"
#include "tune/tile.hpp"
#include "common/shared.hpp"
#include "vk_test_util.hpp"

namespace rocky::test {
namespace {

using graph::Graph;
using graph::Node;
using graph::Op;

constexpr double k_tol = 1e-10;

// The lab overrides these tests set, by name — "attn" (ROCKY_SWITCH attn=flash|simple|decode),
// "tile" (WG,BR,TR,TC[,PREFETCH[,KVH[,SG[,ROLL]]]]: ROCKY_TUNE's attn_tile), "split" (0: never
// split, else key positions per split: attn_rule.split / split_chunk) and "grid" (attn_rule.fa_groups)
// — and the LabOptions the program's boundary parses from them (runtime::parse_lab).
std::map<std::string, std::string>& lab_vars() {
  static std::map<std::string, std::string> v;
  return v;
}
void set_var(const char* name, const std::string& value) { lab_vars()[name] = value; }
void unset_var(const char* name) { lab_vars().erase(name); }
vulkan::LabOptions lab_now() {
  auto get = [](const char* n) { return lab_vars().count(n) ? lab_vars()[n] : std::string(); };
  nlohmann::json tune = nlohmann::json::object();
  if (const std::string t = get("tile"); !t.empty()) {
    static const char* const k_fields[] = {"wg", "br", "tr", "tc", "prefetch", "kvh", "sg", "roll"};
    std::vector<uint32_t> v;
    for (size_t at = 0; at <= t.size();) {
      const size_t c = std::min(t.find(',', at), t.size());
      v.push_back(static_cast<uint32_t>(std::stoul(t.substr(at, c - at))));
      at = c + 1;
    }
    for (size_t i = 0; i < v.size() && i < 8; ++i) tune["attn_tile"][k_fields[i]] = v[i];
  }
  if (const std::string sp = get("split"); !sp.empty()) {
    if (sp == "0")
      tune["attn_rule"]["split"] = 0;
    else
      tune["attn_rule"]["split_chunk"] = std::stoul(sp);
  }
  if (const std::string g = get("grid"); !g.empty()) tune["attn_rule"]["fa_groups"] = std::stoul(g);
  const std::string attn = get("attn");
  return runtime::parse_lab(tune.empty() ? std::string() : tune.dump(), attn.empty() ? "" : "attn=" + attn);
}

class VulkanAttention : public ::testing::Test {
 protected:
  void TearDown() override {
    unset_var("attn");
    unset_var("tile");
    unset_var("split");
    for (auto& [key, be] : shared_backends()) {
      be->set_lab(lab_now());
      EXPECT_EQ(be->instance().error_count(), 0u) << "validation errors (kv_f16=" << std::get<0>(key) << ")";
      be->release_weights();
    }
  }
};

struct Shape {
  int32_t n_tokens, n_past, head_dim, group, n_head_kv;
  float scale;
  int32_t window = 0;  // sliding window (0: none)
};

// Runs one shape through the backend (ubatch 1 of n_past tokens, then ubatch 2 of n_tokens) and
// returns the NMSE of ubatch 2's attention output against the CPU oracle.
// before_ub2 (optional) runs between the two ubatches (the deep-cache test fills the cache with the
// tiled kernel, then switches kernels for the decode step).
double run_shape(vulkan::VulkanBackend& be, bool kv_f16, const Shape& s, std::mt19937& rng,
                 const std::function<void()>& before_ub2 = {}) {
  const int32_t hd = s.head_dim, n_kv = s.n_head_kv, n_head = n_kv * s.group;
  const int32_t total = s.n_past + s.n_tokens, n_ctx = total + 3;
  // One distinct weight row per position: row p of q/k/v is the token at position p.
  auto eq = make_weight(DType::F32, int64_t(hd) * n_head, total, rng, "q");
  auto ek = make_weight(DType::F32, int64_t(hd) * n_kv, total, rng, "k");
  auto ev = make_weight(DType::F32, int64_t(hd) * n_kv, total, rng, "v");
  const gguf::TensorInfo* ws[] = {&eq->info, &ek->info, &ev->info};
  be.load_weights(ws);
  be.init_kv({1, hd * n_kv, n_ctx});
  std::vector<int32_t> all_tok(static_cast<size_t>(total));
  for (int32_t i = 0; i < total; ++i) all_tok[static_cast<size_t>(i)] = i;

  std::vector<float> out;
  for (int ub = (s.n_past == 0 ? 1 : 0); ub < 2; ++ub) {
    const int32_t n = ub == 0 ? s.n_past : s.n_tokens;
    Graph g;
    g.n_tokens = n;
    g.n_past = ub == 0 ? 0 : s.n_past;
    g.kv = {1, hd * n_kv, n_ctx};
    const int32_t q = g.add(get_rows_node(*eq, n, "q"));
    const int32_t k = g.add(get_rows_node(*ek, n, "k"));
    const int32_t v = g.add(get_rows_node(*ev, n, "v"));
    g.output = add_kv_store_attention(g, q, k, v, hd, n_head, n_kv, s.scale);
    for (auto& node : g.nodes)
      if (node.op == Op::ATTENTION) node.attn.window = s.window;
    std::vector<int32_t> tok(all_tok.begin() + g.n_past, all_tok.begin() + g.n_past + n);
    if (ub == 1 && before_ub2) before_ub2();
    if (ub == 0) {
      g.output = -1;
      be.compute(g, own_plan(g), tok, {});
      continue;
    }
    out.assign(static_cast<size_t>(int64_t(hd) * n_head * n), 0.0f);
    be.compute(g, own_plan(g), tok, out);
  }

  // Oracle inputs: Q of ubatch 2; the cache as the GPU holds it (f16-rounded when kv_f16).
  auto cache = [&](const HostWeight& w) {
    std::vector<float> c(w.deq.begin(), w.deq.end());
    if (kv_f16)
      for (auto& x : c) x = quant::f16_to_f32(quant::f32_to_f16(x));
    return c;
  };
  const std::vector<float> kc = cache(*ek), vc = cache(*ev);
  const size_t qn = static_cast<size_t>(hd) * n_head;
  std::vector<float> qv(eq->deq.begin() + static_cast<ptrdiff_t>(qn * s.n_past), eq->deq.end());
  std::vector<float> ref_f(qn * static_cast<size_t>(s.n_tokens));
  backend::cpu::attention(qv.data(), kc.data(), vc.data(), graph::AttnParams{hd, n_head, n_kv, s.scale, s.window},
                          s.n_past, s.n_tokens, ref_f.data());
  be.release_weights();
  return nmse(out, std::vector<double>(ref_f.begin(), ref_f.end()));
}

// tile: an attn_tile (lab_now) for the flash kernel (nullptr = the device's table).
void sweep(const char* kernel, bool kv_f16, const char* tile = nullptr, std::vector<int32_t> head_dims = {64, 128}) {
  set_var("attn", kernel);
  if (tile) set_var("tile", tile);
  auto& be = shared_backend(kv_f16);
  be.set_lab(lab_now());  // as the program boundary parses ROCKY_SWITCH / ROCKY_TUNE
  std::mt19937 rng(kv_f16 ? 71 : 70);
  double worst = 0;
  int cases = 0;
  for (int32_t n : {1, 3, 37, 130}) {
    for (int32_t n_past : {0, 5, 77}) {
      for (int32_t hd : head_dims) {
        for (int32_t group : {1, 2, 7}) {
          const Shape s{n, n_past, hd, group, 1 + cases % 2, cases % 2 ? 1.0f : 1.0f / std::sqrt(float(hd))};
          const double e = run_shape(be, kv_f16, s, rng);
          worst = std::max(worst, e);
          ++cases;
          EXPECT_LE(e, k_tol) << kernel << " kv_f16=" << kv_f16 << " n_tokens=" << n << " n_past=" << n_past
                              << " head_dim=" << hd << " group=" << group << " n_head_kv=" << s.n_head_kv
                              << " scale=" << s.scale;
        }
      }
    }
  }
  std::printf("attention %-6s kv_f16=%d tile %-12s: %d shapes, worst NMSE %.3g (bound %.0e)\n", kernel, kv_f16,
              tile ? tile : "default", cases, worst, k_tol);
  unset_var("tile");
}

TEST_F(VulkanAttention, FlashF32Kv) { sweep("flash", false); }
TEST_F(VulkanAttention, FlashF16Kv) { sweep("flash", true); }
// Register prefetch of K/V blocks (the GPU tiles' PREFETCH 1) and odd tiles: 32 rows × 12 keys
// (a K block is 1.5 passes of the invocations at head_dim 64), 16 rows × 8 keys without prefetch.
TEST_F(VulkanAttention, FlashPrefetchTiles) {
  sweep("flash", false, "64,16,2,2,1");
  sweep("flash", true, "128,32,1,3,1");
  sweep("flash", false, "64,16,2,1,0");
  sweep("flash", true, "64,32,1,3,0");  // 6 keys per block: P read one key at a time (BC % 4 != 0)
}
// K/V blocks staged as f16 in shared memory (KVH = 1): with and without prefetch, 32 rows × 32
// keys (head_dim 64 and 128) and × 64 keys (head_dim 64: 128 needs more than lavapipe's 32 KB);
// with an f32 cache the flag changes nothing (the blocks stay f32).
TEST_F(VulkanAttention, FlashHalfSharedKv) {
  sweep("flash", true, "64,32,4,4,0,1");
  sweep("flash", true, "64,32,4,4,1,1");
  sweep("flash", true, "64,32,4,8,1,1", {64});
  sweep("flash", true, "128,32,1,3,1,1", {64, 80});
  sweep("flash", false, "64,16,2,2,1,1");
}
// The shipped GPU tiles of ops/attention.cpp, run on lavapipe: Arm (16 rows × 16 keys) and the
// desktop one (32 × 32 with prefetch; at head_dim 64 only: 128 needs 38 KB > lavapipe's 32 KB).
TEST_F(VulkanAttention, FlashShippedGpuTiles) {
  sweep("flash", true, "128,16,1,2,0");
  sweep("flash", false, "128,32,2,4,1", {64});
}
TEST_F(VulkanAttention, SimpleF32Kv) { sweep("simple", false); }

// Sliding window (gemma3's local layers): token at q sees q − W < p ≤ q. Windows shorter than
// a key block, than the prompt and than n_past; both kernels, head_dim 64 and Gemma's 256.
// tile: an attn_tile (the shipped GPU tiles prefetch K/V through registers).
void sweep_window(const char* kernel, bool kv_f16, const char* tile = nullptr,
                  std::vector<int32_t> head_dims = {64, 256}) {
  set_var("attn", kernel);
  if (tile) set_var("tile", tile);
  auto& be = shared_backend(kv_f16);
  be.set_lab(lab_now());
  std::mt19937 rng(kv_f16 ? 73 : 72);
  int cases = 0;
  for (int32_t w : {1, 5, 40})
    for (int32_t n : {1, 37, 130})
      for (int32_t n_past : {0, 77})
        for (int32_t hd : head_dims) {
          const Shape s{n, n_past, hd, 1 + cases % 2, 1, 1.0f / std::sqrt(float(hd)), w};
          ++cases;
          EXPECT_LE(run_shape(be, kv_f16, s, rng), k_tol)
              << kernel << " kv_f16=" << kv_f16 << " window=" << w << " n_tokens=" << n << " n_past=" << n_past
              << " head_dim=" << hd << " tile " << (tile ? tile : "default");
        }
  unset_var("tile");
}
TEST_F(VulkanAttention, FlashSlidingWindow) {
  sweep_window("flash", false);
  sweep_window("flash", true, "128,16,1,2,1", {64, 128});  // the GPU tile (prefetch; head_dim 256 needs > 32 KB)
}
TEST_F(VulkanAttention, SimpleSlidingWindow) { sweep_window("simple", true); }
TEST_F(VulkanAttention, SimpleF16Kv) { sweep("simple", true); }
// attention_decode.comp (the GPUs' decode kernel) for n_tokens 1 and 3 (37 and 130 take
// the per-(head, token) kernel): 1, 2 and 7 query heads per KV head, head_dim 64, 80 (three key
// groups of 40 dim pairs, 8 invocations idle in the V phase) and 128.
TEST_F(VulkanAttention, DecodeF32Kv) { sweep("decode", false, nullptr, {64, 80, 128}); }
TEST_F(VulkanAttention, DecodeF16Kv) { sweep("decode", true, nullptr, {64, 80, 128}); }
TEST_F(VulkanAttention, DecodeSlidingWindow) { sweep_window("decode", true); }

// Deep caches: decode after 2,049 and 2,300 positions and 3 tokens after 700 — the split
// path (attention_split + attention_merge; attn_rule.split_chunk 64 and the default 128) and the
// unsplit kernel (attn_rule.split 0) against the oracle; head_dim 80 (not a power
// of two) and 128, GQA 7, 2 and 1, sliding windows of 300 and 200 positions; the tiled kernel with
// 37 tokens after 2,049.
TEST_F(VulkanAttention, DeepCacheSplitDecode) {
  for (const bool kv_f16 : {false, true}) {
    auto& be = shared_backend(kv_f16);
    std::mt19937 rng(kv_f16 ? 91 : 90);
    for (const char* kernel : {"simple", "decode"})
      for (const char* split : {"", "64", "0"}) {
        // The cache is filled by the tiled kernel (the per-(head, token) one is O(N²) on lavapipe),
        // the decode ubatch runs the per-(head, token) kernel or attention_decode with this split.
        auto decode_kernel = [&] {
          set_var("attn", kernel);
          set_var("split", split);
          be.set_lab(lab_now());
        };
        // (n_tokens, n_past, head_dim, group, n_head_kv): the fills cost heads · head_dim · n_past².
        for (const Shape& s : {Shape{1, 2049, 80, 7, 1, 1.0f / std::sqrt(80.0f)}, Shape{1, 2300, 128, 2, 2, 0.0884f},
                               Shape{3, 700, 128, 1, 2, 1.0f},
                               // sliding windows: chunks count from the window's first position
                               Shape{1, 2049, 128, 2, 1, 0.0884f, 300}, Shape{3, 700, 64, 2, 1, 1.0f, 200}}) {
          set_var("attn", "flash");
          be.set_lab(lab_now());
          EXPECT_LE(run_shape(be, kv_f16, s, rng, decode_kernel), k_tol)
              << kernel << " split=" << split << " kv_f16=" << kv_f16 << " n=" << s.n_tokens << " n_past=" << s.n_past
              << " head_dim=" << s.head_dim;
        }
      }
    set_var("attn", "flash");
    unset_var("split");
    be.set_lab(lab_now());
    const Shape s{37, 2049, 128, 2, 1, 1.0f};
    EXPECT_LE(run_shape(be, kv_f16, s, rng), k_tol) << "flash kv_f16=" << kv_f16 << " n_past=" << s.n_past;
  }
  unset_var("split");
}

// The flash kernel with tile(kv_f16) (an attn_tile) on deep caches, both caches, with the prefill
// grid's keys split (attn_rule.fa_groups far above the grid) and unsplit (0).
void deep_tile_sweep(const std::function<std::string(bool)>& tile, uint32_t seed, std::initializer_list<Shape> shapes) {
  for (const bool kv_f16 : {false, true}) {
    auto& be = shared_backend(kv_f16);
    for (const char* grid : {"1048576", "0"}) {
      set_var("attn", "flash");
      set_var("tile", tile(kv_f16).c_str());
      set_var("grid", grid);
      be.set_lab(lab_now());
      std::mt19937 rng(seed + (kv_f16 ? 0 : 1));
      for (const Shape& s : shapes) {
        EXPECT_LE(run_shape(be, kv_f16, s, rng), k_tol)
            << "tile " << tile(kv_f16) << " grid " << grid << " kv_f16=" << kv_f16 << " n=" << s.n_tokens
            << " n_past=" << s.n_past << " head_dim=" << s.head_dim << " window=" << s.window;
      }
    }
  }
  unset_var("grid");
}

// attention_flash_sg (a row group is one subgroup: subgroup row reductions, K and V staged
// together): tiles whose CT equals this device's subgroup size (lavapipe: 8 here, 16 on wider
// hosts), both caches, with and without prefetch and f16 staging, 2 rows × 2 keys and 1 row ×
// 3 keys per invocation; sliding windows; and at depth 2,049 … 2,300 (odd sizes, GQA 7 / 2) with
// and without split keys. A tile whose CT is not the subgroup size is refused with its sizes.
TEST_F(VulkanAttention, FlashSubgroupTiles) {
  const vulkan::DeviceInfo& d = shared_backend(false).info();
  ASSERT_TRUE(d.subgroup_arith && d.subgroup_min == d.subgroup_max) << "lavapipe has a fixed subgroup size";
  const uint32_t sg = d.subgroup_size;
  const std::string t22 = fmt::format("{},{},2,2", 4 * sg, 8), t13 = fmt::format("{},{},1,3", 2 * sg, 2);
  sweep("flash", false, (t22 + ",0,0,1").c_str());
  sweep("flash", true, (t22 + ",1,1,1").c_str());
  sweep("flash", true, (t13 + ",1,0,1").c_str(), {64, 80});  // BC % 4 != 0: P one key at a time
  sweep_window("flash", true, (t22 + ",1,1,1").c_str(), {64, 128});
  deep_tile_sweep([&](bool kv_f16) { return t22 + (kv_f16 ? ",1,1,1" : ",0,0,1"); }, 99,
                  {Shape{37, 2049, 128, 2, 1, 0.0884f}, Shape{130, 2300, 80, 7, 1, 1.0f / std::sqrt(80.0f)},
                   Shape{5, 2100, 64, 2, 2, 1.0f, 700}});
  // CT = 2 · subgroup size: refused, naming the sizes.
  auto& be = shared_backend(false);
  set_var("attn", "flash");
  set_var("tile", fmt::format("{},8,2,2,0,0,1", 8 * sg).c_str());
  be.set_lab(lab_now());
  std::mt19937 rng(101);
  try {
    run_shape(be, false, Shape{37, 5, 64, 2, 1, 0.125f}, rng);
    ADD_FAILURE() << "a subgroup tile with CT != the subgroup size ran";
  } catch (const rocky::Error& e) {
    EXPECT_NE(std::string(e.what()).find("column threads to equal the device's fixed subgroup size"), std::string::npos)
        << e.what();
  }
  be.release_weights();
  unset_var("tile");
  unset_var("attn");
}

// attention_flash_roll (tile field roll: the q·k loop rolled in steps of 4 vec4, the P·V key
// loop not unrolled): 4 rows × 2 keys per invocation as NVIDIA's first tile has them (at lavapipe's
// 32 KB: 16 rows × 32 keys), with f16 staging and prefetch, both caches; head_dim 72 and 100 (head_dim
// / 4 = 18, 25: the last step of 4 is partial), 64, 80 and 128; 6 keys per block (BC % 4 != 0: P read
// one key at a time); sliding windows; and at depth 2,049 … 2,300 (GQA 7 / 2) with and without split
// keys. A tile with both SG and ROLL is refused.
TEST_F(VulkanAttention, FlashRolledTiles) {
  sweep("flash", true, "64,16,4,2,0,1,0,1", {72, 128});
  sweep("flash", false, "64,16,4,2,1,0,0,1", {64, 100});
  sweep("flash", true, "64,32,4,2,1,1,0,1", {80});
  sweep("flash", true, "24,8,2,1,0,1,0,1", {72});  // CT 6 × TC 1: BC 6
  sweep_window("flash", true, "64,16,4,2,0,1,0,1", {64, 72});
  deep_tile_sweep([](bool) { return std::string("64,16,4,2,0,1,0,1"); }, 103,
                  {Shape{37, 2049, 128, 2, 1, 0.0884f}, Shape{130, 2300, 72, 7, 1, 1.0f / std::sqrt(72.0f)},
                   Shape{5, 2100, 80, 2, 2, 1.0f, 700}});
  auto& be = shared_backend(false);
  set_var("attn", "flash");
  set_var("tile", "64,16,4,2,0,0,1,1");
  std::mt19937 rng(105);
  try {
    be.set_lab(lab_now());
    run_shape(be, false, Shape{37, 5, 64, 2, 1, 0.125f}, rng);
    ADD_FAILURE() << "a tile with SG and ROLL ran";
  } catch (const rocky::Error& e) {
    EXPECT_NE(std::string(e.what()).find("attn_tile: roll 1 needs sg 0"), std::string::npos) << e.what();
  }
  be.release_weights();
  unset_var("tile");
  unset_var("attn");
}

// /The tiled kernel with split keys (ops/attention.cpp flash_split_plan: a grid of few
// row blocks over a long cache — an agent's next message at depth): 1, 5, 13 and 50 tokens after
// 1,100 … 1,500 positions, head_dim 80 / 128 / 64, GQA 7 / 2 / 1, a sliding window of 300, both
// caches; each split's partial state is merged by attention_merge. attn_rule.split 0 (unsplit) must
// give the same bound.
TEST_F(VulkanAttention, FlashSplitKeysAtDepth) {
  for (const bool kv_f16 : {false, true}) {
    auto& be = shared_backend(kv_f16);
    std::mt19937 rng(kv_f16 ? 95 : 94);
    for (const char* split : {"", "0"}) {
      set_var("attn", "flash");
      set_var("split", split);
      be.set_lab(lab_now());
      for (const Shape& s : {Shape{1, 1100, 80, 7, 1, 1.0f / std::sqrt(80.0f)}, Shape{5, 1500, 128, 2, 2, 0.0884f},
                             Shape{50, 1100, 64, 1, 2, 1.0f}, Shape{13, 1300, 128, 2, 1, 0.0884f, 300}}) {
        EXPECT_LE(run_shape(be, kv_f16, s, rng), k_tol)
            << "split=" << split << " kv_f16=" << kv_f16 << " n=" << s.n_tokens << " n_past=" << s.n_past
            << " head_dim=" << s.head_dim << " window=" << s.window;
      }
    }
  }
  unset_var("split");
}

// A profile's attn_split tiles run the split-key case (a short ubatch over a long cache) in
// place of its attn tiles: a backend whose profile (ROCKY_TUNE) names 64,16,2,2,0 for it (blocks of
// 16 keys; llvmpipe's attn tiles that fit take 32 at head_dim 64 and 8 at 128) gives results
// within the bound, and different bits from the shared backend's on the same data (the other
// block order ran).
TEST_F(VulkanAttention, ProfileSplitTileRunsSplitKeys) {
  tune::DeviceProfile p = tune::builtin_profile("llvmpipe");
  p.attn_split = {{64, 16, 2, 2, 0}};
  const std::string path = scratch_dir("attn_split_tile") + "/profile.json";
  tune::write_json_file(path, tune::profile_to_json(p, "llvmpipe"));
  vulkan::VulkanOptions o;
  o.validation = true;
  o.persist_pipeline_cache = false;
  o.matmul = vulkan::ops::MatmulPath::BASIC;
  o.lab = runtime::parse_lab(path, "");
  vulkan::VulkanBackend tuned(o);
  auto& plain = shared_backend(false);
  set_var("attn", "flash");
  plain.set_lab(lab_now());
  tuned.set_lab(runtime::parse_lab(path, "attn=flash"));
  for (const Shape& s : {Shape{5, 1500, 128, 2, 2, 0.0884f}, Shape{13, 1300, 64, 7, 1, 0.125f}}) {
    std::mt19937 r1(7), r2(7);
    const double e_tuned = run_shape(tuned, false, s, r1);
    const double e_plain = run_shape(plain, false, s, r2);
    EXPECT_LE(e_tuned, k_tol) << "n=" << s.n_tokens << " n_past=" << s.n_past;
    EXPECT_LE(e_plain, k_tol) << "n=" << s.n_tokens << " n_past=" << s.n_past;
    EXPECT_NE(e_tuned, e_plain) << "the attn_split tile did not run (n=" << s.n_tokens << ")";
    tuned.release_weights();
    plain.release_weights();
  }
  EXPECT_EQ(tuned.instance().error_count(), 0u) << "validation errors";
}

// One batched decode step over sequences of different lengths: a 4-sequence context whose
// sequences hold 37, 2,049, 1 and 300 positions after the step (each filled by its own
// multi-sequence prefill ubatch, the tiled kernel), then one ubatch of one token per sequence (in
// the order 3, 1, 2, 0) — one ATTENTION dispatch over all four tokens with their own (seq, pos)
// from the step table — against the CPU oracle per sequence: the default split (chunks of 128),
// chunks of 64 and no split, recorded and replayed; f32 and f16 KV.
TEST_F(VulkanAttention, MultiSeqStepMixedLengths) {
  for (const bool kv_f16 : {false, true}) {
    auto& be = shared_backend(kv_f16);
    be.set_lab(lab_now());
    std::mt19937 rng(kv_f16 ? 95 : 94);
    // (head_dim, group, n_head_kv): the f16 case is qwen2.5's head_dim with 2 KV heads.
    const int32_t hd = kv_f16 ? 128 : 64, group = kv_f16 ? 2 : 4, n_kv = kv_f16 ? 2 : 1, n_head = n_kv * group;
    const float scale = kv_f16 ? 0.0884f : 1.0f;
    const int32_t len[4] = {37, 2049, 1, 300}, order[4] = {3, 1, 2, 0};
    const int32_t n_ctx = 2049 + 3;
    int32_t base[4], rows = 0;  // weight row of (seq s, pos p): base[s] + p
    for (int32_t sq = 0; sq < 4; ++sq) {
      base[sq] = rows;
      rows += len[sq];
    }
    auto eq = make_weight(DType::F32, int64_t(hd) * n_head, rows, rng, "q");
    auto ek = make_weight(DType::F32, int64_t(hd) * n_kv, rows, rng, "k");
    auto ev = make_weight(DType::F32, int64_t(hd) * n_kv, rows, rng, "v");
    const gguf::TensorInfo* ws[] = {&eq->info, &ek->info, &ev->info};
    be.load_weights(ws);
    const graph::KvShape kv{1, hd * n_kv, n_ctx};
    auto ctx = be.make_context(backend::ContextOptions{kv, 4});
    auto graph_of = [&](int32_t n) {
      Graph g;
      g.n_tokens = n;
      g.kv = kv;
      const int32_t q = g.add(get_rows_node(*eq, n, "q"));
      const int32_t k = g.add(get_rows_node(*ek, n, "k"));
      const int32_t v = g.add(get_rows_node(*ev, n, "v"));
      g.output = add_kv_store_attention(g, q, k, v, hd, n_head, n_kv, scale);
      return g;
    };
    for (int32_t sq = 0; sq < 4; ++sq) {  // prefill: positions 0 … len − 2 of each sequence
      const int32_t n = len[sq] - 1;
      if (n == 0) continue;
      Graph g = graph_of(n);
      g.output = -1;
      std::vector<int32_t> tok(static_cast<size_t>(n));
      for (int32_t j = 0; j < n; ++j) {
        tok[size_t(j)] = base[sq] + j;
        g.seq.push_back(sq);
        g.pos.push_back(j);
      }
      ctx->compute(g, own_plan(g), tok, {});
    }
    // The oracle: each sequence's last token over its own len positions.
    auto cache = [&](const HostWeight& w, int32_t sq) {
      const size_t ne = size_t(hd) * size_t(n_kv);
      std::vector<float> c(w.deq.begin() + ptrdiff_t(ne * size_t(base[sq])),
                           w.deq.begin() + ptrdiff_t(ne * size_t(base[sq] + len[sq])));
      if (kv_f16)
        for (auto& x : c) x = quant::f16_to_f32(quant::f32_to_f16(x));
      return c;
    };
    const size_t qn = size_t(hd) * size_t(n_head);
    std::vector<double> ref;  // [qn, 4] in the step's token order
    for (int32_t sq : order) {
      const std::vector<float> kc = cache(*ek, sq), vc = cache(*ev, sq);
      std::vector<float> qv(eq->deq.begin() + ptrdiff_t(qn * size_t(base[sq] + len[sq] - 1)),
                            eq->deq.begin() + ptrdiff_t(qn * size_t(base[sq] + len[sq])));
      std::vector<float> o(qn);
      backend::cpu::attention(qv.data(), kc.data(), vc.data(), graph::AttnParams{hd, n_head, n_kv, scale}, len[sq] - 1,
                              1, o.data());
      ref.insert(ref.end(), o.begin(), o.end());
    }
    Graph g = graph_of(4);
    std::vector<int32_t> tok;
    for (int32_t sq : order) {
      tok.push_back(base[sq] + len[sq] - 1);
      g.seq.push_back(sq);
      g.pos.push_back(len[sq] - 1);
    }
    const graph::Plan plan = own_plan(g);
    // "" = the per-(head, token) step kernel (lavapipe's default), "decode" = attention_decode.comp.
    for (const char* kernel : {"", "decode"})
      for (const char* split : {"", "64", "0"}) {
        set_var("attn", kernel);
        set_var("split", split);
        be.set_lab(lab_now());
        const backend::HostTiming h0 = ctx->stats().host;
        for (int rep = 0; rep < 2; ++rep) {  // recorded, then replayed (the step writes K/V it holds already)
          std::vector<float> out(qn * 4);
          ctx->compute(g, plan, tok, out);
          const double e = nmse(out, ref);
          EXPECT_LE(e, k_tol) << "kernel '" << kernel << "' kv_f16=" << kv_f16 << " split='" << split << "' rep "
                              << rep;
          std::printf(
              "multi-seq step (1, 37, 300, 2049 positions) kernel '%s' kv_f16=%d split '%s' rep %d: NMSE %.3g\n",
              kernel, kv_f16, split, rep, e);
        }
        const backend::HostTiming h1 = ctx->stats().host;
        EXPECT_EQ(h1.computes - h0.computes, 2u);
        EXPECT_EQ(h1.replays - h0.replays, 1u) << "the second step is a replay";
        // One dispatch for q, k, v each, one rope-less KV store pair, one attention (+ one merge when split).
        const uint64_t per = (h1.dispatches - h0.dispatches) / 2;
        EXPECT_EQ(per, std::string(split) == "0" ? 6u : 7u) << "kernel '" << kernel << "' split '" << split << "'";
      }
    unset_var("attn");
    unset_var("split");
    be.set_lab(lab_now());
    ctx.reset();
    be.release_weights();
  }
}

// A malformed split chunk or grid target (ROCKY_TUNE's attn_rule) is a clear error naming the
// field where the program's boundary parses it, not a silent default.
TEST_F(VulkanAttention, SplitChunkValidated) {
  for (const char* bad : {"100", "\"abc\"", "-64", "64.5"}) {
    try {
      (void)runtime::parse_lab(std::string(R"({"attn_rule": {"split_chunk": )") + bad + "}}", "attn=simple");
      ADD_FAILURE() << "split_chunk " << bad << " accepted";
    } catch (const rocky::Error& e) {
      EXPECT_NE(std::string(e.what()).find("ROCKY_TUNE: attn_rule.split_chunk"), std::string::npos) << e.what();
    }
  }
  for (const char* bad : {"\"abc\"", "-1", "1.5"}) {
    try {
      (void)runtime::parse_lab(std::string(R"({"attn_rule": {"fa_groups": )") + bad + "}}", "");
      ADD_FAILURE() << "fa_groups " << bad << " accepted";
    } catch (const rocky::Error& e) {
      EXPECT_NE(std::string(e.what()).find("ROCKY_TUNE: attn_rule.fa_groups"), std::string::npos) << e.what();
    }
  }
}

// Prefill ubatches split their keys too when the grid is small for the device
// (attn_rule.fa_groups: the workgroup target): 130 and 64 tokens after 1,100 … 2,000 positions, a
// sliding window of 1,200, both caches, with a target that splits (2²⁰) and one that never does (0) — both
// within the bound, with different bits (the split ran). Malformed targets: SplitChunkValidated.
TEST_F(VulkanAttention, FlashGridTargetSplitsPrefill) {
  for (const bool kv_f16 : {false, true}) {
    auto& be = shared_backend(kv_f16);
    for (const Shape& s : {Shape{130, 1100, 128, 2, 2, 0.0884f}, Shape{64, 2000, 64, 7, 1, 0.125f, 1200},
                           Shape{37, 1500, 80, 1, 2, 1.0f}}) {
      double e[2] = {0, 0};
      for (int i = 0; i < 2; ++i) {
        set_var("attn", "flash");
        set_var("grid", i == 0 ? "1048576" : "0");
        be.set_lab(lab_now());
        std::mt19937 rng(kv_f16 ? 97 : 96);
        e[i] = run_shape(be, kv_f16, s, rng);
        EXPECT_LE(e[i], k_tol) << "grid target " << (i == 0 ? "2^20" : "0") << " kv_f16=" << kv_f16
                               << " n=" << s.n_tokens << " n_past=" << s.n_past << " head_dim=" << s.head_dim;
      }
      EXPECT_NE(e[0], e[1]) << "the split did not run (n=" << s.n_tokens << ", kv_f16=" << kv_f16 << ")";
    }
  }
  unset_var("grid");
  unset_var("attn");
}

// Op timing (not run by CI; --gtest_also_run_disabled_tests): GPU time of the attention dispatch
// alone (timestamps) for qwen2.5-3b's shape (head_dim 128, 16 heads, 2 KV heads) at several
// n_tokens / n_past, both kernels; ROCKY_ATTN_BENCH_N="N:n_past,…" overrides the list.
TEST(VulkanAttentionBench, DISABLED_OpTime) {
  vulkan::VulkanOptions o;
  o.profile = true;
  o.persist_pipeline_cache = false;
  vulkan::VulkanBackend be(o);
  std::vector<std::pair<int32_t, int32_t>> cases = {{512, 0}, {64, 448}, {16, 496}, {8, 504}, {4, 508}, {1, 511}};
  if (const char* env = std::getenv("ROCKY_ATTN_BENCH_N"); env && *env) {
    cases.clear();
    int n = 0, p = 0, used = 0;
    for (const char* c = env; std::sscanf(c, "%d:%d%n", &n, &p, &used) == 2; c += used + (c[used] == ',' ? 1 : 0)) {
      cases.emplace_back(n, p);
      if (!c[used]) break;
    }
  }
  const int32_t hd = 128, n_head = 16, n_kv = 2;
  std::mt19937 rng(5);
  for (auto [n, n_past] : cases) {
    for (const char* kernel : {"simple", "flash"}) {
      set_var("attn", kernel);
      be.set_lab(lab_now());
      const int32_t total = n + n_past;
      auto eq = make_weight(DType::F32, int64_t(hd) * n_head, total, rng, "q");
      auto ek = make_weight(DType::F32, int64_t(hd) * n_kv, total, rng, "k");
      auto ev = make_weight(DType::F32, int64_t(hd) * n_kv, total, rng, "v");
      const gguf::TensorInfo* ws[] = {&eq->info, &ek->info, &ev->info};
      be.load_weights(ws);
      be.init_kv({1, hd * n_kv, total});
      Graph g;
      g.n_tokens = n;
      g.n_past = n_past;
      g.kv = {1, hd * n_kv, total};
      const int32_t q = g.add(get_rows_node(*eq, n, "q"));
      const int32_t k = g.add(get_rows_node(*ek, n, "k"));
      const int32_t v = g.add(get_rows_node(*ev, n, "v"));
      g.output = add_kv_store_attention(g, q, k, v, hd, n_head, n_kv, 1.0f / std::sqrt(float(hd)));
      std::vector<int32_t> tok(static_cast<size_t>(n));
      for (int32_t i = 0; i < n; ++i) tok[static_cast<size_t>(i)] = n_past + i;
      std::vector<float> out(static_cast<size_t>(int64_t(hd) * n_head * n));
      double best = 1e300, wall = 1e300;
      for (int rep = 0; rep < 3; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        be.compute(g, own_plan(g), tok, out);
        wall = std::min(wall, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        for (const auto& t : be.recorder().timings())
          if (t.label == "attn") best = std::min(best, t.ms);
      }
      // FLOP: QKᵀ and P·V over the visible keys (2 · 2 · head_dim per query row and key).
      const double flop = 4.0 * hd * n_head * (double(n) * n_past + double(n) * (n + 1) / 2);
      std::printf("attention %-6s n_tokens %4d n_past %4d: %9.3f ms  %7.2f GFLOPS (whole ubatch %9.3f ms wall)\n",
                  kernel, n, n_past, best, flop / best * 1e-6, wall);
      be.release_weights();
    }
  }
  unset_var("attn");
  EXPECT_GT(cases.size(), 0u);
}

}  // namespace
}  // namespace rocky::test
