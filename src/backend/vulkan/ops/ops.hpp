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

#include "backend/vulkan/lab_options.hpp"
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
  // The same rows repacked for mul_mmq (fast::repack_for_mmq; layout in matmul_fast.hpp),
  // present when the backend uses the int8 path: values at byte 0 (mmq_q_row_bytes per row), scale
  // groups at byte mmq_s_offset (mmq_s_row_bytes per row). nullptr otherwise. The backend
  // then uploads only the repack: `buf` is nullptr and every kernel reads mmq_buf (get_rows_mmq,
  // matvec_mmq, mul_mmq; N > 1 matmuls the int8 path cannot take run as matvec_mmq per column).
  const Buffer* mmq_buf = nullptr;
  uint64_t mmq_q_row_bytes = 0;
  uint64_t mmq_s_offset = 0;
  uint64_t mmq_s_row_bytes = 0;
  bool mmq_nibbles = false;  // q4_K / q6_K values as nibble pairs (16 bytes per 32-block)
};

// matmul.comp's tile (tune::BasicTile, mapped to the named specialization constants ROCKY_SC_BM …
// ROCKY_SC_TN): the tuning profile's `matmul`.
using MatmulTile = tune::BasicTile;

// Which kernels run the prefill matmuls (N > 1; N = 1 uses matvec_mmq.comp when the weight carries
// its mmq repack, else matvec.comp):
//   MMQ   — int8 path: activations as q8_1 + mul_mmq (packed int8 dot, or the no-dot variant when
//           the device lacks shaderIntegerDotProduct) for weights fast::mmq_supports() lists with
//           K % 32 == 0 and q8_1 / output regions that fit one binding; every other matmul BASIC.
//           Error vs exact math: that of 8-bit activation blocks (../shared/reference/README.md:
//           ≤ 0.35 absolute on the logits, like llama.cpp's CPU).
//   MM    — mul_mm with f32 shared-memory tiles (weights dequantized; NMSE ≤ 1e-6 vs f64).
//   BASIC — shaders/matmul.comp (the tiled kernel; f32, windows/chunks over any binding size).
//   AUTO  — the default: MMQ (faster than the f32 kernels on the H200 at ub ≥ 128, 2.3× at ub 512,
//           docs/PERF.md; ≈ 4× on lavapipe).
using vulkan::MatmulPath;  // lab_options.hpp
// "auto" | "mmq" | "mm" | "basic"; rocky::Error naming `what` (e.g. "--matmul") otherwise.
MatmulPath parse_matmul_path(const std::string& s, const std::string& what);
const char* matmul_path_name(MatmulPath p);

// gated_delta.comp's tile: value columns per workgroup, state rows per invocation (d_k / rows
// parts per column; WG = cols · d_k / rows). 16 × 16 by default: rows 32 put the state in
// thread-local storage on the Mali-G610 (tests/fast/test_mali.cpp). `chunk`: tokens per chunk of
// the chunked prefill kernel (gated_delta_chunk.comp, same cols / rows; even, 2 … 128), used for
// ubatches of more than one token; 0 = the serial kernel for every ubatch (A/B). Lowered (halved)
// until its shared memory fits the device (delta_chunk_shared_bytes).
struct DeltaTile {
  uint32_t cols = 16, rows = 16;
  uint32_t chunk = 32;
};

struct Env {
  Recorder& rec;
  Pipelines& pipes;
  const DeviceInfo& info;
  MatmulTile tile;
  uint32_t wg = 128;    // default workgroup size of the simple kernels
  bool kv_f16 = false;  // KV cache element type
  // Prefill matmul kernels (see MatmulPath). Direct users of ops (tests, bench-op) get BASIC unless
  // they set a path and `prof`.
  MatmulPath matmul = MatmulPath::BASIC;
  const tune::DeviceProfile* prof = nullptr;  // mul_mmq / mul_mm tiles (MMQ / MM need it)
  // Scratch for matmul()'s own quantization on the int8 path (the backend instead quantizes once
  // per activation in its producer and calls matmul_q8_1). Unset: matmul() never takes MMQ.
  const Buffer* q81_qs = nullptr;
  const Buffer* q81_ds = nullptr;
  // Scratch of the split decode attention (attention_scratch_bytes; the context sizes it before
  // recording). Unset: attention never splits.
  const Buffer* attn_scratch = nullptr;
  // The attention kernel forced by the lab switch (ROCKY_SWITCH attn=…); AUTO = the profile's rule.
  AttnKernel attn = AttnKernel::AUTO;
  // The step buffer (uint [0] = n_past, written by the host before each submit; the backend
  // uses word 0 of its token buffer): when set,
  // rope, kv_store, attention and rope_kv read the cache position from it (ROCKY_SC_POS_BUF) and
  // bind whole KV buffers, so nothing recorded depends on n_past and a decode command buffer can
  // be replayed (VulkanOptions::replay_decode). The n_past arguments are then ignored.
  const Buffer* step = nullptr;
  DeltaTile delta;  // gated_delta's tile
  // Matmuls of up to this many columns (tokens) run as one multi-column decode matvec over
  // the repack (fast::matvec_mmq, weights read once) instead of mul_mmq; 1 = only N = 1. The
  // backend sets VulkanOptions::matvec_max_cols.
  uint32_t mmv_cols = 1;
  // Matmuls of 1 … this many tokens over a repacked weight take the int8-dot matvec
  // (fast::matvec_q8: q8_1 activations from the producers, packed dots) instead of matvec_mmq (f32
  // x, ≤ mmv_cols) and mul_mmq; 0 = off. Needs shaderIntegerDotProduct. The backend sets it from
  // VulkanOptions::matvec_q8 (the profile's mmv.q8).
  uint32_t mmv_q8 = 0;
  // A multi-sequence ubatch: `step` (set too) holds the per-token table of abi.h's
  // k_tok_table (position, sequence's first cache column) and the kernels run with POS_BUF = 2;
  // attention runs the per-(head, token) kernels (attention_step / attention_split), never the
  // tiled one (its query rows would need key ranges of their own).
  bool tok_pos = false;
};

