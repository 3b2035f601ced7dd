// Device memory: buffers with 64-bit sizes and offsets, a cap on what rocky may allocate, uploads
// and readbacks.
//
// Kinds: DEVICE buffers hold weights, the KV cache and the activation arena — device-local, and
// host-visible too where the device has such memory (UMA: weights are written in place, no staging
// copy). HOST buffers are host-visible staging/readback buffers.
//
// Cap: `limit_bytes` (0 = none; the backend fills it from ROCKY_DEVICE_MEMORY_LIMIT=BYTES, which the
// program's boundary parses: LabOptions::device_memory_limit). An
// allocation that would pass the cap, or that the driver refuses, throws OutOfMemoryError naming
// the allocation and suggesting a smaller context (-c) or ubatch (-ub).
#pragma once

#include "backend/vulkan/vk.hpp"

#include <array>
#include <cstdint>
#include <mutex>
#include <memory>
#include <string>

#include "backend/vulkan/device.hpp"
#include "backend/vulkan/lab_options.hpp"

namespace rocky::vulkan {

class Memory;

enum class BufferKind { DEVICE, HOST };

// What a buffer holds, for the accounting by kind (backend::MemoryStats).
enum class MemUse { WEIGHTS, KV, ARENA, OTHER };

class Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  uint64_t size() const { return size_; }
  void* mapped() const { return mapped_; }  // nullptr unless host-visible
  const std::string& label() const { return label_; }
  explicit operator bool() const { return buffer_ != VK_NULL_HANDLE; }

 private:
  friend class Memory;
  Memory* owner_ = nullptr;
  MemUse use_ = MemUse::OTHER;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  uint64_t size_ = 0;
  void* mapped_ = nullptr;
  std::string label_;
  void release();
};

class Memory {
 public:
  // max_allocation: one buffer's cap in bytes (0 = the device's maxMemoryAllocationSize; smaller
  // values stand in for a small device in tests).
  Memory(Device& dev, uint64_t limit_bytes, uint64_t max_allocation = 0);
  ~Memory();
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  // A buffer of `bytes` (rounded up to 4) for `label` ("weight blk.0.attn_q.weight", "KV cache
  // layer 3 K", "activation arena"). Throws OutOfMemoryError (see above).
  // `use` files it under one kind of backend::MemoryStats. Thread-safe (several contexts allocate).
  Buffer create(const std::string& label, uint64_t bytes, BufferKind kind, MemUse use = MemUse::OTHER);
  // `b` made again by create() when it is empty or smaller than `bytes` (its old memory freed
  // first); true when it was. The one reallocation rule of the buffers a context grows.
  bool ensure(Buffer& b, uint64_t bytes, const std::string& label, BufferKind kind, MemUse use = MemUse::OTHER);

  // Copy host bytes into `dst` at `offset` (mapped: memcpy; otherwise through a staging buffer in
  // chunks, waiting for completion).
  void upload(Buffer& dst, uint64_t offset, const void* src, uint64_t bytes);
  // Copy `bytes` at `offset` of `src` to host memory (mapped: memcpy; otherwise via staging).
  void download(const Buffer& src, uint64_t offset, void* dst, uint64_t bytes);

  uint64_t allocated_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return allocated_;
  }
  uint64_t allocated_bytes(MemUse use) const {
    std::lock_guard<std::mutex> lock(mu_);
    return by_use_[static_cast<size_t>(use)];
  }
  uint64_t peak_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
  }
  uint64_t limit_bytes() const { return limit_; }
  uint64_t max_allocation() const;
  Device& device() const { return dev_; }

 private:
  friend class Buffer;
  void free(Buffer& b);
  void copy(VkBuffer src, uint64_t src_off, VkBuffer dst, uint64_t dst_off, uint64_t bytes);
  Device& dev_;
  uint64_t limit_ = 0;
  mutable std::mutex mu_;  // allocated_, by_use_, peak_
  std::mutex copy_mu_;     // pool_, fence_
  uint64_t max_alloc_ = 0;
  uint64_t allocated_ = 0, peak_ = 0;
  std::array<uint64_t, 4> by_use_{};
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
};

}  // namespace rocky::vulkan
