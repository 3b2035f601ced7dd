#include "backend/vulkan/memory.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"
#include "core/fault.hpp"

namespace rocky::vulkan {

namespace {

std::string mib(uint64_t b) { return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1024.0 * 1024.0)); }

[[noreturn]] void out_of_memory(
    const std::string& label, uint64_t bytes, const std::string& why,
    const std::string& fix = "use a smaller context (-c) or ubatch (-ub), or a smaller model") {
  throw OutOfMemoryError(
      fmt::format("out of device memory allocating {} ({} bytes, {}): {}; {}", label, bytes, mib(bytes), why, fix));
}

uint32_t find_type(const VkPhysicalDeviceMemoryProperties& mp, uint32_t bits, VkMemoryPropertyFlags want) {
  for (uint32_t t = 0; t < mp.memoryTypeCount; ++t)
    if ((bits & (1u << t)) && (mp.memoryTypes[t].propertyFlags & want) == want) return t;
  return UINT32_MAX;
}

}  // namespace

Buffer::~Buffer() { release(); }

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    owner_ = o.owner_;
    use_ = o.use_;
    buffer_ = o.buffer_;
    memory_ = o.memory_;
    size_ = o.size_;
    mapped_ = o.mapped_;
    label_ = std::move(o.label_);
    o.owner_ = nullptr;
    o.buffer_ = VK_NULL_HANDLE;
    o.memory_ = VK_NULL_HANDLE;
    o.mapped_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void Buffer::release() {
  if (owner_ != nullptr && buffer_ != VK_NULL_HANDLE) owner_->free(*this);
  owner_ = nullptr;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
}

uint64_t Memory::max_allocation() const {
  const uint64_t d = dev_.info().max_allocation;
  return max_alloc_ != 0 && (d == 0 || max_alloc_ < d) ? max_alloc_ : d;
}

Memory::Memory(Device& dev, uint64_t limit_bytes, uint64_t max_allocation)
    : dev_(dev), limit_(limit_bytes), max_alloc_(max_allocation) {
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT | VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pi.queueFamilyIndex = dev.queue_family();
  vk_check(vkCreateCommandPool(dev.handle(), &pi, nullptr, &pool_), "vkCreateCommandPool");
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  vk_check(vkCreateFence(dev.handle(), &fi, nullptr, &fence_), "vkCreateFence");
}

Memory::~Memory() {
  vkDestroyFence(dev_.handle(), fence_, nullptr);
  vkDestroyCommandPool(dev_.handle(), pool_, nullptr);
}

bool Memory::ensure(Buffer& b, uint64_t bytes, const std::string& label, BufferKind kind, MemUse use) {
  if (b && b.size() >= bytes) return false;
  b = Buffer();
  b = create(label, bytes, kind, use);
  return true;
}

