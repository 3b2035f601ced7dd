// Records one ubatch's whole forward into ONE command buffer and submits it.
//
// Barriers: the recorder tracks the buffer byte ranges read and written by the dispatches recorded
// since the last barrier, and inserts a compute→compute memory barrier only when a new dispatch
// reads a range one of them wrote (RAW) or writes a range one of them read or wrote (WAR/WAW) —
// exactly the barriers the data dependencies need, whatever the graph's order.
//
// Frames: two command buffers (each with its fence, descriptor pools and timestamp queries) are
// used in turn, so at most two are in flight; pools are reset and reused, so nothing grows with
// the number of submits (descriptor pools grow only with the largest graph recorded).
#pragma once

#include "backend/vulkan/vk.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/vulkan/device.hpp"
#include "backend/vulkan/lab_options.hpp"
#include "backend/vulkan/memory.hpp"
#include "backend/vulkan/pipelines.hpp"

namespace rocky::vulkan {

// A buffer range bound to one storage binding. `delta` = bytes between the bound (aligned) start
// and the tensor's first byte; shaders receive delta / element size as an *_off push constant.
struct Bound {
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t offset = 0;  // aligned to minStorageBufferOffsetAlignment
  uint64_t range = 0;
  uint32_t delta = 0;
  bool write = false;
};

struct OpTiming {
  std::string label;  // node name or op
  double ms = 0;
};

class Recorder {
 public:
  // timeout_s: how long a fence wait may take before the GPU counts as hung (rocky::Error); the
  // programs pass ROCKY_VULKAN_TIMEOUT_S (LabOptions::vulkan_timeout_s).
  Recorder(Device& dev, uint64_t max_binding, uint64_t timeout_s = 1800);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // The bytes one binding may span: min(maxStorageBufferRange, --max-binding override).
  uint64_t max_binding() const { return max_binding_; }

  // Bind `bytes` at `offset` of `buf` (64-bit); rocky::Error when the range exceeds max_binding().
  Bound bind(const Buffer& buf, uint64_t offset, uint64_t bytes, bool write) const;

  // Start a command buffer (waits for the frame used two submits ago). profile: timestamps.
  void begin(bool profile = false);
  // Record one dispatch (barrier inserted first when needed). `label` names it for --profile.
  void dispatch(const Pipeline& p, std::span<const Bound> bindings, const void* push, uint32_t push_size, uint32_t gx,
                uint32_t gy, uint32_t gz, const std::string& label = {});
  // Transfers recorded between dispatches: copy `bytes` from src to dst (e.g. the logits into a
  // host readback buffer: no separate submit), fill all of dst with a 32-bit value (e.g. zeroing
  // the KV cache). Each is ordered after every earlier dispatch and before every later one;
  // submit_and_wait() makes their writes visible to the host.
  void copy(const Buffer& src, uint64_t src_off, const Buffer& dst, uint64_t dst_off, uint64_t bytes);
  void fill(const Buffer& dst, uint32_t value);
  // Grid for `groups` workgroups laid out as (x, y) within the device's count limits.
  std::array<uint32_t, 2> grid_1d(uint64_t groups) const;
  // Submit what has been recorded so far WITHOUT waiting and go on recording into the other frame
  // (which first waits for its own previous submit): the GPU starts on the first dispatches of a
  // ubatch while the host records the rest (recording 760 dispatches took ≈ 2 ms on the H200's host,
  // 4 % of a 512-token ubatch). Still at most two command buffers in flight; the next buffer opens
  // with a full barrier, which orders it after everything submitted before it on the queue. A no-op
  // while profiling (the timestamps of a ubatch live in one frame's query pool).
  void flush();
  // End, submit, and wait for completion (rocky::Error on device loss; no hang).
  void submit_and_wait();

  // Command buffers recorded once and submitted again (decode steps, batched steps, speculative
  // verifications): begin_capture(slot) starts recording into that slot's frame, whose command
  // buffer and descriptor sets are kept (not one-time-submit; its pools are reset only by the next
  // begin_capture of the slot), dispatches as usual, then submit_and_wait() runs it once and keeps
  // it. replay(slot) submits the kept command buffer again and waits (one host wait), reporting the
  // captured dispatch / barrier counts. flush() is a no-op while capturing (one command buffer).
  // Whatever the kept commands read must be written by the host before replay() (the step buffer,
  // token ids) — never by re-recording. k_captures slots: a decode step and the verification
  // shapes that alternate with it each keep theirs.
  static constexpr uint32_t k_captures = 4;
  void begin_capture(uint32_t slot);
  void replay(uint32_t slot);
  bool captured(uint32_t slot) const { return slot < k_captures && captured_[slot]; }
  uint32_t replays() const { return replays_; }

  uint32_t dispatches() const { return dispatches_; }
  // Host milliseconds spent waiting for a frame's fence inside flush() since begin() (GPU time the
  // host waited while recording; callers count it as submit/wait time, not recording).
  double flush_wait_ms() const { return flush_wait_ms_; }
  // Descriptor pools held by both frames (bounded by the largest graph, not the submit count).
  size_t descriptor_pools() const { return frames_[0].pools.size() + frames_[1].pools.size(); }
  uint32_t barriers() const { return barriers_; }
  // GPU time of every command buffer submitted so far (ms): timestamps at its start and
  // end, read after its fence (0 where the queue has no timestamps). Against the host's wall time
  // it tells GPU work (and its clock) from host gaps.
  double gpu_ms() const { return gpu_ms_; }
  // Per-dispatch GPU times of the last profiled submit.
  const std::vector<OpTiming>& timings() const { return timings_; }

 private:
  struct Frame {
    VkCommandBuffer cb = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    bool pending = false;
    std::vector<VkDescriptorPool> pools;
    size_t pool_used = 0;  // pools[0..pool_used] are in use this frame
    VkQueryPool queries = VK_NULL_HANDLE;
    uint32_t query_capacity = 0;
    VkQueryPool busy = VK_NULL_HANDLE;  // 2 timestamps: the command buffer's start and end
    bool stamped = false;
  };
  struct Access {
    VkBuffer buffer;
    uint64_t lo, hi;
    bool write;
  };
  VkDescriptorSet allocate_set(const Pipeline& p);
  void wait(Frame& f);
  void end_stamp(Frame& f);

  Device& dev_;
  PFN_vkCmdFillBuffer fill_fn_ = nullptr;  // resolved here (not in vk.hpp's shared table)
  uint64_t max_binding_ = 0;
  uint64_t timeout_s_ = 1800;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  std::array<Frame, 2 + k_captures> frames_{};  // [0], [1]: the ring; [2 + slot]: captured command buffers
  void open(Frame& f, bool profile, bool one_time);
  uint32_t current_ = 0;
  double gpu_ms_ = 0;
  bool recording_ = false;
  bool profile_ = false;
  bool capturing_ = false;
  std::array<bool, k_captures> captured_{};
  std::array<uint32_t, k_captures> captured_dispatches_{}, captured_barriers_{};
  uint32_t replays_ = 0;
  std::vector<Access> pending_;
  uint32_t dispatches_ = 0, barriers_ = 0;
  double flush_wait_ms_ = 0;
  std::vector<std::string> labels_;
  std::vector<OpTiming> timings_;
};

}  // namespace rocky::vulkan
