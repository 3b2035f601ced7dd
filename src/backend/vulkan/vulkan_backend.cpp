#include "backend/vulkan/vulkan_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <cstdlib>

#include <sys/mman.h>
#include <unistd.h>

#include "backend/vulkan/ops/matmul_fast.hpp"
#include "backend/vulkan/pipeline_stats.hpp"
#include "backend/vulkan/push_constants.hpp"
#include "core/error.hpp"
#include "tune/store.hpp"

namespace rocky::vulkan {

using graph::Op;

// The whole pages inside [p, p + n) go back to the kernel: MADV_PAGEOUT reclaims them (clean file
// pages are dropped, anonymous ones swapped or kept) and never changes their contents, so it is
// safe for a GGUF read into memory (GgufFile::from_bytes) too. Best effort: errors are ignored.
static void release_host_pages(const void* p, uint64_t n) {
#ifdef MADV_PAGEOUT
  const long ps = ::sysconf(_SC_PAGESIZE);
  if (ps <= 0 || p == nullptr) return;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), pg = static_cast<uintptr_t>(ps);
  const uintptr_t b = (a + pg - 1) / pg * pg, e = (a + n) / pg * pg;
  if (e > b) (void)::madvise(reinterpret_cast<void*>(b), e - b, MADV_PAGEOUT);
#else
  (void)p;
  (void)n;
#endif
}

VulkanBackend::VulkanBackend(const VulkanOptions& opts) : opts_(opts) {
  const LabOptions& lab = opts_.lab;  // precedence: lab switch > option > tuning profile > default
  InstanceOptions io;
  io.validation = opts.validation;
  io.loader = opts.loader;
  io.xdg_runtime_dir = opts.xdg_runtime_dir;
  instance_ = std::make_shared<Instance>(io);
  device_ = std::make_unique<Device>(instance_, opts.device);
  uint64_t limit = opts.memory_limit != 0 ? opts.memory_limit : lab.device_memory_limit;
  memory_ = std::make_unique<Memory>(*device_, limit, opts.max_allocation);
  pipelines_ = std::make_unique<Pipelines>(*device_, opts.persist_pipeline_cache, opts.cache_dir);
  if (!lab.pipeline_stats.empty()) pipelines_->set_capture_statistics(true);
  // The A/B kill switches (ROCKY_SWITCH, parsed at the program's boundary).
  if (lab.matmul) opts_.matmul = *lab.matmul;
  if (lab.fuse_epilogue) opts_.fuse_epilogue = *lab.fuse_epilogue;
  if (lab.decode_replay) opts_.replay_decode = *lab.decode_replay;
  if (lab.fuse_decode) opts_.fuse_decode = *lab.fuse_decode;
  if (lab.fold_norm) opts_.fold_norm = *lab.fold_norm;
  // The device's tuning profile (src/tune): the built-in one of its class; a profile `rocky tune`
  // wrote for this device and driver (CACHE_DIR/rocky/profiles; src/tune/store.hpp) replaces it,
  // said on stderr (no_profile, --no-profile, skips it); ROCKY_TUNE's fragment goes over either.
  const DeviceInfo& di = device_->info();
  base_profile_ = tune::select_profile(di.vendor_id, di.driver_name, di.type == VK_PHYSICAL_DEVICE_TYPE_CPU);
  if (!opts.no_profile) {
    const tune::ProfileLookup found =
        tune::find_profile(tune::profiles_dir(opts.cache_dir),
                           {di.vendor_id, di.device_id, di.driver_version, di.name, di.driver_name, di.driver_info});
    for (const std::string& n : found.notes) fmt::print(stderr, "rocky: {}\n", n);
    if (!found.path.empty()) {
      base_profile_ = tune::load_profile_override(found.path, base_profile_);
      base_profile_.name = "tuned (" + found.path + ")";
      fmt::print(stderr, "rocky: tuning profile {} (--no-profile: the built-in one)\n", found.path);
    }
  }
  apply_profile();
}

void VulkanBackend::apply_profile() {
  const LabOptions& lab = opts_.lab;
  mmq_profile_ =
      lab.tune.is_null() ? base_profile_ : tune::apply_profile_json(lab.tune, base_profile_, lab.tune_source);
  // The options a profile field backs: set explicitly (tests, tools) they win, else the profile's.
  tile_ = opts_.tile.bm != 0 ? opts_.tile : mmq_profile_.matmul;
  if (tile_.tm == 0 || tile_.tn == 0 || tile_.bm % tile_.tm || tile_.bn % tile_.tn || tile_.bk == 0)
    fail("VulkanOptions::tile {}: expected TM | BM, TN | BN and BK > 0", tile_.str());
  matvec_max_cols_ = opts_.matvec_max_cols != VulkanOptions::k_auto ? opts_.matvec_max_cols : mmq_profile_.mmv.cols;
  matvec_q8_ = opts_.matvec_q8 != VulkanOptions::k_auto ? opts_.matvec_q8 : mmq_profile_.mmv.q8;
  if (matvec_q8_ > fast::k_matvec_q8_max_cols)
    fail("VulkanOptions::matvec_q8 {}: expected 0 (off) … {} columns", matvec_q8_, fast::k_matvec_q8_max_cols);
  if (!device_->info().int8_dot) matvec_q8_ = 0;
  delta_chunk_ = opts_.delta_chunk != VulkanOptions::k_auto ? opts_.delta_chunk : mmq_profile_.delta_chunk;
  if (delta_chunk_ != 0 && (delta_chunk_ < 2 || delta_chunk_ > 128 || delta_chunk_ % 2 != 0))
    fail("VulkanOptions::delta_chunk {}: expected 0 (serial kernel) or an even chunk size 2 … 128", delta_chunk_);
}

void VulkanBackend::set_lab(const LabOptions& lab) {
  opts_.lab = lab;
  apply_profile();
  ++generation_;
}

VulkanBackend::~VulkanBackend() {
  // Order: GPU work done → the default context → weights → pipelines → device → instance. Other
  // contexts must be gone already (backend.hpp).
  if (device_) vkDeviceWaitIdle(device_->handle());
  if (pipelines_ && !opts_.lab.pipeline_stats.empty()) {  // ROCKY_PIPELINE_STATS=PREFIX (lab)
    std::vector<PipelineStats> st;
    try {
      for (auto& s : collect_statistics(*pipelines_))
        if (opts_.lab.pipeline_stats == "all" || s.pipeline.rfind(opts_.lab.pipeline_stats, 0) == 0)
          st.push_back(std::move(s));
      print_stats(st, stderr);  // stderr: bench's stdout is its table or JSON
    } catch (const std::exception& e) {
      fmt::print(stderr, "rocky: ROCKY_PIPELINE_STATS: {}\n", e.what());
    }
  }
  default_.reset();
  weight_buffers_.clear();
  pipelines_.reset();
  memory_.reset();
  device_.reset();
}

std::string VulkanBackend::name() const { return fmt::format("vulkan:{} ({})", opts_.device, device_->info().name); }

std::string VulkanBackend::memory_summary() {
  return backend::memory_summary(weight_bytes_, context().kv_bytes(), context().arena_bytes());
}

backend::BackendStats VulkanBackend::stats() const {
  backend::BackendStats s;
  s.kind = "vulkan";
  s.memory.weights = memory_->allocated_bytes(MemUse::WEIGHTS);
  s.memory.kv = memory_->allocated_bytes(MemUse::KV);
  s.memory.arena = memory_->allocated_bytes(MemUse::ARENA);
  s.memory.other = memory_->allocated_bytes(MemUse::OTHER);
  s.peak_bytes = memory_->peak_bytes();
  s.matmul = ops::matmul_path_name(opts_.matmul);
  s.tiles = mmq_profile_.name + ": " + mmq_profile_.tiles_str();
  s.validation = instance_->validation();
  s.validation_errors = instance_->error_count();
  s.pipelines = pipelines_->size();
  s.pipeline_create_ms = pipelines_->create_ms();
  return s;
}

