// Helpers for the Vulkan tests: random weights of every type (with naive f64 dequantized copies),
// one-region-per-node plans, NMSE, and shared backends created with validation + synchronization
// validation on (every test asserts zero validation errors).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/vulkan/vulkan_backend.hpp"
#include "tune/tile.hpp"
#include "graph/graph.hpp"
#include "graph/planner.hpp"
#include "quant/quant.hpp"
#include "ref_dequant.hpp"

namespace rocky::test {

// A weight tensor living in host memory, described by a gguf::TensorInfo as if from a file.
struct HostWeight {
  gguf::TensorInfo info;
  std::vector<uint8_t> bytes;
  std::vector<double> deq;  // [rows][ne0], f64 reference values
  double at(int64_t row, int64_t k) const {
    return deq[static_cast<size_t>(row * static_cast<int64_t>(info.ne[0]) + k)];
  }
};

inline std::unique_ptr<HostWeight> make_weight(DType t, int64_t ne0, int64_t rows, std::mt19937& rng,
                                               const std::string& name) {
  auto w = std::make_unique<HostWeight>();
  const DTypeInfo& di = dtype_info(t);
  const uint64_t rb = row_bytes(t, static_cast<uint64_t>(ne0));
  w->bytes.resize(rb * static_cast<uint64_t>(rows));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), scale(0.002f, 0.03f);
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t n = ne0 * rows;
  if (t == DType::F32) {
    for (int64_t i = 0; i < n; ++i) {
      float f = u(rng);
      std::memcpy(&w->bytes[static_cast<size_t>(4 * i)], &f, 4);
    }
  } else if (t == DType::F16 || t == DType::BF16) {
    for (int64_t i = 0; i < n; ++i) {
      float f = u(rng);
      uint16_t h;
      if (t == DType::F16) {
        h = ref_to_f16(f);
      } else {
        uint32_t x;
        std::memcpy(&x, &f, 4);
        h = static_cast<uint16_t>(x >> 16);
      }
      std::memcpy(&w->bytes[static_cast<size_t>(2 * i)], &h, 2);
    }
  } else {
    for (auto& b : w->bytes) b = static_cast<uint8_t>(byte(rng));
    const auto fields = f16_fields(t);
    for (size_t blk = 0; blk < w->bytes.size() / di.block_bytes; ++blk) {
      for (int f : fields) {
        uint16_t h = ref_to_f16(scale(rng) * (u(rng) < 0 && f == 0 ? -1.0f : 1.0f));
        std::memcpy(&w->bytes[blk * di.block_bytes + static_cast<size_t>(f)], &h, 2);
      }
    }
  }
  // Reference values: rocky_quant's dequantize_row (bit-exact with ggml; cross-checked against the
  // independent ref_dequant_row in test_vulkan_device).
  w->deq.resize(static_cast<size_t>(n));
  std::vector<float> row(static_cast<size_t>(ne0));
  for (int64_t r = 0; r < rows; ++r) {
    quant::dequantize_row(t, w->bytes.data() + static_cast<uint64_t>(r) * rb, row.data(), ne0);
    std::copy(row.begin(), row.end(), w->deq.begin() + r * ne0);
  }
  w->info.name = name;
  w->info.type = t;
  w->info.n_dims = 2;
  w->info.ne = {static_cast<uint64_t>(ne0), static_cast<uint64_t>(rows), 1, 1};
  w->info.n_elements = static_cast<uint64_t>(n);
  w->info.n_bytes = w->bytes.size();
  w->info.data = w->bytes.data();
  return w;
}

// Every node with an output gets its own 256-aligned region (as plan_arena(reuse = false)).
inline graph::Plan own_plan(const graph::Graph& g) {
  graph::Plan p;
  uint64_t off = 0;
  for (const auto& n : g.nodes) {
    if (n.ne0 == 0 || n.ne1 == 0) {
      p.offset.push_back(graph::k_no_offset);
      continue;
    }
    p.offset.push_back(off);
    off += (n.out_bytes() + 255) / 256 * 256;
  }
  p.arena_bytes = off;
  return p;
}

