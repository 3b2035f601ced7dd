// Device probing, SPIR-V reflection, pipelines, windowing (--max-binding), the memory cap, the
// recorder's barriers, and outside checks of the GPU dequantization against ggml's own values.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <fstream>
#include <random>

#include "backend/vulkan/shader_table.hpp"
#include "core/error.hpp"
#include "gguf/gguf.hpp"
#include "common/shared.hpp"
#include "runtime/options.hpp"
#include "vk_test_util.hpp"

namespace rocky::test {
namespace {

TEST(VulkanDevice, ProbesLimits) {
  vulkan::InstanceOptions io;
  io.validation = true;
  vulkan::Instance inst(io);
  ASSERT_GE(inst.physical_devices().size(), 1u);
  vulkan::DeviceInfo d = inst.probe(0);
  EXPECT_FALSE(d.name.empty());
  EXPECT_GE(d.api_version, VK_API_VERSION_1_2);
  EXPECT_GT(d.subgroup_size, 0u);
  EXPECT_LE(d.subgroup_min, d.subgroup_size);
  EXPECT_GE(d.subgroup_max, d.subgroup_size);
  EXPECT_GE(d.shared_memory, 16384u);
  EXPECT_GE(d.max_workgroup_invocations, 128u);
  EXPECT_GE(d.max_storage_buffer_range, 1u << 27);
  EXPECT_GT(d.max_allocation, 0u);
  EXPECT_FALSE(d.heaps.empty());
  EXPECT_THROW(inst.probe(static_cast<uint32_t>(inst.physical_devices().size())), Error);
  EXPECT_EQ(inst.error_count(), 0u);
}

TEST(VulkanDevice, ParsesDeviceNames) {
  EXPECT_EQ(vulkan::parse_vulkan_device("vulkan"), 0u);
  EXPECT_EQ(vulkan::parse_vulkan_device("vulkan:3"), 3u);
  EXPECT_EQ(vulkan::parse_vulkan_device("cpu"), std::nullopt);
  EXPECT_THROW(vulkan::parse_vulkan_device("vulkan:x"), Error);
  EXPECT_THROW(vulkan::parse_vulkan_device("vulkan:"), Error);
  std::string why;
  auto gpu = vulkan::first_gpu(&why);
  vulkan::Instance inst;
  if (!gpu) {  // lavapipe: a CPU driver is not picked by --device auto
    EXPECT_FALSE(why.empty());
  } else {
    EXPECT_NE(inst.probe(*gpu).type, VK_PHYSICAL_DEVICE_TYPE_CPU);
  }
}

TEST(VulkanDevice, ReflectsBindings) {
  const auto& s = vulkan::find_shader("matmul");
  std::vector<uint32_t> w(s.size / 4);
  std::memcpy(w.data(), s.code, w.size() * 4);
  EXPECT_EQ(vulkan::reflect_bindings(w.data(), w.size()), (std::vector<uint32_t>{0, 1, 2}));
  const auto& a = vulkan::find_shader("attention");
  w.assign(a.size / 4, 0);
  std::memcpy(w.data(), a.code, w.size() * 4);
  EXPECT_EQ(vulkan::reflect_bindings(w.data(), w.size()).size(), 4u);
  EXPECT_THROW(vulkan::find_shader("no_such_shader"), Error);
  uint32_t bad[5] = {1, 2, 3, 4, 5};
  EXPECT_THROW(vulkan::reflect_bindings(bad, 5), Error);
}

// get_rows + matmul + matvec over a weight much larger than --max-binding: identical results
// (n = 7: the output [2003, 7] is larger than one binding too, so the tokens are chunked).
TEST(VulkanDevice, WindowedWeightsGiveIdenticalResults) {
  std::mt19937 rng(7);
  for (DType t : {DType::Q8_0, DType::F16, DType::Q4_K}) {
    const int64_t k = t == DType::Q4_K ? 256 : 64, rows = 2003;
    auto w = make_weight(t, k, rows, rng, "token_embd.weight");
    for (int n : {1, 3, 7}) {
      graph::Graph g;
      g.n_tokens = n;
      int32_t x = g.add(get_rows_node(*w, n, "inp_embd"));
      graph::Node mm;
      mm.op = graph::Op::MATMUL;
      mm.name = "result_output";
      mm.ne0 = rows;
      mm.ne1 = n;
      mm.src[0] = x;
      mm.weight = &w->info;
      g.output = g.add(mm);
      auto plan = own_plan(g);
      std::vector<int32_t> tok = {2002, 0, 1001, 5, 77, 1999, 1000};
      tok.resize(static_cast<size_t>(n));
      std::vector<std::vector<float>> res;
      for (uint64_t mb : {uint64_t{0}, uint64_t{32768}}) {
        auto& be = shared_backend(false, mb);
        const gguf::TensorInfo* ws[] = {&w->info};
        be.load_weights(ws);
        std::vector<float> out(static_cast<size_t>(rows * n));
        be.compute(g, plan, tok, out);
        auto emb = be.read_node(g, plan, x);
        out.insert(out.end(), emb.begin(), emb.end());
        res.push_back(out);
        if (mb != 0) {
          EXPECT_GT(be.recorder().dispatches(), 4u) << "expected several windows";
        }
        be.release_weights();
        EXPECT_EQ(be.instance().error_count(), 0u);
      }
      EXPECT_EQ(res[0], res[1]) << dtype_name(t) << " n=" << n;
      std::vector<double> ref;
      for (int j = 0; j < n; ++j)
        for (int64_t r = 0; r < rows; ++r) {
          double acc = 0;
          for (int64_t i = 0; i < k; ++i) acc += w->at(r, i) * w->at(tok[static_cast<size_t>(j)], i);
          ref.push_back(acc);
        }
      std::vector<float> got(res[0].begin(), res[0].begin() + rows * n);
      EXPECT_LE(nmse(got, ref), 1e-6);
    }
  }
}

TEST(VulkanDevice, MemoryLimitGivesClearError) {
  std::mt19937 rng(8);
  auto w = make_weight(DType::F32, 512, 1024, rng, "blk.0.ffn_down.weight");  // 2 MiB
  const gguf::TensorInfo* ws[] = {&w->info};
  {
    vulkan::VulkanOptions o;
    o.validation = true;
    o.persist_pipeline_cache = false;
    o.memory_limit = 1 << 20;
    vulkan::VulkanBackend be(o);
    try {
      be.load_weights(ws);
      FAIL() << "expected OutOfMemoryError";
    } catch (const OutOfMemoryError& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("blk.0.ffn_down.weight"), std::string::npos) << m;
      EXPECT_NE(m.find("-c"), std::string::npos) << m;
      EXPECT_NE(m.find("-ub"), std::string::npos) << m;
    }
    EXPECT_EQ(be.instance().error_count(), 0u);
  }
  {
    ::setenv("ROCKY_DEVICE_MEMORY_LIMIT", "1000000", 1);
    vulkan::VulkanOptions o;
    runtime::apply_env(runtime::read_env(), o);  // the program boundary's read
    o.persist_pipeline_cache = false;
    vulkan::VulkanBackend be(o);
    ::unsetenv("ROCKY_DEVICE_MEMORY_LIMIT");
    EXPECT_THROW(be.load_weights(ws), OutOfMemoryError);
    EXPECT_THROW(be.init_kv({4, 4096, 4096}), OutOfMemoryError);
  }
  // Not byte counts: words, a sign (strtoull would wrap "-5" to no limit), overflow, spaces.
  for (const char* bad : {"lots", "-5", "+5", " 5", "99999999999999999999999"}) {
    ::setenv("ROCKY_DEVICE_MEMORY_LIMIT", bad, 1);
    EXPECT_THROW(runtime::device_memory_limit_from_env(), Error) << bad;
  }
  ::setenv("ROCKY_DEVICE_MEMORY_LIMIT", "123456", 1);
  EXPECT_EQ(runtime::device_memory_limit_from_env(), 123456u);
  ::unsetenv("ROCKY_DEVICE_MEMORY_LIMIT");
}

// A chain needs a barrier before every dependent dispatch; independent reads need none.
TEST(VulkanDevice, RecorderInsertsOnlyNeededBarriers) {
  std::mt19937 rng(9);
  auto ea = make_weight(DType::F32, 64, 10, rng, "a");
  auto& be = shared_backend();
  const gguf::TensorInfo* ws[] = {&ea->info};
  be.load_weights(ws);
  graph::Graph g;
  g.n_tokens = 4;
  int32_t a = g.add(get_rows_node(*ea, 4, "a"));
  int32_t b = g.add(get_rows_node(*ea, 4, "b"));  // independent of a: no barrier
  graph::Node add;
  add.op = graph::Op::ADD;
  add.name = "add";
  add.ne0 = 64;
  add.ne1 = 4;
  add.src = {a, b, -1};
  int32_t c = g.add(add);  // reads a, b: one barrier
  add.src = {a, c, -1};
  add.name = "add2";
  g.output = g.add(add);  // reads c: one barrier
  std::vector<int32_t> tok = {1, 2, 3, 9};
  std::vector<float> out(64 * 4);
  be.compute(g, own_plan(g), tok, out);
  EXPECT_EQ(be.recorder().dispatches(), 4u);
  EXPECT_EQ(be.recorder().barriers(), 2u);
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(out[size_t(j * 64 + i)], float(3 * ea->at(tok[size_t(j)], i)));
  be.release_weights();
  EXPECT_EQ(be.instance().error_count(), 0u);
}

// Many submits of the same graph: device memory and descriptor pools stay constant.
TEST(VulkanDevice, NothingGrowsWithSubmits) {
  std::mt19937 rng(12);
  auto ea = make_weight(DType::Q4_0, 64, 300, rng, "a");  // > 256 dispatches' worth of sets below
  auto& be = shared_backend();
  const gguf::TensorInfo* ws[] = {&ea->info};
  be.load_weights(ws);
  graph::Graph g;
  g.n_tokens = 3;
  int32_t cur = g.add(get_rows_node(*ea, 3, "x"));
  for (int i = 0; i < 300; ++i) {  // a long chain: more descriptor sets than one pool holds
    graph::Node add;
    add.op = graph::Op::ADD;
    add.name = "add" + std::to_string(i);
    add.ne0 = 64;
    add.ne1 = 3;
    add.src = {cur, 0, -1};
    cur = g.add(add);
  }
  g.output = cur;
  auto plan = own_plan(g);
  std::vector<int32_t> tok = {1, 299, 7};
  std::vector<float> out(64 * 3);
  uint64_t mem = 0;
  size_t pools = 0;
  for (int rep = 0; rep < 30; ++rep) {
    be.compute(g, plan, tok, out);
    if (rep == 2) {
      mem = be.device_memory_bytes();
      pools = be.recorder().descriptor_pools();
    }
  }
  EXPECT_EQ(be.device_memory_bytes(), mem);
  EXPECT_EQ(be.recorder().descriptor_pools(), pools);
  EXPECT_LE(pools, 4u);
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(out[size_t(j * 64 + i)], 301 * ea->at(tok[size_t(j)], i), 1e-3);
  be.release_weights();
  EXPECT_EQ(be.instance().error_count(), 0u);
}

// The tests' f64 reference dequantizer (ref_dequant.hpp) against rocky_quant's dequantize_row.
TEST(VulkanDevice, RefDequantAgreesWithRockyQuant) {
  std::mt19937 rng(10);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                  DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    auto w = make_weight(t, 512, 3, rng, "w");
    std::vector<double> mine(w->deq.size());
    ref_dequant_row(t, w->bytes.data(), mine.data(), static_cast<int64_t>(mine.size()));
    for (size_t i = 0; i < mine.size(); ++i)
      ASSERT_NEAR(mine[i], w->deq[i], 1e-6 * std::abs(mine[i]) + 1e-12) << dtype_name(t) << " element " << i;
  }
}