Buffer Memory::create(const std::string& label, uint64_t bytes, BufferKind kind, MemUse use) {
  bytes = std::max<uint64_t>(4, (bytes + 3) & ~uint64_t{3});
  std::lock_guard<std::mutex> lock(mu_);
  if (limit_ != 0 && allocated_ + bytes > limit_) {
    out_of_memory(label, bytes,
                  fmt::format("rocky would hold {} of device memory, over ROCKY_DEVICE_MEMORY_LIMIT={} ({})",
                              mib(allocated_ + bytes), limit_, mib(limit_)));
  }
  const uint64_t max_alloc = max_allocation();
  if (bytes > max_alloc && max_alloc != 0) {
    const std::string why = fmt::format("larger than the device's maxMemoryAllocationSize ({})", mib(max_alloc));
    // A weight is one allocation of its own size: -c and -ub do not change it.
    if (label.rfind("weight ", 0) == 0 || label.rfind("mmq repack ", 0) == 0) {
      throw OutOfMemoryError(
          fmt::format("{}: the tensor ({} bytes, {}) cannot be placed on this device: it is {}; a smaller "
                      "quantization of the model (e.g. rocky quantize … q4_k_m), a device or driver with a larger "
                      "maxMemoryAllocationSize, or --device cpu would help",
                      label, bytes, mib(bytes), why));
    }
    out_of_memory(label, bytes, why);
  }
  VkDevice d = dev_.handle();
  Buffer b;
  b.label_ = label;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  vk_check(vkCreateBuffer(d, &bi, nullptr, &b.buffer_), "vkCreateBuffer");
  b.owner_ = this;
  b.size_ = bytes;
  b.use_ = use;
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(d, b.buffer_, &req);
  const auto& mp = dev_.memory_properties();
  uint32_t type = UINT32_MAX;
  if (kind == BufferKind::DEVICE) {
    if (dev_.info().uma) {
      type = find_type(mp, req.memoryTypeBits,
                       VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                           VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    }
    if (type == UINT32_MAX) type = find_type(mp, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  } else {
    type = find_type(mp, req.memoryTypeBits,
                     VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                         VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (type == UINT32_MAX)
      type =
          find_type(mp, req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  }
  if (type == UINT32_MAX) type = find_type(mp, req.memoryTypeBits, 0);
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  // ROCKY_FAULT=alloc@N (core/fault.hpp): this allocation fails as the driver's refusal would.
  VkResult r =
      fault::hit(fault::Kind::Alloc) ? VK_ERROR_OUT_OF_DEVICE_MEMORY : vkAllocateMemory(d, &ai, nullptr, &b.memory_);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
    vkDestroyBuffer(d, b.buffer_, nullptr);
    b.buffer_ = VK_NULL_HANDLE;
    b.owner_ = nullptr;
    out_of_memory(label, bytes,
                  fmt::format("the driver refused ({}) with {} already allocated", vk_result_name(r), mib(allocated_)));
  }
  vk_check(r, "vkAllocateMemory");
  vk_check(vkBindBufferMemory(d, b.buffer_, b.memory_, 0), "vkBindBufferMemory");
  if (mp.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
    vk_check(vkMapMemory(d, b.memory_, 0, VK_WHOLE_SIZE, 0, &b.mapped_), "vkMapMemory");
  }
  allocated_ += bytes;
  by_use_[static_cast<size_t>(use)] += bytes;
  peak_ = std::max(peak_, allocated_);
  return b;
}

void Memory::free(Buffer& b) {
  VkDevice d = dev_.handle();
  if (b.mapped_) vkUnmapMemory(d, b.memory_);
  vkDestroyBuffer(d, b.buffer_, nullptr);
  vkFreeMemory(d, b.memory_, nullptr);
  std::lock_guard<std::mutex> lock(mu_);
  allocated_ -= b.size_;
  by_use_[static_cast<size_t>(b.use_)] -= b.size_;
}

void Memory::copy(VkBuffer src, uint64_t src_off, VkBuffer dst, uint64_t dst_off, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(copy_mu_);  // one command pool and fence for staging copies
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cb;
  vk_check(vkAllocateCommandBuffers(dev_.handle(), &ai, &cb), "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vkBeginCommandBuffer(cb, &bi);
  // Earlier compute writes / host writes → this copy → later host reads and shader reads.
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                       VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  VkBufferCopy region{src_off, dst_off, bytes};
  vkCmdCopyBuffer(cb, src, dst, 1, &region);
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0,
                       nullptr);
  vk_check(vkEndCommandBuffer(cb), "vkEndCommandBuffer");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  {
    std::lock_guard<std::mutex> lock(dev_.queue_mutex());
    vk_check(vkQueueSubmit(dev_.queue(), 1, &si, fence_), "vkQueueSubmit (copy)");
  }
  vk_check(vkWaitForFences(dev_.handle(), 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences (copy)");
  vkResetFences(dev_.handle(), 1, &fence_);
  vkFreeCommandBuffers(dev_.handle(), pool_, 1, &cb);
}

void Memory::upload(Buffer& dst, uint64_t offset, const void* src, uint64_t bytes) {
  if (bytes == 0) return;
  if (dst.mapped()) {
    std::memcpy(static_cast<uint8_t*>(dst.mapped()) + offset, src, bytes);
    return;
  }
  const uint64_t chunk = std::min<uint64_t>(bytes, 64ull << 20);
  Buffer staging = create("staging (upload)", chunk, BufferKind::HOST);
  for (uint64_t done = 0; done < bytes; done += chunk) {
    uint64_t n = std::min(chunk, bytes - done);
    std::memcpy(staging.mapped(), static_cast<const uint8_t*>(src) + done, n);
    copy(staging.handle(), 0, dst.handle(), offset + done, n);
  }
}

void Memory::download(const Buffer& src, uint64_t offset, void* dst, uint64_t bytes) {
  if (bytes == 0) return;
  if (src.mapped()) {
    std::memcpy(dst, static_cast<const uint8_t*>(src.mapped()) + offset, bytes);
    return;
  }
  const uint64_t chunk = std::min<uint64_t>(bytes, 64ull << 20);
  Buffer staging = create("staging (readback)", chunk, BufferKind::HOST);
  for (uint64_t done = 0; done < bytes; done += chunk) {
    uint64_t n = std::min(chunk, bytes - done);
    copy(src.handle(), offset + done, staging.handle(), 0, n);
    std::memcpy(static_cast<uint8_t*>(dst) + done, staging.mapped(), n);
  }
}

}  // namespace rocky::vulkan
