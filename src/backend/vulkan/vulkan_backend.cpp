#include "backend/vulkan/vulkan_backend.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "backend/vulkan/ops/matmul_fast.hpp"
#include "backend/vulkan/push_constants.hpp"
#include "core/error.hpp"

namespace rocky::vulkan {

using graph::Op;

namespace {
std::string mib(uint64_t b) { return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1024.0 * 1024.0)); }
}  // namespace

VulkanBackend::VulkanBackend(const VulkanOptions& opts) : opts_(opts) {
  // ROCKY_MATMUL_TILE=bm,bn,bk,tm,tn overrides the matmul tile (tuning experiments).
  if (const char* t = std::getenv("ROCKY_MATMUL_TILE"); t && *t) {
    ops::MatmulTile m;
    if (std::sscanf(t, "%u,%u,%u,%u,%u", &m.bm, &m.bn, &m.bk, &m.tm, &m.tn) != 5 || m.tm == 0 || m.tn == 0 ||
        m.bm % m.tm || m.bn % m.tn || m.bk == 0) {
      fail("ROCKY_MATMUL_TILE='{}': expected bm,bn,bk,tm,tn with tm | bm and tn | bn", t);
    }
    opts_.tile = m;
  }
  InstanceOptions io;
  io.validation = opts.validation;
  instance_ = std::make_shared<Instance>(io);
  device_ = std::make_unique<Device>(instance_, opts.device);
  uint64_t limit = opts.memory_limit != 0 ? opts.memory_limit : device_memory_limit_from_env();
  memory_ = std::make_unique<Memory>(*device_, limit);
  pipelines_ = std::make_unique<Pipelines>(*device_, opts.persist_pipeline_cache);
  recorder_ = std::make_unique<Recorder>(*device_, opts.max_binding);
  if (opts_.tile.bm == 0) opts_.tile = ops::default_tile(device_->info());
  // Prefill matmul kernels: the option, or ROCKY_MATMUL=auto|mmq|mm|basic (lab scripts).
  if (const char* mm = std::getenv("ROCKY_MATMUL"); mm && *mm) opts_.matmul = ops::parse_matmul_path(mm, "ROCKY_MATMUL");
  // ROCKY_FUSE_EPILOGUE=0|1 overrides fuse_epilogue (A/B runs of rocky bench in lab scripts).
  if (const char* fe = std::getenv("ROCKY_FUSE_EPILOGUE"); fe && *fe) {
    const std::string v = fe;
    if (v != "0" && v != "1") fail("ROCKY_FUSE_EPILOGUE='{}': expected 0 or 1", v);
    opts_.fuse_epilogue = v == "1";
  }
  // Tiles of mul_mmq / mul_mm: the device's profile (ROCKY_TUNE=FILE overrides; src/tune/tile.hpp).
  mmq_profile_ = tune::select_profile(device_->info().vendor_id, device_->info().driver_name);
  if (const char* f = std::getenv("ROCKY_TUNE"); f && *f) mmq_profile_ = tune::load_profile_override(f, mmq_profile_);
}

VulkanBackend::~VulkanBackend() {
  // Order: GPU work done → buffers → pipelines → device → instance.
  if (device_) vkDeviceWaitIdle(device_->handle());
  recorder_.reset();
  tokens_ = Buffer();
  readback_ = Buffer();
  arena_ = Buffer();
  q81_slots_.clear();
  kv_buffers_.clear();
  weight_buffers_.clear();
  pipelines_.reset();
  memory_.reset();
  device_.reset();
}

std::string VulkanBackend::name() const { return fmt::format("vulkan:{} ({})", opts_.device, device_->info().name); }

std::string VulkanBackend::memory_summary() const {
  uint64_t kv = 0;
  for (const auto& b : kv_buffers_) kv += b.size();
  uint64_t arena = arena_ ? arena_.size() : 0;
  return fmt::format("weights {} + KV {} + arena {} = {}", mib(weight_bytes_), mib(kv), mib(arena),
                     mib(weight_bytes_ + kv + arena));
}

