// The prefix KV cache (runtime/prefix_cache.hpp) and the backends' KV export/import.
// Counts tokens and bytes, never time. Models: stories260K (../shared), and rocky synth's
// qwen35-test (a hybrid model: recurrent-state checkpoints), CPU and Vulkan (lavapipe).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "model/model.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/generator.hpp"
#include "runtime/prefix_cache.hpp"
#include "runtime/session.hpp"
#include "synth/synth.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky {
namespace {

namespace fs = std::filesystem;
using runtime::Block;
using runtime::BlockPtr;
using runtime::PrefixCache;
using runtime::PrefixCacheOptions;

std::string stories() { return test::shared_path("reference/models/stories260K.gguf"); }

// rocky synth --preset qwen35-test (two qwen35 layer patterns: 6 Gated DeltaNet + 2 gated
// attention layers), made once per test process in the scratch directory.
std::string qwen35() {
  static const std::string path = [] {
    const std::string p = test::scratch_dir("prefix-cache-models") + "/qwen35-test.gguf";
    fs::create_directories(fs::path(p).parent_path());
    synth::SynthOptions o;
    o.preset = "qwen35-test";
    o.out = p;
    o.progress = false;
    synth::synth_model(o);
    return p;
  }();
  return path;
}

// "cpu", "vulkan", or "vulkan-f16" (f16 KV cache).
std::unique_ptr<runtime::Session> session(const model::Model& m, const std::string& dev, int32_t n_ctx = 256,
                                          int32_t n_ub = 512) {
  runtime::BackendOptions bo;
  bo.device = dev == "vulkan-f16" ? "vulkan" : dev;
  bo.kv_f16 = dev == "vulkan-f16";
  return std::make_unique<runtime::Session>(m, runtime::make_backend(bo), runtime::SessionOptions{n_ctx, n_ub});
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Hash64, MatchesXxh64OnKnownInputs) {
  // XXH64 reference values (seed 0).
  EXPECT_EQ(runtime::hash64("", 0), 0xEF46DB3751D8E999ull);
  // Different lengths, seeds and contents differ.
  std::vector<uint8_t> d(1000);
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(i * 7 + 3);
  const uint64_t h = runtime::hash64(d.data(), d.size());
  EXPECT_NE(h, runtime::hash64(d.data(), d.size() - 1));
  EXPECT_NE(h, runtime::hash64(d.data(), d.size(), 1));
  d[517] ^= 1;
  EXPECT_NE(h, runtime::hash64(d.data(), d.size()));
}

// export_kv → import_kv into another context: the bytes round-trip, and the logits of the
// following tokens equal (bit for bit) those of the context that computed the prefix itself.
void kv_round_trip(const std::string& dev) {
  auto m = model::Model::load(stories());
  const auto toks = test::random_prompt(70, 11, m->hparams().n_vocab);
  const int32_t k = 48;
  std::span<const int32_t> all(toks);
  auto a = session(*m, dev);
  a->eval(all.first(k));
  const std::vector<uint8_t> bytes = a->export_kv(0, k);
  ASSERT_EQ(bytes.size(), a->context().kv_export_bytes(k));
  ASSERT_GT(bytes.size(), 0u);
  size_t nonzero = 0;
  for (uint8_t x : bytes) nonzero += x != 0;
  EXPECT_GT(nonzero, bytes.size() / 2) << "the exported K/V is mostly zeros";
  const std::vector<float> want = a->eval(all.subspan(k), true);

  auto b = session(*m, dev);
  b->eval(test::random_prompt(30, 99, m->hparams().n_vocab));  // other contents first: import must overwrite
  b->truncate(0);
  b->import_kv(0, k, bytes);
  EXPECT_EQ(b->n_past(), k);
  EXPECT_EQ(b->export_kv(0, k), bytes);
  const std::vector<float> got = b->eval(all.subspan(k), true);
  EXPECT_TRUE(same_bits(got, want)) << dev << ": logits after import differ from the original context's";

  // A sub-range at an offset: positions [16, 48) only.
  auto c = session(*m, dev);
  c->import_kv(0, 16, std::span<const uint8_t>(a->export_kv(0, 16)));
  c->import_kv(16, 32, std::span<const uint8_t>(a->export_kv(16, 32)));
  EXPECT_EQ(c->export_kv(0, k), bytes);
  // Bad ranges are errors, not crashes.
  EXPECT_THROW(c->export_kv(40, 20), Error);
  EXPECT_THROW(c->import_kv(10, 4, std::span<const uint8_t>(bytes).first(10)), Error);
  EXPECT_THROW(c->context().import_kv(250, 10, std::vector<uint8_t>(c->context().kv_export_bytes(10))), Error);
}

TEST(KvExportImport, RoundTripCpu) { kv_round_trip("cpu"); }
TEST(KvExportImport, RoundTripVulkan) { kv_round_trip("vulkan"); }
TEST(KvExportImport, RoundTripVulkanF16) { kv_round_trip("vulkan-f16"); }

// A hybrid context resumes from K/V + a state checkpoint: the logits of the following tokens
// equal (bit for bit) those of the context that computed the prefix; eval() with a checkpoint
// stride ends a ubatch at the last block boundary and keeps exactly that state.
void state_round_trip(const std::string& dev) {
  auto m = model::Model::load(qwen35());
  const int32_t nv = m->hparams().n_vocab;
  const auto toks = test::random_prompt(70, 11, nv);
  const int32_t k = 48;
  std::span<const int32_t> all(toks);
  auto a = session(*m, dev);
  ASSERT_TRUE(a->recurrent());
  EXPECT_EQ(a->state_layers(), (std::vector<int32_t>{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(a->state_bytes(), a->context().state_export_bytes(6));
  a->eval(all.first(k));
  const std::vector<uint8_t> kv = a->export_kv(0, k);
  const std::vector<uint8_t> st = a->export_state();
  ASSERT_EQ(st.size(), a->state_bytes());
  size_t nonzero = 0;
  for (uint8_t x : st) nonzero += x != 0;
  EXPECT_GT(nonzero, st.size() / 2) << "the exported state is mostly zeros";
  const std::vector<float> want = a->eval(all.subspan(k), true);

  auto b = session(*m, dev);
  b->eval(test::random_prompt(30, 99, nv));  // other contents first: the import must overwrite them
  b->context().import_kv(0, k, kv);
  b->import_state(k, st);
  EXPECT_EQ(b->n_past(), k);
  EXPECT_EQ(b->export_state(), st);
  EXPECT_TRUE(same_bits(b->eval(all.subspan(k), true), want)) << dev << ": logits after the checkpoint differ";

  // eval() with stride 16 over 50 tokens: one checkpoint at 48, the state a 48-token eval leaves.
  auto c = session(*m, dev);
  c->set_checkpoint_stride(16);
  c->eval(all.first(50));
  ASSERT_EQ(c->checkpoints().size(), 1u);
  EXPECT_EQ(c->checkpoints()[0].pos, 48);
  EXPECT_TRUE(c->checkpoints()[0].state == st) << dev;
  for (int32_t i = 50; i < 66; ++i) c->eval(all.subspan(static_cast<size_t>(i), 1));  // decode crosses 64
  ASSERT_EQ(c->checkpoints().size(), 2u);
  EXPECT_EQ(c->checkpoints()[1].pos, 64);
  EXPECT_EQ(c->take_checkpoints().size(), 2u);
  EXPECT_TRUE(c->checkpoints().empty());
  // checkpoint_at: a shared boundary inside the prompt is kept too, with the same state.
  auto e = session(*m, dev);
  e->set_checkpoint_stride(16);
  e->checkpoint_at(32);
  e->eval(all.first(50));
  ASSERT_EQ(e->checkpoints().size(), 2u);
  EXPECT_EQ(e->checkpoints()[0].pos, 32);
  EXPECT_EQ(e->checkpoints()[1].pos, 48);
  // (Each is the state a context evaluating the same ubatches holds there; the CPU oracle's
  // sgemm may round a 48-token ubatch differently from 32 + 16, so compare like with like.)
  auto f = session(*m, dev);
  f->eval(all.first(32));
  EXPECT_TRUE(e->checkpoints()[0].state == f->export_state()) << dev;
  f->eval(all.subspan(32, 16));
  EXPECT_TRUE(e->checkpoints()[1].state == f->export_state()) << dev;
  // Bad input is an error, not a crash.
  EXPECT_THROW(c->import_state(10, std::span<const uint8_t>(st).first(100)), Error);
  EXPECT_THROW(c->context().import_state(std::vector<int32_t>{9}, st), Error);
  auto plain = session(*model::Model::load(stories()), dev);
  EXPECT_FALSE(plain->recurrent());
  EXPECT_THROW(plain->export_state(), Error);
}

TEST(StateExportImport, RoundTripCpu) { state_round_trip("cpu"); }
TEST(StateExportImport, RoundTripVulkan) { state_round_trip("vulkan"); }

// A synthetic identity for the cache unit tests (no model needed).
runtime::CacheIdentity fake_id(uint64_t model = 42) {
  runtime::CacheIdentity id;
  id.model = model;
  id.kv_type = 0;
  id.n_layer = 2;
  id.n_embd_kv = 4;
  id.kv_bytes_per_pos = 2 * 2 * 4 * 4;  // layers · (K, V) · n_embd_kv · f32
  return id;
}

BlockPtr make_block(const PrefixCache& c, std::span<const int32_t> toks, size_t b, uint8_t fill) {
  const auto keys = c.chain(toks);
  auto blk = std::make_shared<Block>();
  blk->key = keys[b];
  blk->parent = b ? keys[b - 1] : c.seed();
  blk->p0 = static_cast<int32_t>(b) * c.block();
  blk->tokens.assign(toks.begin() + blk->p0, toks.begin() + blk->p0 + c.block());
  blk->kv.assign(c.identity().kv_bytes_per_pos * static_cast<size_t>(c.block()), fill);
  for (size_t i = 0; i < blk->kv.size(); ++i) blk->kv[i] = static_cast<uint8_t>(fill + i * 13);
  return blk;
}

BlockPtr find_block(PrefixCache& c, std::span<const int32_t> toks, size_t b, int* tier = nullptr) {
  const auto keys = c.chain(toks);
  const int32_t B = c.block();
  return c.find(keys[b], b ? keys[b - 1] : c.seed(), static_cast<int32_t>(b) * B,
                toks.subspan(b * static_cast<size_t>(B), static_cast<size_t>(B)), tier);
}

TEST(PrefixCache, ChainKeysNamePrefixesNotBlocks) {
  PrefixCache c(fake_id(), PrefixCacheOptions{16, 1 << 20, "", 0});
  std::vector<int32_t> a(40), b(40);
  for (int i = 0; i < 40; ++i) a[size_t(i)] = b[size_t(i)] = i + 5;
  b[3] = 999;  // block 0 differs → every later key differs although blocks 1.. are equal
  const auto ka = c.chain(a), kb = c.chain(b);
  ASSERT_EQ(ka.size(), 2u);  // only full blocks
  EXPECT_NE(ka[0], kb[0]);
  EXPECT_NE(ka[1], kb[1]);
  PrefixCache other_model(fake_id(43), PrefixCacheOptions{16, 1 << 20, "", 0});
  EXPECT_NE(other_model.chain(a)[0], ka[0]);
  PrefixCache other_block(fake_id(), PrefixCacheOptions{8, 1 << 20, "", 0});
  EXPECT_NE(other_block.chain(a)[1], ka[0]);
  EXPECT_THROW(PrefixCache(fake_id(), PrefixCacheOptions{257, 1 << 20, "", 0}), Error);
  EXPECT_THROW(PrefixCache(fake_id(), PrefixCacheOptions{0, 1 << 20, "", 0}), Error);
}

TEST(PrefixCache, RamTierStaysWithinItsLimitAndEvictsDeepestFirst) {
  const auto id = fake_id();
  // One block: 16 · 64 K/V bytes + 64 token bytes + the struct; room for about 5 blocks.
  const uint64_t one = 16 * id.kv_bytes_per_pos + 16 * 4 + sizeof(Block);
  PrefixCache c(id, PrefixCacheOptions{16, 5 * one + one / 2, "", 0});
  std::vector<int32_t> t(16 * 8);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>(i * 3 + 1);
  // A chain of 8 blocks, saved as save_prefix does: deepest first, then the chain touched.
  for (size_t b = 8; b-- > 0;) {
    c.put(make_block(c, t, b, static_cast<uint8_t>(b)));
    EXPECT_LE(c.stats().ram.bytes, 5 * one + one / 2);
  }
  const auto keys = c.chain(t);
  c.touch_chain(keys);
  const auto st = c.stats();
  EXPECT_EQ(st.ram.blocks, 5);
  EXPECT_EQ(st.ram.evictions, 3);
  EXPECT_LE(st.ram.bytes, 5 * one + one / 2);
  // The root blocks survive; the deepest ones went.
  for (size_t b = 0; b < 5; ++b) EXPECT_TRUE(c.contains(keys[b])) << b;
  for (size_t b = 5; b < 8; ++b) EXPECT_FALSE(c.contains(keys[b])) << b;
  // A second chain sharing block 0 evicts the first chain's deepest blocks, never the shared root.
  std::vector<int32_t> u = t;
  for (size_t i = 16; i < u.size(); ++i) u[i] += 7;
  for (size_t b = 3; b-- > 1;) c.put(make_block(c, u, b, 9));
  const auto ku = c.chain(u);
  c.touch_chain(std::span<const uint64_t>(ku).first(3));
  EXPECT_TRUE(c.contains(keys[0]));
  EXPECT_LE(c.stats().ram.bytes, 5 * one + one / 2);
  // Hits copy nothing out of the cache: two readers get the same block.
  int tier = 0;
  BlockPtr r1 = find_block(c, t, 0, &tier), r2 = find_block(c, t, 0);
  ASSERT_TRUE(r1 && r2);
  EXPECT_EQ(tier, 1);
  EXPECT_EQ(r1.get(), r2.get());
  EXPECT_TRUE(c.contains(keys[0]));  // loading copies, never moves
  // Same key, other tokens (a collision stand-in): no hit.
  std::vector<int32_t> v = t;
  const auto kv = c.chain(v);
  v[2] = 12345;
  EXPECT_FALSE(c.find(kv[0], c.seed(), 0, std::span<const int32_t>(v).first(16)));
}

struct DiskFixture : ::testing::Test {
  std::string dir;
  void SetUp() override {
    dir = test::scratch_dir(std::string("prefix-cache-") +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> r;
    for (auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".rkv") r.push_back(e.path());
    std::sort(r.begin(), r.end());
    return r;
  }
  uint64_t dir_bytes() const {
    uint64_t n = 0;
    for (auto& e : fs::directory_iterator(dir)) n += e.file_size();
    return n;
  }
};

std::vector<int32_t> seq(size_t n, int32_t start) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = start + static_cast<int32_t>(i);
  return t;
}

// prefetch() reads ahead only what it should and changes no answer: keys in RAM, keys with no
// file and keys of another chain are skipped; after it the chain's blocks come from disk, equal to
// what was written, and nothing is counted by the prefetch itself.
TEST_F(DiskFixture, PrefetchChangesNoAnswer) {
  const auto id = fake_id();
  const auto t = seq(64, 10);
  {
    PrefixCache c(id, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
    for (size_t b = 3; b-- > 0;) c.put(make_block(c, t, b, static_cast<uint8_t>(b)));
    c.flush();
  }
  PrefixCache c(id, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
  std::vector<uint64_t> keys = c.chain(t);  // 4 keys, 3 on disk
  keys.push_back(0x1234);                   // no such entry
  c.prefetch(keys);
  const runtime::PrefixCacheStats s0 = c.stats();
  EXPECT_EQ(s0.disk.hits + s0.disk.misses + s0.ram.hits + s0.ram.misses, 0) << "prefetch counts nothing";
  for (size_t b = 0; b < 3; ++b) {
    int tier = 0;
    BlockPtr got = find_block(c, t, b, &tier);
    ASSERT_TRUE(got) << b;
    EXPECT_EQ(tier, 2);
    EXPECT_EQ(got->kv, make_block(c, t, b, static_cast<uint8_t>(b))->kv);
  }
  EXPECT_FALSE(find_block(c, t, 3)) << "block 3 was never written";
  c.prefetch(keys);  // now in RAM: nothing to read
  EXPECT_EQ(c.stats().disk_errors, 0);
  PrefixCache off(id, PrefixCacheOptions{16, 1 << 20, "", 0});
  off.prefetch(keys);  // no disk tier: a no-op
}

// Read rate of the disk tier after a restart (not run by CI; --gtest_also_run_disabled_tests):
// 20 blocks of 256 positions × 36,864 B (qwen2.5-3b's f16 K/V: 9.4 MB per block, 189 MB), the page
// cache dropped when /proc/sys/vm/drop_caches is writable (then kept: the host side alone); the
// chain read with find() in order, without and with prefetch() first.
TEST_F(DiskFixture, DISABLED_RestartReadRate) {
  auto id = fake_id();
  id.n_layer = 36;
  id.n_embd_kv = 256;
  id.kv_bytes_per_pos = 36 * 2 * 256 * 2;
  const size_t n_blocks = 20;
  const auto t = seq(256 * n_blocks, 7);
  {
    PrefixCache c(id, PrefixCacheOptions{256, 4096ull << 20, dir, 4096ull << 20});
    for (size_t b = n_blocks; b-- > 0;) c.put(make_block(c, t, b, static_cast<uint8_t>(b)));
    c.flush();
  }
  const std::pair<bool, bool> runs[] = {{false, true}, {true, true}, {false, false}, {true, false}};
  for (const auto& [pre, drop] : runs) {  // (prefetch, drop the page cache first)
    ::sync();
    const bool dropped = drop && [] {
      std::ofstream f("/proc/sys/vm/drop_caches");
      return static_cast<bool>(f << "3\n");
    }();
    PrefixCache c(id, PrefixCacheOptions{256, 4096ull << 20, dir, 4096ull << 20});
    const auto t0 = std::chrono::steady_clock::now();
    if (pre) c.prefetch(c.chain(t));
    uint64_t bytes = 0;
    for (size_t b = 0; b < n_blocks; ++b) {
      BlockPtr got = find_block(c, t, b);
      ASSERT_TRUE(got) << b;
      bytes += got->kv.size();
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("restart read, prefetch %d, page cache dropped %d: %zu blocks, %.1f MB in %.1f ms = %.2f GB/s\n",
                pre ? 1 : 0, dropped ? 1 : 0, n_blocks, bytes / 1e6, s * 1e3, bytes / s / 1e9);
  }
}

TEST_F(DiskFixture, SurvivesARestartAndStaysWithinItsLimit) {
  const auto id = fake_id();
  const auto t = seq(64, 10);
  {
    PrefixCache c(id, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
    for (size_t b = 4; b-- > 0;) c.put(make_block(c, t, b, static_cast<uint8_t>(b)));
    c.flush();
    EXPECT_EQ(c.stats().disk_writes, 4);
    EXPECT_EQ(c.stats().disk.blocks, 4);
  }
  EXPECT_EQ(entries().size(), 4u);
  PrefixCache c(id, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
  EXPECT_EQ(c.stats().disk.blocks, 4);
  for (size_t b = 0; b < 4; ++b) {
    int tier = 0;
    BlockPtr got = find_block(c, t, b, &tier);
    ASSERT_TRUE(got) << b;
    EXPECT_EQ(tier, 2);
    EXPECT_EQ(got->kv, make_block(c, t, b, static_cast<uint8_t>(b))->kv);
  }
  EXPECT_EQ(c.stats().disk.hits, 4);
  EXPECT_EQ(c.stats().disk_errors, 0);
  // Promoted to RAM: the second lookup is a RAM hit.
  int tier = 0;
  ASSERT_TRUE(find_block(c, t, 0, &tier));
  EXPECT_EQ(tier, 1);

  // Fill past the disk limit: the directory never holds more than --cache-disk.
  const uint64_t entry = fs::file_size(entries()[0]);
  const uint64_t limit = 3 * entry + entry / 2;
  {
    PrefixCache small(id, PrefixCacheOptions{16, 1 << 20, dir, limit});
    EXPECT_LE(dir_bytes(), limit);  // trimmed at start
    const auto u = seq(16 * 10, 500);
    for (size_t b = 10; b-- > 0;) {
      small.put(make_block(small, u, b, 1));
      small.flush();
      EXPECT_LE(dir_bytes(), limit);
      EXPECT_LE(small.stats().disk.bytes, limit);
    }
    EXPECT_EQ(small.stats().disk.blocks, 3);
    EXPECT_GT(small.stats().disk.evictions, 0);
  }
  EXPECT_LE(dir_bytes(), limit);
}

// One damaged entry of each kind: skipped with a warning, counted, removed; never returned.
TEST_F(DiskFixture, DamagedEntriesAreSkipped) {
  const auto id = fake_id();
  const auto t = seq(16, 7);
  auto write_one = [&](const runtime::CacheIdentity& who) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    PrefixCache c(who, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
    c.put(make_block(c, t, 0, 3));
    c.flush();
  };
  struct Damage {
    const char* name;
    std::function<void(const fs::path&)> apply;
  };
  auto flip = [](const fs::path& p, size_t at) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char ch = 0;
    f.read(&ch, 1);
    ch = static_cast<char>(ch ^ 0x10);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(&ch, 1);
  };
  const std::vector<Damage> cases = {
      {"truncated", [](const fs::path& p) { fs::resize_file(p, fs::file_size(p) - 9); }},
      {"zero length", [](const fs::path& p) { fs::resize_file(p, 0); }},
      {"header byte", [&](const fs::path& p) { flip(p, 40); }},
      {"old version",
       [](const fs::path& p) {
         // A well-formed entry of format version 0: version field rewritten, header checksum redone.
         std::vector<uint8_t> b = test::read_file_bytes(p.string());
         const uint32_t v = 0;
         std::memcpy(b.data() + 8, &v, 4);
         const uint64_t h = runtime::hash64(b.data(), 104);
         std::memcpy(b.data() + 104, &h, 8);
         std::ofstream(p, std::ios::binary | std::ios::trunc)
             .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
       }},
      {"payload byte", [&](const fs::path& p) { flip(p, fs::file_size(p) - 100); }},
      {"padded", [](const fs::path& p) { fs::resize_file(p, fs::file_size(p) + 4); }},
  };
  for (const Damage& d : cases) {
    write_one(id);
    ASSERT_EQ(entries().size(), 1u) << d.name;
    d.apply(entries()[0]);
    PrefixCache c(id, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
    EXPECT_FALSE(find_block(c, t, 0)) << d.name;
    EXPECT_EQ(c.stats().disk_errors, 1) << d.name;
    EXPECT_EQ(c.stats().disk.misses, 1) << d.name;
    EXPECT_TRUE(entries().empty()) << d.name << ": the damaged entry is removed (recomputed and rewritten)";
    // Recompute + write-through replaces it with a good entry.
    c.put(make_block(c, t, 0, 3));
    c.flush();
    PrefixCache again(id, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
    EXPECT_TRUE(find_block(again, t, 0)) << d.name;
  }
  // Another model's entry under this model's name.
  {
    auto other = fake_id(777);
    write_one(other);
    PrefixCache mine(id, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
    PrefixCache theirs(other, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
    const fs::path src = entries()[0];
    const auto keys = mine.chain(t);
    const std::string name = fmt::format("{:016x}-{:016x}.rkv", id.hash(), keys[0]);
    fs::copy_file(src, fs::path(dir) / name);
    EXPECT_FALSE(find_block(mine, t, 0));
    EXPECT_EQ(mine.stats().disk_errors, 1);
    EXPECT_TRUE(find_block(theirs, t, 0)) << "the other model's own entry is untouched";
  }
}

// A block with a state checkpoint replaces the same block without one (RAM and disk, bytes
// counted), and an entry whose checkpoint length is not this identity's is a damaged entry.
TEST_F(DiskFixture, StateCheckpointsReplaceAndAreChecked) {
  auto id = fake_id();
  id.state_bytes = 96;
  EXPECT_NE(id.hash(), fake_id().hash());
  const auto t = seq(32, 5);
  auto with_state = [&](const PrefixCache& c, size_t b, size_t n) {
    auto blk = std::make_shared<Block>(*make_block(c, t, b, 9));
    blk->state.resize(n);
    for (size_t i = 0; i < n; ++i) blk->state[i] = static_cast<uint8_t>(i * 7 + 1);
    return BlockPtr(blk);
  };
  {
    PrefixCache c(id, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
    c.put(make_block(c, t, 1, 9));
    c.flush();
    const uint64_t plain = c.stats().ram.bytes;
    c.put(make_block(c, t, 1, 9));  // the same again: kept
    c.flush();
    EXPECT_EQ(c.stats().disk_writes, 1);
    c.put(with_state(c, 1, 96));
    c.flush();
    EXPECT_EQ(c.stats().disk_writes, 2) << "the checkpoint is written through";
    EXPECT_EQ(c.stats().ram.blocks, 1);
    EXPECT_EQ(c.stats().ram.bytes, plain + 96);
    ASSERT_TRUE(c.peek(c.chain(t)[1]));
    EXPECT_EQ(c.peek(c.chain(t)[1])->state.size(), 96u);
    c.put(make_block(c, t, 1, 9));  // without a checkpoint: does not replace it
    c.flush();
    EXPECT_EQ(c.peek(c.chain(t)[1])->state.size(), 96u);
    EXPECT_EQ(c.stats().disk_writes, 2);
    c.put(with_state(c, 0, 95));  // a checkpoint of the wrong length (written as given)
    c.flush();
  }
  PrefixCache c(id, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
  BlockPtr got = find_block(c, t, 1);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->state, with_state(c, 1, 96)->state);
  EXPECT_FALSE(find_block(c, t, 0)) << "a 95-byte checkpoint for a 96-byte state";
  EXPECT_EQ(c.stats().disk_errors, 1);
  // A pure-attention identity reads no entry that carries a state.
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto plain_id = fake_id();
  {
    PrefixCache w(plain_id, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
    w.put(with_state(w, 0, 96));
    w.flush();
  }
  PrefixCache r(plain_id, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
  EXPECT_FALSE(find_block(r, t, 0));
  EXPECT_EQ(r.stats().disk_errors, 1);
}

TEST_F(DiskFixture, UnwritableDirectoryMeansNoDiskTier) {
  if (::geteuid() == 0) {
    // root ignores permissions: use a path under a regular file instead (cannot be created).
    std::ofstream(dir + "/file") << "x";
    PrefixCache c(fake_id(), PrefixCacheOptions{16, 1 << 20, dir + "/file/sub", 1 << 20});
    EXPECT_FALSE(c.stats().disk_enabled);
    const auto t = seq(16, 1);
    c.put(make_block(c, t, 0, 1));  // still works from RAM
    c.flush();
    EXPECT_TRUE(find_block(c, t, 0));
    return;
  }
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  PrefixCache c(fake_id(), PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
  EXPECT_FALSE(c.stats().disk_enabled);
  const auto t = seq(16, 1);
  c.put(make_block(c, t, 0, 1));
  c.flush();
  EXPECT_TRUE(find_block(c, t, 0));
  fs::permissions(dir, fs::perms::owner_all);
  EXPECT_TRUE(entries().empty());
}

// A write that fails (the directory vanished: as a full disk, the write path errors) turns the
// disk tier off with one warning; the RAM tier goes on.
TEST_F(DiskFixture, FailingWritesTurnTheDiskTierOff) {
  PrefixCache c(fake_id(), PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
  ASSERT_TRUE(c.stats().disk_enabled);
  fs::remove_all(dir);
  const auto t = seq(32, 1);
  for (size_t b = 2; b-- > 0;) c.put(make_block(c, t, b, 1));
  c.flush();
  EXPECT_FALSE(c.stats().disk_enabled);
  EXPECT_EQ(c.stats().disk_writes, 0);
  EXPECT_TRUE(find_block(c, t, 0));
  EXPECT_TRUE(find_block(c, t, 1));
}

// Two caches (two servers) on one directory writing the same and different blocks at once: every
// entry a third one reads is whole (no errors), and each finds the other's blocks.
TEST_F(DiskFixture, TwoWritersShareOneDirectory) {
  const auto id = fake_id();
  const auto t = seq(16 * 12, 3);
  {
    PrefixCache a(id, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
    PrefixCache b(id, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
    std::thread ta([&] {
      for (size_t k = 12; k-- > 0;) a.put(make_block(a, t, k, static_cast<uint8_t>(k)));
    });
    std::thread tb([&] {
      for (size_t k = 0; k < 12; k += 2) b.put(make_block(b, t, k, static_cast<uint8_t>(k)));
    });
    ta.join();
    tb.join();
    a.flush();
    b.flush();
    EXPECT_TRUE(find_block(b, t, 11)) << "b reads a's block from the shared directory";
  }
  for (auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().rfind(".tmp", 0), std::string::npos);
  PrefixCache c(id, PrefixCacheOptions{16, 1 << 20, dir, 1 << 20});
  for (size_t k = 0; k < 12; ++k) {
    BlockPtr got = find_block(c, t, k);
    ASSERT_TRUE(got) << k;
    EXPECT_EQ(got->kv, make_block(c, t, k, static_cast<uint8_t>(k))->kv);
  }
  EXPECT_EQ(c.stats().disk_errors, 0);
}

// End to end on a Session: greedy output with reuse equals greedy output without, and the
// counts of cached tokens are what the blocks give.
// On a hybrid model (qwen35()) the hits end at a block boundary with a state checkpoint.
void greedy_with_and_without_reuse(const std::string& dev, const std::string& dir,
                                   const std::string& model_path = stories()) {
  auto m = model::Model::load(model_path);
  auto tok = tok::Tokenizer::from_gguf(m->file());
  const int32_t nv = m->hparams().n_vocab;
  const std::vector<int32_t> sys = test::random_prompt(50, 5, nv);
  runtime::PrefixCacheOptions co{16, 64 << 20, dir, 64 << 20};
  auto s = session(*m, dev);
  auto cache = std::make_unique<PrefixCache>(runtime::cache_identity(*m, s->context()), co);
  runtime::GenerateParams gp;
  gp.sampling.temp = 0;
  gp.max_tokens = 12;
  gp.ignore_eos = true;
  auto run = [&](runtime::Session& ss, PrefixCache* c, std::vector<int32_t>& held, const std::vector<int32_t>& prompt,
                 bool use) {
    const runtime::PrefixHit hit = runtime::restore_prefix(ss, c, held, prompt, use);
    runtime::GenerateParams p = gp;
    p.n_cached = hit.n_cached;
    runtime::SessionSource src(ss);
    runtime::Generator g(src, tok);
    auto r = g.generate(prompt, p);
    held = prompt;
    held.insert(held.end(), r.tokens.begin(), r.tokens.end() - 1);
    EXPECT_EQ(static_cast<int32_t>(held.size()), ss.n_past());
    if (c) runtime::save_prefix(ss, *c, held);
    return std::make_pair(r, hit);
  };
  // Turn 1 (cold), then an agent's turn 2: history + completion + a new message.
  std::vector<int32_t> held;
  auto [r1, h1] = run(*s, cache.get(), held, sys, true);
  EXPECT_EQ(h1.n_cached, 0);
  std::vector<int32_t> p2 = sys;
  p2.insert(p2.end(), r1.tokens.begin(), r1.tokens.end());
  for (int32_t x : test::random_prompt(9, 6, nv)) p2.push_back(x == 1 ? 2 : x);
  // Another context (another slot): its hits come from RAM only.
  auto s2 = session(*m, dev);
  std::vector<int32_t> held2;
  auto [r2, h2] = run(*s2, cache.get(), held2, p2, true);
  EXPECT_GE(h2.n_cached, static_cast<int32_t>(sys.size() + r1.tokens.size()) - 16);
  EXPECT_EQ(h2.from_device, 0);
  EXPECT_EQ(h2.from_ram, h2.n_cached);
  // The same prompt from scratch gives the same greedy tokens.
  auto s3 = session(*m, dev);
  std::vector<int32_t> held3;
  auto [r3, h3] = run(*s3, nullptr, held3, p2, false);
  EXPECT_EQ(h3.n_cached, 0);
  EXPECT_EQ(r2.tokens, r3.tokens) << dev;
  // The same slot again: the device tier answers without a copy.
  std::vector<int32_t> p3 = p2;
  p3.push_back(7);
  auto [r4, h4] = run(*s2, cache.get(), held2, p3, true);
  // (A hybrid context holds its state after all of held2, past the common prefix: it resumes from
  // the last checkpoint at or below p2's end, still keeping the K/V on the device.)
  const bool hybrid = s->recurrent();
  EXPECT_GE(h4.from_device, static_cast<int32_t>(hybrid ? p2.size() / 16 * 16 : p2.size()));
  EXPECT_EQ(h4.n_cached, h4.from_device);
  EXPECT_EQ(r4.tokens.size(), 12u);
  if (hybrid) {
    EXPECT_EQ(h2.n_cached % 16, 0);
    EXPECT_GT(cache->stats().ram.blocks, 0);
  }
  // A restart (new cache object, same directory): the hits come from disk.
  cache.reset();
  auto cache2 = std::make_unique<PrefixCache>(runtime::cache_identity(*m, s->context()), co);
  auto s4 = session(*m, dev);
  std::vector<int32_t> held4;
  auto [r5, h5] = run(*s4, cache2.get(), held4, p2, true);
  EXPECT_EQ(h5.from_disk, h5.n_cached);
  EXPECT_GE(h5.n_cached, h2.n_cached);
  EXPECT_EQ(r5.tokens, r3.tokens);
  EXPECT_EQ(cache2->stats().disk_errors, 0);
}

TEST_F(DiskFixture, GreedyWithReuseEqualsWithoutCpu) { greedy_with_and_without_reuse("cpu", dir); }
TEST_F(DiskFixture, GreedyWithReuseEqualsWithoutVulkan) { greedy_with_and_without_reuse("vulkan", dir); }
TEST_F(DiskFixture, GreedyWithReuseEqualsWithoutHybridCpu) { greedy_with_and_without_reuse("cpu", dir, qwen35()); }
TEST_F(DiskFixture, GreedyWithReuseEqualsWithoutHybridVulkan) {
  greedy_with_and_without_reuse("vulkan", dir, qwen35());
}

// A damaged checkpoint on disk (a flipped byte, cut short, a header that names another state
// length): skipped with a warning, the prompt recomputed with the same greedy output, the entry
// rewritten (the next restore hits again).
void damaged_checkpoint_falls_back(const std::string& dev, const std::string& dir) {
  auto m = model::Model::load(qwen35());
  auto tok = tok::Tokenizer::from_gguf(m->file());
  const std::vector<int32_t> prompt = test::random_prompt(60, 21, m->hparams().n_vocab);
  const runtime::PrefixCacheOptions co{16, 64 << 20, dir, 64 << 20};
  runtime::GenerateParams gp;
  gp.sampling.temp = 0;
  gp.max_tokens = 4;
  gp.ignore_eos = true;
  auto turn = [&](PrefixCache* c, bool use, runtime::PrefixHit* hit_out) {
    auto s = session(*m, dev);
    const runtime::PrefixHit hit = runtime::restore_prefix(*s, c, {}, prompt, use);
    if (hit_out) *hit_out = hit;
    runtime::GenerateParams p = gp;
    p.n_cached = hit.n_cached;
    runtime::SessionSource src(*s);
    runtime::Generator g(src, tok);
    auto r = g.generate(prompt, p);
    std::vector<int32_t> held = prompt;
    held.insert(held.end(), r.tokens.begin(), r.tokens.end() - 1);
    if (c) runtime::save_prefix(*s, *c, held);
    if (c) c->flush();
    return r.tokens;
  };
  const auto ref = turn(nullptr, false, nullptr);
  auto state_entry = [&] {  // the one entry with a checkpoint: the largest file
    fs::path best;
    for (auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".rkv" && (best.empty() || e.file_size() > fs::file_size(best))) best = e.path();
    return best;
  };
  auto rewrite = [](const fs::path& p, const std::vector<uint8_t>& b) {
    std::ofstream(p, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  };
  struct Damage {
    const char* name;
    std::function<void(const fs::path&)> apply;
  };
  const std::vector<Damage> cases = {
      {"state byte",
       [&](const fs::path& p) {
         std::vector<uint8_t> b = test::read_file_bytes(p.string());
         b[b.size() - 33] ^= 0x04;
         rewrite(p, b);
       }},
      {"state cut short", [](const fs::path& p) { fs::resize_file(p, fs::file_size(p) - 1000); }},
      {"state shape",
       [&](const fs::path& p) {
         // A well-formed entry whose checkpoint is 4 bytes shorter than this model's state: the
         // lengths (header offsets 80, 88) and both checksums redone.
         std::vector<uint8_t> b = test::read_file_bytes(p.string());
         b.resize(b.size() - 4);
         for (size_t off : {size_t{80}, size_t{88}}) {
           uint64_t v;
           std::memcpy(&v, b.data() + off, 8);
           v -= 4;
           std::memcpy(b.data() + off, &v, 8);
         }
         const uint64_t pc = runtime::hash64(b.data() + 112, b.size() - 112);
         std::memcpy(b.data() + 96, &pc, 8);
         const uint64_t hc = runtime::hash64(b.data(), 104);
         std::memcpy(b.data() + 104, &hc, 8);
         rewrite(p, b);
       }},
  };
  for (const Damage& d : cases) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    {
      PrefixCache c(runtime::cache_identity(*m, session(*m, dev)->context()), co);
      EXPECT_EQ(turn(&c, true, nullptr), ref) << d.name;
    }
    const fs::path e = state_entry();
    ASSERT_FALSE(e.empty()) << d.name;
    d.apply(e);
    PrefixCache c(runtime::cache_identity(*m, session(*m, dev)->context()), co);
    runtime::PrefixHit hit;
    EXPECT_EQ(turn(&c, true, &hit), ref) << d.name;
    EXPECT_EQ(hit.n_cached, 0) << d.name << ": the only checkpoint is damaged";
    EXPECT_EQ(c.stats().disk_errors, 1) << d.name;
    EXPECT_EQ(turn(&c, true, &hit), ref) << d.name;
    EXPECT_EQ(hit.n_cached, 48) << d.name << ": recomputed and saved again";
    PrefixCache again(runtime::cache_identity(*m, session(*m, dev)->context()), co);
    EXPECT_EQ(turn(&again, true, &hit), ref) << d.name;
    EXPECT_EQ(hit.n_cached, 48) << d.name;
    EXPECT_EQ(hit.from_disk, 48) << d.name;
    EXPECT_EQ(again.stats().disk_errors, 0) << d.name;
  }
}

TEST_F(DiskFixture, DamagedCheckpointFallsBackCpu) { damaged_checkpoint_falls_back("cpu", dir); }
TEST_F(DiskFixture, DamagedCheckpointFallsBackVulkan) { damaged_checkpoint_falls_back("vulkan", dir); }

}  // namespace
}  // namespace rocky
