// Host side of every GPU op: each ops/<op>.cpp picks the pipeline variant for shaders/<op>.comp,
// fills its push constants (shaders/abi.h) and records the dispatch(es) into the Recorder.
//
// Shapes are GGUF order (ne0 innermost). Activations are dense f32 [ne0, ne1] regions of a
// buffer (usually the arena) addressed by 64-bit byte offsets; weights are ggml rows of any
// computable type. Tensors larger than one binding (weights, e.g. a big embedding) are processed
// in per-dispatch windows of whole rows; activations must each fit one binding (rocky::Error
// otherwise, naming the tensor).
#pragma once

#include <cstdint>
#include <string>

#include "backend/vulkan/memory.hpp"
#include "backend/vulkan/pipelines.hpp"
#include "backend/vulkan/recorder.hpp"
#include "core/dtype.hpp"
#include "tune/tile.hpp"

namespace rocky::vulkan::ops {

// A byte range of a buffer holding a tensor.
struct Region {
  const Buffer* buf = nullptr;
  uint64_t offset = 0;  // bytes
  uint64_t bytes = 0;
};

// A weight matrix [ne0 = K, rows = M] in ggml rows of `type`.
struct Weight {
  const Buffer* buf = nullptr;
  DType type = DType::F32;
  uint64_t ne0 = 0;
  uint64_t rows = 0;
  uint64_t row_bytes = 0;
  std::string name;
  // [M5] The same rows repacked for mul_mmq (fast::repack_for_mmq; layout in matmul_fast.hpp),
  // present when the backend uses the int8 path: values at byte 0 (mmq_q_row_bytes per row), f32
  // scale pairs at byte mmq_s_offset (K/32 · 8 bytes per row). nullptr otherwise.
  const Buffer* mmq_buf = nullptr;
  uint64_t mmq_q_row_bytes = 0;
  uint64_t mmq_s_offset = 0;
  bool mmq_nibbles = false;  // q4_K values as nibble pairs (16 bytes per 32-block)
};

// Matmul tile shape, mapped to the named specialization constants ROCKY_SC_BM … ROCKY_SC_TN.
// Invocations per workgroup = (bm / tm) · (bn / tn); accumulators per invocation = tm · tn.
struct MatmulTile {
  uint32_t bm = 0, bn = 0, bk = 0, tm = 0, tn = 0;  // all 0 = the device class default
  uint32_t invocations() const { return (bm / tm) * (bn / tn); }
  uint32_t accumulators() const { return tm * tn; }
  uint32_t shared_bytes() const { return (bm + bn) * bk * 4; }
};

// The tile for a device class (data, not code): CPU drivers (lavapipe) run fastest with many
// accumulators per invocation; GPUs get a small register budget (8 accumulators: the Mali-G610
// full-occupancy budget is 32 registers per thread, see ../shared/PLATFORMS.md).
inline MatmulTile default_tile(const DeviceInfo& d) {
  if (d.type == VK_PHYSICAL_DEVICE_TYPE_CPU) return MatmulTile{128, 32, 8, 8, 4};  // 128 invocations, 32 acc
  return MatmulTile{32, 32, 16, 2, 4};                                               // 128 invocations, 8 acc
}

struct Env {
  Recorder& rec;
  Pipelines& pipes;
  const DeviceInfo& info;
  MatmulTile tile;
  uint32_t wg = 128;     // default workgroup size of the simple kernels
  bool kv_f16 = false;   // KV cache element type
  // [M5] int8 prefill path (ROCKY_MATMUL=mmq): when set, matmul() with N > 1 and a mul_mmq weight
  // type quantizes x to q8_1 in these buffers and runs mul_mmq with this profile.
  const Buffer* q81_qs = nullptr;
  const Buffer* q81_ds = nullptr;
  const tune::DeviceProfile* mmq = nullptr;
};

// True when the shaders dequantize `t` (get_rows, matmul, matvec).
bool gpu_supports(DType t);

void get_rows(Env& e, const Weight& w, Region tokens, uint32_t n_tokens, Region out, const std::string& label);
void rms_norm(Env& e, Region x, Region w, uint32_t ne0, uint32_t n_cols, float eps, Region out, const std::string& label);
// y[M, N] = W · x[K, N]; N == 1 uses the mat-vec kernel.
void matmul(Env& e, const Weight& w, Region x, uint32_t n, Region y, const std::string& label);
// The shared dispatch of the three elementwise binary shaders (add, bias_add, silu_mul): one
// invocation per output element, abi::BinaryPC{n, ne0, offsets}; ne0 = the bias length (else 0).
void binary_elementwise(Env& e, const char* shader, Region a, Region b, uint32_t ne0, uint64_t n, Region out,
                        const std::string& label);
void add(Env& e, Region a, Region b, uint64_t n, Region out, const std::string& label);
void bias_add(Env& e, Region a, Region bias, uint32_t ne0, uint64_t n, Region out, const std::string& label);
void silu_mul(Env& e, Region gate, Region up, uint64_t n, Region out, const std::string& label);
void take_cols(Env& e, Region x, uint32_t ne0, uint32_t first_col, uint32_t n_cols, Region out, const std::string& label);
struct RopeArgs {
  uint32_t head_dim, n_head, n_rot, n_tokens, n_past, mode;
  float freq_base, freq_scale;
};
void rope(Env& e, Region x, const RopeArgs& a, Region out, const std::string& label);
// cache: the layer's whole K or V buffer ([n_embd, n_ctx], f32 or f16 per e.kv_f16).
void kv_store(Env& e, Region x, uint32_t n_embd, uint32_t n_tokens, uint32_t n_past, Region cache, const std::string& label);
struct AttnArgs {
  uint32_t head_dim, n_head, n_head_kv, n_tokens, n_past, n_embd_kv;
  float scale;
};
void attention(Env& e, Region q, Region k_cache, Region v_cache, const AttnArgs& a, Region out, const std::string& label);

// Helpers shared by the op files.
inline Bound bind(Env& e, Region r, bool write) { return e.rec.bind(*r.buf, r.offset, r.bytes, write); }
inline uint32_t f32_off(const Bound& b) { return b.delta / 4; }

}  // namespace rocky::vulkan::ops
