// Every reference label and every prompt through the real runtime (model builders, planner with
// arena reuse, Session's ubatch loop with -ub smaller than most prompts) on the Vulkan backend, with
// validation + synchronization validation on and zero messages asserted after every session. The
// checks and case tables are the CPU oracle's (tests/model/harness.hpp), run with a Vulkan backend
// factory; tolerances from ../shared/reference/README.md and issue :
// - tight labels: rel ≤ 1e-3 with an f32 KV cache (stricter than 's 1e-2 for GPU paths);
// - stories260K / stories260K-f16 (f16 KV, as llama.cpp's plain labels): rel ≤ 1e-2;
// - q8_0 / q4_K_M loose labels: ≤ 0.35 absolute at the last position;
// - stories260K free-running greedy equals the reference; random-weight models by teacher forcing.
// The GPU's default KV cache is f16 (llama.cpp's; rocky run / verify / bench / serve): every
// tight case also runs with it, at the f16 KV tolerance rel ≤ 1e-2 (k_f16_kv); the f32-KV cases
// keep 1e-3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "model/harness.hpp"
#include "vk_test_util.hpp"

namespace rocky::test {
namespace {

// A session's handle on one of the binary's shared validated backends (vk_test_util.hpp), so the
// pipelines are compiled once, not once per session; the session's weights are released when it
// ends (weights are keyed by TensorInfo address, which a later model may reuse).
class BorrowedVulkan final : public backend::Backend {
 public:
  explicit BorrowedVulkan(vulkan::VulkanBackend& b) : b_(b) {}
  ~BorrowedVulkan() override { b_.release_weights(); }
  BorrowedVulkan(const BorrowedVulkan&) = delete;
  BorrowedVulkan& operator=(const BorrowedVulkan&) = delete;
  std::string name() const override { return b_.name(); }
  void load_weights(std::span<const gguf::TensorInfo* const> w) override { b_.load_weights(w); }
  std::unique_ptr<backend::Context> make_context(const backend::ContextOptions& o) override {
    return b_.make_context(o);
  }
  backend::BackendStats stats() const override { return b_.stats(); }
  const vulkan::VulkanBackend& vk() const { return b_; }

