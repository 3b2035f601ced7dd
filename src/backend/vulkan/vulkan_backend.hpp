// The Vulkan implementation of backend::Backend / backend::Context (backend/backend.hpp): runs a
// Graph + Plan on one device. The backend uploads the weights once; each context holds a KV cache,
// ONE activation arena buffer sized by the planner, and its own command buffers. Each compute()
// records the whole ubatch into one command buffer (recorder.hpp) and waits for it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "backend/vulkan/device.hpp"
#include "backend/vulkan/lab_options.hpp"
#include "backend/vulkan/memory.hpp"
#include "backend/vulkan/ops/matmul_fast.hpp"
#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/pipelines.hpp"
#include "backend/vulkan/recorder.hpp"

namespace rocky::vulkan {

struct VulkanOptions {
  uint32_t device = 0;          // index in `rocky devices`
  bool validation = false;      // validation layer + synchronization validation
  uint64_t max_binding = 0;     // --max-binding BYTES (0 = the device's maxStorageBufferRange)
  uint64_t memory_limit = 0;    // cap in bytes (0 = LabOptions::device_memory_limit, else none)
  uint64_t max_allocation = 0;  // one buffer's cap (0 = maxMemoryAllocationSize; tests: a small device)
  bool kv_f16 = false;          // f16 KV cache
  bool profile = false;         // per-dispatch GPU time (timings())
  bool persist_pipeline_cache = true;
  // Options that a tuning-profile field backs take k_auto (or an all-0 tile): the profile's value.
  static constexpr uint32_t k_auto = ~0u;
  ops::MatmulTile tile{};  // matmul.comp's tile; all 0: the profile's `matmul`
  // Prefill matmul kernels (ops::MatmulPath; CLI --matmul auto|mmq|mm|basic). The lab switch
  // ROCKY_SWITCH matmul=… overrides it.
  ops::MatmulPath matmul = ops::MatmulPath::AUTO;
  // Int8 path: the op producing an activation (rms_norm, silu·mul) writes q8_1 directly when every
  // consumer is an int8 matmul; false = f32 op + one quantize_q8_1 per activation (A/B, tests).
  bool fuse_q8_1 = true;
  // Int8 path: a MATMUL whose only consumer is the next node, an ADD_BIAS (q/k/v bias) or an ADD
  // (residual), adds the bias / residual in mul_mmq's epilogue and writes straight into that
  // node's output; the ADD_BIAS / ADD dispatch is skipped (fast::MmqEpilogue). false = separate
  // dispatches (A/B, tests). ROCKY_SWITCH fuse_epilogue=0|1 overrides it.
  bool fuse_epilogue = true;
  // Per-ubatch I/O without staging submits: token ids live in host-visible memory and the logits
  // are copied into a host readback buffer inside the ubatch's command buffer. Always so when the
  // device memory is not host-visible (discrete GPUs); true forces it on UMA devices (tests).
  bool host_io = false;
  // Dispatches recorded per command buffer before it is submitted without waiting (Recorder::flush),
  // so the GPU starts while the host records the rest; 0 = one command buffer per ubatch.
  uint32_t flush_dispatches = 96;
  // Decode (one-token graphs): the command buffer is recorded once per graph shape and
  // replayed for every later token (Recorder::replay) — rope, the KV store and attention read
  // n_past from a step buffer the host writes before each submit, so nothing recorded depends on
  // it. Re-recorded after any change of the graph, plan, weights or a buffer it binds; never while
  // profiling. false = record every token (A/B, tests). ROCKY_SWITCH decode_replay=0|1 overrides it.
  bool replay_decode = true;
  // Decode: rope of Q and K and the K and V cache stores of a layer in one dispatch
  // (shaders/rope_kv.comp) instead of four. ROCKY_SWITCH fuse_decode=0|1 overrides it.
  bool fuse_decode = true;
  // Decode: an RMSNorm read only by matvecs is folded into them (plan_norm_fold; each matvec
  // scales by 1 / rms(x) itself) — 2 dispatches fewer per layer. Off by default: on the H200 it
  // made ffn_gate / ffn_up / attn_q ≈ 5 µs slower each (every workgroup reads the norm weight too)
  // while the norm it removed costs ≈ 4.8 µs (tuning-log #24). ROCKY_SWITCH fold_norm=0|1 overrides it.
  bool fold_norm = false;
  // Matmuls of 2 … this many tokens (a batched decode step, a short ubatch) run as one
  // multi-column matvec over the repack (weights read once) instead of mul_mmq, whose 64–128-wide
  // token tiles sat mostly empty: on the H200 a 2-sequence step cost more than two 1-token steps
  // (bench -npl: 229 t/s at 1 sequence, 91 at 2). 1 = mul_mmq for every N > 1. k_auto: the
  // profile's mmv.cols (8 in every built-in profile).
  uint32_t matvec_max_cols = k_auto;
  // Matmuls of 1 … this many tokens over a repacked weight run as the int8-dot matvec
  // (fast::matvec_q8: the q8_1 producers feed it, as they feed mul_mmq) instead of the f32-activation
  // matvec and mul_mmq; 0 = off; at most fast::k_matvec_q8_max_cols. k_auto: the tuning profile's
  // mmv.q8. Needs shaderIntegerDotProduct (else off).
  uint32_t matvec_q8 = k_auto;
  // Tokens per chunk of the chunked gated-delta-rule kernel for ubatches of more than one
  // token (gated_delta_chunk.comp; even, 2 … 128, lowered to fit the device's shared memory);
  // 0 = the serial kernel (gated_delta.comp, always the decode kernel) for every ubatch (A/B).
  // k_auto: the profile's delta_chunk (32; 0 on NVIDIA, where the serial kernel is faster).
  uint32_t delta_chunk = k_auto;
  // Lab overrides (ROCKY_*), as the program's boundary parsed them (runtime::read_env): the switches
  // win over the options above, the tuning fragment goes over the device's profile. The backend
  // never reads the environment.
  LabOptions lab;
  // Where the VkPipelineCache file lives (CACHE_DIR/rocky; "" = not persisted): $XDG_CACHE_HOME or
  // ~/.cache, from runtime::read_env.
  std::string cache_dir;
  // Skip the tuning profile `rocky tune` wrote for this device (CACHE_DIR/rocky/profiles): the
  // built-in one (and ROCKY_TUNE's fragment) only. CLI --no-profile.
  bool no_profile = false;
  std::string loader;                          // ROCKY_VULKAN_LOADER ("" = libvulkan.so.1)
  std::optional<std::string> xdg_runtime_dir;  // for the hint when device creation fails (InstanceOptions)
};

using HostTiming = backend::HostTiming;

class VulkanBackend;

// One context over a VulkanBackend (backend/backend.hpp): the KV cache (one K and one V buffer per
// layer, f32 or f16 with kv_f16), the activation arena (grown only when a larger plan arrives), the
// token-id / logits I/O buffers, the int8 path's q8_1 slots and its own Recorder (command buffers,
// descriptor pools, timestamps). The weights, pipelines and allocator are the backend's.
class VulkanContext final : public backend::Context {
 public:
  VulkanContext(VulkanBackend& be, const backend::ContextOptions& o);
  ~VulkanContext() override;
  VulkanContext(const VulkanContext&) = delete;
  VulkanContext& operator=(const VulkanContext&) = delete;