// The test's reference dequantizer and the GPU's get_rows against ggml's own values.
TEST(VulkanDevice, DequantMatchesGgml) {
  const char* files[][2] = {{"synth-llama-q4_k_m.json", "synth/synth-llama-q4_k_m.gguf"},
                            {"synth-llama-q8_0.json", "synth/synth-llama-q8_0.gguf"},
                            {"llama-2-tiny-random.json", "llama-2-tiny-random.gguf"}};
  auto& be = shared_backend();
  int checked = 0;
  for (auto& f : files) {
    std::ifstream js(shared_path(std::string("reference/ref/dequant/") + f[0]));
    auto j = nlohmann::json::parse(js);
    auto model = gguf::GgufFile::open(shared_path(std::string("reference/models/") + f[1]));
    for (auto& [tname, entry] : j["types"].items()) {
      const gguf::TensorInfo* t = model.find_tensor(entry["tensor"].get<std::string>());
      ASSERT_NE(t, nullptr);
      std::vector<double> want = entry["values_ggml_to_float"].get<std::vector<double>>();
      const int64_t k = static_cast<int64_t>(t->ne[0]);
      const int n_rows = static_cast<int>((int64_t(want.size()) + k - 1) / k);
      std::vector<double> mine(static_cast<size_t>(n_rows * k));
      ref_dequant_row(t->type, t->data, mine.data(), n_rows * k);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(mine[i], want[i], 1e-6 * std::abs(want[i]) + 1e-9) << tname << " " << i;
      const gguf::TensorInfo* ws[] = {t};
      be.load_weights(ws);
      graph::Graph g;
      g.n_tokens = n_rows;
      graph::Node n;
      n.op = graph::Op::GET_ROWS;
      n.name = "rows";
      n.ne0 = k;
      n.ne1 = n_rows;
      n.weight = t;
      g.output = g.add(n);
      std::vector<int32_t> tok(static_cast<size_t>(n_rows));
      for (int r = 0; r < n_rows; ++r) tok[size_t(r)] = r;
      std::vector<float> out(static_cast<size_t>(n_rows * k));
      be.compute(g, own_plan(g), tok, out);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(out[i], want[i], 1e-6 * std::abs(want[i]) + 1e-9) << tname << " " << i;
      be.release_weights();
      ++checked;
    }
  }
  EXPECT_GE(checked, 5);
  EXPECT_EQ(be.instance().error_count(), 0u);
}

}  // namespace
}  // namespace rocky::test