// The profile the kernels' rules and tiles come from: e.prof, else (direct users of ops: tests)
// the built-in profile of the device's class (tune::select_profile).
const tune::DeviceProfile& profile(const Env& e);

// True when the shaders dequantize `t` (get_rows, matmul, matvec).
bool gpu_supports(DType t);

void get_rows(Env& e, const Weight& w, Region tokens, uint32_t n_tokens, Region out, const std::string& label);
void rms_norm(Env& e, Region x, Region w, uint32_t ne0, uint32_t n_cols, float eps, Region out,
              const std::string& label);
// y[M, N] = W · x[K, N]; N == 1 uses the mat-vec kernel, N > 1 the kernel e.matmul selects.
void matmul(Env& e, const Weight& w, Region x, uint32_t n, Region y, const std::string& label);
// True when a prefill matmul of `w` over N = n tokens runs on the int8 path under e.matmul and
// e.prof (w carries its mmq repack; the q8_1 activations [K, n] and y [M, n] each fit one binding);
// also for 1 ≤ n ≤ e.mmv_q8 (the int8-dot matvec, fast::matvec_q8) on a device with int8 dot.
bool matmul_uses_q8_1(const Env& e, const Weight& w, uint32_t n);
// The int8 path's product from activations already in q8_1 (fast::q8_1_qs_bytes / ds_bytes of
// [K, n] at offset 0 of qs / ds): mul_mmq, OpSDot where the device has it. Needs e.prof.
void matmul_q8_1(Env& e, const Weight& w, Region qs, Region ds, uint32_t n, Region y, const std::string& label);
// The shared dispatch of the three elementwise binary shaders (add, bias_add, silu_mul): one
// invocation per output element, abi::BinaryPC{n, ne0, offsets}; ne0 = the bias length (else 0).
void binary_elementwise(Env& e, const char* shader, Region a, Region b, uint32_t ne0, uint64_t n, Region out,
                        const std::string& label);
void add(Env& e, Region a, Region b, uint64_t n, Region out, const std::string& label);
void bias_add(Env& e, Region a, Region bias, uint32_t ne0, uint64_t n, Region out, const std::string& label);
void silu_mul(Env& e, Region gate, Region up, uint64_t n, Region out, const std::string& label);
// out = gelu_tanh(gate) · up (shaders/gelu_mul.comp); out = a · s (shaders/scale.comp).
void gelu_mul(Env& e, Region gate, Region up, uint64_t n, Region out, const std::string& label);
void scale(Env& e, Region a, float s, uint64_t n, Region out, const std::string& label);
void take_cols(Env& e, Region x, uint32_t ne0, uint32_t first_col, uint32_t n_cols, Region out,
               const std::string& label);
struct RopeArgs {
  uint32_t head_dim, n_head, n_rot, n_tokens, n_past, mode;
  float freq_base, freq_scale;
};
// factors: the f32 [n_rot/2] frequency divisors (rope_freqs), or a null region (buf == nullptr).
void rope(Env& e, Region x, const RopeArgs& a, Region out, const std::string& label, Region factors = {});
// A layer's cache as a sliding-window ring (graph.hpp KvShape): ring > 0 columns per sequence,
// position p at column p mod ring; seq_cells: a full layer's columns per sequence (n_ctx, the
// sequences' first columns in abi.h's k_tok_table). {0, 0}: columns are positions.
struct KvRing {
  uint32_t ring = 0, seq_cells = 0;
};
// cache: the layer's whole K or V buffer ([n_embd, n_ctx], f32 or f16 per e.kv_f16; a ring's
// [n_embd, ring]).
void kv_store(Env& e, Region x, uint32_t n_embd, uint32_t n_tokens, uint32_t n_past, Region cache,
              const std::string& label, KvRing ring = {});
