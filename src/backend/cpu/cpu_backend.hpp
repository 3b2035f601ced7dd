// The CPU oracle backend: runs a graph::Graph node by node with the ops of ops.hpp.
// Weights are read straight from the GGUF mapping (f32 used in place; other types dequantized in
// row chunks per product), so the backend itself holds no copy. Each context: an f32 KV cache, per
// layer K and V [n_embd_kv, n_ctx · n_seq] (sequence s: columns s · n_ctx ..), and one host activation arena laid out by the plan
// (graph/planner.hpp).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "backend/backend.hpp"

namespace rocky::backend::cpu {

class CpuBackend;

class CpuContext final : public Context {
 public:
  CpuContext(CpuBackend& be, const ContextOptions& o);
  ~CpuContext() override;
  CpuContext(const CpuContext&) = delete;
  CpuContext& operator=(const CpuContext&) = delete;

  void reset() override;
  void compute(const graph::Graph& g, const graph::Plan& p, std::span<const int32_t> tokens,
               std::span<float> logits) override;
  std::vector<float> read_node(const graph::Graph& g, const graph::Plan& p, int32_t node) override;
  ContextStats stats() const override;
  void reset_host_timing() override {}
  const graph::KvShape& kv() const override { return kv_; }
  KvType kv_type() const override { return KvType::F32; }
  uint64_t kv_export_bytes(int32_t n) const override;
  void export_kv(int32_t p0, int32_t n, std::span<uint8_t> dst, int32_t seq = 0) override;
  void import_kv(int32_t p0, int32_t n, std::span<const uint8_t> src, int32_t seq = 0) override;
  void export_state(std::span<const int32_t> layers, std::span<uint8_t> dst) override;
  void import_state(std::span<const int32_t> layers, std::span<const uint8_t> src) override;

 private:
  float* at(const graph::Plan& p, int32_t node);
  void note_memory();
  void check_kv_range(const char* what, int32_t p0, int32_t n, size_t bytes, int32_t seq) const;
  void check_state_layers(const char* what, std::span<const int32_t> layers, size_t bytes) const;

  CpuBackend& be_;
  graph::KvShape kv_;
  int32_t n_seq_ = 1;                                  // sequence s owns cells [s · n_ctx, (s + 1) · n_ctx)
  std::vector<std::vector<float>> k_cache_, v_cache_;  // per layer [n_embd_kv · kv_.cells(l) · n_seq]
  // recurrent state per layer (hybrid models; empty otherwise), sequence 0: [kv.conv_state]
  // and [kv.ssm_state] floats (graph.hpp SSM_CONV / GATED_DELTA layouts).
  std::vector<std::vector<float>> conv_state_, ssm_state_;
  std::vector<float> arena_;                 // plan.arena_bytes / 4 floats
  uint64_t kv_bytes_ = 0, arena_bytes_ = 0;  // as counted in the backend's totals
};

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  // Checks every weight is computable (rocky::Error naming the tensor and type otherwise).
  void load_weights(std::span<const gguf::TensorInfo* const> weights) override;
  std::unique_ptr<Context> make_context(const ContextOptions& o) override;
  BackendStats stats() const override;

 private:
  friend class CpuContext;
  void account(int64_t d_kv, int64_t d_arena);  // host memory of the contexts, by kind
  std::atomic<uint64_t> kv_{0}, arena_{0}, peak_{0};
};

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace rocky::backend::cpu