void VulkanBackend::load_weights(std::span<const gguf::TensorInfo* const> weights) {
  for (const gguf::TensorInfo* t : weights) {
    if (weights_.count(t)) continue;
    auto b = std::make_unique<Buffer>(memory_->create("weight " + t->name, t->n_bytes, BufferKind::DEVICE));
    memory_->upload(*b, 0, t->data, t->n_bytes);
    ops::Weight w;
    w.type = t->type;
    w.ne0 = t->ne[0];
    w.rows = t->rows();
    w.row_bytes = row_bytes(t->type, t->ne[0]);
    w.name = t->name;
    weight_bytes_ += b->size();
    w.buf = b.get();
    weight_buffers_.push_back(std::move(b));
    if ((opts_.matmul == ops::MatmulPath::AUTO || opts_.matmul == ops::MatmulPath::MMQ) && fast::mmq_supports(t->type)) {  // [M5] + the layout mul_mmq reads (matmul_fast.hpp)
      auto r = std::make_unique<Buffer>(fast::upload_for_mmq(*memory_, w, t->data, mmq_profile_.mmq_q4k_nibbles));
      weight_bytes_ += r->size();
      w.mmq_buf = r.get();
      weight_buffers_.push_back(std::move(r));
    }
    weights_[t] = w;
  }
}

void VulkanBackend::release_weights() {
  weights_.clear();
  weight_buffers_.clear();
  weight_bytes_ = 0;
}

void VulkanBackend::init_kv(const graph::KvShape& kv) {
  // Same shape again (Session::reset between benchmark repetitions): keep the buffers, zero them.
  const bool same = !kv_buffers_.empty() && kv.n_layer == kv_.n_layer && kv.n_embd_kv == kv_.n_embd_kv &&
                    kv.n_ctx == kv_.n_ctx && kv_f16_now_ == opts_.kv_f16;
  if (!same) {
    kv_buffers_.clear();
    kv_ = kv;
    kv_f16_now_ = opts_.kv_f16;
    const uint64_t elem = opts_.kv_f16 ? 2 : 4;
    const uint64_t bytes = uint64_t(kv.n_embd_kv) * uint64_t(kv.n_ctx) * elem;
    for (int32_t l = 0; l < kv.n_layer; ++l) {
      for (int kvi = 0; kvi < 2; ++kvi) {
        kv_buffers_.push_back(memory_->create(fmt::format("KV cache layer {} {} ({} positions)", l, kvi ? "V" : "K", kv.n_ctx),
                                              bytes, BufferKind::DEVICE));
      }
    }
  }
  // Zeros by the GPU, all layers in one submit (was one staged upload per buffer on discrete GPUs).
  recorder_->begin(false);
  for (const Buffer& b : kv_buffers_) recorder_->fill(b, 0);
  recorder_->submit_and_wait();
}

const ops::Weight& VulkanBackend::weight(const gguf::TensorInfo* t) const {
  if (t == nullptr) fail("graph node without its weight");
  auto it = weights_.find(t);
  if (it == weights_.end()) fail("weight {} was not loaded (load_weights)", t->name);
  return it->second;
}

ops::Region VulkanBackend::weight_region(const gguf::TensorInfo* t) const {
  const ops::Weight& w = weight(t);
  if (w.type != DType::F32) fail("weight {}: type {} where f32 is required", w.name, dtype_name(w.type));
  return {w.buf, 0, t->n_bytes};
}

ops::Region VulkanBackend::node_region(const graph::Graph& g, const graph::Plan& p, int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= g.nodes.size()) fail("graph: node id {} out of range", id);
  const auto& n = g.nodes[static_cast<size_t>(id)];
  if (p.offset.size() != g.nodes.size()) fail("plan has {} offsets for {} nodes", p.offset.size(), g.nodes.size());
  if (p.offset[static_cast<size_t>(id)] == graph::k_no_offset) fail("graph node {} ({}) has no arena output", id, n.name);
  if (n.out_type != DType::F32) fail("graph node {}: output type {} (the Vulkan backend keeps f32)", n.name, dtype_name(n.out_type));
  return {&arena_, p.offset[static_cast<size_t>(id)], n.out_bytes()};
}

