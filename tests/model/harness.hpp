// End-to-end harness shared by the model tests of every backend (the CPU oracle here, the Vulkan
// backend in tests/vulkan): sessions built by a backend factory, the reference case tables,
// all-position / last-position checks, free-running greedy and teacher forcing against
// llama.cpp's reference outputs (../shared/reference/README.md).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "backend/cpu/cpu_backend.hpp"
#include "model/model.hpp"
#include "model/ref.hpp"
#include "runtime/sampler.hpp"
#include "runtime/session.hpp"

namespace rocky::test {

// How a check gets its backend. `make` builds a fresh backend for each session; `after` runs once
// a session's evals are done (the Vulkan tests assert zero validation messages there).
struct BackendSpec {
  std::string name = "cpu";
  std::function<std::unique_ptr<backend::Backend>()> make = [] { return backend::cpu::make_cpu_backend(); };
  std::function<void(runtime::Session&)> after = [](runtime::Session&) {};
  int32_t n_ubatch = 512;  // -ub: smaller than the prompt exercises the Session's ubatch loop
};

inline const BackendSpec& cpu_spec() {
  static const BackendSpec s;
  return s;
}

inline std::unique_ptr<runtime::Session> make_session(const model::Model& m, const BackendSpec& b,
                                                      int32_t n_ctx = 1024) {
  return std::make_unique<runtime::Session>(m, b.make(), runtime::SessionOptions{n_ctx, b.n_ubatch});
}

inline std::unique_ptr<runtime::Session> make_session(const model::Model& m, int32_t n_ctx = 1024, int32_t n_ub = 512) {
  return std::make_unique<runtime::Session>(m, backend::cpu::make_cpu_backend(), runtime::SessionOptions{n_ctx, n_ub});
}

inline std::string model_path(const std::string& file) {
  return shared_path("reference/models/" + (file.rfind("synth-", 0) == 0 ? "synth/" + file : file));
}

// A reference label and the model file run against it.
struct TightCase {
  const char* label;
  const char* model;
};

// Case tables (reference/README.md). Tight labels at the last position: llama-2-tiny-random (f16
// weights) and the q4_K_M synth models run against their dequant-f32 labels.
inline const std::vector<TightCase> k_tight_last = {
    {"llama-2-tiny-random", "llama-2-tiny-random.gguf"},
    {"synth-llama-q4_k_m-dequant-f32__kvf32_faoff", "synth-llama-q4_k_m.gguf"},
    {"synth-qwen2-q4_k_m-dequant-f32__kvf32_faoff", "synth-qwen2-q4_k_m.gguf"},
};
// Loose labels held to rel ≤ 1e-2 (stories260K with f16 KV / f16 weights).
inline const std::vector<TightCase> k_loose_rel = {
    {"stories260K", "stories260K.gguf"},
    {"stories260K-f16", "stories260K-f16.gguf"},
};
// Loose labels held to ≤ 0.35 absolute at the last position.
inline const std::vector<TightCase> k_loose_abs = {
    {"synth-llama-q8_0", "synth-llama-q8_0.gguf"},
    {"synth-llama-q4_k_m", "synth-llama-q4_k_m.gguf"},
    {"synth-llama-q4_k_m__kvf32_faoff", "synth-llama-q4_k_m.gguf"},
    {"synth-qwen2-q4_k_m", "synth-qwen2-q4_k_m.gguf"},
    {"synth-qwen2-q4_k_m__kvf32_faoff", "synth-qwen2-q4_k_m.gguf"},
};
// Random-weight models compared by teacher forcing.
inline const std::vector<TightCase> k_teacher_forced = {
    {"llama-2-tiny-random", "llama-2-tiny-random.gguf"},
    {"synth-llama-q4_k_m-dequant-f32__kvf32_faoff", "synth-llama-q4_k_m.gguf"},
    {"synth-qwen2-q4_k_m-dequant-f32__kvf32_faoff", "synth-qwen2-q4_k_m.gguf"},
    {"synth-llama-q8_0", "synth-llama-q8_0.gguf"},
};

// Turn-2 models (reference/README.md "Turn-2 labels"): the quantized file against its tight
// dequant-f32 ideal label (rel ≤ 1e-3 on the CPU), and against its loose quantized label (≤ 0.45
// absolute at the last position).
struct Turn2Case {
  const char* ideal;  // tight label
  const char* quant;  // loose label
  const char* model;
};
inline const std::vector<Turn2Case> k_turn2 = {
    {"synth-qwen3-q4_k_m-dequant-f32__kvf32_faoff", "synth-qwen3-q4_k_m__kvf32_faoff", "synth-qwen3-q4_k_m.gguf"},
    {"synth-llama3-q4_k_m-dequant-f32__kvf32_faoff", "synth-llama3-q4_k_m__kvf32_faoff", "synth-llama3-q4_k_m.gguf"},
    {"synth-qwen2-0.5b-shape-q4_k_m-dequant-f32__kvf32_faoff", "synth-qwen2-0.5b-shape-q4_k_m__kvf32_faoff",
     "synth-qwen2-0.5b-shape-q4_k_m.gguf"},
    {"synth-llama-q5_k_m-dequant-f32__kvf32_faoff", "synth-llama-q5_k_m__kvf32_faoff", "synth-llama-q5_k_m.gguf"},
    // gemma3: sliding window 64 on layers 0–4 (p2 / p3 cross it), global layer 5.
    {"synth-gemma3-q4_k_m-dequant-f32__kvf32_faoff", "synth-gemma3-q4_k_m__kvf32_faoff", "synth-gemma3-q4_k_m.gguf"},
};
inline constexpr double k_turn2_loose_abs = 0.45;

// Every prompt position of every prompt against `<prompt>.cpu.all_logits.f32` (stories260K labels).
inline void check_all_positions(const TightCase& c, double tol_rel, const BackendSpec& b = cpu_spec()) {
  auto m = model::Model::load(model_path(c.model));
  for (const auto& p : k_prompts) {
    auto r = load_ref(c.label, p);
    auto ref = load_f32(ref_path(c.label, p, ".cpu.all_logits.f32"));
    ASSERT_EQ(ref.size(), r.eval_tokens.size() * static_cast<size_t>(r.n_vocab));
    auto s = make_session(*m, b);
    auto got = s->eval(r.eval_tokens, /*all_logits=*/true);
    ASSERT_EQ(got.size(), ref.size());
    double rel = rel_err(got, ref);
    EXPECT_LE(rel, tol_rel) << b.name << " " << c.label << " " << p;
    ::testing::Test::RecordProperty(b.name + "_rel_" + p, std::to_string(rel));
    std::printf("[%s] %s %s: rel %.3g over %zu positions\n", b.name.c_str(), c.label, p.c_str(), rel,
                r.eval_tokens.size());
    b.after(*s);
  }
}

// One prompt's last-position logits against `<prompt>.cpu.last_logits.f32`; a tolerance of 0 is
// not checked.
inline void compare_last(const TightCase& c, const std::string& p, const std::vector<float>& got, double tol_rel,
                         double tol_abs, const BackendSpec& b) {
  auto ref = load_f32(ref_path(c.label, p, ".cpu.last_logits.f32"));
  ASSERT_EQ(got.size(), ref.size()) << b.name << " " << c.label << " " << p;
  double rel = rel_err(got, ref), ab = max_abs_diff(got, ref);
  if (tol_rel > 0) {
    EXPECT_LE(rel, tol_rel) << b.name << " " << c.label << " " << p;
  }
  if (tol_abs > 0) {
    EXPECT_LE(ab, tol_abs) << b.name << " " << c.label << " " << p;
  }
  std::printf("[%s] %s %s: last position rel %.3g abs %.3g\n", b.name.c_str(), c.label, p.c_str(), rel, ab);
}

// The last prompt position of every prompt against `<prompt>.cpu.last_logits.f32`.
inline void check_last(const TightCase& c, double tol_rel, double tol_abs, const BackendSpec& b = cpu_spec()) {
  auto m = model::Model::load(model_path(c.model));
  for (const auto& p : k_prompts) {
    auto r = load_ref(c.label, p);
    ASSERT_EQ(m->hparams().n_vocab, r.n_vocab);
    auto s = make_session(*m, b);
    compare_last(c, p, s->eval(r.eval_tokens), tol_rel, tol_abs, b);
    b.after(*s);
  }
}

// Free-running greedy decode (one token per eval) equals llama.cpp's greedy_ids (stories260K).
inline void check_greedy(const TightCase& c, const BackendSpec& b = cpu_spec()) {
  auto m = model::Model::load(model_path(c.model));
  for (const auto& p : k_prompts) {
    auto r = load_ref(c.label, p);
    auto s = make_session(*m, b);
    auto logits = s->eval(r.eval_tokens);
    std::vector<int32_t> gen;
    for (size_t i = 0; i < r.greedy_ids.size(); ++i) {
      int32_t t = runtime::argmax(logits);
      gen.push_back(t);
      logits = s->eval(std::span<const int32_t>(&t, 1));
    }
    EXPECT_EQ(gen, r.greedy_ids) << b.name << " " << c.label << " " << p;
    b.after(*s);
  }
}

// Random-weight models: teacher forcing with the reference greedy ids; a different argmax counts
// only where our own top-1/top-2 margin exceeds margin_rel · max|logit|. Two evals per prompt:
// the prompt (last-position logits), then all forced tokens but the last in one ubatch with every
// position's logits (so logits are computed only where they are compared). With last_tol_rel or
// last_tol_abs > 0 the prompt's last-position logits are also compared as check_last does (one
// prefill for both checks: the Vulkan tests use this to stay fast on lavapipe).
inline void teacher_force(const TightCase& c, const BackendSpec& b = cpu_spec(), float margin_rel = 1e-2f,
                          double last_tol_rel = 0, double last_tol_abs = 0) {
  auto m = model::Model::load(model_path(c.model));
  for (const auto& p : k_prompts) {
    auto r = load_ref(c.label, p);
    auto s = make_session(*m, b);
    ASSERT_EQ(m->hparams().n_vocab, r.n_vocab);
    std::vector<float> all = s->eval(r.eval_tokens);
    if (last_tol_rel > 0 || last_tol_abs > 0) compare_last(c, p, all, last_tol_rel, last_tol_abs, b);
    auto rest = s->eval(std::span<const int32_t>(r.greedy_ids).first(r.greedy_ids.size() - 1), /*all_logits=*/true);
    all.insert(all.end(), rest.begin(), rest.end());
    const size_t nv = static_cast<size_t>(r.n_vocab);
    ASSERT_EQ(all.size(), r.greedy_ids.size() * nv);
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
      if (margin > margin_rel * mx) {
        EXPECT_EQ(top, r.greedy_ids[i]) << b.name << " " << c.label << " " << p << " step " << i << " margin "
                                        << margin;
        ++checked;
      } else {
        ++skipped;
      }
    }
    std::printf("[%s] %s %s: teacher forcing %d checked, %d near-ties skipped\n", b.name.c_str(), c.label, p.c_str(),
                checked, skipped);
    EXPECT_GT(checked, 16);
    b.after(*s);
  }
}

}  // namespace rocky::test