  void reset() override;
  void compute(const graph::Graph& g, const graph::Plan& p, std::span<const int32_t> tokens,
               std::span<float> logits) override;
  std::vector<float> read_node(const graph::Graph& g, const graph::Plan& p, int32_t node) override;
  // False for a node of the last compute() whose f32 output was never written (its producer wrote
  // only the q8_1 copy its int8 matmuls read, or it is a matmul that wrote its bias / residual
  // consumer's output instead); read_node() of such a node is a rocky::Error.
  bool node_written(int32_t id) const override;
  backend::ContextStats stats() const override;
  double gpu_ms() const override;
  void reset_host_timing() override { timing_ = {}; }
  const graph::KvShape& kv() const override { return kv_; }
  // KV cells ↔ host bytes (backend.hpp): memcpy where the KV buffers are host-visible (UMA),
  // else every layer's K and V range copied through one host staging buffer in one submit.
  backend::KvType kv_type() const override { return kv_f16_ ? backend::KvType::F16 : backend::KvType::F32; }
  uint64_t kv_export_bytes(int32_t n) const override;
  void export_kv(int32_t p0, int32_t n, std::span<uint8_t> dst, int32_t seq = 0) override;
  void import_kv(int32_t p0, int32_t n, std::span<const uint8_t> src, int32_t seq = 0) override;
  // Recurrent state ↔ host bytes (backend.hpp), the same way as the KV cells.
  void export_state(std::span<const int32_t> layers, std::span<uint8_t> dst) override;
  void import_state(std::span<const int32_t> layers, std::span<const uint8_t> src) override;