void VulkanBackend::record_node(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id) {
  const graph::Node& n = g.nodes[static_cast<size_t>(id)];
  auto src = [&](int k) -> const graph::Node& {
    int32_t s = n.src[static_cast<size_t>(k)];
    if (s < 0 || s >= id) fail("graph node {}: source {} invalid ({})", n.name, k, s);
    return g.nodes[static_cast<size_t>(s)];
  };
  auto in = [&](int k) { return node_region(g, p, n.src[static_cast<size_t>(k)]); };
  const uint32_t ne0 = static_cast<uint32_t>(n.ne0), ne1 = static_cast<uint32_t>(n.ne1);
  switch (n.op) {
    case Op::GET_ROWS: {
      const ops::Weight& w = weight(n.weight);
      if (w.ne0 != uint64_t(n.ne0) || n.ne1 != g.n_tokens) fail("graph node {}: shape does not match its weight / tokens", n.name);
      ops::get_rows(env, w, {&tokens_, 0, uint64_t(g.n_tokens) * 4}, ne1, node_region(g, p, id), n.name);
      break;
    }
    case Op::RMS_NORM:
      if (src(0).ne0 != n.ne0 || n.weight->n_elements != uint64_t(n.ne0)) fail("graph node {}: shape mismatch", n.name);
      if (q81_.fused[size_t(id)]) {  // every consumer is an int8 matmul: write only their q8_1 input
        const int32_t s = q81_.slot[size_t(id)];
        fast::rms_norm_q8_1(env, in(0), weight_region(n.weight), ne0, ne1, n.eps,
                                slot_qs(s, fast::q8_1_qs_bytes(ne0, ne1)), slot_ds(s, fast::q8_1_ds_bytes(ne0, ne1)), n.name);
        break;
      }
      ops::rms_norm(env, in(0), weight_region(n.weight), ne0, ne1, n.eps, node_region(g, p, id), n.name);
      break;
    case Op::MATMUL: {
      const ops::Weight& w = weight(n.weight);
      if (w.ne0 != uint64_t(src(0).ne0) || w.rows != uint64_t(n.ne0) || src(0).ne1 != n.ne1) {
        fail("graph node {}: weight {} [{}, {}] does not fit x [{}, {}] → y [{}, {}]", n.name, w.name, w.ne0, w.rows,
             src(0).ne0, src(0).ne1, n.ne0, n.ne1);
      }
      if (q81_.mmq[size_t(id)]) {  // the int8 path reads the q8_1 copy of its input
        const int32_t s = q81_.slot[size_t(n.src[0])];
        if (s < 0) fail("graph node {}: int8 matmul without a q8_1 input (internal)", n.name);
        const ops::Region qs = slot_qs(s, fast::q8_1_qs_bytes(w.ne0, ne1)), ds = slot_ds(s, fast::q8_1_ds_bytes(w.ne0, ne1));
        ++int8_matmuls_;
        if (const int32_t c = q81_.epi_into[size_t(id)]; c >= 0) {
          // + bias / residual in mul_mmq's epilogue, written into the consumer's output (plan_q8_1).
          const graph::Node& cn = g.nodes[size_t(c)];
          fast::MmqEpilogue epi;
          if (cn.op == Op::ADD_BIAS) {
            epi.kind = fast::Epilogue::BIAS;
            epi.operand = weight_region(cn.weight);
          } else {
            epi.kind = fast::Epilogue::RESIDUAL;
            epi.operand = node_region(g, p, cn.src[cn.src[0] == id ? 1 : 0]);
          }
          // Label "blk.N.attn_q+attn_q_b": --profile groups it per op like the others.
          const std::string tail = cn.name.rfind("blk.", 0) == 0 && cn.name.find('.', 4) != std::string::npos
                                       ? cn.name.substr(cn.name.find('.', 4) + 1)
                                       : cn.name;
          fast::mul_mmq(env, mmq_profile_, w, qs, ds, ne1, node_region(g, p, c), env.info.int8_dot, n.name + "+" + tail, epi);
          ++fused_epilogues_;
          break;
        }
        ops::matmul_q8_1(env, w, qs, ds, ne1, node_region(g, p, id), n.name);
        break;
      }
      ops::matmul(env, w, in(0), ne1, node_region(g, p, id), n.name);
      break;
    }
    case Op::ADD_BIAS:
      if (n.weight->n_elements != uint64_t(n.ne0)) fail("graph node {}: bias size mismatch", n.name);
      if (q81_.epi_done[size_t(id)]) break;  // written by its matmul's epilogue
      ops::bias_add(env, in(0), weight_region(n.weight), ne0, uint64_t(ne0) * ne1, node_region(g, p, id), n.name);
      break;
    case Op::ROPE: {
      ops::RopeArgs a{static_cast<uint32_t>(n.rope.head_dim), static_cast<uint32_t>(n.rope.n_head),
                      static_cast<uint32_t>(n.rope.n_rot), ne1, static_cast<uint32_t>(g.n_past),
                      n.rope.mode == graph::RopeMode::NEOX ? abi::k_rope_neox : abi::k_rope_normal,
                      n.rope.freq_base, n.rope.freq_scale};
      if (uint64_t(a.head_dim) * a.n_head != uint64_t(n.ne0)) fail("graph node {}: rope shape mismatch", n.name);
      ops::Region ff;
      if (n.weight != nullptr) {
        if (n.weight->n_elements * 2 != uint64_t(a.n_rot)) fail("graph node {}: rope factors are not [n_rot/2]", n.name);
        ff = weight_region(n.weight);
      }
      ops::rope(env, in(0), a, node_region(g, p, id), n.name, ff);
      break;
    }
    case Op::KV_STORE: {
      if (n.layer < 0 || n.layer >= kv_.n_layer) fail("graph node {}: layer {} outside the KV cache", n.name, n.layer);
      if (src(0).ne0 != kv_.n_embd_kv || g.n_past + g.n_tokens > kv_.n_ctx) {
        fail("graph node {}: KV write of [{}, {}] at {} does not fit the cache [{}, {}]", n.name, src(0).ne0,
             g.n_tokens, g.n_past, kv_.n_embd_kv, kv_.n_ctx);
      }
      const Buffer& c = kv_buffers_[size_t(n.layer) * 2 + (n.kv ? 1 : 0)];
      ops::kv_store(env, in(0), static_cast<uint32_t>(kv_.n_embd_kv), static_cast<uint32_t>(g.n_tokens),
                    static_cast<uint32_t>(g.n_past), {&c, 0, c.size()}, n.name);
      break;
    }
    case Op::ATTENTION: {
      if (n.layer < 0 || n.layer >= kv_.n_layer) fail("graph node {}: layer {} outside the KV cache", n.name, n.layer);
      ops::AttnArgs a{static_cast<uint32_t>(n.attn.head_dim), static_cast<uint32_t>(n.attn.n_head),
                      static_cast<uint32_t>(n.attn.n_head_kv), ne1, static_cast<uint32_t>(g.n_past),
                      static_cast<uint32_t>(kv_.n_embd_kv), n.attn.scale};
      if (uint64_t(a.head_dim) * a.n_head_kv != uint64_t(kv_.n_embd_kv) || uint64_t(a.head_dim) * a.n_head != uint64_t(n.ne0)) {
        fail("graph node {}: attention shape mismatch with the KV cache", n.name);
      }
      const Buffer& kc = kv_buffers_[size_t(n.layer) * 2];
      const Buffer& vc = kv_buffers_[size_t(n.layer) * 2 + 1];
      ops::attention(env, in(0), {&kc, 0, kc.size()}, {&vc, 0, vc.size()}, a, node_region(g, p, id), n.name);
      break;
    }
    case Op::SILU_MUL:
      if (q81_.fused[size_t(id)]) {
        const int32_t s = q81_.slot[size_t(id)];
        fast::silu_mul_q8_1(env, in(0), in(1), ne0, ne1, slot_qs(s, fast::q8_1_qs_bytes(ne0, ne1)),
                            slot_ds(s, fast::q8_1_ds_bytes(ne0, ne1)), n.name);
        break;
      }
      ops::silu_mul(env, in(0), in(1), uint64_t(ne0) * ne1, node_region(g, p, id), n.name);
      break;
    case Op::ADD:
      if (q81_.epi_done[size_t(id)]) break;  // written by its matmul's epilogue
      ops::add(env, in(0), in(1), uint64_t(ne0) * ne1, node_region(g, p, id), n.name);
      break;
    case Op::TAKE_COLS:
      if (n.first_col + n.ne1 > src(0).ne1) fail("graph node {}: columns past the source", n.name);
      ops::take_cols(env, in(0), ne0, static_cast<uint32_t>(n.first_col), ne1, node_region(g, p, id), n.name);
      break;
    case Op::VIEW:  // shares its source's arena bytes (graph/planner.hpp): nothing to record
      if (uint64_t(src(0).ne0) * uint64_t(src(0).ne1) != uint64_t(ne0) * ne1) fail("graph node {}: view changes the size", n.name);
      break;
  }
}

