// CPU oracle backend (see cpu_backend.hpp).
#include "backend/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

#include "backend/cpu/ops.hpp"
#include "core/error.hpp"
#include "core/fault.hpp"

namespace rocky::backend::cpu {

using graph::Node;
using graph::Op;

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

void CpuBackend::load_weights(std::span<const gguf::TensorInfo* const> weights) {
  for (const gguf::TensorInfo* t : weights) {
    if (!dtype_info(t->type).computable) {
      fail("cpu backend: tensor '{}' has type {}, which rocky cannot compute", t->name, dtype_name(t->type));
    }
  }
}

std::unique_ptr<Context> CpuBackend::make_context(const ContextOptions& o) {
  return std::make_unique<CpuContext>(*this, o);
}

BackendStats CpuBackend::stats() const {
  BackendStats s;
  s.memory.kv = kv_.load();
  s.memory.arena = arena_.load();
  s.peak_bytes = peak_.load();
  return s;
}

void CpuBackend::account(int64_t d_kv, int64_t d_arena) {
  kv_ += static_cast<uint64_t>(d_kv);  // two's complement: a negative delta subtracts
  arena_ += static_cast<uint64_t>(d_arena);
  const uint64_t now = kv_.load() + arena_.load();
  uint64_t p = peak_.load();
  while (now > p && !peak_.compare_exchange_weak(p, now)) {}
}

namespace {
// MemAvailable of /proc/meminfo in bytes (0 when it cannot be read: no check).
uint64_t available_ram_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}
}  // namespace

CpuContext::CpuContext(CpuBackend& be, const ContextOptions& o) : be_(be), kv_(o.kv) {
  if (o.n_seq < 1) fail("cpu backend: {} sequences asked for (at least 1)", o.n_seq);
  if (o.n_seq > 1 && (o.kv.conv_state > 0 || o.kv.ssm_state > 0))
    fail(
        "cpu backend: {} sequences asked for, but a hybrid model's recurrent state is held for one sequence ("
        "batched decoding of recurrent layers is not implemented: use -np without --cont-batching)",
        o.n_seq);
  n_seq_ = o.n_seq;
  const graph::KvShape& kv = kv_;
  // Floats of one layer's K (or V): n_embd_kv · cells(l) · n_seq (a sliding-window ring holds fewer).
  auto layer_floats = [&](int32_t l) {
    return static_cast<size_t>(kv.n_embd_kv) * static_cast<size_t>(kv.cells(l)) * static_cast<size_t>(n_seq_);
  };
  uint64_t want = 0;
  for (int32_t l = 0; l < kv.n_layer; ++l) want += 2ull * layer_floats(l) * sizeof(float);
  // Linux overcommits: a KV cache larger than the RAM would be granted and then fill memory page by
  // page (a hang, then the OOM killer) instead of failing here.
  if (const uint64_t avail = available_ram_bytes(); avail > 0 && want > avail)
    throw OutOfMemoryError(
        fmt::format("cpu backend: the f32 KV cache needs {} MiB, more than the {} MiB of RAM "
                    "available (/proc/meminfo MemAvailable); lower -c",
                    want >> 20, avail >> 20));
  // ROCKY_FAULT=alloc@N (core/fault.hpp): the KV cache counts as one device allocation here.
  if (fault::hit(fault::Kind::Alloc))
    throw OutOfMemoryError(fmt::format(
        "cpu backend: cannot allocate the f32 KV cache ({} MiB): injected VK_ERROR_OUT_OF_DEVICE_MEMORY (ROCKY_FAULT)",
        want >> 20));
  try {
    k_cache_.resize(static_cast<size_t>(kv.n_layer));
    v_cache_.resize(static_cast<size_t>(kv.n_layer));
    for (int32_t l = 0; l < kv.n_layer; ++l) {
      k_cache_[static_cast<size_t>(l)].assign(layer_floats(l), 0.0f);
      v_cache_[static_cast<size_t>(l)].assign(layer_floats(l), 0.0f);
    }
    if (kv.recurrent()) {
      conv_state_.assign(static_cast<size_t>(kv.n_layer), std::vector<float>(static_cast<size_t>(kv.conv_state), 0.0f));
      ssm_state_.assign(static_cast<size_t>(kv.n_layer), std::vector<float>(static_cast<size_t>(kv.ssm_state), 0.0f));
    }
  } catch (const std::bad_alloc&) {
    throw OutOfMemoryError(fmt::format("cpu backend: cannot allocate the f32 KV cache ({} MiB); lower -c", want >> 20));
  }
  note_memory();
}

CpuContext::~CpuContext() { be_.account(-static_cast<int64_t>(kv_bytes_), -static_cast<int64_t>(arena_bytes_)); }

