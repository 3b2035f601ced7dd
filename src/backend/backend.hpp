// The backend contract: what the runtime asks of a device (CPU oracle, Vulkan).
//
// Two objects, as llama.cpp splits llama_model from llama_context:
//   - a Backend holds the device and the weights: load_weights() uploads (or maps) each tensor once;
//     after loading, the weights are only read, so any number of contexts share them;
//   - a Context (Backend::make_context) holds what one stream of ubatches needs: the KV cache of
//     its n_seq sequences, its activation arena and I/O buffers, its command buffers; compute()
//     runs one ubatch, read_node() reads a node back. A second context costs its KV cache and arena,
//     never a second copy of the weights.
//
// Lifecycle: construct the backend → load_weights() (before any context computes) → make_context()
// per sequence stream → compute() per ubatch. A context must be destroyed before its backend.
// Threads: different contexts of one backend may compute from different threads at once (each has
// its own command buffers and buffers; the backend's shared pipeline cache, allocator and queue are
// guarded); one context is used by one thread at a time; load_weights() is not concurrent with
// compute().
//
// The graph (graph.hpp) and plan (planner.hpp) are built by the runtime and are identical for all
// backends, so any node can be compared across backends.
//
// Errors: rocky::Error (OutOfMemoryError for allocations) with a message naming the allocation and
// the fix; a lost device is an Error too (never a hang).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "graph/planner.hpp"

namespace rocky::backend {

// Device memory in bytes, by what it holds.
struct MemoryStats {
  uint64_t weights = 0;  // weight tensors and their load-time repacks (shared by every context)
  uint64_t kv = 0;       // KV caches
  uint64_t arena = 0;    // activation arenas (graph::Plan::arena_bytes, grown to the largest plan)
  uint64_t other = 0;    // the rest: int8-path q8_1 activation copies, token ids, logits readback, staging
  uint64_t total() const { return weights + kv + arena + other; }
};

// Host wall time spent in Context::compute(), accumulated over calls (Context::reset_host_timing()
// clears it): where a decode step's time goes besides the GPU (rocky bench reports it per token).
// Zero on the CPU backend.
struct HostTiming {
  double setup_ms = 0;        // token upload, buffer checks, q8_1 planning
  double record_ms = 0;       // recording every dispatch (pipeline lookup, descriptors, barriers)
  double submit_wait_ms = 0;  // waiting for fences: while recording, and after the last submit (GPU time)
  double readback_ms = 0;     // logits to host memory after the fence
  uint64_t computes = 0, dispatches = 0;
  uint64_t replays = 0;  // computes that submitted a kept command buffer again (no recording; Vulkan decode)
};

// GPU time of one dispatch of the last profiled compute().
struct OpTime {
  std::string label;  // node name ("blk.3.ffn_up") or op
  double ms = 0;
};

struct ContextStats {
  MemoryStats memory;       // this context's buffers now (weights = 0: they belong to the backend)
  HostTiming host;          // since reset_host_timing()
  std::vector<OpTime> ops;  // per dispatch of the last compute() (only when the backend profiles)
  // Kernels the last compute()'s prefill matmuls used: "mmq" (int8 path: q8_1 activations ×
  // mul_mmq), "mm", "basic" (f32 kernels), "cpu" (the oracle); "mmv" for a ubatch of 2 … 8
  // tokens whose matmuls ran as the multi-column decode matvec; mixes joined with "+".
  std::string matmul_path;
  uint32_t int8_matmuls = 0;     // matmuls of the last compute() on the int8 path
  uint32_t fused_epilogues = 0;  // of those, the ones that added their bias / residual themselves
  uint32_t dispatches = 0;       // GPU dispatches of the last compute()
};

struct BackendStats {
  std::string kind = "cpu";    // "cpu" (the oracle: host memory) | "vulkan"
  MemoryStats memory;          // allocated now: the weights + every live context's buffers
  uint64_t peak_bytes = 0;     // the most ever allocated at once (all kinds)
  std::string matmul = "cpu";  // the prefill matmul option in effect: auto | mmq | mm | basic | cpu
  bool validation = false;     // the Vulkan validation layer is on
  uint64_t validation_errors = 0;
  std::string tiles;              // the tuning profile and the tiles its kernels use ("" on the CPU)
  uint64_t pipelines = 0;         // compute pipelines created so far (0 on the CPU)
  double pipeline_create_ms = 0;  // wall time spent creating them (ms)
};

// Element type of a context's KV cache.
enum class KvType : uint32_t { F32 = 0, F16 = 1 };

struct ContextOptions {
  graph::KvShape kv;  // per sequence: layers, K/V width, positions (n_ctx)
  // Sequences whose KV caches this context holds: the cache has n_seq · n_ctx cells,
  // sequence s owns [s · n_ctx, (s + 1) · n_ctx); a graph with per-token graph::Graph::seq / pos
  // runs tokens of several of them in one ubatch (without: sequence 0 at n_past). export_kv /
  // import_kv address one sequence's cells (`seq`, default 0).
  int32_t n_seq = 1;
};

class Context {
 public:
  virtual ~Context() = default;

  // Zero the KV cache in place (n_past restarts at 0 in the runtime).
  virtual void reset() = 0;

  // Run one ubatch. tokens.size() == g.n_tokens; g.kv must equal this context's KV shape. The logits
  // node (g.output, [n_vocab, n_out], f32) is copied to `logits` (size n_vocab · n_out, column-major
  // as in the arena: token-major rows). When g.output == -1 (no logits wanted) `logits` is empty and
  // nothing is copied.
  virtual void compute(const graph::Graph& g, const graph::Plan& p, std::span<const int32_t> tokens,
                       std::span<float> logits) = 0;