void VulkanBackend::compute(const graph::Graph& g, const graph::Plan& p, std::span<const int32_t> tokens,
                            std::span<float> logits) {
  if (tokens.size() != static_cast<size_t>(g.n_tokens)) fail("compute: {} tokens for a graph of {}", tokens.size(), g.n_tokens);
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  const auto t0 = Clock::now();
  if (g.output >= static_cast<int32_t>(g.nodes.size())) fail("compute: output node {} out of range", g.output);
  // Token ids: written by the host each ubatch; in host-visible memory so that no staging submit is
  // needed (UMA: device memory is host-visible already). A discrete GPU whose device memory is
  // host-visible through a resizable BAR is not treated as UMA here: CPU reads of that memory are
  // uncached PCIe reads (the H200 took 20–23 ms to read 608 KB of logits, docs/tuning-log.md #12),
  // so tokens and logits go through host memory and the ubatch's own command buffer copies them.
  const bool host_io = opts_.host_io || !device_->info().uma || device_->info().type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  const uint64_t tok_bytes = std::max<uint64_t>(4, tokens.size() * 4);
  if (!tokens_ || tokens_.size() < tok_bytes) {
    tokens_ = Buffer();
    tokens_ = memory_->create("token ids", tok_bytes, host_io ? BufferKind::HOST : BufferKind::DEVICE);
  }
  memory_->upload(tokens_, 0, tokens.data(), tokens.size() * 4);
  if (p.arena_bytes > 0 && (!arena_ || arena_.size() < p.arena_bytes)) {
    arena_ = Buffer();
    arena_ = memory_->create(fmt::format("activation arena ({} tokens)", g.n_tokens), p.arena_bytes, BufferKind::DEVICE);
  }
  for (const auto& n : g.nodes) {
    if (n.op == Op::GET_ROWS && n.weight) {
      const ops::Weight& w = weight(n.weight);
      for (int32_t t : tokens)
        if (t < 0 || uint64_t(t) >= w.rows) fail("token id {} outside the vocabulary ({} rows of {})", t, w.rows, w.name);
    }
  }
  ops::Env env{*recorder_, *pipelines_, device_->info(), opts_.tile, 128, opts_.kv_f16};
  env.matmul = opts_.matmul;
  env.prof = &mmq_profile_;
  q81_ = plan_q8_1(env, g);
  while (q81_slots_.size() < q81_.n_slots) q81_slots_.emplace_back();
  for (uint32_t i = 0; i < q81_.n_slots; ++i) {  // grown only when a larger graph arrives
    auto& [qs, ds] = q81_slots_[i];
    if (!qs || qs.size() < q81_.qs_bytes) {
      qs = Buffer();
      qs = memory_->create(fmt::format("q8_1 activations (slot {})", i), q81_.qs_bytes, BufferKind::DEVICE);
    }
    if (!ds || ds.size() < q81_.ds_bytes) {
      ds = Buffer();
      ds = memory_->create(fmt::format("q8_1 activation scales (slot {})", i), q81_.ds_bytes, BufferKind::DEVICE);
    }
  }
  int8_matmuls_ = 0;
  fused_epilogues_ = 0;
  // Logits: copied into a host buffer by the same command buffer unless the arena is host-visible.
  uint64_t out_bytes = 0;
  if (g.output >= 0) {
    const graph::Node& out = g.nodes[static_cast<size_t>(g.output)];
    out_bytes = uint64_t(out.ne0) * uint64_t(out.ne1) * 4;
  }
  const bool copy_out = out_bytes > 0 && (host_io || !arena_.mapped());
  if (copy_out && (!readback_ || readback_.size() < out_bytes)) {
    readback_ = Buffer();
    readback_ = memory_->create("logits readback", out_bytes, BufferKind::HOST);
  }
  const auto t1 = Clock::now();
  recorder_->begin(opts_.profile);
  uint32_t flushed = 0;
  for (int32_t i = 0; i < static_cast<int32_t>(g.nodes.size()); ++i) {
    record_node(env, g, p, i);
    record_q8_1_output(env, g, p, i);
    // VulkanOptions::flush_dispatches: a 36-layer ubatch (≈ 760 dispatches) goes out in 8 submits.
    if (opts_.flush_dispatches > 0 && recorder_->dispatches() - flushed >= opts_.flush_dispatches) {
      recorder_->flush();
      flushed = recorder_->dispatches();
    }
  }
  if (copy_out) recorder_->copy(arena_, p.offset[static_cast<size_t>(g.output)], readback_, 0, out_bytes);
  const auto t2 = Clock::now();
  recorder_->submit_and_wait();
  const auto t3 = Clock::now();
  timing_.setup_ms += ms(t0, t1);
  timing_.record_ms += ms(t1, t2) - recorder_->flush_wait_ms();  // waits inside flush() are GPU time
  timing_.submit_wait_ms += ms(t2, t3) + recorder_->flush_wait_ms();
  timing_.computes += 1;
  timing_.dispatches += recorder_->dispatches();
  if (g.output < 0) {  // a prefill ubatch that only fills the KV cache
    if (!logits.empty()) fail("compute: logits buffer given but the graph has no output node");
    return;
  }
  const graph::Node& out = g.nodes[static_cast<size_t>(g.output)];
  const uint64_t n_out = uint64_t(out.ne0) * uint64_t(out.ne1);
  if (logits.size() != n_out) fail("compute: logits buffer holds {} floats, the output node {} has {}", logits.size(), out.name, n_out);
  if (copy_out) {
    memory_->download(readback_, 0, logits.data(), n_out * 4);  // mapped: a memcpy
  } else {
    memory_->download(arena_, p.offset[static_cast<size_t>(g.output)], logits.data(), n_out * 4);
  }
  timing_.readback_ms += ms(t3, Clock::now());
}