std::unique_ptr<backend::Context> VulkanBackend::make_context(const backend::ContextOptions& o) {
  return std::make_unique<VulkanContext>(*this, o);
}

void VulkanBackend::init_kv(const graph::KvShape& kv) {
  // Same shape again (Session::reset between benchmark repetitions): keep the buffers, zero them.
  if (default_ && kv.n_layer == default_->kv().n_layer && kv.n_embd_kv == default_->kv().n_embd_kv &&
      kv.n_ctx == default_->kv().n_ctx && kv.conv_state == default_->kv().conv_state &&
      kv.ssm_state == default_->kv().ssm_state) {
    default_->reset();
    return;
  }
  default_.reset();
  default_ = std::make_unique<VulkanContext>(*this, backend::ContextOptions{kv, 1});
}

VulkanContext& VulkanBackend::context() {
  if (!default_) default_ = std::make_unique<VulkanContext>(*this, backend::ContextOptions{});
  return *default_;
}

void VulkanBackend::load_weights(std::span<const gguf::TensorInfo* const> weights) {
  const bool mmq = opts_.matmul == ops::MatmulPath::AUTO || opts_.matmul == ops::MatmulPath::MMQ;
  for (const gguf::TensorInfo* t : weights) {
    if (weights_.count(t)) continue;
    ++generation_;
    ops::Weight w;
    w.type = t->type;
    w.ne0 = t->ne[0];
    w.rows = t->rows();
    w.row_bytes = row_bytes(t->type, t->ne[0]);
    w.name = t->name;
    // A quantized weight the int8 path cannot take is said, never silently slow: refused with
    // --matmul mmq, a note (once per type) with auto; plain f32/f16/bf16 weights go to mul_mm / matmul.
    if (mmq && dtype_info(t->type).block_elems > 1 && !fast::mmq_supports(t->type)) {
      if (opts_.matmul == ops::MatmulPath::MMQ)
        fail("{}: weight type {} has no int8 (mul_mmq) kernel (supported: {}); use --matmul auto, mm or basic", t->name,
             dtype_name(t->type), fast::mmq_supported_types());
      if (std::find(noted_types_.begin(), noted_types_.end(), t->type) == noted_types_.end()) {
        noted_types_.push_back(t->type);
        fmt::print(stderr,
                   "rocky: note: weight type {} (first: {}) has no int8 (mul_mmq) kernel (supported: {}); "
                   "those matmuls run on the f32 kernels\n",
                   dtype_name(t->type), t->name, fast::mmq_supported_types());
      }
    }
    // One device copy per weight: the mmq repack (matmul_fast.hpp) where the int8 path takes
    // the type — every kernel reads it (get_rows_mmq, matvec_mmq, mul_mmq) — else the GGUF rows.
    if (mmq && fast::mmq_supports(t->type) && t->ne[0] % 32 == 0) {  // the layout mul_mmq reads
      auto r = std::make_unique<Buffer>(fast::upload_for_mmq(*memory_, w, t->data, mmq_profile_.mmq_nibbles(t->type)));
      weight_bytes_ += r->size();
      w.mmq_buf = r.get();
      weight_buffers_.push_back(std::move(r));
    } else {
      auto b = std::make_unique<Buffer>(
          memory_->create("weight " + t->name, t->n_bytes, BufferKind::DEVICE, MemUse::WEIGHTS));
      memory_->upload(*b, 0, t->data, t->n_bytes);
      weight_bytes_ += b->size();
      w.buf = b.get();
      weight_buffers_.push_back(std::move(b));
    }
    weights_[t] = w;
    // UMA: the device memory is host RAM too; the mapped file's pages of this tensor are not needed
    // any more (a later reader, e.g. the CPU oracle of rocky verify, faults them in again).
    if (device_->info().uma) release_host_pages(t->data, t->n_bytes);
  }
}

void VulkanBackend::release_weights() {
  weights_.clear();
  weight_buffers_.clear();
  weight_bytes_ = 0;
  ++generation_;
}

namespace {
// An ATTENTION node's kernel arguments (record_node, and compute's scratch sizing).
ops::AttnArgs attn_args(const graph::Graph& g, const graph::Node& n, const graph::KvShape& kv) {
  uint32_t n_kv_max = 0;  // a multi-sequence ubatch: its longest key range
  for (int32_t x : g.pos) n_kv_max = std::max(n_kv_max, static_cast<uint32_t>(x) + 1u);
  return ops::AttnArgs{static_cast<uint32_t>(n.attn.head_dim),
                       static_cast<uint32_t>(n.attn.n_head),
                       static_cast<uint32_t>(n.attn.n_head_kv),
                       static_cast<uint32_t>(n.ne1),
                       static_cast<uint32_t>(g.n_past),
                       static_cast<uint32_t>(kv.n_embd_kv),
                       n.attn.scale,
                       static_cast<uint32_t>(n.attn.window),
                       n_kv_max};
}

// A multi-sequence ubatch that starts with a prompt chunk: its first `n` tokens (≥ 8) belong
// to one sequence at consecutive positions pos0 … — their attention runs as an ordinary
// single-sequence ubatch (the tiled prefill kernel where it applies) over that sequence's cells,
// the rest with the per-token table. n = 0: no such run.
struct LeadRun {
  int32_t n = 0, pos0 = 0, seq = 0;
};
LeadRun lead_run(const graph::Graph& g) {
  if (!g.multi_seq() || g.n_tokens < 8) return {};
  int32_t r = 1;
  while (r < g.n_tokens && g.seq[size_t(r)] == g.seq[0] && g.pos[size_t(r)] == g.pos[0] + r) ++r;
  if (r < 8) return {};
  return {r, g.pos[0], g.seq[0]};
}
// The attention calls record_node makes for a node with a lead run: the prompt chunk (n_past
// = pos0 from the push constant, no step buffer, no per-token table) and the rest (per-token
// table), or the whole ubatch as one call. The scratch sizing and the replay key use these same
// arguments, so that each call's split plan is the one sized and keyed.
struct AttnCall {
  ops::AttnArgs a;
  bool lead = false;  // recorded with Env::step = nullptr, Env::tok_pos = false
};
std::vector<AttnCall> attn_calls(const ops::AttnArgs& a, const LeadRun& run, int32_t n_tokens) {
  if (run.n <= 0) return {{a, false}};
  ops::AttnArgs a1 = a;
  a1.n_tokens = static_cast<uint32_t>(run.n);
  a1.n_past = static_cast<uint32_t>(run.pos0);
  a1.n_kv_max = 0;
  std::vector<AttnCall> r{{a1, true}};
  if (run.n < n_tokens) {
    ops::AttnArgs a2 = a;
    a2.n_tokens = static_cast<uint32_t>(n_tokens - run.n);
    a2.tok0 = static_cast<uint32_t>(run.n);
    r.push_back({a2, false});
  }
  return r;
}
}  // namespace