  const Recorder& recorder() const { return *recorder_; }
  // Matmuls of the last compute() that ran on the int8 path (q8_1 activations + mul_mmq).
  uint32_t int8_matmuls() const { return int8_matmuls_; }
  // Of those, the matmuls of the last compute() that applied a bias / residual epilogue (each one
  // ADD_BIAS / ADD dispatch fewer; VulkanOptions::fuse_epilogue).
  uint32_t fused_epilogues() const { return fused_epilogues_; }
  const HostTiming& host_timing() const { return timing_; }
  uint64_t kv_bytes() const;
  uint64_t arena_bytes() const { return arena_ ? arena_.size() : 0; }

 private:
  ops::Region node_region(const graph::Graph& g, const graph::Plan& p, int32_t id) const;
  // Recording (vulkan_record.cpp): one node as the lowering planned it; the matmuls (int8 path,
  // decode matvecs, epilogues, folded norms) and attention (a lead prompt chunk) have their own.
  void record_node(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id);
  void record_matmul(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id);
  void record_int8_matmul(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id, const ops::Weight& w);
  void record_attention(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id);
  // The bias / residual epilogue of matmul `id` that writes consumer c's output (plan_q8_1).
  fast::MmqEpilogue epilogue_of(const graph::Graph& g, const graph::Plan& p, int32_t id, int32_t c) const;
  // Grows a buffer that recorded commands bind (Memory::ensure); a new one bumps buffers_gen_.
  void ensure_bound(Buffer& b, uint64_t bytes, const std::string& label, BufferKind kind, MemUse use = MemUse::OTHER);
  void check_kv_range(const char* what, int32_t p0, int32_t n, size_t bytes, int32_t seq) const;
  void check_state_layers(const char* what, std::span<const int32_t> layers, size_t bytes) const;
  Buffer& kv_staging(uint64_t bytes);
  // Byte offset of sequence seq's position p0 in layer l's K or V buffer (a ring's: p0 mod its size).
  uint64_t kv_cell_offset(int32_t l, int32_t seq, int32_t p0) const {
    return (uint64_t(seq) * uint64_t(kv_.cells(l)) + uint64_t(kv_.cell(l, p0))) * uint64_t(kv_.n_embd_kv) *
           (kv_f16_ ? 2 : 4);
  }
  // Layer l's ring for the kernels ({0, 0}: not a ring).
  ops::KvRing kv_ring(int32_t l) const {
    return kv_.ring_layer(l) ? ops::KvRing{uint32_t(kv_.n_ring), uint32_t(kv_.n_ctx)} : ops::KvRing{};
  }
  // Copies of positions [p0, p0 + n) of sequence seq between each layer's K/V buffers and host bytes
  // laid out as export_kv's, cut where a ring wraps: fn(buffer index, buffer byte offset, host byte
  // offset, bytes). only_live: a ring's positions older than its last n_ring are skipped (an import).
  template <class Fn>
  void for_kv_runs(int32_t p0, int32_t n, int32_t seq, bool only_live, Fn&& fn) const;

