#include "backend/vulkan/recorder.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "core/error.hpp"
#include "core/fault.hpp"

namespace rocky::vulkan {

namespace {
constexpr uint32_t k_sets_per_pool = 256;
constexpr uint32_t k_query_capacity = 4096;
// Destructor: a frame still pending only after a failed wait; do not hang on it.
constexpr uint64_t k_wait_timeout_ns = 5ull * 1000 * 1000 * 1000;

// vkQueueSubmit of a compute's command buffer, or VK_ERROR_DEVICE_LOST when the fault injector
// picks this submit (ROCKY_FAULT=lost@N, core/fault.hpp).
VkResult queue_submit(VkQueue q, const VkSubmitInfo& si, VkFence fence) {
  if (fault::hit(fault::Kind::Lost)) return VK_ERROR_DEVICE_LOST;
  return vkQueueSubmit(q, 1, &si, fence);
}
}  // namespace

// A hung GPU is an error, not a hang. One ubatch of a large model on a CPU driver (lavapipe) can
// legitimately take many minutes, so the default is generous; ROCKY_VULKAN_TIMEOUT_S overrides it.
Recorder::Recorder(Device& dev, uint64_t max_binding, uint64_t timeout_s)
    : dev_(dev), timeout_s_(timeout_s > 0 ? timeout_s : 1800) {
  max_binding_ = dev.info().max_storage_buffer_range;
  fill_fn_ = reinterpret_cast<PFN_vkCmdFillBuffer>(vkGetInstanceProcAddr(dev.instance().handle(), "vkCmdFillBuffer"));
  if (fill_fn_ == nullptr) fail("Vulkan: the loader does not provide vkCmdFillBuffer");
  if (max_binding != 0) max_binding_ = std::min(max_binding_, max_binding);
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = dev.queue_family();
  vk_check(vkCreateCommandPool(dev.handle(), &pi, nullptr, &pool_), "vkCreateCommandPool");
  for (auto& f : frames_) {
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    vk_check(vkAllocateCommandBuffers(dev.handle(), &ai, &f.cb), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    vk_check(vkCreateFence(dev.handle(), &fi, nullptr, &f.fence), "vkCreateFence");
    if (dev.info().timestamps) {
      VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qi.queryCount = 2;
      vk_check(vkCreateQueryPool(dev.handle(), &qi, nullptr, &f.busy), "vkCreateQueryPool");
    }
  }
}

Recorder::~Recorder() {
  VkDevice d = dev_.handle();
  for (auto& f : frames_) {
    if (f.pending) vkWaitForFences(d, 1, &f.fence, VK_TRUE, k_wait_timeout_ns);
    for (auto p : f.pools) vkDestroyDescriptorPool(d, p, nullptr);
    if (f.queries) vkDestroyQueryPool(d, f.queries, nullptr);
    if (f.busy) vkDestroyQueryPool(d, f.busy, nullptr);
    vkDestroyFence(d, f.fence, nullptr);
  }
  vkDestroyCommandPool(d, pool_, nullptr);
}

Bound Recorder::bind(const Buffer& buf, uint64_t offset, uint64_t bytes, bool write) const {
  const uint64_t align = std::max<uint64_t>(4, dev_.info().min_storage_offset_alignment);
  Bound b;
  b.buffer = buf.handle();
  b.offset = offset / align * align;
  b.delta = static_cast<uint32_t>(offset - b.offset);
  b.range = std::min<uint64_t>(((offset - b.offset) + bytes + 3) & ~uint64_t{3}, buf.size() - b.offset);
  b.write = write;
  if (b.range > max_binding_) {
    fail(
        "{}: a binding of {} bytes at offset {} exceeds the device's storage binding limit of {} bytes "
        "(maxStorageBufferRange or --max-binding)",
        buf.label(), b.range, offset, max_binding_);
  }
  if (offset + bytes > buf.size()) fail("{}: range [{}, +{}) past its size {}", buf.label(), offset, bytes, buf.size());
  return b;
}

void Recorder::wait(Frame& f) {
  if (!f.pending) return;
  VkResult r = vkWaitForFences(dev_.handle(), 1, &f.fence, VK_TRUE, timeout_s_ * 1000000000ull);
  if (r == VK_TIMEOUT) {
    fail(
        "Vulkan: the GPU did not finish a command buffer within {} s (device hung? raise "
        "ROCKY_VULKAN_TIMEOUT_S for very large ubatches on slow drivers, or use a smaller -ub)",
        timeout_s_);
  }
  vk_check(r, "vkWaitForFences");
  vkResetFences(dev_.handle(), 1, &f.fence);
  f.pending = false;
  if (f.stamped) {  // complete: its fence signalled
    uint64_t ts[2] = {0, 0};
    if (vkGetQueryPoolResults(dev_.handle(), f.busy, 0, 2, sizeof ts, ts, 8, VK_QUERY_RESULT_64_BIT) == VK_SUCCESS &&
        ts[1] >= ts[0])
      gpu_ms_ += static_cast<double>(ts[1] - ts[0]) * dev_.info().timestamp_period_ns * 1e-6;
  }
}

void Recorder::end_stamp(Frame& f) {
  if (!f.busy) return;
  vkCmdWriteTimestamp(f.cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, f.busy, 1);
  f.stamped = true;
}

void Recorder::begin(bool profile) {
  current_ = current_ == 0 ? 1 : 0;  // the ring: frames 0 and 1 in turn (2 + slot: captured buffers)
  open(frames_[current_], profile, true);
}

void Recorder::begin_capture(uint32_t slot) {
  if (slot >= k_captures) fail("Recorder::begin_capture: slot {} of {}", slot, k_captures);
  captured_[slot] = false;
  current_ = 2 + slot;
  open(frames_[current_], false, false);
  capturing_ = true;
}

void Recorder::replay(uint32_t slot) {
  if (recording_) fail("Recorder::replay while recording");
  if (!captured(slot)) fail("Recorder::replay without a captured command buffer in slot {}", slot);
  Frame& f = frames_[2 + slot];
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &f.cb;
  {
    std::lock_guard<std::mutex> lock(dev_.queue_mutex());
    vk_check(queue_submit(dev_.queue(), si, f.fence), "vkQueueSubmit");
  }
  f.pending = true;
  wait(f);
  dispatches_ = captured_dispatches_[slot];
  barriers_ = captured_barriers_[slot];
  flush_wait_ms_ = 0;
  timings_.clear();
  ++replays_;
}

void Recorder::open(Frame& f, bool profile, bool one_time) {
  wait(f);
  for (auto p : f.pools) vkResetDescriptorPool(dev_.handle(), p, 0);
  f.pool_used = 0;
  profile_ = profile && dev_.info().timestamps;
  if (profile_ && f.queries == VK_NULL_HANDLE) {
    VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = k_query_capacity;
    vk_check(vkCreateQueryPool(dev_.handle(), &qi, nullptr, &f.queries), "vkCreateQueryPool");
    f.query_capacity = k_query_capacity;
  }
  vk_check(vkResetCommandBuffer(f.cb, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = one_time ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT : 0;
  vk_check(vkBeginCommandBuffer(f.cb, &bi), "vkBeginCommandBuffer");
  if (profile_) vkCmdResetQueryPool(f.cb, f.queries, 0, f.query_capacity);
  f.stamped = false;
  if (f.busy) {
    vkCmdResetQueryPool(f.cb, f.busy, 0, 2);
    vkCmdWriteTimestamp(f.cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, f.busy, 0);
  }
  // Host writes (token ids, uploads) before this submit → shader reads; and the shader writes of
  // earlier submits (the KV cache of the previous decode step, when a kept command buffer is
  // submitted again) → this one's reads and writes.
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  vkCmdPipelineBarrier(
      f.cb, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  recording_ = true;
  capturing_ = false;
  pending_.clear();
  labels_.clear();
  dispatches_ = barriers_ = 0;
  flush_wait_ms_ = 0;
}

VkDescriptorSet Recorder::allocate_set(const Pipeline& p) {
  Frame& f = frames_[current_];
  for (;;) {
    if (f.pool_used == f.pools.size()) {
      VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, k_sets_per_pool * 4};
      VkDescriptorPoolCreateInfo pi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      pi.maxSets = k_sets_per_pool;
      pi.poolSizeCount = 1;
      pi.pPoolSizes = &ps;
      VkDescriptorPool pool;
      vk_check(vkCreateDescriptorPool(dev_.handle(), &pi, nullptr, &pool), "vkCreateDescriptorPool");
      f.pools.push_back(pool);
    }
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = f.pools[f.pool_used];
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &p.set_layout;
    VkDescriptorSet set;
    VkResult r = vkAllocateDescriptorSets(dev_.handle(), &ai, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) vk_check(r, "vkAllocateDescriptorSets");
    ++f.pool_used;
  }
}

std::array<uint32_t, 2> Recorder::grid_1d(uint64_t groups) const {
  const uint64_t max_x = dev_.info().max_workgroup_count[0];
  if (groups <= max_x) return {static_cast<uint32_t>(std::max<uint64_t>(groups, 1)), 1};
  uint64_t gy = (groups + max_x - 1) / max_x;
  uint64_t gx = (groups + gy - 1) / gy;
  return {static_cast<uint32_t>(gx), static_cast<uint32_t>(gy)};
}

void Recorder::dispatch(const Pipeline& p, std::span<const Bound> bindings, const void* push, uint32_t push_size,
                        uint32_t gx, uint32_t gy, uint32_t gz, const std::string& label) {
  if (!recording_) fail("Recorder::dispatch outside begin()/submit_and_wait()");
  if (bindings.size() != p.n_bindings) {
    fail("shader {}: {} buffers bound, the SPIR-V declares {}", p.shader, bindings.size(), p.n_bindings);
  }
  if (push_size > p.push_bytes) fail("shader {}: push constants {} bytes > {}", p.shader, push_size, p.push_bytes);
  const auto& lim = dev_.info().max_workgroup_count;
  if (gx > lim[0] || gy > lim[1] || gz > lim[2]) {
    fail("shader {}: grid {}×{}×{} exceeds the device's workgroup count limit {}×{}×{}", p.shader, gx, gy, gz, lim[0],
         lim[1], lim[2]);
  }
  Frame& f = frames_[current_];
  if (gx == 0 || gy == 0 || gz == 0) return;

  // Hazards against the dispatches since the last barrier.
  bool need = false;
  for (const Bound& b : bindings) {
    for (const Access& a : pending_) {
      if (a.buffer != b.buffer || b.offset + b.range <= a.lo || a.hi <= b.offset) continue;
      if (a.write || b.write) need = true;
    }
  }
  if (need) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    vkCmdPipelineBarrier(f.cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                         nullptr, 0, nullptr);
    pending_.clear();
    ++barriers_;
  }
  for (const Bound& b : bindings) pending_.push_back({b.buffer, b.offset, b.offset + b.range, b.write});

  VkDescriptorSet set = allocate_set(p);
  constexpr size_t k_max_bindings = 8;  // no per-dispatch heap allocation
  if (bindings.size() > k_max_bindings)
    fail("shader {}: {} bindings (at most {})", p.shader, bindings.size(), k_max_bindings);
  std::array<VkDescriptorBufferInfo, k_max_bindings> infos{};
  std::array<VkWriteDescriptorSet, k_max_bindings> writes{};
  for (size_t i = 0; i < bindings.size(); ++i) {
    infos[i] = {bindings[i].buffer, bindings[i].offset, bindings[i].range};
    writes[i] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(dev_.handle(), static_cast<uint32_t>(bindings.size()), writes.data(), 0, nullptr);
  vkCmdBindPipeline(f.cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  vkCmdBindDescriptorSets(f.cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  if (push_size > 0) vkCmdPushConstants(f.cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
  const bool timed = profile_ && 2 * labels_.size() + 2 <= f.query_capacity;
  if (timed)
    vkCmdWriteTimestamp(f.cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, f.queries, static_cast<uint32_t>(2 * labels_.size()));
  vkCmdDispatch(f.cb, gx, gy, gz);
  if (timed) {
    vkCmdWriteTimestamp(f.cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, f.queries,
                        static_cast<uint32_t>(2 * labels_.size() + 1));
    labels_.push_back(label.empty() ? p.shader : label);
  }
  ++dispatches_;
}

namespace {
// Everything recorded so far (compute and transfer) → everything after (compute and transfer).
void full_barrier(VkCommandBuffer cb) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(cb, st, st, 0, 1, &mb, 0, nullptr, 0, nullptr);
}
}  // namespace

void Recorder::copy(const Buffer& src, uint64_t src_off, const Buffer& dst, uint64_t dst_off, uint64_t bytes) {
  if (!recording_) fail("Recorder::copy outside begin()/submit_and_wait()");
  if (src_off + bytes > src.size() || dst_off + bytes > dst.size()) {
    fail("Recorder::copy: {} bytes from {}+{} to {}+{} past a buffer's end", bytes, src.label(), src_off, dst.label(),
         dst_off);
  }
  if (bytes == 0) return;
  Frame& f = frames_[current_];
  full_barrier(f.cb);
  VkBufferCopy region{src_off, dst_off, bytes};
  vkCmdCopyBuffer(f.cb, src.handle(), dst.handle(), 1, &region);
  full_barrier(f.cb);
  pending_.clear();
  barriers_ += 2;
}

void Recorder::fill(const Buffer& dst, uint32_t value) {
  if (!recording_) fail("Recorder::fill outside begin()/submit_and_wait()");
  Frame& f = frames_[current_];
  full_barrier(f.cb);
  fill_fn_(f.cb, dst.handle(), 0, VK_WHOLE_SIZE, value);
  full_barrier(f.cb);
  pending_.clear();
  barriers_ += 2;
}

void Recorder::flush() {
  if (!recording_) fail("Recorder::flush outside begin()/submit_and_wait()");
  if (profile_ || capturing_) return;
  Frame& f = frames_[current_];
  end_stamp(f);
  vk_check(vkEndCommandBuffer(f.cb), "vkEndCommandBuffer");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &f.cb;
  {
    std::lock_guard<std::mutex> lock(dev_.queue_mutex());
    vk_check(queue_submit(dev_.queue(), si, f.fence), "vkQueueSubmit");
  }
  f.pending = true;
  const uint32_t dispatches = dispatches_, barriers = barriers_;
  const double waited = flush_wait_ms_;
  const auto t0 = std::chrono::steady_clock::now();
  begin(false);  // waits for the other frame's fence
  dispatches_ = dispatches;
  barriers_ = barriers + 1;
  flush_wait_ms_ = waited + std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  full_barrier(frames_[current_].cb);
}

void Recorder::submit_and_wait() {
  Frame& f = frames_[current_];
  // Shader and transfer writes → host reads and transfers after the fence.
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
  vkCmdPipelineBarrier(f.cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  end_stamp(f);
  vk_check(vkEndCommandBuffer(f.cb), "vkEndCommandBuffer");
  recording_ = false;
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &f.cb;
  {
    std::lock_guard<std::mutex> lock(dev_.queue_mutex());
    vk_check(queue_submit(dev_.queue(), si, f.fence), "vkQueueSubmit");
  }
  f.pending = true;
  if (capturing_) {
    capturing_ = false;
    const uint32_t slot = current_ - 2;
    captured_[slot] = true;
    captured_dispatches_[slot] = dispatches_;
    captured_barriers_[slot] = barriers_;
  }
  wait(f);
  timings_.clear();
  if (profile_ && !labels_.empty()) {
    std::vector<uint64_t> ts(2 * labels_.size());
    vk_check(vkGetQueryPoolResults(dev_.handle(), f.queries, 0, static_cast<uint32_t>(ts.size()), ts.size() * 8,
                                   ts.data(), 8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
             "vkGetQueryPoolResults");
    for (size_t i = 0; i < labels_.size(); ++i) {
      double ms = static_cast<double>(ts[2 * i + 1] - ts[2 * i]) * dev_.info().timestamp_period_ns * 1e-6;
      timings_.push_back({labels_[i], ms});
    }
  }
}

}  // namespace rocky::vulkan