VulkanBackend::Q81Plan VulkanBackend::plan_q8_1(const ops::Env& env, const graph::Graph& g) const {
  const size_t nn = g.nodes.size();
  Q81Plan q;
  q.mmq.assign(nn, 0);
  q.slot.assign(nn, -1);
  q.fused.assign(nn, 0);
  // Which matmuls take the int8 path, and how many of each node's consumers do / do not.
  std::vector<uint32_t> mmq_uses(nn, 0), other_uses(nn, 0);
  for (size_t i = 0; i < nn; ++i) {
    const graph::Node& n = g.nodes[i];
    if (n.op == Op::MATMUL && n.weight && n.src[0] >= 0 && size_t(n.src[0]) < i) {
      auto it = weights_.find(n.weight);
      if (it != weights_.end() && ops::matmul_uses_q8_1(env, it->second, static_cast<uint32_t>(n.ne1))) q.mmq[i] = 1;
    }
    for (size_t k = 0; k < n.src.size(); ++k) {
      const int32_t s = n.src[k];
      if (s < 0 || size_t(s) >= i) continue;
      if (k == 0 && q.mmq[i]) {
        ++mmq_uses[size_t(s)];
      } else {
        ++other_uses[size_t(s)];
      }
    }
  }
  if (g.output >= 0 && size_t(g.output) < nn) ++other_uses[size_t(g.output)];
  // Slots: a node's q8_1 copy lives from its producer to its last int8 consumer; a slot is reused
  // once every consumer of its previous tenant has been recorded (graph order = recording order;
  // the recorder's hazard tracking puts the WAR barrier between the last read and the next write).
  std::vector<uint32_t> left;  // per slot: int8 consumers not yet recorded
  for (size_t i = 0; i < nn; ++i) {
    const graph::Node& n = g.nodes[i];
    if (q.mmq[i]) --left[size_t(q.slot[size_t(n.src[0])])];
    if (mmq_uses[i] == 0) continue;
    int32_t slot = -1;
    for (size_t k = 0; k < left.size() && slot < 0; ++k)
      if (left[k] == 0) slot = static_cast<int32_t>(k);
    if (slot < 0) {
      slot = static_cast<int32_t>(left.size());
      left.push_back(0);
    }
    left[size_t(slot)] = mmq_uses[i];
    q.slot[i] = slot;
    const uint64_t k = uint64_t(n.ne0), cols = uint64_t(n.ne1);
    q.qs_bytes = std::max(q.qs_bytes, fast::q8_1_qs_bytes(k, cols));
    q.ds_bytes = std::max(q.ds_bytes, fast::q8_1_ds_bytes(k, cols));
    // rms_norm and silu·mul write the q8_1 layout themselves when nothing else reads their output.
    q.fused[i] = opts_.fuse_q8_1 && other_uses[i] == 0 && (n.op == Op::RMS_NORM || n.op == Op::SILU_MUL) && k % 32 == 0;
  }
  q.n_slots = static_cast<uint32_t>(left.size());
  // Epilogue fusion: an int8 matmul i whose output is read by exactly one node, the NEXT one (j =
  // i + 1): an ADD_BIAS with an f32 bias, or an ADD whose other source r was written before i.
  // mul_mmq then writes W·x + bias / W·x + r into j's region at i and j records nothing. Safe with
  // the arena planner (graph/planner.hpp): j's region never overlaps j's inputs (r, i's output);
  // what it may overlap are outputs freed after node i — i's own f32 input among them, which the
  // int8 matmul does not read (it reads the q8_1 slot) — and nothing runs between i and j.
  q.epi_into.assign(nn, -1);
  q.epi_done.assign(nn, 0);
  if (!opts_.fuse_epilogue) return q;
  for (size_t i = 0; i + 1 < nn; ++i) {
    if (!q.mmq[i] || mmq_uses[i] != 0 || other_uses[i] != 1) continue;
    const graph::Node& n = g.nodes[i];
    const graph::Node& c = g.nodes[i + 1];
    if (c.ne0 != n.ne0 || c.ne1 != n.ne1) continue;
    const int32_t me = static_cast<int32_t>(i);
    bool ok = false;
    if (c.op == Op::ADD_BIAS && c.src[0] == me && c.weight && c.weight->n_elements == uint64_t(n.ne0)) {
      auto it = weights_.find(c.weight);
      ok = it != weights_.end() && it->second.type == DType::F32;
    } else if (c.op == Op::ADD && (c.src[0] == me) != (c.src[1] == me)) {
      const int32_t r = c.src[c.src[0] == me ? 1 : 0];
      ok = r >= 0 && r < me && !q.fused[size_t(r)] && g.nodes[size_t(r)].ne0 == n.ne0 && g.nodes[size_t(r)].ne1 == n.ne1;
    }
    if (!ok) continue;
    q.epi_into[i] = static_cast<int32_t>(i + 1);
    q.epi_done[i + 1] = 1;
  }
  return q;
}