  VulkanBackend& be_;
  std::unique_ptr<Recorder> recorder_;
  graph::KvShape kv_{};
  std::vector<Buffer> kv_buffers_;  // [layer · 2 + (0 = K, 1 = V)]
  // recurrent state (hybrid models; empty otherwise), sequence 0: [layer · 2 + (0 = conv window,
  // 1 = delta-rule state)], f32, kv_.conv_state / kv_.ssm_state floats (graph.hpp layouts).
  std::vector<Buffer> state_buffers_;
  Buffer arena_;
  Buffer tokens_;
  Buffer readback_;      // logits, when the arena is not host-visible (or host_io)
  Buffer attn_scratch_;  // split decode attention's partial states (ops::attention_scratch_bytes)
  Buffer kv_staging_;    // export_kv / import_kv when the KV buffers are not host-visible
  bool kv_f16_ = false;  // element type of kv_buffers_
  int32_t n_seq_ = 1;    // sequences: each layer buffer holds n_seq · n_ctx columns (sequence s from s · n_ctx)
  // Int8 prefill path: planned per compute() (plan_q8_1): which matmuls run mul_mmq, which node
  // outputs get a q8_1 copy in which slot, and which producers write q8_1 only.
  struct Q81Plan {
    std::vector<uint8_t> mmq;       // [node] MATMUL on the int8 path
    std::vector<int32_t> slot;      // [node] q8_1 slot holding this node's output, -1 = none
    std::vector<uint8_t> fused;     // [node] the producer writes q8_1 only (no f32 output)
    std::vector<int32_t> epi_into;  // [MATMUL node] consumer whose output it writes with its epilogue, -1 = none
    std::vector<uint8_t> epi_done;  // [ADD_BIAS / ADD node] written by its matmul's epilogue: no dispatch
    uint32_t n_slots = 0;
    uint64_t qs_bytes = 0, ds_bytes = 0;  // per slot
  };
  Q81Plan plan_q8_1(const ops::Env& env, const graph::Graph& g) const;
  void record_q8_1_output(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id);
  ops::Region slot_qs(int32_t slot, uint64_t bytes) const { return {&q81_slots_[size_t(slot)].first, 0, bytes}; }
  ops::Region slot_ds(int32_t slot, uint64_t bytes) const { return {&q81_slots_[size_t(slot)].second, 0, bytes}; }

  std::vector<std::pair<Buffer, Buffer>> q81_slots_;  // (qs, ds)
  Q81Plan q81_;
  uint32_t int8_matmuls_ = 0;
  uint32_t f32_prefill_matmuls_ = 0;  // matmuls with N > 1 on the f32 kernels (last compute)
  uint32_t mmv_matmuls_ = 0;          // matmuls with 1 < N ≤ matvec_max_cols as the multi-column matvec
  uint32_t fused_epilogues_ = 0;
  HostTiming timing_;
  // Replay: a counter bumped whenever this context re-creates a buffer that recorded commands
  // bind, and each capture slot's key and last use (the step is word 0 of tokens_; with host_io
  // its device copy step_dev_ {n_past, token id}, written by the command buffer).
  Buffer step_dev_;
  uint64_t buffers_gen_ = 0;
  std::array<uint64_t, Recorder::k_captures> replay_key_{}, replay_used_{};
  uint64_t replay_tick_ = 0;
  uint64_t replay_key_of(const graph::Graph& g, const graph::Plan& p, bool copy_out) const;
  void read_logits(const graph::Graph& g, const graph::Plan& p, bool copy_out, std::span<float> logits);
  // Decode fusion: [node] 1 = records rope_kv, 2 = recorded by it, 3 = an RMSNorm folded into
  // the matvecs that read it (norm_into_[matvec] = the norm's node id, else -1).
  std::vector<uint8_t> fused_decode_;
  std::vector<int32_t> norm_into_;
  void plan_decode_fusion(const graph::Graph& g, const graph::Plan& p, const ops::Env& env);
  void plan_norm_fold(const graph::Graph& g, const graph::Plan& p, const ops::Env& env,
                      const std::vector<uint32_t>& uses);
  void record_rope_kv(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id);
};

// The device and the weights (one buffer per tensor, + its mmq repack on the int8 path; UMA:
// written in place), the pipeline cache and the allocator, shared by every VulkanContext.
class VulkanBackend final : public backend::Backend {
 public:
  explicit VulkanBackend(const VulkanOptions& opts);
  ~VulkanBackend() override;