VulkanContext::VulkanContext(VulkanBackend& be, const backend::ContextOptions& o) : be_(be), kv_(o.kv) {
  if (o.n_seq < 1) fail("Vulkan context: {} sequences asked for (at least 1)", o.n_seq);
  if (o.n_seq > 1 && (o.kv.conv_state > 0 || o.kv.ssm_state > 0))
    fail(
        "Vulkan context: {} sequences asked for, but a hybrid model's recurrent state is held for one sequence "
        "(batched decoding of recurrent layers is not implemented: use -np without --cont-batching)",
        o.n_seq);
  n_seq_ = o.n_seq;
  if (kv_.n_layer < 0 || kv_.n_embd_kv < 0 || kv_.n_ctx < 0) fail("Vulkan context: negative KV shape");
  recorder_ = std::make_unique<Recorder>(*be_.device_, be_.opts_.max_binding, be_.opts_.lab.vulkan_timeout_s);
  kv_f16_ = be_.opts_.kv_f16;
  const uint64_t elem = kv_f16_ ? 2 : 4;
  const uint64_t cells = uint64_t(kv_.n_ctx) * uint64_t(n_seq_);
  const uint64_t bytes = uint64_t(kv_.n_embd_kv) * cells * elem;
  if (cells * uint64_t(kv_.n_embd_kv) > UINT32_MAX)
    fail(
        "Vulkan context: a KV cache of {} sequences × {} positions × {} values exceeds 32-bit indexing; lower -c or "
        "-np",
        n_seq_, kv_.n_ctx, kv_.n_embd_kv);
  for (int32_t l = 0; l < kv_.n_layer; ++l) {
    for (int kvi = 0; kvi < 2; ++kvi) {
      kv_buffers_.push_back(be_.memory_->create(
          n_seq_ == 1 ? fmt::format("KV cache layer {} {} ({} positions)", l, kvi ? "V" : "K", kv_.n_ctx)
                      : fmt::format("KV cache layer {} {} ({} sequences × {} positions)", l, kvi ? "V" : "K", n_seq_,
                                    kv_.n_ctx),
          bytes, BufferKind::DEVICE, MemUse::KV));
    }
  }
  if (kv_.recurrent()) {
    if (kv_.conv_state <= 0 || kv_.ssm_state <= 0) fail("Vulkan context: recurrent state shape without both parts");
    for (int32_t l = 0; l < kv_.n_layer; ++l) {
      state_buffers_.push_back(be_.memory_->create(fmt::format("conv state layer {}", l), uint64_t(kv_.conv_state) * 4,
                                                   BufferKind::DEVICE, MemUse::KV));
      state_buffers_.push_back(be_.memory_->create(fmt::format("delta-rule state layer {}", l),
                                                   uint64_t(kv_.ssm_state) * 4, BufferKind::DEVICE, MemUse::KV));
    }
  }
  reset();
}

VulkanContext::~VulkanContext() {
  recorder_.reset();  // waits for its frames still in flight
}

void VulkanContext::reset() {
  if (kv_buffers_.empty() && state_buffers_.empty()) return;
  // Zeros by the GPU, all layers in one submit (was one staged upload per buffer on discrete GPUs).
  recorder_->begin(false);
  for (const Buffer& b : kv_buffers_) recorder_->fill(b, 0);
  for (const Buffer& b : state_buffers_) recorder_->fill(b, 0);
  recorder_->submit_and_wait();
}

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
  if (kv_staging_.size() < bytes) {
    kv_staging_ = Buffer{};
    kv_staging_ = be_.memory_->create("KV staging (prefix cache)", bytes, BufferKind::HOST, MemUse::OTHER);
  }
  return kv_staging_;
}

void VulkanContext::export_kv(int32_t p0, int32_t n, std::span<uint8_t> dst, int32_t seq) {
  check_kv_range("export_kv", p0, n, dst.size(), seq);
  if (n == 0 || kv_buffers_.empty()) return;
  const uint64_t off = kv_cell_offset(seq, p0);
  const uint64_t len = dst.size() / kv_buffers_.size();
  const bool mapped =
      std::all_of(kv_buffers_.begin(), kv_buffers_.end(), [](const Buffer& b) { return b.mapped() != nullptr; });
  if (mapped) {
    for (size_t i = 0; i < kv_buffers_.size(); ++i)
      std::memcpy(dst.data() + i * len, static_cast<const uint8_t*>(kv_buffers_[i].mapped()) + off, len);
    return;
  }
  Buffer& st = kv_staging(dst.size());
  recorder_->begin(false);
  for (size_t i = 0; i < kv_buffers_.size(); ++i) recorder_->copy(kv_buffers_[i], off, st, i * len, len);
  recorder_->submit_and_wait();
  std::memcpy(dst.data(), st.mapped(), dst.size());
}