// Σ(got − ref)² / Σ ref² (normalised mean squared error, as llama.cpp's test-backend-ops).
inline double nmse(const std::vector<float>& got, const std::vector<double>& ref) {
  EXPECT_EQ(got.size(), ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < std::min(got.size(), ref.size()); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den == 0 ? num : num / den;
}

using BackendKey = std::tuple<bool, uint64_t, bool, vulkan::ops::MatmulPath>;
inline std::map<BackendKey, std::unique_ptr<vulkan::VulkanBackend>>& shared_backends() {
  static std::map<BackendKey, std::unique_ptr<vulkan::VulkanBackend>> all;
  return all;
}

// Destroys the shared backends after the last test, before static destruction (the Vulkan loader
// and layers must still be alive when the instance goes).
struct SharedBackendsEnv : ::testing::Environment {
  void TearDown() override { shared_backends().clear(); }
};
inline ::testing::Environment* const k_shared_backends_env = ::testing::AddGlobalTestEnvironment(new SharedBackendsEnv);

// A backend per configuration, created once per test binary with validation on. gpu_tile: the
// matmul tile GPUs get (the generic profile's `matmul`), so lavapipe tests it too.
// matmul: the prefill kernels. The Vulkan tests compare with f32-exact references at rel ≤ 1e-3 /
// NMSE ≤ 1e-6, so they pin BASIC (matmul.comp); the int8 default (VulkanOptions{}.matmul) is
// checked against its own 0.35-absolute bound in tests/fast/test_fast_model.cpp.
inline vulkan::VulkanBackend& shared_backend(bool kv_f16 = false, uint64_t max_binding = 0, bool gpu_tile = false,
                                             vulkan::ops::MatmulPath matmul = vulkan::ops::MatmulPath::BASIC) {
  auto& b = shared_backends()[{kv_f16, max_binding, gpu_tile, matmul}];
  if (!b) {
    vulkan::VulkanOptions o;
    o.validation = true;
    o.kv_f16 = kv_f16;
    o.max_binding = max_binding;
    o.persist_pipeline_cache = false;
    o.matmul = matmul;
    if (gpu_tile) o.tile = tune::builtin_profile("generic").matmul;
    b = std::make_unique<vulkan::VulkanBackend>(o);
  }
  return *b;
}

inline graph::Node get_rows_node(const HostWeight& w, int32_t n_tokens, const std::string& name) {
  graph::Node n;
  n.op = graph::Op::GET_ROWS;
  n.name = name;
  n.ne0 = static_cast<int64_t>(w.info.ne[0]);
  n.ne1 = n_tokens;
  n.weight = &w.info;
  return n;
}

// The tail of an attention test graph: store k and v (node ids) into layer 0 of the KV cache, then
// attend q over it (causal, GQA n_head / n_kv, head_dim hd); returns the ATTENTION node's id.
inline int32_t add_kv_store_attention(graph::Graph& g, int32_t q, int32_t k, int32_t v, int32_t hd, int32_t n_head,
                                      int32_t n_kv, float scale) {
  graph::Node ks;
  ks.op = graph::Op::KV_STORE;
  ks.name = "k_store";
  ks.src[0] = k;
  ks.layer = 0;
  ks.kv = 0;
  const int32_t iks = g.add(ks);
  graph::Node vs = ks;
  vs.name = "v_store";
  vs.src[0] = v;
  vs.kv = 1;
  const int32_t ivs = g.add(vs);
  graph::Node at;
  at.op = graph::Op::ATTENTION;
  at.name = "attn";
  at.ne0 = int64_t(hd) * n_head;
  at.ne1 = g.n_tokens;
  at.src = {q, iks, ivs};
  at.layer = 0;
  at.attn = {hd, n_head, n_kv, scale};
  return g.add(at);
}

}  // namespace rocky::test