 private:
  vulkan::VulkanBackend& b_;
};

// Sessions on the shared validated backend with the given KV type; after each session, zero
// validation messages so far.
BackendSpec vk_spec(bool kv_f16, int32_t n_ubatch, vulkan::ops::MatmulPath mm = vulkan::ops::MatmulPath::BASIC) {
  BackendSpec b;
  b.name = std::string("vulkan kv ") + (kv_f16 ? "f16" : "f32") + " -ub " + std::to_string(n_ubatch) +
           (mm == vulkan::ops::MatmulPath::AUTO ? " matmul auto" : "");
  b.make = [kv_f16, mm] {
    return std::unique_ptr<backend::Backend>(std::make_unique<BorrowedVulkan>(shared_backend(kv_f16, 0, false, mm)));
  };
  b.after = [](runtime::Session& s) {
    EXPECT_EQ(s.backend().stats().validation_errors, 0u) << "Vulkan validation errors";
  };
  b.n_ubatch = n_ubatch;
  return b;
}

// llama.cpp's plain labels ran with an f16 KV cache; `__kvf32_faoff` and the dequant labels with f32.
bool label_kv_f16(const std::string& label) {
  return label.find("kvf32") == std::string::npos && label != "llama-2-tiny-random";
}

constexpr double k_tight = 1e-3;
constexpr double k_f16_kv = 1e-2;  // rel, f16 KV cache (cmd_verify's default bound for it)

TEST(VulkanReference, Stories260KAllPositionsTight) {
  check_all_positions({"stories260K__kvf32_faoff", "stories260K.gguf"}, k_tight, vk_spec(false, 16));
}

bool teacher_forced(const TightCase& c) {
  return std::any_of(k_teacher_forced.begin(), k_teacher_forced.end(),
                     [&](const TightCase& t) { return std::string(t.label) == c.label; });
}

// Tight labels at the last position of every prompt, and (random-weight models) teacher forcing
// from the same prefill. -ub 7 for llama-2-tiny-random (smaller than the prompts and than the 31
// forced tokens); the synth models' ubatch loop is covered in LooseLabelsAbsAndTeacherForcing (on
// lavapipe small ubatches with every position's logits over qwen2's 151,936-entry vocab are slow).
TEST(VulkanReference, TightLabelsAndTeacherForcing) {
  const int32_t ubs[] = {7, 512, 512};
  for (size_t i = 0; i < k_tight_last.size(); ++i) {
    const auto& c = k_tight_last[i];
    if (teacher_forced(c)) {
      teacher_force(c, vk_spec(false, ubs[i % 3]), 1e-2f, k_tight, 0);
    } else {
      check_last(c, k_tight, 0, vk_spec(false, ubs[i % 3]));
    }
  }
}

// The same cases on the default f16 KV cache.
TEST(VulkanReference, TightLabelsAndTeacherForcingF16Kv) {
  const int32_t ubs[] = {7, 512, 512};
  for (size_t i = 0; i < k_tight_last.size(); ++i) {
    const auto& c = k_tight_last[i];
    if (teacher_forced(c)) {
      teacher_force(c, vk_spec(true, ubs[i % 3]), 1e-2f, k_f16_kv, 0);
    } else {
      check_last(c, k_f16_kv, 0, vk_spec(true, ubs[i % 3]));
    }
  }
}

TEST(VulkanReference, LooseLabelsRel) {
  for (const auto& c : k_loose_rel) check_last(c, 1e-2, 0, vk_spec(label_kv_f16(c.label), 16));
}

TEST(VulkanReference, LooseLabelsAbsAndTeacherForcing) {
  for (size_t i = 0; i < k_loose_abs.size(); ++i) {
    const auto& c = k_loose_abs[i];
    const BackendSpec b = vk_spec(label_kv_f16(c.label), i % 2 ? 5 : 512);  // q8_0 (teacher forced): 512
    if (teacher_forced(c)) {
      teacher_force(c, b, 1e-2f, 0, 0.35);
    } else {
      check_last(c, 0, 0.35, b);
    }
  }
}

// Every teacher-forced model is covered by one of the two tests above.
TEST(VulkanReference, TeacherForcedCasesAllCovered) {
  for (const auto& t : k_teacher_forced) {
    const auto in = [&](const std::vector<TightCase>& v) {
      return std::any_of(v.begin(), v.end(), [&](const TightCase& c) { return std::string(c.label) == t.label; });
    };
    EXPECT_TRUE(in(k_tight_last) || in(k_loose_abs)) << t.label;
  }
}

// Turn-2 models (qwen3 through graph views, llama 3 with rope_freqs, qwen2 at 0.5B widths, q5_K):
// the f32 kernels at rel ≤ 1e-3 of the ideal labels (-ub 64 < the long prompts: the ubatch loop);
// the int8 path (--matmul auto) within 5e-2 of max|logit| with the reference's top-1 wherever the
// reference top-1/top-2 margin exceeds that bound.
TEST(VulkanReference, Turn2IdealLabelsF32) {
  for (const auto& c : k_turn2) check_last({c.ideal, c.model}, k_tight, 0, vk_spec(false, 64));
}

TEST(VulkanReference, Turn2IdealLabelsF32KernelsF16Kv) {
  for (const auto& c : k_turn2) check_last({c.ideal, c.model}, k_f16_kv, 0, vk_spec(true, 64));
}

// The int8 path on both KV types (f16: the default configuration of rocky run).
void turn2_int8(bool kv_f16) {
  constexpr double k_int8_rel = 5e-2;
  const BackendSpec b = vk_spec(kv_f16, 512, vulkan::ops::MatmulPath::AUTO);
  for (const auto& c : k_turn2) {
    auto m = model::Model::load(model_path(c.model));
    for (const auto& p : k_prompts) {
      auto r = load_ref(c.ideal, p);
      auto s = make_session(*m, b);
      const std::vector<float> got = s->eval(r.eval_tokens);
      // every prefill matmul on the int8 path (q5_0 / q5_K included): no f32 fallback.
      EXPECT_EQ(s->context().stats().matmul_path, "mmq") << c.model << " " << p;
      compare_last({c.ideal, c.model}, p, got, k_int8_rel, 0, b);
      const auto ref = load_f32(ref_path(c.ideal, p, ".cpu.last_logits.f32"));
      const int32_t top = runtime::argmax(ref);
      float second = -INFINITY, mx = 0;
      for (size_t v = 0; v < ref.size(); ++v) {
        mx = std::max(mx, std::fabs(ref[v]));
        if (static_cast<int32_t>(v) != top) second = std::max(second, ref[v]);
      }
      if (ref[static_cast<size_t>(top)] - second > k_int8_rel * mx) {
        EXPECT_EQ(runtime::argmax(got), top) << c.ideal << " " << p;
      }
      b.after(*s);
    }
  }
}

// qwen35 (hybrid linear attention): f32 kernels with an f32 KV cache against the ideal label
// (rel ≤ 1e-3) with teacher forcing, so the recurrent states go through ubatches of 64 (p2: 4) and
// 31 replayed decode steps; the int8 path with the f16 KV cache (rocky run's default) within the
// README's 1.35 absolute for 8-bit activation blocks on this file, measured from the ideal (as
// turn2_int8; llama.cpp's own int8 CPU label is 0.89–1.17 from it, and 1.43 from ours on p1: two
// independent roundings), with the ideal's top-1 wherever its margin exceeds twice our distance.
TEST(VulkanReference, Qwen35IdealF32AndTeacherForcing) {
  teacher_force({"synth-qwen35-q4_k_m-dequant-f32__kvf32_faoff", "synth-qwen35-q4_k_m.gguf"}, vk_spec(false, 64), 1e-2f,
                k_tight, 0);
}

TEST(VulkanReference, Qwen35Int8F16Kv) {
  const BackendSpec b = vk_spec(true, 512, vulkan::ops::MatmulPath::AUTO);
  const TightCase quant{"synth-qwen35-q4_k_m__kvf32_faoff", "synth-qwen35-q4_k_m.gguf"};
  auto m = model::Model::load(model_path(quant.model));
  for (const auto& p : k_prompts) {
    auto s = make_session(*m, b);
    const std::vector<float> got = s->eval(load_ref(quant.label, p).eval_tokens);
    EXPECT_EQ(s->context().stats().matmul_path, "mmq") << p;
    compare_last({"synth-qwen35-q4_k_m-dequant-f32__kvf32_faoff", quant.model}, p, got, 0, 1.35, b);
    compare_last(quant, p, got, 0, 0, b);  // printed only
    const auto ideal = load_f32(ref_path("synth-qwen35-q4_k_m-dequant-f32__kvf32_faoff", p, ".cpu.last_logits.f32"));
    const int32_t top = runtime::argmax(ideal);
    float second = -INFINITY;
    for (size_t v = 0; v < ideal.size(); ++v)
      if (static_cast<int32_t>(v) != top) second = std::max(second, ideal[v]);
    const double margin = ideal[static_cast<size_t>(top)] - second, dist = max_abs_diff(got, ideal);
    std::printf("[%s] qwen35 %s: top-1 margin %.3g, %.3g from the ideal\n", b.name.c_str(), p.c_str(), margin, dist);
    if (margin > 2 * dist) {
      EXPECT_EQ(runtime::argmax(got), top) << p;
    }
    b.after(*s);
  }
}

TEST(VulkanReference, Turn2IdealLabelsInt8) { turn2_int8(false); }
TEST(VulkanReference, Turn2IdealLabelsInt8F16Kv) { turn2_int8(true); }

TEST(VulkanReference, Stories260KAllPositionsF16Kv) {
  check_all_positions({"stories260K", "stories260K.gguf"}, k_f16_kv, vk_spec(true, 16));
}

TEST(VulkanReference, Stories260KGreedy) {
  for (const char* label : {"stories260K__kvf32_faoff", "stories260K"})
    check_greedy({label, "stories260K.gguf"}, vk_spec(label_kv_f16(label), 512));
}

}  // namespace
}  // namespace rocky::test