void VulkanContext::import_kv(int32_t p0, int32_t n, std::span<const uint8_t> src, int32_t seq) {
  check_kv_range("import_kv", p0, n, src.size(), seq);
  if (n == 0 || kv_buffers_.empty()) return;
  const uint64_t off = kv_cell_offset(seq, p0);
  const uint64_t len = src.size() / kv_buffers_.size();
  const bool mapped =
      std::all_of(kv_buffers_.begin(), kv_buffers_.end(), [](const Buffer& b) { return b.mapped() != nullptr; });
  if (mapped) {
    for (size_t i = 0; i < kv_buffers_.size(); ++i)
      std::memcpy(static_cast<uint8_t*>(kv_buffers_[i].mapped()) + off, src.data() + i * len, len);
    return;
  }
  Buffer& st = kv_staging(src.size());
  std::memcpy(st.mapped(), src.data(), src.size());
  recorder_->begin(false);
  for (size_t i = 0; i < kv_buffers_.size(); ++i) recorder_->copy(st, i * len, kv_buffers_[i], off, len);
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

uint64_t VulkanContext::kv_bytes() const {
  uint64_t kv = 0;
  for (const auto& b : kv_buffers_) kv += b.size();
  for (const auto& b : state_buffers_) kv += b.size();
  return kv;
}

double VulkanContext::gpu_ms() const { return recorder_->gpu_ms(); }

backend::ContextStats VulkanContext::stats() const {
  backend::ContextStats s;
  s.memory.kv = kv_bytes();
  s.memory.arena = arena_bytes();
  for (const auto& [qs, ds] : q81_slots_) s.memory.other += qs.size() + ds.size();
  s.memory.other += tokens_.size() + readback_.size() + step_dev_.size() + attn_scratch_.size();
  s.host = timing_;
  for (const auto& t : recorder_->timings()) s.ops.push_back({t.label, t.ms});
  // The kernels the last prefill ubatch used: "mmq" (int8 path), else the option's f32 kernels.
  // Some prefill matmuls on the int8 path and some not (a weight type mul_mmq lacks): "mmq+mm" /
  // "mmq+basic", so a partial fallback is visible in `rocky bench` rather than reported as "mmq".
  const char* f32_path = be_.opts_.matmul == ops::MatmulPath::MM ? "mm" : "basic";
  // "mmv": matmuls of 2 … matvec_max_cols tokens as the multi-column matvec (a short ubatch's).
  std::string path = int8_matmuls_ > 0 ? "mmq" : "";
  if (mmv_matmuls_ > 0) path += path.empty() ? "mmv" : "+mmv";
  if (path.empty() || f32_prefill_matmuls_ > 0) path += path.empty() ? f32_path : std::string("+") + f32_path;
  s.matmul_path = path;
  s.int8_matmuls = int8_matmuls_;
  s.fused_epilogues = fused_epilogues_;
  s.dispatches = recorder_->dispatches();
  return s;
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

ops::Region VulkanContext::node_region(const graph::Graph& g, const graph::Plan& p, int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= g.nodes.size()) fail("graph: node id {} out of range", id);
  const auto& n = g.nodes[static_cast<size_t>(id)];
  if (p.offset.size() != g.nodes.size()) fail("plan has {} offsets for {} nodes", p.offset.size(), g.nodes.size());
  if (p.offset[static_cast<size_t>(id)] == graph::k_no_offset)
    fail("graph node {} ({}) has no arena output", id, n.name);
  if (n.out_type != DType::F32)
    fail("graph node {}: output type {} (the Vulkan backend keeps f32)", n.name, dtype_name(n.out_type));
  return {&arena_, p.offset[static_cast<size_t>(id)], n.out_bytes()};
}

void VulkanContext::record_node(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id) {
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
      const ops::Weight& w = be_.weight(n.weight);
      if (w.ne0 != uint64_t(n.ne0) || n.ne1 != g.n_tokens)
        fail("graph node {}: shape does not match its weight / tokens", n.name);
      // Decode: word 0 of the token buffer is the step (n_past), the token id follows; a
      // multi-sequence ubatch: the ids follow the per-token table.
      const Buffer& tb = env.step != nullptr ? *env.step : tokens_;
      const uint64_t tok_off = env.tok_pos           ? (abi::k_tok_table + 2u * uint64_t(g.n_tokens)) * 4u
                               : env.step != nullptr ? 4u
                                                     : 0u;
      ops::get_rows(env, w, {&tb, tok_off, uint64_t(g.n_tokens) * 4}, ne1, node_region(g, p, id), n.name);
      break;
    }
    case Op::RMS_NORM:
      if (src(0).ne0 != n.ne0 || n.weight->n_elements != uint64_t(n.ne0)) fail("graph node {}: shape mismatch", n.name);
      if (q81_.fused[size_t(id)]) {  // every consumer is an int8 matmul: write only their q8_1 input
        const int32_t s = q81_.slot[size_t(id)];
        fast::rms_norm_q8_1(env, in(0), be_.weight_region(n.weight), ne0, ne1, n.eps,
                            slot_qs(s, fast::q8_1_qs_bytes(ne0, ne1)), slot_ds(s, fast::q8_1_ds_bytes(ne0, ne1)),
                            n.name);
        break;
      }
      ops::rms_norm(env, in(0), be_.weight_region(n.weight), ne0, ne1, n.eps, node_region(g, p, id), n.name);
      break;
    case Op::MATMUL: {
      const ops::Weight& w = be_.weight(n.weight);
      if (w.ne0 != uint64_t(src(0).ne0) || w.rows != uint64_t(n.ne0) || src(0).ne1 != n.ne1) {
        fail("graph node {}: weight {} [{}, {}] does not fit x [{}, {}] → y [{}, {}]", n.name, w.name, w.ne0, w.rows,
             src(0).ne0, src(0).ne1, n.ne0, n.ne1);
      }
      if (q81_.mmq[size_t(id)]) {  // the int8 path reads the q8_1 copy of its input
        const int32_t s = q81_.slot[size_t(n.src[0])];
        if (s < 0) fail("graph node {}: int8 matmul without a q8_1 input (internal)", n.name);
        const ops::Region qs = slot_qs(s, fast::q8_1_qs_bytes(w.ne0, ne1)),
                          ds = slot_ds(s, fast::q8_1_ds_bytes(w.ne0, ne1));
        ++int8_matmuls_;
        if (const int32_t c = q81_.epi_into[size_t(id)]; c >= 0) {
          // + bias / residual in mul_mmq's epilogue, written into the consumer's output (plan_q8_1).
          const graph::Node& cn = g.nodes[size_t(c)];
          fast::MmqEpilogue epi;
          if (cn.op == Op::ADD_BIAS) {
            epi.kind = fast::Epilogue::BIAS;
            epi.operand = be_.weight_region(cn.weight);
          } else {
            epi.kind = fast::Epilogue::RESIDUAL;
            epi.operand = node_region(g, p, cn.src[cn.src[0] == id ? 1 : 0]);
          }
          // Label "blk.N.attn_q+attn_q_b": --profile groups it per op like the others.
          const std::string tail = cn.name.rfind("blk.", 0) == 0 && cn.name.find('.', 4) != std::string::npos
                                       ? cn.name.substr(cn.name.find('.', 4) + 1)
                                       : cn.name;
          fast::mul_mmq(env, be_.mmq_profile_, w, qs, ds, ne1, node_region(g, p, c), env.info.int8_dot,
                        n.name + "+" + tail, epi);
          ++fused_epilogues_;
          break;
        }
        ops::matmul_q8_1(env, w, qs, ds, ne1, node_region(g, p, id), n.name);
        break;
      }
      // A decode RMSNorm folded into this matvec (plan_norm_fold): x is the norm's input.
      const int32_t nf = id < int32_t(norm_into_.size()) ? norm_into_[size_t(id)] : -1;
      fast::MatvecNorm fold;
      if (nf >= 0) {
        const graph::Node& nn = g.nodes[size_t(nf)];
        fold.weight = be_.weight_region(nn.weight);
        fold.eps = nn.eps;
      }
      const ops::Region x_in = nf >= 0 ? node_region(g, p, g.nodes[size_t(nf)].src[0]) : in(0);
      if (const int32_t c = q81_.epi_into[size_t(id)]; c >= 0) {  // decode matvec + bias / residual
        const graph::Node& cn = g.nodes[size_t(c)];
        const ops::Region x = x_in, out = node_region(g, p, c);
        if (x.offset + x.bytes <= out.offset || out.offset + out.bytes <= x.offset) {
          fast::MmqEpilogue epi;
          epi.kind = cn.op == Op::ADD_BIAS ? fast::Epilogue::BIAS : fast::Epilogue::RESIDUAL;
          epi.operand =
              cn.op == Op::ADD_BIAS ? be_.weight_region(cn.weight) : node_region(g, p, cn.src[cn.src[0] == id ? 1 : 0]);
          const std::string tail = cn.name.rfind("blk.", 0) == 0 && cn.name.find('.', 4) != std::string::npos
                                       ? cn.name.substr(cn.name.find('.', 4) + 1)
                                       : cn.name;
          fast::matvec_mmq(env, w, x, out, n.name + "+" + tail, epi, nf >= 0 ? &fold : nullptr, ne1);
          if (ne1 > 1) ++mmv_matmuls_;
          ++fused_epilogues_;
          break;
        }
        q81_.epi_into[size_t(id)] = -1;  // x shares memory with the consumer's output: unfused
        q81_.epi_done[size_t(c)] = 0;
      }
      if (nf >= 0) {
        fast::matvec_mmq(env, w, x_in, node_region(g, p, id), n.name, {}, &fold);
        break;
      }
      if (ne1 > 1 && ne1 <= env.mmv_cols && ops::matvec_uses_mmq(env, w)) {
        ++mmv_matmuls_;
      } else if (ne1 > 1) {
        ++f32_prefill_matmuls_;
      }
      ops::matmul(env, w, in(0), ne1, node_region(g, p, id), n.name);
      break;
    }
    case Op::ADD_BIAS:
      if (n.weight->n_elements != uint64_t(n.ne0)) fail("graph node {}: bias size mismatch", n.name);
      if (q81_.epi_done[size_t(id)]) break;  // written by its matmul's epilogue
      ops::bias_add(env, in(0), be_.weight_region(n.weight), ne0, uint64_t(ne0) * ne1, node_region(g, p, id), n.name);
      break;
    case Op::ROPE: {
      ops::RopeArgs a{static_cast<uint32_t>(n.rope.head_dim),
                      static_cast<uint32_t>(n.rope.n_head),
                      static_cast<uint32_t>(n.rope.n_rot),
                      ne1,
                      static_cast<uint32_t>(g.n_past),
                      n.rope.mode == graph::RopeMode::NEOX ? abi::k_rope_neox : abi::k_rope_normal,
                      n.rope.freq_base,
                      n.rope.freq_scale};
      if (uint64_t(a.head_dim) * a.n_head != uint64_t(n.ne0)) fail("graph node {}: rope shape mismatch", n.name);
      ops::Region ff;
      if (n.weight != nullptr) {
        if (n.weight->n_elements * 2 != uint64_t(a.n_rot))
          fail("graph node {}: rope factors are not [n_rot/2]", n.name);
        ff = be_.weight_region(n.weight);
      }
      ops::rope(env, in(0), a, node_region(g, p, id), n.name, ff);
      break;
    }
    case Op::KV_STORE: {
      if (n.layer < 0 || n.layer >= kv_.n_layer) fail("graph node {}: layer {} outside the KV cache", n.name, n.layer);
      if (src(0).ne0 != kv_.n_embd_kv || (!g.multi_seq() && g.n_past + g.n_tokens > kv_.n_ctx)) {
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
      const ops::AttnArgs a = attn_args(g, n, kv_);
      if (uint64_t(a.head_dim) * a.n_head_kv != uint64_t(kv_.n_embd_kv) ||
          uint64_t(a.head_dim) * a.n_head != uint64_t(n.ne0)) {
        fail("graph node {}: attention shape mismatch with the KV cache", n.name);
      }
      const Buffer& kc = kv_buffers_[size_t(n.layer) * 2];
      const Buffer& vc = kv_buffers_[size_t(n.layer) * 2 + 1];
      if (const LeadRun run = lead_run(g); run.n > 0) {
        // The prompt chunk: n_past = pos0 from the push constant, over its sequence's cells.
        ops::Env e1 = env;
        e1.step = nullptr;
        e1.tok_pos = false;
        const std::vector<AttnCall> calls = attn_calls(a, run, g.n_tokens);
        const ops::AttnArgs& a1 = calls[0].a;
        const uint64_t c0 = uint64_t(run.seq) * uint64_t(kv_.n_ctx) * uint64_t(kv_.n_embd_kv) * (kv_f16_ ? 2 : 4);
        const ops::Region q = in(0), out = node_region(g, p, id);
        const uint64_t col = uint64_t(n.ne0) * 4, n1 = uint64_t(run.n);
        ops::attention(e1, {q.buf, q.offset, n1 * col}, {&kc, c0, kc.size() - c0}, {&vc, c0, vc.size() - c0}, a1,
                       {out.buf, out.offset, n1 * col}, n.name);
        if (run.n < g.n_tokens) {  // the rest (decode tokens, other sequences): the per-token table
          const ops::AttnArgs& a2 = calls[1].a;
          ops::attention(env, {q.buf, q.offset + n1 * col, q.bytes - n1 * col}, {&kc, 0, kc.size()},
                         {&vc, 0, vc.size()}, a2, {out.buf, out.offset + n1 * col, out.bytes - n1 * col}, n.name);
        }
        break;
      }
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
    case Op::SCALE: ops::scale(env, in(0), n.scale, uint64_t(ne0) * ne1, node_region(g, p, id), n.name); break;
    case Op::GELU_MUL: ops::gelu_mul(env, in(0), in(1), uint64_t(ne0) * ne1, node_region(g, p, id), n.name); break;
    case Op::VIEW:  // shares its source's arena bytes (graph/planner.hpp): nothing to record
      if (uint64_t(src(0).ne0) * uint64_t(src(0).ne1) != uint64_t(ne0) * ne1)
        fail("graph node {}: view changes the size", n.name);
      break;
    case Op::SSM_CONV: {
      const graph::Node& x = src(0);
      if (size_t(n.layer) * 2 + 1 >= state_buffers_.size() || n.weight->ne[1] != uint64_t(x.ne0) ||
          uint64_t(kv_.conv_state) != (n.weight->ne[0] - 1) * uint64_t(x.ne0))
        fail("graph node {}: conv weight / state do not match the context's recurrent state", n.name);
      const Buffer& st = state_buffers_[size_t(n.layer) * 2];
      ops::ssm_conv(env, in(0), be_.weight_region(n.weight), static_cast<uint32_t>(n.weight->ne[0]), ne0, ne1,
                    {&st, 0, st.size()}, node_region(g, p, id), n.name);
      break;
    }
    case Op::GATED_DELTA: {
      const graph::SsmParams& sp = n.ssm;
      if (size_t(n.layer) * 2 + 1 >= state_buffers_.size() ||
          int64_t(sp.n_v_heads) * sp.d_k * sp.d_v != kv_.ssm_state || n.weight->n_elements != uint64_t(sp.n_v_heads))
        fail("graph node {}: delta-rule shape does not match the context's recurrent state", n.name);
      const Buffer& st = state_buffers_[size_t(n.layer) * 2 + 1];
      const ops::DeltaArgs d{
          uint32_t(sp.n_k_heads), uint32_t(sp.n_v_heads), uint32_t(sp.d_k), uint32_t(sp.d_v), ne1, sp.eps};
      ops::gated_delta(env, in(0), in(1), in(2), be_.weight_region(n.weight), d, {&st, 0, st.size()},
                       node_region(g, p, id), n.name);
      break;
    }
    case Op::TAKE_ROWS:
      ops::take_rows(env, in(0), static_cast<uint32_t>(src(0).ne0), static_cast<uint32_t>(n.first_row), ne0, ne1,
                     node_region(g, p, id), n.name);
      break;
    case Op::SIGMOID_MUL:
      ops::sigmoid_mul(env, in(0), in(1), uint64_t(ne0) * ne1, node_region(g, p, id), n.name);
      break;
  }
}

void VulkanContext::compute(const graph::Graph& g, const graph::Plan& p, std::span<const int32_t> tokens,
                            std::span<float> logits) {
  if (tokens.size() != static_cast<size_t>(g.n_tokens))
    fail("compute: {} tokens for a graph of {}", tokens.size(), g.n_tokens);
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  const auto t0 = Clock::now();
  if (g.output >= static_cast<int32_t>(g.nodes.size())) fail("compute: output node {} out of range", g.output);
  // Token ids: written by the host each ubatch; in host-visible memory so that no staging submit is
  // needed (UMA: device memory is host-visible already). A discrete GPU whose device memory is
  // host-visible through a resizable BAR is not treated as UMA here: CPU reads of that memory are
  // uncached PCIe reads (the H200 took 20–23 ms to read 608 KB of logits, docs/tuning-log.md #12),
  // so tokens and logits go through host memory and the ubatch's own command buffer copies them.
  const bool host_io =
      be_.opts_.host_io || !be_.device_->info().uma || be_.device_->info().type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  // Decode (one token): the token buffer holds {n_past, token id} — word 0 is the step the
  // decode kernels read (ops::Env::step), so the recorded commands do not depend on n_past and one
  // 8-byte host write per token updates both.
  // A multi-sequence ubatch: the token buffer holds the step block {0, per token (position,
  // sequence's first cache column), the token ids} (abi.h's k_tok_table), read like the decode step
  // (POS_BUF = 2), so its commands do not depend on the positions either and are replayed too.
  const bool multi = g.multi_seq();
  if (multi) g.check_seqs(n_seq_);
  const bool decode = g.n_tokens == 1 && !multi;
  const uint64_t step_bytes = multi ? (abi::k_tok_table + 3u * tokens.size()) * 4u : decode ? 8u : 0u;
  const uint64_t tok_bytes = std::max<uint64_t>({step_bytes, 4, tokens.size() * 4});
  if (!tokens_ || tokens_.size() < tok_bytes) {
    tokens_ = Buffer();
    tokens_ =
        be_.memory_->create("token ids", tok_bytes, host_io ? BufferKind::HOST : BufferKind::DEVICE, MemUse::OTHER);
    ++buffers_gen_;
  }
  if (multi) {
    std::vector<uint32_t> block(step_bytes / 4, 0u);
    for (size_t j = 0; j < tokens.size(); ++j) {
      block[abi::k_tok_table + 2 * j] = static_cast<uint32_t>(g.pos[j]);
      block[abi::k_tok_table + 2 * j + 1] = static_cast<uint32_t>(g.seq[j]) * static_cast<uint32_t>(kv_.n_ctx);
      block[abi::k_tok_table + 2 * tokens.size() + j] = static_cast<uint32_t>(tokens[j]);
    }
    be_.memory_->upload(tokens_, 0, block.data(), step_bytes);
  } else if (decode) {
    if (g.n_past < 0 || (!kv_buffers_.empty() && int64_t(g.n_past) + g.n_tokens > kv_.n_ctx))
      fail("compute: decode at position {} does not fit the KV cache ({} positions)", g.n_past, kv_.n_ctx);
    const uint32_t step[2] = {static_cast<uint32_t>(g.n_past), static_cast<uint32_t>(tokens[0])};
    be_.memory_->upload(tokens_, 0, step, sizeof step);
  } else {
    be_.memory_->upload(tokens_, 0, tokens.data(), tokens.size() * 4);
  }
  if (p.arena_bytes > 0 && (!arena_ || arena_.size() < p.arena_bytes)) {
    arena_ = Buffer();
    arena_ = be_.memory_->create(fmt::format("activation arena ({} tokens)", g.n_tokens), p.arena_bytes,
                                 BufferKind::DEVICE, MemUse::ARENA);
    ++buffers_gen_;
  }
  for (const auto& n : g.nodes) {
    if (n.op == Op::GET_ROWS && n.weight) {
      const ops::Weight& w = be_.weight(n.weight);
      for (int32_t t : tokens)
        if (t < 0 || uint64_t(t) >= w.rows)
          fail("token id {} outside the vocabulary ({} rows of {})", t, w.rows, w.name);
    }
  }
  // Logits: copied into a host buffer by the same command buffer unless the arena is host-visible.
  uint64_t out_bytes = 0;
  if (g.output >= 0) {
    const graph::Node& out = g.nodes[static_cast<size_t>(g.output)];
    out_bytes = uint64_t(out.ne0) * uint64_t(out.ne1) * 4;
  }
  const bool copy_out = out_bytes > 0 && (host_io || !arena_.mapped());
  // Replay: the same decode graph, plan and buffers as the captured command buffer — submit it
  // again (the host wrote the token id and the step buffer above).
  const bool replay = (decode || multi) && be_.opts_.replay_decode && !be_.opts_.profile;
  uint64_t key = 0;
  if (replay) {
    key = replay_key_of(g, p, copy_out);
    if (recorder_->captured() && key == replay_key_) {
      const auto t1 = Clock::now();
      recorder_->replay();
      const auto t3 = Clock::now();
      timing_.setup_ms += ms(t0, t1);
      timing_.submit_wait_ms += ms(t1, t3);
      timing_.computes += 1;
      timing_.replays += 1;
      timing_.dispatches += recorder_->dispatches();
      read_logits(g, p, copy_out, logits);
      timing_.readback_ms += ms(t3, Clock::now());
      return;
    }
  }
  recorder_->drop_capture();
  ops::Env env{*recorder_, *be_.pipelines_, be_.device_->info(), be_.tile_, 128, be_.opts_.kv_f16};
  env.matmul = be_.opts_.matmul;
  env.prof = &be_.mmq_profile_;
  env.attn = be_.opts_.lab.attn;
  env.mmv_cols = std::clamp<uint32_t>(be_.matvec_max_cols_, 1, fast::k_matvec_max_cols);
  env.mmv_q8 = be_.matvec_q8_;
  env.delta.chunk = be_.delta_chunk_;
  // Discrete GPUs (host_io): the step and token id are copied into device memory first (one 8-byte
  // copy in the command buffer), so the decode kernels do not each read host memory over PCIe.
  if ((decode || multi) && host_io && (!step_dev_ || step_dev_.size() < step_bytes)) {
    step_dev_ = Buffer();
    step_dev_ = be_.memory_->create(multi ? "ubatch step (positions, token ids)" : "decode step (n_past, token id)",
                                    std::max<uint64_t>(step_bytes, 8), BufferKind::DEVICE, MemUse::OTHER);
    ++buffers_gen_;
  }
  if (decode || multi) env.step = host_io ? &step_dev_ : &tokens_;
  env.tok_pos = multi;
  q81_ = plan_q8_1(env, g);
  plan_decode_fusion(g, p, env);
  while (q81_slots_.size() < q81_.n_slots) q81_slots_.emplace_back();
  for (uint32_t i = 0; i < q81_.n_slots; ++i) {  // grown only when a larger graph arrives
    auto& [qs, ds] = q81_slots_[i];
    if (!qs || qs.size() < q81_.qs_bytes) {
      qs = Buffer();
      qs = be_.memory_->create(fmt::format("q8_1 activations (slot {})", i), q81_.qs_bytes, BufferKind::DEVICE);
      ++buffers_gen_;
    }
    if (!ds || ds.size() < q81_.ds_bytes) {
      ds = Buffer();
      ds = be_.memory_->create(fmt::format("q8_1 activation scales (slot {})", i), q81_.ds_bytes, BufferKind::DEVICE);
      ++buffers_gen_;
    }
  }
  // Split decode attention's scratch: the largest any ATTENTION node of this graph needs.
  uint64_t attn_bytes = 0;
  const LeadRun lead = lead_run(g);
  for (const auto& n : g.nodes)
    if (n.op == Op::ATTENTION) {
      for (const AttnCall& c : attn_calls(attn_args(g, n, kv_), lead, g.n_tokens)) {
        ops::Env ec = env;
        if (c.lead) {  // the prompt chunk, as record_node issues it
          ec.step = nullptr;
          ec.tok_pos = false;
        }
        attn_bytes = std::max(attn_bytes, ops::attention_scratch_bytes(ec, c.a));
      }
    }
  if (attn_bytes > 0 && (!attn_scratch_ || attn_scratch_.size() < attn_bytes)) {
    attn_scratch_ = Buffer();
    attn_scratch_ = be_.memory_->create("split attention scratch", attn_bytes, BufferKind::DEVICE);
    ++buffers_gen_;
  }
  env.attn_scratch = attn_scratch_ ? &attn_scratch_ : nullptr;
  int8_matmuls_ = 0;
  f32_prefill_matmuls_ = 0;
  mmv_matmuls_ = 0;
  fused_epilogues_ = 0;
  if (copy_out && (!readback_ || readback_.size() < out_bytes)) {
    readback_ = Buffer();
    readback_ = be_.memory_->create("logits readback", out_bytes, BufferKind::HOST);
    ++buffers_gen_;
  }
  const auto t1 = Clock::now();
  if (replay) {
    recorder_->begin_capture();  // one command buffer, kept for the next tokens
  } else {
    recorder_->begin(be_.opts_.profile);
  }
  if ((decode || multi) && host_io) recorder_->copy(tokens_, 0, step_dev_, 0, step_bytes);
  uint32_t flushed = 0;
  for (int32_t i = 0; i < static_cast<int32_t>(g.nodes.size()); ++i) {
    if (fused_decode_[size_t(i)] == 1) {
      record_rope_kv(env, g, p, i);
    } else if (fused_decode_[size_t(i)] == 0) {
      record_node(env, g, p, i);
    }
    record_q8_1_output(env, g, p, i);
    // VulkanOptions::flush_dispatches: a 36-layer ubatch (≈ 760 dispatches) goes out in 8 submits.
    if (be_.opts_.flush_dispatches > 0 && recorder_->dispatches() - flushed >= be_.opts_.flush_dispatches) {
      recorder_->flush();
      flushed = recorder_->dispatches();
    }
  }
  if (copy_out) recorder_->copy(arena_, p.offset[static_cast<size_t>(g.output)], readback_, 0, out_bytes);
  const auto t2 = Clock::now();
  recorder_->submit_and_wait();
  if (replay) replay_key_ = replay_key_of(g, p, copy_out);  // after this call's allocations
  const auto t3 = Clock::now();
  timing_.setup_ms += ms(t0, t1);
  timing_.record_ms += ms(t1, t2) - recorder_->flush_wait_ms();  // waits inside flush() are GPU time
  timing_.submit_wait_ms += ms(t2, t3) + recorder_->flush_wait_ms();
  timing_.computes += 1;
  timing_.dispatches += recorder_->dispatches();
  read_logits(g, p, copy_out, logits);
  timing_.readback_ms += ms(t3, Clock::now());
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

// The captured command buffer's key: everything its recording read, except n_past and the token
// ids (the step and token buffers carry those). A change of any of it means re-recording.
uint64_t VulkanContext::replay_key_of(const graph::Graph& g, const graph::Plan& p, bool copy_out) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over 64-bit words
  auto mix = [&h](uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  };
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return uint64_t(u);
  };
  mix(be_.generation_);
  mix(buffers_gen_);
  mix(uint64_t(g.n_tokens));
  mix(uint64_t(int64_t(g.output)));
  mix(copy_out ? 1 : 0);
  mix(g.multi_seq() ? 1 : 0);       // POS_BUF = 2 kernels, the step block's layout (n_tokens above)
  const LeadRun run = lead_run(g);  // a prompt chunk's attention records its n_past and cells
  mix(uint64_t(uint32_t(run.n)) | uint64_t(uint32_t(run.pos0)) << 32);
  mix(uint64_t(uint32_t(run.seq)));
  mix(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const graph::Node& n = g.nodes[i];
    mix(uint64_t(n.op) | uint64_t(n.out_type) << 8 | uint64_t(uint32_t(n.layer)) << 16 | uint64_t(n.kv) << 48);
    mix(uint64_t(n.ne0));
    mix(uint64_t(n.ne1));
    for (int32_t s : n.src) mix(uint64_t(uint32_t(s)));
    mix(reinterpret_cast<uintptr_t>(n.weight));
    mix(uint64_t(n.first_col));
    mix(bits(n.eps));
    mix(uint64_t(n.rope.mode) | uint64_t(uint32_t(n.rope.head_dim)) << 8 | uint64_t(uint32_t(n.rope.n_rot)) << 32);
    mix(uint64_t(uint32_t(n.rope.n_head)) | bits(n.rope.freq_base) << 32);
    mix(bits(n.rope.freq_scale) | bits(n.attn.scale) << 32);
    mix(uint64_t(uint32_t(n.attn.head_dim)) | uint64_t(uint32_t(n.attn.n_head)) << 20 |
        uint64_t(uint32_t(n.attn.n_head_kv)) << 40);
    mix(i < p.offset.size() ? p.offset[i] : ~0ull);
    if (n.op == Op::ATTENTION)  // each call's split plan, as record_node issues them
      for (const AttnCall& c : attn_calls(attn_args(g, n, kv_), run, g.n_tokens))
        mix(ops::attention_split_signature(be_.mmq_profile_, be_.opts_.lab.attn, be_.device_->info(), c.a));
  }
  return h;
}