namespace rocky::test {
namespace {

// The VkPipelineCache is written under $XDG_CACHE_HOME/rocky, and --profile-style timestamps
// give one timing per dispatch.
TEST(VulkanDevice, PipelineCachePersistsAndProfileTimes) {
  const std::string dir = scratch_dir("vk-pipeline-cache");
  std::filesystem::remove_all(dir + "/rocky");
  ::setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  std::mt19937 rng(11);
  auto ea = make_weight(DType::Q8_0, 64, 9, rng, "a");
  {
    vulkan::VulkanOptions o;
    runtime::apply_env(runtime::read_env(), o);  // the program boundary's read: XDG_CACHE_HOME
    o.validation = true;
    o.profile = true;
    o.matmul = vulkan::ops::MatmulPath::BASIC;  // one matmul.comp dispatch (the int8 path adds a quantize)
    vulkan::VulkanBackend be(o);
    const gguf::TensorInfo* ws[] = {&ea->info};
    be.load_weights(ws);
    graph::Graph g;
    g.n_tokens = 2;
    int32_t a = g.add(get_rows_node(*ea, 2, "a"));
    graph::Node mm;
    mm.op = graph::Op::MATMUL;
    mm.name = "mm";
    mm.ne0 = 9;
    mm.ne1 = 2;
    mm.src[0] = a;
    mm.weight = &ea->info;
    g.output = g.add(mm);
    std::vector<int32_t> tok = {3, 8};
    std::vector<float> out(18);
    be.compute(g, own_plan(g), tok, out);
    EXPECT_EQ(be.pipeline_count(), 2u);
    if (be.info().timestamps) {
      ASSERT_EQ(be.recorder().timings().size(), 2u);
      EXPECT_EQ(be.recorder().timings()[1].label, "mm");
      EXPECT_GE(be.recorder().timings()[1].ms, 0.0);
    }
    EXPECT_EQ(be.instance().error_count(), 0u);
  }
  ::unsetenv("XDG_CACHE_HOME");
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/rocky"))
    if (e.path().extension() == ".bin" && std::filesystem::file_size(e.path()) > 0) ++files;
  EXPECT_EQ(files, 1u);
}

}  // namespace
}  // namespace rocky::test