// rope of q → qo, rope of k → the K cache and v → the V cache at columns n_past + j, one
// dispatch (shaders/rope_kv.comp); q [head_dim·n_head, N], k and v [head_dim·n_head_kv, N]; the
// caches as kv_store's (whole buffers). a.n_head = Q heads; n_head_kv = K/V heads.
void rope_kv(Env& e, Region q, Region k, Region v, const RopeArgs& a, uint32_t n_head_kv, Region qo, Region k_cache,
             Region v_cache, const std::string& label, Region factors = {}, KvRing ring = {});
struct AttnArgs {
  uint32_t head_dim, n_head, n_head_kv, n_tokens, n_past, n_embd_kv;
  float scale;
  uint32_t window = 0;    // sliding window (graph::AttnParams::window); 0 = every earlier key
  uint32_t n_kv_max = 0;  // the longest key range of the ubatch's tokens; 0 = n_past + n_tokens
  uint32_t tok0 = 0;      // Env::tok_pos: this call's token j is token tok0 + j of the step's table
  KvRing ring;            // the layer's cache as a sliding-window ring ({0, 0}: none)
};
void attention(Env& e, Region q, Region k_cache, Region v_cache, const AttnArgs& a, Region out,
               const std::string& label);
// Bytes of Env::attn_scratch that attention(a) uses: > 0 when it runs split (decode at depth:
// attention_decode (GPUs) or the per-(head, token) kernel with the key range cut into chunks of
// the profile's attn_rule.split_chunk or 32 / 128 positions, at most 128 of them, then attention_merge), else 0.
uint64_t attention_scratch_bytes(const Env& e, const AttnArgs& a);
// (chunk, n_split) of that split as one word (0 chunks: no split): part of the replayed decode's
// key, so that a token crossing into the next chunk records the step again.
uint64_t attention_split_signature(const tune::DeviceProfile& prof, AttnKernel attn, const DeviceInfo& d,
                                   const AttnArgs& a);

// Hybrid linear attention (qwen35; graph.hpp SSM_CONV / GATED_DELTA / TAKE_ROWS / SIGMOID_MUL).
// out[i, j] = x[first_row + i, j] for i < ne0 (x has in_ne0 rows).
void take_rows(Env& e, Region x, uint32_t in_ne0, uint32_t first_row, uint32_t ne0, uint32_t n_cols, Region out,
               const std::string& label);
// out = a · sigmoid(b) (n elements).
void sigmoid_mul(Env& e, Region a, Region b, uint64_t n, Region out, const std::string& label);
// Causal depthwise conv1d + SiLU over x [c, n_tokens] with w f32 [k, c] and the conv state
// [(k−1)·c] (read, then shifted: two dispatches).
void ssm_conv(Env& e, Region x, Region w, uint32_t k, uint32_t c, uint32_t n_tokens, Region state, Region out,
              const std::string& label);
struct DeltaArgs {
  uint32_t n_k_heads, n_v_heads, d_k, d_v, n_tokens;
  float eps;
};
// The tile of Env::delta, rows lowered to a divisor of d_k, chunk to an even size whose shared
// memory fits the device (0 when none does: the serial kernel).
DeltaTile delta_tile(const Env& e, uint32_t d_k);
// Shared memory of gated_delta_chunk.comp at tile t for d_k, bytes.
uint64_t delta_chunk_shared_bytes(const DeltaTile& t, uint32_t d_k);
// The gated delta rule over n_tokens (one dispatch; the state [H_v][d_k][d_v] in registers): qkv
// the conv output, a / b [H_v, N], A = ssm_a f32 [H_v]; out [H_v·d_v, N]. N = 1 (decode) or a tile
// chunk of 0 runs gated_delta.comp (token by token), else gated_delta_chunk.comp (chunks of
// `chunk` tokens, the last one shorter; the same result within f32 rounding).
void gated_delta(Env& e, Region qkv, Region a, Region b, Region A, const DeltaArgs& d, Region state, Region out,
                 const std::string& label);

// Helpers shared by the op files.
inline Bound bind(Env& e, Region r, bool write) { return e.rec.bind(*r.buf, r.offset, r.bytes, write); }
inline uint32_t f32_off(const Bound& b) { return b.delta / 4; }
// The step buffer's binding when e.step is set, else `dummy` (read-only; the shader does not read it).
inline Bound bind_step(Env& e, Region dummy) {
  return e.step != nullptr ? e.rec.bind(*e.step, 0, e.tok_pos ? e.step->size() : 4, false) : bind(e, dummy, false);
}
inline uint32_t pos_buf(const Env& e) { return e.tok_pos ? 2u : e.step != nullptr ? 1u : 0u; }

// Decode (N = 1) over the weight's mmq repack (shaders/matvec_mmq.comp, f32 activations, f32
// accumulation): matmul() takes it for n == 1 when matvec_uses_mmq (w.mmq_buf set, type in
// fast::mmq_supports, K % 32 == 0), else shaders/matvec.comp. x [K], y [M] f32; weight windows of
// whole rows within e.rec.max_binding().
bool matvec_uses_mmq(const Env& e, const Weight& w);
void matvec_mmq(Env& e, const Weight& w, Region x, Region y, const std::string& label);

}  // namespace rocky::vulkan::ops