int64_t VulkanBackend::max_ubatch_tokens(const graph::Graph& g, std::string* why) const {
  if (g.n_tokens < 2) return INT64_MAX;
  const uint64_t dev_lim = device_->info().max_storage_buffer_range;
  const uint64_t lim = opts_.max_binding != 0 ? std::min(dev_lim, opts_.max_binding) : dev_lim;    // as Recorder
  const uint64_t slack = std::max<uint64_t>(4, device_->info().min_storage_offset_alignment) + 4;  // Recorder::bind
  uint64_t per_token = 0;
  const graph::Node* worst = nullptr;
  for (const graph::Node& n : g.nodes) {
    if (n.ne1 != g.n_tokens) continue;  // fixed size (the last token's logits, its column)
    const uint64_t b = (n.out_bytes() + uint64_t(g.n_tokens) - 1) / uint64_t(g.n_tokens);
    if (b > per_token) {
      per_token = b;
      worst = &n;
    }
  }
  // Token columns are also a grid dimension of the per-token kernels (kv_store, …).
  const int64_t grid = std::max<int64_t>(1, device_->info().max_workgroup_count[1]);
  const int64_t bind =
      worst != nullptr && lim > slack ? std::max<int64_t>(1, int64_t((lim - slack) / per_token)) : INT64_MAX;
  if (why != nullptr) {
    *why = bind <= grid ? fmt::format("{} holds {} bytes per token and one storage binding {} bytes",
                                      worst ? worst->name : std::string("-"), per_token, lim)
                        : fmt::format("the device's maxComputeWorkGroupCount[1] is {}", grid);
  }
  return std::min(bind, grid);
}

