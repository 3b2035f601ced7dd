// The CPU oracle backend: runs a graph::Graph node by node with the ops of ops.hpp.
// Weights are read straight from the GGUF mapping (f32 used in place; other types dequantized in
// row chunks per product). KV cache: f32, per layer K and V [n_embd_kv, n_ctx]. The activation
// arena is one host buffer laid out by the plan (graph/planner.hpp).
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.hpp"

namespace rocky::backend::cpu {

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  // Checks every weight is computable (rocky::Error naming the tensor and type otherwise).
  void load_weights(std::span<const gguf::TensorInfo* const> weights) override;
  void init_kv(const graph::KvShape& kv) override;
  void compute(const graph::Graph& g, const graph::Plan& p, std::span<const int32_t> tokens,
               std::span<float> logits) override;
  std::vector<float> read_node(const graph::Graph& g, const graph::Plan& p, int32_t node) override;
  uint64_t device_memory_bytes() const override { return peak_bytes_; }
  KvType kv_type() const override { return KvType::F32; }
  void export_kv(int32_t p0, int32_t n, std::span<uint8_t> dst) override;
  void import_kv(int32_t p0, int32_t n, std::span<const uint8_t> src) override;
  uint64_t kv_bytes(int32_t n) const override;

 private:
  float* at(const graph::Plan& p, int32_t node);
  void note_memory();
  void check_kv_range(const char* what, int32_t p0, int32_t n, size_t bytes) const;

  graph::KvShape kv_;
  std::vector<std::vector<float>> k_cache_, v_cache_;  // per layer [n_embd_kv · n_ctx]
  std::vector<float> arena_;                           // plan.arena_bytes / 4 floats
  uint64_t peak_bytes_ = 0;
};

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace rocky::backend::cpu
