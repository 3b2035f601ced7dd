// One device copy of each weight, end to end on lavapipe: the 2-layer qwen2.5-1.5b Q4_K_M
// synth model (token_embd q6_K 151,936 × 1,536: the embedding lookup and the tied output head read
// the same repack) holds memory.weights ≤ 1.15 × its GGUF tensor bytes in `rocky bench -o json`
// (before : 2.49×, the GGUF rows plus an int8 / f32-scale repack), its logits still match the
// CPU oracle (`rocky verify`, the int8 path's 0.35 bound, f16 KV by default and f32 KV), and on a
// UMA device the mapped file's pages are given back after the upload (RSS does not hold a second
// copy of the weights).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/vulkan/vulkan_backend.hpp"
#include "bench/run_rocky.hpp"
#include "common/shared.hpp"
#include "gguf/gguf.hpp"

using nlohmann::json;
using rocky::test::run_rocky;

namespace {

const std::string& model_path() {
  static const std::string p = [] {
    const std::string m = rocky::test::scratch_dir("weights_once") + "/qwen2.5-1.5b-q4_k_m-2l.gguf";
    auto r = run_rocky("weights_once",
                       {"synth", "--preset", "qwen2.5-1.5b", "--type", "q4_k_m", "--layers", "2", "-o", m, "-q"});
    EXPECT_EQ(r.rc, 0) << r.err;
    return m;
  }();
  return p;
}

uint64_t tensor_bytes(const std::string& path) {
  auto f = rocky::gguf::GgufFile::open(path);
  uint64_t b = 0;
  for (const auto& t : f.tensors()) b += t.n_bytes;
  return b;
}

// Resident set of this process in bytes (/proc/self/statm, field 2 in pages).
uint64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, res = 0;
  f >> size >> res;
  return res * 4096;
}

TEST(WeightsOnce, BenchMemoryWeightsWithin115PercentOfTheGguf) {
  const std::string& m = model_path();
  const uint64_t gguf = tensor_bytes(m);
  auto r = run_rocky("weights_once", {"bench", "-m", m, "--device", "vulkan:0", "-p", "8", "-n", "2", "-r", "1", "-o",
                                      "json", "--no-roofline", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const json rows = json::parse(r.out);
  ASSERT_EQ(rows.size(), 2u);
  for (const json& x : rows) {
    SCOPED_TRACE(x.dump());
    EXPECT_EQ(x["model_size"].get<uint64_t>(), gguf);
    const json& mem = x["memory"];
    const uint64_t w = mem["weights"].get<uint64_t>();
    std::printf("memory.weights %llu bytes = %.4f × the GGUF's %llu tensor bytes; peak %llu\n",
                static_cast<unsigned long long>(w), double(w) / double(gguf), static_cast<unsigned long long>(gguf),
                static_cast<unsigned long long>(x["peak_device_memory"].get<uint64_t>()));
    EXPECT_LE(double(w), 1.15 * double(gguf));
    EXPECT_GE(w, gguf * 95 / 100) << "every weight is on the device once";
    EXPECT_GE(x["peak_device_memory"].get<uint64_t>(),
              w + mem["kv"].get<uint64_t>() + mem["arena"].get<uint64_t>() + mem["other"].get<uint64_t>());
    EXPECT_EQ(x["type_k"].get<std::string>(), "f16");  // the GPU default (llama.cpp's)
    EXPECT_EQ(x["type_v"].get<std::string>(), "f16");
  }
  // -ctk/-ctv f32: the cache doubles, the weights stay.
  auto r32 = run_rocky("weights_once", {"bench", "-m", m, "--device", "vulkan:0", "-p", "8", "-n", "0", "-r", "1", "-o",
                                        "json", "--no-roofline", "-q", "-ctk", "f32", "-ctv", "f32"});
  ASSERT_EQ(r32.rc, 0) << r32.err;
  const json x32 = json::parse(r32.out).at(0);
  EXPECT_EQ(x32["type_k"].get<std::string>(), "f32");
  EXPECT_EQ(x32["memory"]["kv"].get<uint64_t>(), 2 * rows[0]["memory"]["kv"].get<uint64_t>());
  EXPECT_EQ(x32["memory"]["weights"].get<uint64_t>(), rows[0]["memory"]["weights"].get<uint64_t>());
}

TEST(WeightsOnce, VerifyMatchesTheCpu) {
  const std::string& m = model_path();
  for (const char* kv : {"f16", "f32"}) {
    SCOPED_TRACE(kv);
    auto r = run_rocky("weights_once", {"verify", "-m", m, "--device", "vulkan:0", "-p",
                                        "The quick brown fox jumps over", "-ctk", kv, "-ctv", kv, "--json"});
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    const json v = json::parse(r.out);
    EXPECT_EQ(v["kv_cache"].get<std::string>(), kv) << v.dump();
  }
}

// UMA (lavapipe): the device memory is host RAM, so the file's pages must not stay resident beside
// it. Touch every tensor page (a resident copy), load, and check RSS grew by about one copy.
TEST(WeightsOnce, UmaReleasesTheMappedPages) {
  const std::string& m = model_path();
  auto f = rocky::gguf::GgufFile::open(m);
  rocky::vulkan::VulkanOptions vo;
  rocky::vulkan::VulkanBackend be(vo);
  if (!be.info().uma) GTEST_SKIP() << "not a UMA device: the host pages are not device memory";
  std::vector<const rocky::gguf::TensorInfo*> ts;
  uint64_t sum = 0, bytes = 0;
  for (const auto& t : f.tensors()) {
    ts.push_back(&t);
    bytes += t.n_bytes;
    for (uint64_t i = 0; i < t.n_bytes; i += 4096) sum += t.data[i];  // fault every page in
  }
  const uint64_t before = rss_bytes();
  be.load_weights(ts);
  const uint64_t after = rss_bytes();
  const uint64_t dev = be.stats().memory.weights;
  std::printf(
      "RSS %.1f MiB with the file's pages resident → %.1f MiB after the upload (device weights %.1f MiB, "
      "tensors %.1f MiB; checksum %llu)\n",
      before / 1048576.0, after / 1048576.0, dev / 1048576.0, bytes / 1048576.0, static_cast<unsigned long long>(sum));
  // Without the release: after ≈ before + dev (the mapping stays resident). With it the mapped
  // pages go: after ≤ before + dev − 0.8 · bytes.
  EXPECT_LE(double(after), double(before) + double(dev) - 0.8 * double(bytes));
}

}  // namespace
