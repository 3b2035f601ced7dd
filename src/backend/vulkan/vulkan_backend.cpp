#include "backend/vulkan/vulkan_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
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
  if (default_ && kv == default_->kv()) {
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

}  // namespace rocky::vulkan