  // After compute(): a node's output as f32 [ne0 · ne1] (for verify --bisect). Only meaningful for
  // plans made with reuse = false, or for nodes whose arena region has not been reused since.
  virtual std::vector<float> read_node(const graph::Graph& g, const graph::Plan& p, int32_t node) = 0;

  // False for a node of the last compute() whose f32 output was never written (a fused producer or
  // epilogue wrote its consumer's input instead); read_node() of such a node is an error.
  virtual bool node_written(int32_t node) const { return node >= 0; }

  virtual ContextStats stats() const = 0;
  virtual void reset_host_timing() = 0;
  // GPU time of this context's submitted command buffers since it was made (ms; from
  // timestamps at each one's start and end). 0 on the CPU or where the queue has no timestamps.
  virtual double gpu_ms() const { return 0; }
  virtual const graph::KvShape& kv() const = 0;

  // --- Moving one sequence's KV cells (the prefix cache, runtime/prefix_cache.hpp) ---
  // The cache holds, per layer, K and V as [n_embd_kv, n_ctx] of kv_type() elements (position-
  // major: the n_embd_kv values of one position are contiguous). The bytes of positions
  // [p0, p0 + n) are, for each layer l = 0 .. n_layer-1 in order, K then V, each n · n_embd_kv
  // elements as the cache holds them: kv_export_bytes(n) = n_layer · 2 · n · n_embd_kv · element
  // size. export_kv copies them to host memory, import_kv writes them back at the same positions
  // (the very bits: a following compute() gives the logits the original cells gave). p0 + n must
  // be ≤ n_ctx, seq in [0, n_seq) and the span exactly kv_export_bytes(n) long (else rocky::Error);
  // both wait for completion. The positions are those of sequence `seq` (its cells start at
  // seq · n_ctx), so a block exported from one sequence imports into any other.
  virtual KvType kv_type() const = 0;
  virtual uint64_t kv_export_bytes(int32_t n) const = 0;
  virtual void export_kv(int32_t p0, int32_t n, std::span<uint8_t> dst, int32_t seq = 0) = 0;
  virtual void import_kv(int32_t p0, int32_t n, std::span<const uint8_t> src, int32_t seq = 0) = 0;

  // --- Sequence 0's recurrent state (hybrid models: the prefix cache's state checkpoints) ---
  // For each layer of `layers` (ascending, < n_layer) in order: its conv window (kv().conv_state
  // f32, graph.hpp's SSM_CONV layout), then its delta-rule state (kv().ssm_state f32, GATED_DELTA
  // layout), as the context holds them: state_export_bytes(k) = k · (conv_state + ssm_state) · 4
  // bytes. import_state writes the very bits back (a following compute() continues exactly as
  // the exporting context would). A context without recurrent state, a layer out of range or a
  // span of another length is a rocky::Error; both wait for completion.
  uint64_t state_export_bytes(size_t n_layers) const {
    return kv().recurrent() ? uint64_t(n_layers) * uint64_t(kv().conv_state + kv().ssm_state) * 4 : 0;
  }
  virtual void export_state(std::span<const int32_t> layers, std::span<uint8_t> dst) = 0;
  virtual void import_state(std::span<const int32_t> layers, std::span<const uint8_t> src) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu", "vulkan:0 (llvmpipe …)" — for logs and `rocky bench`'s backend column.
  virtual std::string name() const = 0;

  // Make every weight the model's graphs read available to the device (upload once; on UMA map).
  // Tensors already loaded are skipped, so every session over one backend may call it.
  virtual void load_weights(std::span<const gguf::TensorInfo* const> weights) = 0;

  // A new context with its own KV cache (zeroed) for o.n_seq sequences of o.kv; OutOfMemoryError
  // naming the allocation when it does not fit. KV element type is the backend's choice (the CPU
  // oracle uses f32).
  virtual std::unique_ptr<Context> make_context(const ContextOptions& o) = 0;

  virtual BackendStats stats() const = 0;

  // Peak device memory allocated so far, in bytes (weights + KV + arena + staging) = stats().peak_bytes.
  uint64_t device_memory_bytes() const { return stats().peak_bytes; }

  // The most tokens one ubatch shaped like `g` (a graph of g.n_tokens ≥ 2 tokens, so that per-token
  // nodes can be told from fixed ones) may hold on this device: on Vulkan every node output must
  // fit one storage binding. `why` (optional) names the limiting node. Default: no limit.
  virtual int64_t max_ubatch_tokens(const graph::Graph& g, std::string* why) const {
    (void)g;
    (void)why;
    return INT64_MAX;
  }

  // The most tokens a batched step may carry when a sequence brings several of them (speculative
  // verification) beside other sequences' tokens, with every token's logits those of the same
  // tokens in a step of their own; 1: such a sequence's tokens go into a step of their own.
  // Default: no limit.
  virtual int64_t mixed_verify_tokens() const { return INT64_MAX; }
};

// "weights 12.3 MiB + KV 4.0 MiB + arena 1.5 MiB = 17.8 MiB" (what `rocky run` / `verify` print).
inline std::string memory_summary(uint64_t weights, uint64_t kv, uint64_t arena) {
  auto mib = [](uint64_t b) { return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1024.0 * 1024.0)); };
  return fmt::format("weights {} + KV {} + arena {} = {}", mib(weights), mib(kv), mib(arena),
                     mib(weights + kv + arena));
}

}  // namespace rocky::backend
