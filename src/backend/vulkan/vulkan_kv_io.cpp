// VulkanContext's host copies: KV cells and recurrent state exported to / imported from host bytes
// (the prefix cache; memcpy where the buffers are host-visible, else one staged submit), and the
// read-back of logits and of any node's output.
#include <algorithm>
#include <cstring>

#include "backend/vulkan/vulkan_backend.hpp"
#include "core/error.hpp"

namespace rocky::vulkan {

uint64_t VulkanContext::kv_export_bytes(int32_t n) const {
  return uint64_t(kv_.n_layer) * 2 * uint64_t(n) * uint64_t(kv_.n_embd_kv) * (kv_f16_ ? 2 : 4);
}

void VulkanContext::check_kv_range(const char* what, int32_t p0, int32_t n, size_t bytes, int32_t seq) const {
  if (seq < 0 || seq >= n_seq_) fail("vulkan backend: {} of sequence {}: the context holds {}", what, seq, n_seq_);
  if (p0 < 0 || n < 0 || int64_t(p0) + n > kv_.n_ctx)
    fail("vulkan backend: {} of positions [{}, {}) outside the KV cache ({} positions)", what, p0, int64_t(p0) + n,
         kv_.n_ctx);
  if (bytes != kv_export_bytes(n))
    fail("vulkan backend: {} of {} positions needs {} bytes, got {}", what, n, kv_export_bytes(n), bytes);
}

Buffer& VulkanContext::kv_staging(uint64_t bytes) {
  be_.memory_->ensure(kv_staging_, bytes, "KV staging (prefix cache)", BufferKind::HOST);
  return kv_staging_;
}

template <class Fn>
void VulkanContext::for_kv_runs(int32_t p0, int32_t n, int32_t seq, bool only_live, Fn&& fn) const {
  const uint64_t row = uint64_t(kv_.n_embd_kv) * (kv_f16_ ? 2 : 4);
  const uint64_t len = uint64_t(n) * row;  // one buffer's share of the host bytes
  for (size_t i = 0; i < kv_buffers_.size(); ++i) {
    const auto l = static_cast<int32_t>(i / 2);
    if (!kv_.ring_layer(l)) {
      fn(i, kv_cell_offset(l, seq, p0), i * len, len);
      continue;
    }
    // A ring: runs of positions up to where it wraps; an import writes only its newest n_ring.
    const int64_t end = int64_t(p0) + n;
    for (int64_t a = only_live ? std::max<int64_t>(p0, end - kv_.n_ring) : p0; a < end;) {
      const int64_t cnt = std::min<int64_t>(end - a, kv_.n_ring - a % kv_.n_ring);
      fn(i, kv_cell_offset(l, seq, static_cast<int32_t>(a)), i * len + uint64_t(a - p0) * row, uint64_t(cnt) * row);
      a += cnt;
    }
  }
}

void VulkanContext::export_kv(int32_t p0, int32_t n, std::span<uint8_t> dst, int32_t seq) {
  check_kv_range("export_kv", p0, n, dst.size(), seq);
  if (n == 0 || kv_buffers_.empty()) return;
  const bool mapped =
      std::all_of(kv_buffers_.begin(), kv_buffers_.end(), [](const Buffer& b) { return b.mapped() != nullptr; });
  if (mapped) {
    for_kv_runs(p0, n, seq, false, [&](size_t i, uint64_t off, uint64_t at, uint64_t bytes) {
      std::memcpy(dst.data() + at, static_cast<const uint8_t*>(kv_buffers_[i].mapped()) + off, bytes);
    });
    return;
  }
  Buffer& st = kv_staging(dst.size());
  recorder_->begin(false);
  for_kv_runs(p0, n, seq, false, [&](size_t i, uint64_t off, uint64_t at, uint64_t bytes) {
    recorder_->copy(kv_buffers_[i], off, st, at, bytes);
  });
  recorder_->submit_and_wait();
  std::memcpy(dst.data(), st.mapped(), dst.size());
}

void VulkanContext::import_kv(int32_t p0, int32_t n, std::span<const uint8_t> src, int32_t seq) {
  check_kv_range("import_kv", p0, n, src.size(), seq);
  if (n == 0 || kv_buffers_.empty()) return;
  const bool mapped =
      std::all_of(kv_buffers_.begin(), kv_buffers_.end(), [](const Buffer& b) { return b.mapped() != nullptr; });
  if (mapped) {
    for_kv_runs(p0, n, seq, true, [&](size_t i, uint64_t off, uint64_t at, uint64_t bytes) {
      std::memcpy(static_cast<uint8_t*>(kv_buffers_[i].mapped()) + off, src.data() + at, bytes);
    });
    return;
  }
  Buffer& st = kv_staging(src.size());
  std::memcpy(st.mapped(), src.data(), src.size());
  recorder_->begin(false);
  for_kv_runs(p0, n, seq, true, [&](size_t i, uint64_t off, uint64_t at, uint64_t bytes) {
    recorder_->copy(st, at, kv_buffers_[i], off, bytes);
  });
  recorder_->submit_and_wait();
}

void VulkanContext::check_state_layers(const char* what, std::span<const int32_t> layers, size_t bytes) const {
  if (!kv_.recurrent() || state_buffers_.empty()) fail("vulkan backend: {}: this model has no recurrent state", what);
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i] < 0 || layers[i] >= kv_.n_layer || (i > 0 && layers[i] <= layers[i - 1]))
      fail("vulkan backend: {}: layer {} out of range or order (0 .. {}, ascending)", what, layers[i], kv_.n_layer - 1);
  if (bytes != state_export_bytes(layers.size()))
    fail("vulkan backend: {} of {} layers needs {} bytes, got {}", what, layers.size(),
         state_export_bytes(layers.size()), bytes);
}