void VulkanBackend::record_q8_1_output(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id) {
  const int32_t s = q81_.slot[size_t(id)];
  if (s < 0 || q81_.fused[size_t(id)]) return;
  // The f32 output is needed too (or its op has no q8_1 producer): quantize it once for all its
  // int8 consumers (e.g. the attention output before attn_output).
  const graph::Node& n = g.nodes[size_t(id)];
  const uint32_t k = static_cast<uint32_t>(n.ne0), cols = static_cast<uint32_t>(n.ne1);
  fast::quantize_q8_1(env, node_region(g, p, id), k, cols, slot_qs(s, fast::q8_1_qs_bytes(k, cols)),
                      slot_ds(s, fast::q8_1_ds_bytes(k, cols)), n.name + " q8_1");
}

bool VulkanBackend::node_written(int32_t id) const {
  return id < 0 || size_t(id) >= q81_.fused.size() || (!q81_.fused[size_t(id)] && q81_.epi_into[size_t(id)] < 0);
}

std::vector<float> VulkanBackend::read_node(const graph::Graph& g, const graph::Plan& p, int32_t node) {
  if (!node_written(node) && size_t(node) < g.nodes.size()) {
    fail("graph node {} was not written in f32: its producer wrote only the q8_1 copy its int8 matmuls read "
         "(VulkanOptions::fuse_q8_1), or it is a matmul that wrote its consumer's output through its epilogue "
         "(VulkanOptions::fuse_epilogue)", g.nodes[size_t(node)].name);
  }
  ops::Region r = node_region(g, p, node);
  std::vector<float> v(r.bytes / 4);
  memory_->download(arena_, r.offset, v.data(), r.bytes);
  return v;
}

}  // namespace rocky::vulkan