VulkanContext::Q81Plan VulkanContext::plan_q8_1(const ops::Env& env, const graph::Graph& g) const {
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
      auto it = be_.weights_.find(n.weight);
      if (it != be_.weights_.end() && ops::matmul_uses_q8_1(env, it->second, static_cast<uint32_t>(n.ne1)))
        q.mmq[i] = 1;
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
    q.fused[i] =
        be_.opts_.fuse_q8_1 && other_uses[i] == 0 && (n.op == Op::RMS_NORM || n.op == Op::SILU_MUL) && k % 32 == 0;
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
  if (!be_.opts_.fuse_epilogue) return q;
  for (size_t i = 0; i + 1 < nn; ++i) {
    const graph::Node& n = g.nodes[i];
    // or a decode matvec over the repack (N = 1): fast::matvec_mmq's epilogue, same rule;
    // record_node also checks that j's region does not overlap the f32 x the matvec reads.
    bool decode = false;
    if (!q.mmq[i] && n.op == Op::MATMUL && n.ne1 >= 1 && n.ne1 <= env.mmv_cols && n.weight) {
      auto it = be_.weights_.find(n.weight);
      decode = it != be_.weights_.end() && ops::matvec_uses_mmq(env, it->second);
    }
    if ((!q.mmq[i] && !decode) || mmq_uses[i] != 0 || other_uses[i] != 1) continue;
    const graph::Node& c = g.nodes[i + 1];
    if (c.ne0 != n.ne0 || c.ne1 != n.ne1) continue;
    const int32_t me = static_cast<int32_t>(i);
    bool ok = false;
    if (c.op == Op::ADD_BIAS && c.src[0] == me && c.weight && c.weight->n_elements == uint64_t(n.ne0)) {
      auto it = be_.weights_.find(c.weight);
      ok = it != be_.weights_.end() && it->second.type == DType::F32;
    } else if (c.op == Op::ADD && (c.src[0] == me) != (c.src[1] == me)) {
      const int32_t r = c.src[c.src[0] == me ? 1 : 0];
      ok =
          r >= 0 && r < me && !q.fused[size_t(r)] && g.nodes[size_t(r)].ne0 == n.ne0 && g.nodes[size_t(r)].ne1 == n.ne1;
    }
    if (!ok) continue;
    q.epi_into[i] = static_cast<int32_t>(i + 1);
    q.epi_done[i + 1] = 1;
  }
  return q;
}