void VulkanContext::export_state(std::span<const int32_t> layers, std::span<uint8_t> dst) {
  check_state_layers("export_state", layers, dst.size());
  if (layers.empty()) return;
  const uint64_t part[2] = {uint64_t(kv_.conv_state) * 4, uint64_t(kv_.ssm_state) * 4};
  const bool mapped =
      std::all_of(state_buffers_.begin(), state_buffers_.end(), [](const Buffer& b) { return b.mapped() != nullptr; });
  Buffer* st = mapped ? nullptr : &kv_staging(dst.size());
  if (st) recorder_->begin(false);
  uint64_t o = 0;
  for (int32_t l : layers) {
    for (size_t k = 0; k < 2; ++k) {
      const Buffer& b = state_buffers_[size_t(l) * 2 + k];
      if (st)
        recorder_->copy(b, 0, *st, o, part[k]);
      else
        std::memcpy(dst.data() + o, b.mapped(), part[k]);
      o += part[k];
    }
  }
  if (!st) return;
  recorder_->submit_and_wait();
  std::memcpy(dst.data(), st->mapped(), dst.size());
}

void VulkanContext::import_state(std::span<const int32_t> layers, std::span<const uint8_t> src) {
  check_state_layers("import_state", layers, src.size());
  if (layers.empty()) return;
  const uint64_t part[2] = {uint64_t(kv_.conv_state) * 4, uint64_t(kv_.ssm_state) * 4};
  const bool mapped =
      std::all_of(state_buffers_.begin(), state_buffers_.end(), [](const Buffer& b) { return b.mapped() != nullptr; });
  Buffer* st = mapped ? nullptr : &kv_staging(src.size());
  if (st) {
    std::memcpy(st->mapped(), src.data(), src.size());
    recorder_->begin(false);
  }
  uint64_t o = 0;
  for (int32_t l : layers) {
    for (size_t k = 0; k < 2; ++k) {
      Buffer& b = state_buffers_[size_t(l) * 2 + k];
      if (st)
        recorder_->copy(*st, o, b, 0, part[k]);
      else
        std::memcpy(b.mapped(), src.data() + o, part[k]);
      o += part[k];
    }
  }
  if (st) recorder_->submit_and_wait();
}

void VulkanContext::read_logits(const graph::Graph& g, const graph::Plan& p, bool copy_out, std::span<float> logits) {
  if (g.output < 0) {  // a prefill ubatch that only fills the KV cache
    if (!logits.empty()) fail("compute: logits buffer given but the graph has no output node");
    return;
  }
  const graph::Node& out = g.nodes[static_cast<size_t>(g.output)];
  const uint64_t n_out = uint64_t(out.ne0) * uint64_t(out.ne1);
  if (logits.size() != n_out)
    fail("compute: logits buffer holds {} floats, the output node {} has {}", logits.size(), out.name, n_out);
  if (copy_out) {
    be_.memory_->download(readback_, 0, logits.data(), n_out * 4);  // mapped: a memcpy
  } else {
    be_.memory_->download(arena_, p.offset[static_cast<size_t>(g.output)], logits.data(), n_out * 4);
  }
}

std::vector<float> VulkanContext::read_node(const graph::Graph& g, const graph::Plan& p, int32_t node) {
  if (!node_written(node) && size_t(node) < g.nodes.size()) {
    fail(
        "graph node {} was not written in f32: its producer wrote only the q8_1 copy its int8 matmuls read "
        "(VulkanOptions::fuse_q8_1), or it is a matmul that wrote its consumer's output through its epilogue "
        "(VulkanOptions::fuse_epilogue)",
        g.nodes[size_t(node)].name);
  }
  ops::Region r = node_region(g, p, node);
  std::vector<float> v(r.bytes / 4);
  be_.memory_->download(arena_, r.offset, v.data(), r.bytes);
  return v;
}

}  // namespace rocky::vulkan
