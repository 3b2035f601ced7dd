// End-to-end harness shared by the model tests: sessions on the CPU oracle, last-position checks
// and teacher forcing against llama.cpp's reference outputs (reference/README.md).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "backend/cpu/cpu_backend.hpp"
#include "model/model.hpp"
#include "model/ref.hpp"
#include "runtime/sampler.hpp"
#include "runtime/session.hpp"

namespace rocky::test {

inline std::unique_ptr<runtime::Session> make_session(const model::Model& m, int32_t n_ctx = 1024, int32_t n_ub = 512) {
  return std::make_unique<runtime::Session>(m, backend::cpu::make_cpu_backend(), runtime::SessionOptions{n_ctx, n_ub});
}

inline std::string model_path(const std::string& file) {
  return shared_path("reference/models/" + (file.rfind("synth-", 0) == 0 ? "synth/" + file : file));
}

// Last-position tight comparisons: llama-2-tiny-random (f16 weights) and the q4_K_M synth models
// against their dequant-f32 labels.
struct TightCase {
  const char* label;
  const char* model;
};

inline void check_last(const TightCase& c, double tol_rel, double tol_abs) {
  auto m = model::Model::load(model_path(c.model));
  for (const auto& p : k_prompts) {
    auto r = load_ref(c.label, p);
    auto ref = load_f32(ref_path(c.label, p, ".cpu.last_logits.f32"));
    ASSERT_EQ(ref.size(), static_cast<size_t>(r.n_vocab));
    ASSERT_EQ(m->hparams().n_vocab, r.n_vocab);
    auto s = make_session(*m);
    auto got = s->eval(r.eval_tokens);
    double rel = rel_err(got, ref), ab = max_abs_diff(got, ref);
    if (tol_rel > 0) {
      EXPECT_LE(rel, tol_rel) << c.label << " " << p;
    }
    if (tol_abs > 0) {
      EXPECT_LE(ab, tol_abs) << c.label << " " << p;
    }
    std::printf("%s %s: rel %.3g abs %.3g (%zu tokens)\n", c.label, p.c_str(), rel, ab, r.eval_tokens.size());
  }
}

// Random-weight models: teacher forcing with the reference greedy ids; a different argmax counts
// only where our own top-1/top-2 margin exceeds 1e-2 · max|logit|.
inline void teacher_force(const char* label, const char* model_file) {
  auto m = model::Model::load(model_path(model_file));
  for (const auto& p : k_prompts) {
    auto r = load_ref(label, p);
    auto s = make_session(*m);
    // Logits only where needed: the prompt's last position, then every forced token but the last.
    std::vector<float> all = s->eval(r.eval_tokens);
    auto rest = s->eval(std::span<const int32_t>(r.greedy_ids).first(r.greedy_ids.size() - 1), /*all_logits=*/true);
    all.insert(all.end(), rest.begin(), rest.end());
    const size_t nv = static_cast<size_t>(r.n_vocab);
    int checked = 0, skipped = 0;
    for (size_t i = 0; i < r.greedy_ids.size(); ++i) {
      std::span<const float> row(all.data() + i * nv, nv);
      int32_t top = runtime::argmax(row);
      float mx = 0, second = -INFINITY;
      for (size_t v = 0; v < nv; ++v) {
        mx = std::max(mx, std::fabs(row[v]));
        if (static_cast<int32_t>(v) != top) second = std::max(second, row[v]);
      }
      const float margin = row[static_cast<size_t>(top)] - second;
      if (margin > 1e-2f * mx) {
        EXPECT_EQ(top, r.greedy_ids[i]) << label << " " << p << " step " << i << " margin " << margin;
        ++checked;
      } else {
        ++skipped;
      }
    }
    std::printf("%s %s: teacher forcing %d checked, %d near-ties skipped\n", label, p.c_str(), checked, skipped);
    EXPECT_GT(checked, 16);
  }
}

}  // namespace rocky::test