  std::string name() const override;
  void load_weights(std::span<const gguf::TensorInfo* const> weights) override;
  std::unique_ptr<backend::Context> make_context(const backend::ContextOptions& o) override;
  backend::BackendStats stats() const override;
  // Every node output is bound whole by some op (only the basic matmul splits token columns), so
  // tokens · (largest per-token output) must fit maxStorageBufferRange (or --max-binding).
  int64_t max_ubatch_tokens(const graph::Graph& g, std::string* why) const override;
  // 1: on lavapipe a step holding several tokens of one sequence beside other sequences' tokens
  // gave that sequence other greedy picks than the same tokens in a step of their own (not a
  // near-tie: the same positions every run; test_spec_http_vulkan, a draft model under batching),
  // so verifications do not share steps here until the per-token kernels are checked for it.
  int64_t mixed_verify_tokens() const override { return 1; }

  // Free every uploaded weight (a later load_weights starts afresh; tests reuse one backend).
  void release_weights();
  const DeviceInfo& info() const { return device_->info(); }
  Instance& instance() const { return *instance_; }
  size_t pipeline_count() const { return pipelines_->size(); }
  const ops::MatmulTile& tile() const { return tile_; }
  // The tuning profile in effect (built in, `rocky tune`'s file, ROCKY_TUNE's fragment over it).
  const tune::DeviceProfile& profile() const { return mmq_profile_; }
  ops::MatmulPath matmul_path() const { return opts_.matmul; }
  const VulkanOptions& options() const { return opts_; }
  // Lab / tests: replace the lab overrides for the next compute() of every context (not while one
  // computes): the attention switch and ROCKY_TUNE's fragment (the profile is made again: tiles,
  // rules, matvec shapes, delta chunk); the other switches were applied when the backend was made,
  // and weights already uploaded keep the layout they were repacked in.
  void set_lab(const LabOptions& lab);

  // A default context for single-stream tools and tests (the lab commands, tests/vulkan): init_kv
  // makes it (again when the shape changes; the same shape zeroes it in place), compute() without
  // init_kv makes one with no KV cache. The calls below forward to it.
  void init_kv(const graph::KvShape& kv);
  VulkanContext& context();
  void compute(const graph::Graph& g, const graph::Plan& p, std::span<const int32_t> tokens, std::span<float> logits) {
    context().compute(g, p, tokens, logits);
  }
  std::vector<float> read_node(const graph::Graph& g, const graph::Plan& p, int32_t node) {
    return context().read_node(g, p, node);
  }
  bool node_written(int32_t id) { return context().node_written(id); }
  const Recorder& recorder() { return context().recorder(); }
  uint32_t int8_matmuls() { return context().int8_matmuls(); }
  uint32_t fused_epilogues() { return context().fused_epilogues(); }
  const HostTiming& host_timing() { return context().host_timing(); }
  void reset_host_timing() { context().reset_host_timing(); }
  // "weights 12.3 MiB + KV 4.0 MiB + arena 1.5 MiB = 17.8 MiB" (the default context's).
  std::string memory_summary();

 private:
  friend class VulkanContext;
  const ops::Weight& weight(const gguf::TensorInfo* t) const;
  ops::Region weight_region(const gguf::TensorInfo* t) const;

  VulkanOptions opts_;
  std::shared_ptr<Instance> instance_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Memory> memory_;
  std::unique_ptr<Pipelines> pipelines_;
  std::vector<std::unique_ptr<Buffer>> weight_buffers_;  // stable addresses (ops::Weight::buf)
  std::map<const gguf::TensorInfo*, ops::Weight> weights_;
  uint64_t weight_bytes_ = 0;
  std::vector<DType> noted_types_;  // quantized types already noted as not on the int8 path
  // Bumped whenever the weights or the lab overrides change: recorded decode command buffers of
  // every context are then stale (VulkanOptions::replay_decode).
  uint64_t generation_ = 1;
  // The device's tuning profile: base_profile_ (built in, or `rocky tune`'s file) with ROCKY_TUNE's
  // fragment over it, and the options it backs as resolved (apply_profile).
  void apply_profile();
  tune::DeviceProfile base_profile_, mmq_profile_;
  ops::MatmulTile tile_;
  uint32_t matvec_max_cols_ = 8, matvec_q8_ = 0, delta_chunk_ = 0;
  std::unique_ptr<VulkanContext> default_;
};

}  // namespace rocky::vulkan
