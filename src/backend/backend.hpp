// The backend contract: what the runtime asks of a device (CPU oracle, Vulkan).
//
// Lifecycle: construct → load_weights() once → init_kv() once per session → compute() per ubatch.
// A backend owns its copy (or mapping) of the weights, its KV cache and its activation arena.
// The graph (graph.hpp) and plan (planner.hpp) are built by the runtime and are identical for all
// backends, so any node can be compared across backends.
//
// Errors: rocky::Error (OutOfMemoryError for allocations) with a message naming the allocation and
// the fix; a lost device is an Error too (never a hang).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "graph/planner.hpp"

namespace rocky::backend {

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu", "vulkan:0 (llvmpipe …)" — for logs and `rocky bench`'s backend column.
  virtual std::string name() const = 0;

  // Make every weight the model's graphs read available to the device (upload once; on UMA map).
  virtual void load_weights(std::span<const gguf::TensorInfo* const> weights) = 0;

  // Allocate (or reallocate) the KV cache and clear it. KV element type is the backend's choice
  // (the CPU oracle uses f32).
  virtual void init_kv(const graph::KvShape& kv) = 0;

  // Run one ubatch. tokens.size() == g.n_tokens; the logits node (g.output, [n_vocab, n_out], f32)
  // is copied to `logits` (size n_vocab · n_out, column-major as in the arena: token-major rows).
  // When g.output == -1 (no logits wanted) `logits` is empty and nothing is copied.
  virtual void compute(const graph::Graph& g, const graph::Plan& p, std::span<const int32_t> tokens,
                       std::span<float> logits) = 0;

  // After compute(): a node's output as f32 [ne0 · ne1] (for verify --bisect). Only meaningful for
  // plans made with reuse = false, or for nodes whose arena region has not been reused since.
  virtual std::vector<float> read_node(const graph::Graph& g, const graph::Plan& p, int32_t node) = 0;

  // --- Moving one sequence's KV cells (the prefix cache, runtime/prefix_cache.hpp) ---
  // The cache holds, per layer, K and V as [n_embd_kv, n_ctx] of kv_type() elements (position-
  // major: the n_embd_kv values of one position are contiguous). The bytes of positions
  // [p0, p0 + n) are, for each layer l = 0 .. n_layer-1 in order, K then V, each n · n_embd_kv
  // elements as the cache holds them: kv_bytes(n) = n_layer · 2 · n · n_embd_kv · element size.
  // export_kv copies them to host memory, import_kv writes them back at the same positions (a
  // copy of the very bits: a following compute() gives the logits the original cells gave).
  // Both need init_kv() first and p0 + n ≤ n_ctx (else rocky::Error); they wait for completion.
  enum class KvType : uint32_t { F32 = 0, F16 = 1 };
  virtual KvType kv_type() const = 0;
  virtual void export_kv(int32_t p0, int32_t n, std::span<uint8_t> dst) = 0;
  virtual void import_kv(int32_t p0, int32_t n, std::span<const uint8_t> src) = 0;
  // Bytes export_kv writes for n positions (0 before init_kv).
  virtual uint64_t kv_bytes(int32_t n) const = 0;

  // Peak device memory allocated so far, in bytes (weights + KV + arena + staging).
  virtual uint64_t device_memory_bytes() const = 0;
};

}  // namespace rocky::backend