void CpuContext::reset() {
  for (auto& c : k_cache_) std::fill(c.begin(), c.end(), 0.0f);
  for (auto& c : v_cache_) std::fill(c.begin(), c.end(), 0.0f);
  for (auto& c : conv_state_) std::fill(c.begin(), c.end(), 0.0f);
  for (auto& c : ssm_state_) std::fill(c.begin(), c.end(), 0.0f);
}

ContextStats CpuContext::stats() const {
  ContextStats s;
  s.memory.kv = kv_bytes_;
  s.memory.arena = arena_bytes_;
  s.matmul_path = "cpu";
  return s;
}

void CpuContext::note_memory() {
  uint64_t kv = 0;
  for (const auto& c : k_cache_) kv += c.size() * sizeof(float);
  for (const auto& c : v_cache_) kv += c.size() * sizeof(float);
  for (const auto& c : conv_state_) kv += c.size() * sizeof(float);
  for (const auto& c : ssm_state_) kv += c.size() * sizeof(float);
  const uint64_t arena = arena_.size() * sizeof(float);
  be_.account(static_cast<int64_t>(kv - kv_bytes_), static_cast<int64_t>(arena - arena_bytes_));
  kv_bytes_ = kv;
  arena_bytes_ = arena;
}

float* CpuContext::at(const graph::Plan& p, int32_t node) {
  return arena_.data() + p.offset[static_cast<size_t>(node)] / sizeof(float);
}