void VulkanContext::record_q8_1_output(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id) {
  const int32_t s = q81_.slot[size_t(id)];
  if (s < 0 || q81_.fused[size_t(id)]) return;
  // The f32 output is needed too (or its op has no q8_1 producer): quantize it once for all its
  // int8 consumers (e.g. the attention output before attn_output).
  const graph::Node& n = g.nodes[size_t(id)];
  const uint32_t k = static_cast<uint32_t>(n.ne0), cols = static_cast<uint32_t>(n.ne1);
  fast::quantize_q8_1(env, node_region(g, p, id), k, cols, slot_qs(s, fast::q8_1_qs_bytes(k, cols)),
                      slot_ds(s, fast::q8_1_ds_bytes(k, cols)), n.name + " q8_1");
}

bool VulkanContext::node_written(int32_t id) const {
  if (id >= 0 && size_t(id) < fused_decode_.size() && fused_decode_[size_t(id)] >= 2)
    return false;  // inside rope_kv, or an RMSNorm folded into its matvecs
  return id < 0 || size_t(id) >= q81_.fused.size() || (!q81_.fused[size_t(id)] && q81_.epi_into[size_t(id)] < 0);
}

// rope_kv: nodes i … i+3 = ROPE (Q), ROPE (K), KV_STORE K of that rope, KV_STORE V of one
// layer (blocks::self_attention's order), with the K rope read by nothing else, go into one
// dispatch at node i; i+1 … i+3 record nothing (the K rope's f32 output is never written).
void VulkanContext::plan_decode_fusion(const graph::Graph& g, const graph::Plan& p, const ops::Env& env) {
  const size_t nn = g.nodes.size();
  fused_decode_.assign(nn, 0);
  norm_into_.assign(nn, -1);
  // a multi-sequence ubatch too (rope_kv reads each token's position and column, POS_BUF = 2).
  if (!be_.opts_.fuse_decode || (g.n_tokens != 1 && !g.multi_seq()) || kv_buffers_.empty()) return;
  std::vector<uint32_t> uses(nn, 0);
  for (const graph::Node& n : g.nodes)
    for (int32_t s : n.src)
      if (s >= 0 && size_t(s) < nn) ++uses[size_t(s)];
  if (g.output >= 0 && size_t(g.output) < nn) ++uses[size_t(g.output)];
  if (be_.opts_.fold_norm) plan_norm_fold(g, p, env, uses);
  for (size_t i = 0; i + 3 < nn; ++i) {
    const graph::Node &q = g.nodes[i], &k = g.nodes[i + 1], &ks = g.nodes[i + 2], &vs = g.nodes[i + 3];
    if (q.op != Op::ROPE || k.op != Op::ROPE || ks.op != Op::KV_STORE || vs.op != Op::KV_STORE) continue;
    if (ks.kv != 0 || vs.kv != 1 || ks.layer != vs.layer || ks.src[0] != int32_t(i + 1) || uses[i + 1] != 1) continue;
    if (q.rope.mode != k.rope.mode || q.rope.head_dim != k.rope.head_dim || q.rope.n_rot != k.rope.n_rot ||
        q.rope.freq_base != k.rope.freq_base || q.rope.freq_scale != k.rope.freq_scale || q.weight != k.weight)
      continue;
    if (q.src[0] < 0 || k.src[0] < 0 || vs.src[0] < 0 || q.src[0] >= int32_t(i) || k.src[0] >= int32_t(i) ||
        vs.src[0] >= int32_t(i))
      continue;
    const graph::Node& vn = g.nodes[size_t(vs.src[0])];
    if (k.ne0 != kv_.n_embd_kv || vn.ne0 != kv_.n_embd_kv || vn.ne1 != g.n_tokens ||
        int64_t(k.rope.head_dim) * k.rope.n_head != k.ne0)
      continue;
    fused_decode_[i] = 1;
    fused_decode_[i + 1] = fused_decode_[i + 2] = fused_decode_[i + 3] = 2;
    i += 3;
  }
}

