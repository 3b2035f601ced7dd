// End-to-end on the Vulkan backend with graphs from src/model's builders, driven ubatch by ubatch
// by hand (no Session): stories260K over every prompt position with f32 and f16 KV, then a
// free-running greedy decode through the N = 1 (mat-vec) kernels; and the quantized synth model
// with and without --max-binding smaller than its embedding (windowed get_rows and output matmul).
// Tolerances: ../shared/reference/README.md (rel = max|Δlogit| / max|ref logit|).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "gguf/gguf.hpp"
#include "gguf/writer.hpp"
#include "model/model.hpp"
#include "model/ref.hpp"
#include "vk_test_util.hpp"

namespace rocky::test {
namespace {

using model::Logits;

TEST(VulkanModel, Stories260KMatchesLlamaCpp) {
  auto m = model::Model::load(shared_path("reference/models/stories260K.gguf"));
  const int32_t n_vocab = m->hparams().n_vocab;
  const std::string label = "stories260K__kvf32_faoff";
  for (bool kv_f16 : {false, true}) {
    auto& be = shared_backend(kv_f16);
    for (const char* prompt : {"p1_short", "p2_paragraph"}) {
      RefCase r = load_ref(label, prompt);
      const int32_t n = static_cast<int32_t>(r.eval_tokens.size()), n_ctx = n + 40;
      graph::Graph g = m->build_graph({n, 0, n_ctx, Logits::ALL});
      auto w = g.weights();
      be.load_weights(w);
      be.init_kv(g.kv);
      std::vector<float> logits(size_t(n_vocab) * size_t(n));
      be.compute(g, own_plan(g), r.eval_tokens, logits);
      auto ref = load_f32(ref_path(label, prompt, ".cpu.all_logits.f32"));
      ASSERT_EQ(ref.size(), logits.size());
      const double rel = rel_err(logits, ref);
      std::printf("stories260K %s kv_f16=%d: rel %.3g over %d positions\n", prompt, int(kv_f16), rel, n);
      EXPECT_LE(rel, kv_f16 ? 1e-2 : 1e-3) << prompt << " kv_f16=" << kv_f16;
      if (!kv_f16) {
        // Free-running greedy decode, one token per ubatch (N = 1: the mat-vec kernels).
        std::vector<int32_t> got;
        const float* last = logits.data() + size_t(n - 1) * size_t(n_vocab);
        int32_t next = int32_t(std::max_element(last, last + n_vocab) - last);
        std::vector<float> one(static_cast<size_t>(n_vocab));
        for (int32_t i = 0; i < 32 && n + i < n_ctx; ++i) {
          got.push_back(next);
          graph::Graph gd = m->build_graph({1, n + i, n_ctx, Logits::LAST});
          std::vector<int32_t> tk{next};
          be.compute(gd, own_plan(gd), tk, one);
          next = int32_t(std::max_element(one.begin(), one.end()) - one.begin());
        }
        EXPECT_EQ(got, r.greedy_ids) << prompt;
      }
      be.release_weights();
      EXPECT_EQ(be.instance().error_count(), 0u);
    }
  }
}

TEST(VulkanModel, SynthQ4KMWindowedEqualsUnwindowed) {
  auto m = model::Model::load(shared_path("reference/models/synth/synth-llama-q4_k_m.gguf"));
  const std::string label = "synth-llama-q4_k_m-dequant-f32__kvf32_faoff";
  RefCase r = load_ref(label, "p1_short");
  const int32_t n = static_cast<int32_t>(r.eval_tokens.size());
  graph::Graph g = m->build_graph({n, 0, n + 8, Logits::LAST});
  const uint64_t emb_bytes = m->weights().tok_embd->n_bytes;
  std::vector<std::vector<float>> results;
  for (uint64_t mb : {uint64_t{0}, uint64_t{1} << 20}) {
    ASSERT_TRUE(mb == 0 || emb_bytes > 2 * mb);
    auto& be = shared_backend(false, mb);
    auto w = g.weights();
    be.load_weights(w);
    be.init_kv(g.kv);
    std::vector<float> logits(static_cast<size_t>(m->hparams().n_vocab));
    be.compute(g, own_plan(g), r.eval_tokens, logits);
    results.push_back(logits);
    be.release_weights();
    EXPECT_EQ(be.instance().error_count(), 0u);
  }
  EXPECT_EQ(results[0], results[1]);
  auto ref = load_f32(ref_path(label, "p1_short", ".cpu.last_logits.f32"));
  ASSERT_EQ(ref.size(), results[0].size());
  const double rel = rel_err(results[0], ref);
  std::printf("synth-llama-q4_k_m p1_short vs dequant-f32 reference: rel %.3g\n", rel);
  EXPECT_LE(rel, 1e-3);
}

// Recorder::flush: the ubatch split into many command buffers (one per dispatch, two in flight)
// gives bit-identical logits to one command buffer, with zero validation (synchronization) errors.
TEST(VulkanModel, FlushedCommandBuffersEqualOne) {
  auto m = model::Model::load(shared_path("reference/models/synth/synth-llama-q4_k_m.gguf"));
  RefCase r = load_ref("synth-llama-q4_k_m-dequant-f32__kvf32_faoff", "p1_short");
  const int32_t n = static_cast<int32_t>(r.eval_tokens.size());
  std::vector<std::vector<float>> results;
  for (uint32_t every : {0u, 1u, 7u}) {
    for (auto path : {vulkan::ops::MatmulPath::BASIC, vulkan::ops::MatmulPath::AUTO}) {
      vulkan::VulkanOptions o;
      o.validation = true;
      o.persist_pipeline_cache = false;
      o.flush_dispatches = every;
      o.matmul = path;
      vulkan::VulkanBackend be(o);
      graph::Graph g = m->build_graph({n, 0, n + 8, Logits::LAST});
      auto w = g.weights();
      be.load_weights(w);
      be.init_kv(g.kv);
      std::vector<float> logits(static_cast<size_t>(m->hparams().n_vocab));
      be.compute(g, own_plan(g), r.eval_tokens, logits);
      EXPECT_GT(be.recorder().dispatches(), 20u);
      EXPECT_EQ(be.instance().error_count(), 0u) << "flush every " << every;
      results.push_back(std::move(logits));
    }
  }
  for (size_t i = 2; i < results.size(); ++i) EXPECT_EQ(results[i], results[i % 2]) << "run " << i;
}

// A quantized weight type without an int8 kernel (q4_1) is never silently slow: loading it
// with --matmul mmq is refused naming the tensor, the type and the supported list; with auto it
// loads (the f32 kernels take it, with a note on stderr); q5_1 loads on the int8 path.
TEST(VulkanModel, WeightTypeWithoutInt8KernelIsRefusedOrNoted) {
  const std::string path = rocky::test::scratch_dir("vk_model") + "/q4_1.gguf";
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  const std::vector<uint64_t> ne = {64, 3};
  std::vector<uint8_t> bytes(row_bytes(DType::Q4_1, 64) * 3, 0x11);
  w.add_tensor("w41", DType::Q4_1, ne, std::vector<uint8_t>(bytes));
  std::vector<uint8_t> b51(row_bytes(DType::Q5_1, 64) * 3, 0x11);
  w.add_tensor("w51", DType::Q5_1, ne, std::move(b51));
  w.write(path);
  const auto f = gguf::GgufFile::open(path);
  const gguf::TensorInfo* t41 = f.find_tensor("w41");
  const gguf::TensorInfo* t51 = f.find_tensor("w51");
  ASSERT_NE(t41, nullptr);
  ASSERT_NE(t51, nullptr);
  {
    auto& mmq = shared_backend(false, 0, false, vulkan::ops::MatmulPath::MMQ);
    const gguf::TensorInfo* one[] = {t51};
    EXPECT_NO_THROW(mmq.load_weights(one));
    const gguf::TensorInfo* bad[] = {t41};
    try {
      mmq.load_weights(bad);
      ADD_FAILURE() << "q4_1 accepted by --matmul mmq";
    } catch (const rocky::Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("w41"), std::string::npos) << m;
      EXPECT_NE(m.find("q4_1"), std::string::npos) << m;
      EXPECT_NE(m.find("q5_1"), std::string::npos) << m;  // the supported list
    }
    mmq.release_weights();
  }
  auto& aut = shared_backend(false, 0, false, vulkan::ops::MatmulPath::AUTO);
  const gguf::TensorInfo* both[] = {t41, t51};
  EXPECT_NO_THROW(aut.load_weights(both));
  aut.release_weights();
}

}  // namespace
}  // namespace rocky::test