void CpuContext::compute(const graph::Graph& g, const graph::Plan& p, std::span<const int32_t> tokens,
                         std::span<float> logits) {
  if (tokens.size() != static_cast<size_t>(g.n_tokens)) {
    fail("cpu backend: {} tokens given for a graph of {}", tokens.size(), g.n_tokens);
  }
  if (!(g.kv == kv_)) {
    fail("cpu backend: graph KV shape differs from the context's");
  }
  // ROCKY_FAULT=lost@N (core/fault.hpp): this step is the one the device is lost in.
  if (fault::hit(fault::Kind::Lost))
    throw DeviceLostError("cpu backend: device lost during compute (injected VK_ERROR_DEVICE_LOST: ROCKY_FAULT)");
  const bool multi = g.multi_seq();
  if (multi) {
    g.check_seqs(n_seq_);
  } else if (g.n_past + g.n_tokens > kv_.n_ctx) {
    fail("cpu backend: {} + {} positions exceed the KV cache ({})", g.n_past, g.n_tokens, kv_.n_ctx);
  }
  // Multi-sequence: token j's sequence's first cell, in a full layer (cell0) and in a ring (ring0).
  std::vector<int64_t> cell0, ring0;
  if (multi)
    for (int32_t s : g.seq) {
      cell0.push_back(int64_t{s} * kv_.n_ctx);
      ring0.push_back(int64_t{s} * kv_.n_ring);
    }
  if (kv_.has_ring()) g.check_ring(n_seq_);
  const size_t need = (p.arena_bytes + sizeof(float) - 1) / sizeof(float);
  if (arena_.size() < need) {
    arena_.resize(need);
    note_memory();
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const int32_t id = static_cast<int32_t>(i);
    auto src = [&](int k) { return at(p, n.src[static_cast<size_t>(k)]); };
    const int64_t cnt = n.ne0 * n.ne1;
    switch (n.op) {
      case Op::GET_ROWS: get_rows(view_of(*n.weight), tokens, at(p, id)); break;
      case Op::RMS_NORM:
        rms_norm(src(0), reinterpret_cast<const float*>(n.weight->data), n.eps, n.ne0, n.ne1, at(p, id));
        break;
      case Op::MATMUL: matmul(view_of(*n.weight), src(0), n.ne1, at(p, id)); break;
      case Op::ADD_BIAS:
        add_bias(src(0), reinterpret_cast<const float*>(n.weight->data), n.ne0, n.ne1, at(p, id));
        break;
      case Op::ROPE:
        if (n.weight != nullptr &&
            (n.weight->type != DType::F32 || n.weight->n_elements * 2 != uint64_t(n.rope.n_rot))) {
          fail("cpu backend: node {}: rope factors {} must be f32 [n_rot/2 = {}]", n.name, n.weight->name,
               n.rope.n_rot / 2);
        }
        if (multi) {  // one column per token at its own position
          for (int64_t j = 0; j < n.ne1; ++j)
            rope(src(0) + j * n.ne0, n.rope, n.weight ? reinterpret_cast<const float*>(n.weight->data) : nullptr,
                 g.pos[static_cast<size_t>(j)], 1, at(p, id) + j * n.ne0);
          break;
        }
        rope(src(0), n.rope, n.weight ? reinterpret_cast<const float*>(n.weight->data) : nullptr, g.n_past, n.ne1,
             at(p, id));
        break;
      case Op::KV_STORE: {
        const Node& s = g.nodes[static_cast<size_t>(n.src[0])];
        auto& cache = (n.kv == 0 ? k_cache_ : v_cache_)[static_cast<size_t>(n.layer)];
        const bool ring = kv_.ring_layer(n.layer);
        for (int64_t j = 0; j < s.ne1; ++j) {
          const size_t u = static_cast<size_t>(j);
          const int64_t pos = multi ? g.pos[u] : g.n_past + j;
          const int64_t cell = (multi ? (ring ? ring0[u] : cell0[u]) : 0) + kv_.cell(n.layer, pos);
          std::memcpy(cache.data() + cell * s.ne0, src(0) + j * s.ne0, static_cast<size_t>(s.ne0) * sizeof(float));
        }
        break;
      }
      case Op::ATTENTION: {
        const bool ring = kv_.ring_layer(n.layer);
        const int64_t r = ring ? kv_.n_ring : 0;
        if (multi) {
          attention_seqs(src(0), k_cache_[static_cast<size_t>(n.layer)].data(),
                         v_cache_[static_cast<size_t>(n.layer)].data(), n.attn, ring ? ring0 : cell0, g.pos, at(p, id),
                         r);
          break;
        }
        attention(src(0), k_cache_[static_cast<size_t>(n.layer)].data(), v_cache_[static_cast<size_t>(n.layer)].data(),
                  n.attn, g.n_past, n.ne1, at(p, id), r);
        break;
      }
      case Op::SILU_MUL: silu_mul(src(0), src(1), cnt, at(p, id)); break;
      case Op::ADD: add(src(0), src(1), cnt, at(p, id)); break;
      case Op::TAKE_COLS:
        std::memmove(at(p, id), src(0) + n.first_col * n.ne0, static_cast<size_t>(cnt) * sizeof(float));
        break;
      case Op::SCALE: scale(src(0), n.scale, cnt, at(p, id)); break;
      case Op::GELU_MUL: gelu_mul(src(0), src(1), cnt, at(p, id)); break;
      case Op::VIEW:  // shares its source's arena bytes (planner.hpp): nothing to compute
        break;
      case Op::SSM_CONV: {
        const Node& s = g.nodes[static_cast<size_t>(n.src[0])];
        const int64_t k = static_cast<int64_t>(n.weight->ne[0]);
        if (n.weight->type != DType::F32 || static_cast<int64_t>(n.weight->ne[1]) != s.ne0 ||
            (k - 1) * s.ne0 != kv_.conv_state || n.layer < 0 || n.layer >= kv_.n_layer) {
          fail("cpu backend: node {}: conv weight {} / state do not match the input [{}, {}]", n.name, n.weight->name,
               s.ne0, s.ne1);
        }
        ssm_conv(src(0), reinterpret_cast<const float*>(n.weight->data), k, s.ne0, s.ne1,
                 conv_state_[static_cast<size_t>(n.layer)].data(), at(p, id));
        break;
      }
      case Op::GATED_DELTA: {
        const graph::SsmParams& sp = n.ssm;
        if (int64_t(sp.n_v_heads) * sp.d_k * sp.d_v != kv_.ssm_state || n.layer < 0 || n.layer >= kv_.n_layer ||
            n.weight->type != DType::F32 || n.weight->n_elements != uint64_t(sp.n_v_heads)) {
          fail("cpu backend: node {}: delta-rule shape does not match the context's state", n.name);
        }
        gated_delta(src(0), src(1), src(2), reinterpret_cast<const float*>(n.weight->data), sp, n.ne1,
                    ssm_state_[static_cast<size_t>(n.layer)].data(), at(p, id));
        break;
      }
      case Op::TAKE_ROWS: {
        const Node& s = g.nodes[static_cast<size_t>(n.src[0])];
        take_rows(src(0), s.ne0, n.first_row, n.ne0, n.ne1, at(p, id));
        break;
      }
      case Op::SIGMOID_MUL: sigmoid_mul(src(0), src(1), cnt, at(p, id)); break;
    }
  }
  if (g.output < 0) {
    if (!logits.empty()) fail("cpu backend: logits requested from a graph without output");
    return;
  }
  const Node& out = g.nodes[static_cast<size_t>(g.output)];
  const size_t n_out = static_cast<size_t>(out.ne0 * out.ne1);
  if (logits.size() != n_out) fail("cpu backend: logits buffer holds {} floats, graph gives {}", logits.size(), n_out);
  std::memcpy(logits.data(), at(p, g.output), n_out * sizeof(float));
}

uint64_t CpuContext::kv_export_bytes(int32_t n) const {
  return uint64_t(kv_.n_layer) * 2 * uint64_t(n) * uint64_t(kv_.n_embd_kv) * sizeof(float);
}