// An RMSNorm (decode, one column) whose every reader is a matvec over the mmq repack (src 0,
// N = 1) is folded into those matvecs (fast::MatvecNorm): each reads the norm's input x and weight
// and scales its sums by 1 / rms(x) itself, and the norm records nothing. Safe when x's arena
// region is written by no node from the norm to one past its last reader (that reader's epilogue
// output included) — the planner may reuse a region once its last reader is done, and the norm was
// the last reader the plan knew of.
void VulkanContext::plan_norm_fold(const graph::Graph& g, const graph::Plan& p, const ops::Env& env,
                                   const std::vector<uint32_t>& uses) {
  const size_t nn = g.nodes.size();
  if (p.offset.size() != nn) return;
  std::vector<std::vector<int32_t>> readers(nn);
  for (size_t j = 0; j < nn; ++j)
    for (int32_t s : g.nodes[j].src)
      if (s >= 0 && size_t(s) < j) readers[size_t(s)].push_back(static_cast<int32_t>(j));
  for (size_t i = 0; i < nn; ++i) {
    const graph::Node& n = g.nodes[i];
    if (n.op != Op::RMS_NORM || n.ne1 != 1 || n.src[0] < 0 || !n.weight || size_t(g.output) == i) continue;
    if (readers[i].empty() || readers[i].size() != uses[i] || q81_.slot[i] >= 0) continue;
    bool ok = true;
    int32_t last = 0;
    for (int32_t j : readers[i]) {
      const graph::Node& c = g.nodes[size_t(j)];
      auto it = c.op == Op::MATMUL && c.weight ? be_.weights_.find(c.weight) : be_.weights_.end();
      ok = ok && c.src[0] == int32_t(i) && c.src[1] < 0 && c.ne1 == 1 && !q81_.mmq[size_t(j)] &&
           it != be_.weights_.end() && ops::matvec_uses_mmq(env, it->second) && it->second.ne0 == uint64_t(n.ne0);
      last = std::max(last, j);
    }
    auto wt = be_.weights_.find(n.weight);
    if (!ok || wt == be_.weights_.end() || wt->second.type != DType::F32) continue;
    const uint64_t x0 = p.offset[size_t(n.src[0])];
    if (x0 == graph::k_no_offset) continue;
    const uint64_t x1 = x0 + g.nodes[size_t(n.src[0])].out_bytes();
    for (size_t m = i + 1; ok && m <= std::min(nn - 1, size_t(last) + 1); ++m) {
      const graph::Node& o = g.nodes[m];
      if (o.op == Op::VIEW || p.offset[m] == graph::k_no_offset || o.out_bytes() == 0) continue;
      ok = p.offset[m] + o.out_bytes() <= x0 || x1 <= p.offset[m];
    }
    if (!ok) continue;
    fused_decode_[i] = 3;
    for (int32_t j : readers[i]) norm_into_[size_t(j)] = static_cast<int32_t>(i);
  }
}

void VulkanContext::record_rope_kv(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id) {
  const graph::Node &q = g.nodes[size_t(id)], &k = g.nodes[size_t(id) + 1], &vs = g.nodes[size_t(id) + 3];
  if (vs.layer < 0 || vs.layer >= kv_.n_layer) fail("graph node {}: layer {} outside the KV cache", vs.name, vs.layer);
  if (!g.multi_seq() && g.n_past + g.n_tokens > kv_.n_ctx)
    fail("graph node {}: KV write at {} past the cache ({})", vs.name, g.n_past, kv_.n_ctx);
  ops::RopeArgs a{static_cast<uint32_t>(q.rope.head_dim),
                  static_cast<uint32_t>(q.rope.n_head),
                  static_cast<uint32_t>(q.rope.n_rot),
                  static_cast<uint32_t>(g.n_tokens),
                  static_cast<uint32_t>(g.n_past),
                  q.rope.mode == graph::RopeMode::NEOX ? abi::k_rope_neox : abi::k_rope_normal,
                  q.rope.freq_base,
                  q.rope.freq_scale};
  if (uint64_t(a.head_dim) * a.n_head != uint64_t(q.ne0)) fail("graph node {}: rope shape mismatch", q.name);
  ops::Region ff;
  if (q.weight != nullptr) {
    if (q.weight->n_elements * 2 != uint64_t(a.n_rot)) fail("graph node {}: rope factors are not [n_rot/2]", q.name);
    ff = be_.weight_region(q.weight);
  }
  const Buffer& kc = kv_buffers_[size_t(vs.layer) * 2];
  const Buffer& vc = kv_buffers_[size_t(vs.layer) * 2 + 1];
  const std::string label =
      q.name.rfind("blk.", 0) == 0 ? q.name.substr(0, q.name.find('.', 4) + 1) + "rope_kv" : "rope_kv";
  ops::rope_kv(env, node_region(g, p, q.src[0]), node_region(g, p, k.src[0]), node_region(g, p, vs.src[0]), a,
               static_cast<uint32_t>(k.rope.n_head), node_region(g, p, id), {&kc, 0, kc.size()}, {&vc, 0, vc.size()},
               label, ff);
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