void CpuContext::check_kv_range(const char* what, int32_t p0, int32_t n, size_t bytes, int32_t seq) const {
  if (seq < 0 || seq >= n_seq_) fail("cpu backend: {} of sequence {}: the context holds {}", what, seq, n_seq_);
  if (p0 < 0 || n < 0 || int64_t(p0) + n > kv_.n_ctx)
    fail("cpu backend: {} of positions [{}, {}) outside the KV cache ({} positions)", what, p0, int64_t(p0) + n,
         kv_.n_ctx);
  if (bytes != kv_export_bytes(n))
    fail("cpu backend: {} of {} positions needs {} bytes, got {}", what, n, kv_export_bytes(n), bytes);
}

// Position p of layer l is at column seq · cells(l) + cell(l, p); a ring's positions older than its
// last n_ring ones are exported as whatever their column holds now (the caller's to know) and, on
// import, written in ascending order, so that the newest n_ring positions are what the ring holds.
void CpuContext::export_kv(int32_t p0, int32_t n, std::span<uint8_t> dst, int32_t seq) {
  check_kv_range("export_kv", p0, n, dst.size(), seq);
  const size_t row = static_cast<size_t>(kv_.n_embd_kv) * sizeof(float);
  uint8_t* o = dst.data();
  for (int32_t l = 0; l < kv_.n_layer; ++l) {
    const int64_t c0 = int64_t{seq} * kv_.cells(l);
    for (const auto* c : {&k_cache_, &v_cache_}) {
      const auto* base = reinterpret_cast<const uint8_t*>((*c)[static_cast<size_t>(l)].data());
      for (int32_t i = 0; i < n; ++i, o += row)
        std::memcpy(o, base + row * static_cast<size_t>(c0 + kv_.cell(l, p0 + i)), row);
    }
  }
}

void CpuContext::import_kv(int32_t p0, int32_t n, std::span<const uint8_t> src, int32_t seq) {
  check_kv_range("import_kv", p0, n, src.size(), seq);
  const size_t row = static_cast<size_t>(kv_.n_embd_kv) * sizeof(float);
  const uint8_t* in = src.data();
  for (int32_t l = 0; l < kv_.n_layer; ++l) {
    const int64_t c0 = int64_t{seq} * kv_.cells(l);
    for (auto* c : {&k_cache_, &v_cache_}) {
      auto* base = reinterpret_cast<uint8_t*>((*c)[static_cast<size_t>(l)].data());
      for (int32_t i = 0; i < n; ++i, in += row)
        std::memcpy(base + row * static_cast<size_t>(c0 + kv_.cell(l, p0 + i)), in, row);
    }
  }
}

void CpuContext::check_state_layers(const char* what, std::span<const int32_t> layers, size_t bytes) const {
  if (!kv_.recurrent()) fail("cpu backend: {}: this model has no recurrent state", what);
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i] < 0 || layers[i] >= kv_.n_layer || (i > 0 && layers[i] <= layers[i - 1]))
      fail("cpu backend: {}: layer {} out of range or order (0 .. {}, ascending)", what, layers[i], kv_.n_layer - 1);
  if (bytes != state_export_bytes(layers.size()))
    fail("cpu backend: {} of {} layers needs {} bytes, got {}", what, layers.size(), state_export_bytes(layers.size()),
         bytes);
}

void CpuContext::export_state(std::span<const int32_t> layers, std::span<uint8_t> dst) {
  check_state_layers("export_state", layers, dst.size());
  uint8_t* o = dst.data();
  for (int32_t l : layers) {
    for (const auto* st : {&conv_state_, &ssm_state_}) {
      const auto& v = (*st)[static_cast<size_t>(l)];
      std::memcpy(o, v.data(), v.size() * sizeof(float));
      o += v.size() * sizeof(float);
    }
  }
}

void CpuContext::import_state(std::span<const int32_t> layers, std::span<const uint8_t> src) {
  check_state_layers("import_state", layers, src.size());
  const uint8_t* in = src.data();
  for (int32_t l : layers) {
    for (auto* st : {&conv_state_, &ssm_state_}) {
      auto& v = (*st)[static_cast<size_t>(l)];
      std::memcpy(v.data(), in, v.size() * sizeof(float));
      in += v.size() * sizeof(float);
    }
  }
}

std::vector<float> CpuContext::read_node(const graph::Graph& g, const graph::Plan& p, int32_t node) {
  const Node& n = g.nodes[static_cast<size_t>(node)];
  if (p.offset[static_cast<size_t>(node)] == graph::k_no_offset) return {};
  const float* s = at(p, node);
  return std::vector<float>(s, s + n.ne0 * n.ne1);
}

}  // namespace rocky::backend::cpu
