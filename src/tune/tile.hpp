// Matmul tiles as data, and per-device tuning profiles.
//
// A MatmulTile maps 1:1 onto the named specialization constants of shaders/mul_mmq.comp and
// mul_mm.comp (shaders/fast_abi.h): a workgroup computes BM output rows × BN tokens; it is
// (BM/WM)·(BN/WN) warps of (WM/TM)·(WN/TN) invocations each; every invocation holds TM·TN f32
// accumulators (mul_mmq: plus TM·TN int32 partial dots); K advances BK values per shared-memory
// stage; BK_STEP is the k-words consumed per inner step (reserved, 1).
//
// Profiles (DeviceProfile) give the tile per kernel family and the accumulator-register budget per
// thread (e.g. 16 on Mali-Valhall: ../shared/anchors.md, 16 accumulators spill-free; 128 on NVIDIA,
// where mul_mmq 8×8 (128 accumulator registers) runs in 234 registers, docs/tuning-log.md). They
// hold every other per-device choice of the kernels too (attn_rule, matmul, delta_chunk, …: no
// vendor branches in ops code). They are chosen from the device type, Vulkan vendor id and driver
// name (select_profile), and overridden by a JSON file or fragment (load_profile_override,
// apply_profile_json; rocky tune's files, ROCKY_TUNE):
//   {"profile": "mali-valhall",            // optional: start from this built-in profile
//    "max_accumulators": 16,
//    "mmq": {"bm":64,"bn":32,"bk":32,"wm":32,"wn":16,"tm":4,"tn":4,"wg":64,"bk_step":1,"prefetch":1,"vec4":1},
//    "mm":  {...same fields...},
//    "mmq_alt": [{...}, ...],                // more mul_mmq tiles, in order of preference
//    "min_workgroups": 100,                  // pick_mmq_tile: first tile with this many workgroups
//    "mmq_q4k_nibbles": 1,                   // q4_K and q6_K repacked as nibble pairs (else int8)
//    "mmv": {"wg":64,"rows":4,"min_groups":512,"split":0,"unroll":1,"wg_by_k":0,"q8":0,"cols_wg":0,
//            "cols_rows":0,"cols":8,"col_split":3},  // decode matvecs (MatvecRule)
//    "attn": [{"wg":128,"br":16,"tr":1,"tc":2,"prefetch":1,"kvh":0,"sg":0,"roll":0}, ...],  // flash-attention tiles, best first
//    "attn_wide": [...],                     // the same for head_dim > 128 (absent/empty: "attn")
//    "attn_split": [...],                    // the same for split keys (few query rows; absent/empty: the above)
//    "attn_tile": {...},                     // one flash tile for every head_dim in their place (null: none)
//    "attn_rule": {"flash_min_tokens":8,"decode":0,"decode_tokens":16,"split":1,"split_chunk":0,
//                  "fa_groups":256,"dim_pairs":1,"vec_f32":1},   // the kernels' choice (AttnRule)
//    "matmul": {"bm":32,"bn":32,"bk":16,"tm":2,"tn":4},  // shaders/matmul.comp's tile (BasicTile)
//    "delta_chunk": 32, "norm_q8_wg": 0,     // gated-delta chunk (0: serial); rms_norm_q8_1's workgroup
//    "modeled": 0,                           // 1: ranked by an offline compiler's model, never run
//    "deny": [{"kernel":"mul_mmq","tile":"bm…","reason":"…"}],  // candidates rocky tune refused
//    "device": {...}, "tune": {...}, "results": [...]}  // written by rocky tune (src/tune/store.hpp)
// Errors: rocky::Error naming the file and field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dtype.hpp"

namespace rocky::tune {

struct MatmulTile {
  uint32_t bm = 64, bn = 64, bk = 32;  // workgroup tile: rows, tokens, k values per stage
  uint32_t wm = 32, wn = 32;           // warp tile
  uint32_t tm = 4, tn = 4;             // per-invocation tile (accumulators = tm · tn)
  uint32_t wg = 256;                   // invocations per workgroup (must equal the derived count)
  uint32_t bk_step = 1;
  uint32_t prefetch = 1;  // mul_mmq: 1 = register double buffering of global loads
  uint32_t vec4 = 1;      // mul_mmq: 1 = uvec4 shared-memory reads, 0 = word by word

  uint32_t accumulators() const { return tm * tn; }
  // Accumulator registers of mul_mmq: TM·TN f32 accumulators + TM·TN int32 partial dots (the
  // budget applies to this for mul_mmq, to accumulators() for mul_mm).
  uint32_t mmq_accumulators() const { return 2 * tm * tn; }
  // (BM/WM)·(BN/WN)·(WM/TM)·(WN/TN).
  uint32_t derived_invocations() const;
  // Shared memory of each kernel family per workgroup (bytes), as declared in the shader.
  uint32_t mmq_shared_bytes() const;
  uint32_t mm_shared_bytes() const;
  std::string str() const;  // "bm64 bn64 bk32 wm32 wn32 tm4 tn4 wg256 step1 pf1" (+ " v1" when vec4 = 0)
};

// The decode matvec_mmq's shape rule (ops/matmul.cpp, fast::matvec_shape): `wg` invocations
// per workgroup, at most `rows` rows per workgroup (halved, down to 1, while fewer than `min_groups`
// workgroups would cover M), `split` 0|1|2 (block, half-block, quarter-block steps), `unroll` 1|2;
// `wg_by_k` = 1: the invocations follow the row's 32-blocks (≤ 64 blocks: 32; ≥ 256 blocks: 128
// with unroll 2; NVIDIA, docs/tuning-log.md #16).
struct MatvecRule {
  uint32_t wg = 64, rows = 4, min_groups = 512, split = 0, unroll = 1, wg_by_k = 0;
  // Matmuls of 1 … q8 tokens take the int8-dot matvec (q8_1 activations; fast::matvec_q8)
  // instead of the f32-activation matvec; 0 = never (the wg / rows above serve both kernels).
  uint32_t q8 = 0;
  // The int8-dot matvec of 2 … 8 columns (a batched decode step, a short ubatch's columns):
  // `cols_wg` invocations (power of two), at most `cols_rows` rows per workgroup, unroll 2, for every
  // K; 0 = the one-column shape above (NVIDIA: 32, 2 — 4 streams 953 → 1,042 t/s, tuning-log #41).
  uint32_t cols_wg = 0, cols_rows = 0;
  // Matmuls of 2 … `cols` tokens run as one multi-column matvec over the repack (≤ 8; 1 = mul_mmq
  // for every N > 1; VulkanOptions::matvec_max_cols). `col_split` 0|1|2: that matvec's step for
  // every N > 1 (whole / half / quarter blocks); k_col_split_by_cols = by the column count (≤ 2
  // columns: whole, ≤ 4: half, else quarter, and never below `split`).
  static constexpr uint32_t k_col_split_by_cols = 3;
  uint32_t cols = 8, col_split = k_col_split_by_cols;
  // The int8-dot matvec's columns per workgroup (1 … 16; more columns run as grid-z groups of as
  // even a size as fits): a speculative verify step of 8 drafted tokens is 9 columns. `q8_wouter`
  // = 1: groups of more than 8 columns keep the rows' weight units in registers and stream the
  // columns' activations past them (0: every column's activations in registers, the ≤ 8 shape).
  uint32_t q8_group = 8, q8_wouter = 0;
  std::string str() const;  // "wg64 rows4 groups512 split0 unroll1" (+ " byk", " q8≤N", " cols32x2")
  bool operator==(const MatvecRule&) const = default;
};

// A flash-attention tile (ops/attention.cpp, shaders/common/attention_flash.glsl): invocations,
// query rows per workgroup, rows and keys per invocation, K/V prefetch through registers, K/V
// blocks in shared memory as f16 (`kvh` = 1; only with an f16 KV cache, else f32 as with 0).
// `sg` = 1: attention_flash_sg — a row group of CT column threads is one subgroup (usable only
// where CT equals the device's fixed subgroup size and subgroup arithmetic is supported): subgroup
// row reductions, K and V staged together in two buffers, two workgroup barriers per key block.
// `roll` = 1: attention_flash_roll — the q·k loop over head_dim rolled in steps of 4 vec4 and
// the P·V key loop not unrolled (fewer live registers: on the H200 4 rows × 2 keys per invocation
// fit in 106 registers rather than spilling; docs/tuning-log.md #45); not with `sg`.
struct FlashTile {
  uint32_t wg = 64, br = 8, tr = 1, tc = 1, prefetch = 0, kvh = 0, sg = 0, roll = 0;
  uint32_t ct() const { return wg / (br / tr); }
  uint32_t bc() const { return tc * ct(); }
  // Bytes of shared memory at head_dim hd (the kernel's arrays: Q, the K/V block (sg: K and V), the
  // partial row maxima (not with sg), P with one vec4 of pad per row).
  uint32_t shared_bytes(uint32_t hd, bool kv_f16) const {
    const uint32_t qs = hd / 4 + 1;
    return br * qs * 16 + (sg ? 2 : 1) * bc() * qs * (kvh && kv_f16 ? 8 : 16) + (sg ? 4 : br * ct() * 4) +
           br * (bc() / 4 + 1) * 16;
  }
  std::string str() const;  // "wg128 br16 tr1 tc2 pf1" (+ " kvh1", " sg1", " roll1")
  bool operator==(const FlashTile&) const = default;
};

// The tile of shaders/matmul.comp (MatmulPath::BASIC; ops::MatmulTile): BM rows × BN tokens per
// workgroup, BK k values per shared-memory stage, TM × TN outputs per invocation; invocations per
// workgroup (BM / TM) · (BN / TN), accumulators TM · TN.
struct BasicTile {
  uint32_t bm = 0, bn = 0, bk = 0, tm = 0, tn = 0;  // all 0 = unset (VulkanOptions::tile: the profile's)
  uint32_t invocations() const { return (bm / tm) * (bn / tn); }
  uint32_t accumulators() const { return tm * tn; }
  uint32_t shared_bytes() const { return (bm + bn) * bk * 4; }
  std::string str() const;  // "bm32 bn32 bk16 tm2 tn4"
  bool operator==(const BasicTile&) const = default;
};

// How ops/attention.cpp chooses among its kernels (the reasons are written there):
//   flash_min_tokens  the tiled kernel (attention_flash) from this many tokens of a ubatch (0: always);
//   decode            1: attention_decode.comp serves ubatches of ≤ decode_tokens (needs subgroup
//                     arithmetic; measured on NVIDIA only: tuning-log #33, #36; Mali spills with it);
//   split             0: never cut a decode's or a short ubatch's key range (split keys);
//   split_chunk       key positions per split of the decode kernels (0: 32 for attention_decode,
//                     128 for the per-(head, token) kernel; else a multiple of 32);
//   fa_groups         a flash grid of fewer workgroups than this has its keys split (0: never);
//   dim_pairs         attention.comp reads V as f16 pairs (one 32-bit load per two values);
//   vec_f32           attention.comp's vector q·k with an f32 cache too (Mali: 0, 64 work registers).
struct AttnRule {
  uint32_t flash_min_tokens = 8, decode = 0, decode_tokens = 16, split = 1, split_chunk = 0, fa_groups = 256,
           dim_pairs = 1, vec_f32 = 1;
  bool operator==(const AttnRule&) const = default;
};

// A candidate rocky tune refused (failed to compile, spilled, lost the device, ran past the
// time limit, or gave a wrong answer): never picked again on this device and driver.
struct DenyEntry {
  std::string kernel, tile, reason;
};

struct DeviceProfile {
  std::string name;                // "mali-valhall", "adreno", "intel", "amd", "nvidia", "llvmpipe", "generic"
  uint32_t max_accumulators = 16;  // per invocation, f32 (the register budget of one thread)
  MatmulTile mmq;                  // mul_mmq (q8_1 activations, packed int8 dot)
  MatmulTile mm;                   // mul_mm (dequantized f32 tiles, FMA)
  // Shape-aware choice (pick_mmq_tile): the alternatives to `mmq` for grids too small to fill the
  // device, and the workgroup count a grid needs (0: always `mmq`).
  std::vector<MatmulTile> mmq_alt;
  uint32_t min_workgroups = 0;
  // mul_mmq weight layout chosen at load (fast::repack_for_mmq): q4_K and q6_K values as nibble
  // pairs (0.5 byte per value, q6_K's high bits beside its scales; the kernels expand them) or
  // int8 (1 byte). Nibbles everywhere by default: the repack is the weight's only device copy
  //, and int8 values were only 1 % faster on the H200 (docs/tuning-log.md #10).
  bool mmq_q4k_nibbles = true;
  // The same for q6_K (nibble pairs + the 2 high bits beside the scales; on in every built-in
  // profile: 0 spills on the G610 compiler too).
  bool mmq_q6k_nibbles = true;
  bool mmq_nibbles(DType t) const { return t == DType::Q6_K ? mmq_q6k_nibbles : mmq_q4k_nibbles; }
  // With pipeline statistics captured (--pipeline-stats), a kernel whose statistics show spills or
  // local/scratch memory is refused (rocky::Error) unless this is false (bench-op --allow-spills).
  bool refuse_spills = true;
  // The decode matvec_mmq's shape rule and the flash-attention tiles (best first; the first
  // that fits the device is used; `attn_wide` for head_dim > 128, empty = `attn`; `attn_split`
  // for a short ubatch over a long cache — the split-key case, few row blocks — empty = the others).
  MatvecRule mmv;
  std::vector<FlashTile> attn, attn_wide, attn_split;
  // A flash tile for every head_dim in place of the tables above (lab experiments: ROCKY_TUNE's
  // "attn_tile"); a rocky::Error where it does not fit the device. wg 0 = none.
  FlashTile attn_tile{0, 0, 0, 0};
  bool has_attn_tile() const { return attn_tile.wg != 0; }
  AttnRule attn_rule;
  // shaders/matmul.comp's tile (MatmulPath::BASIC).
  BasicTile matmul{32, 32, 16, 2, 4};
  // Tokens per chunk of the chunked gated-delta-rule kernel (qwen3.5's linear attention; even,
  // 2 … 128; 0 = the serial kernel for every ubatch; VulkanOptions::delta_chunk).
  uint32_t delta_chunk = 32;
  // rms_norm_q8_1's workgroup (fast::rms_norm_q8_1_wg): 0 = 256 where the device allows, else 128.
  uint32_t norm_q8_wg = 0;
  // Made by `rocky tune --offline` from a compiler's model (never run on the device), the
  // candidates the search refused, and the file the profile came from ("" = built in).
  bool modeled = false;
  std::vector<DenyEntry> deny;
  std::string path;
  const std::vector<FlashTile>& attn_tiles(uint32_t head_dim) const {
    return head_dim > 128 && !attn_wide.empty() ? attn_wide : attn;
  }
  // "mmq bm… | alt bm…, bm… (≥ N groups) | mm bm… | mmv wg… | attn wg…": what the kernels use.
  std::string tiles_str() const;
};

// The built-in profiles, and the one by name (rocky::Error listing the names when unknown).
const std::vector<DeviceProfile>& builtin_profiles();
const DeviceProfile& builtin_profile(const std::string& name);

// The one profile selector: a CPU device or a llvmpipe / lavapipe driver → llvmpipe; else by PCI
// vendor id (0x13B5 Arm → mali-valhall, 0x5143 Qualcomm → adreno, 0x8086 intel, 0x1002 amd,
// 0x10DE nvidia); else a panvk driver → mali-valhall; else generic.
const DeviceProfile& select_profile(uint32_t vendor_id, const std::string& driver_name, bool cpu);

// The mul_mmq tile for an M × N product: the first of {mmq, mmq_alt...} whose grid
// ceil(M/BM)·ceil(N/BN) has at least min_workgroups workgroups — when N < mmq's BN, the one of
// those with the least padded work ceil(M/BM)·BM·ceil(N/BN)·BN (the first of equals); when none
// has enough, the one with the most workgroups (the first of equals).
const MatmulTile& pick_mmq_tile(const DeviceProfile& p, uint32_t m, uint32_t n);

// Apply a JSON override file (format above) to `base`.
DeviceProfile load_profile_override(const std::string& path, const DeviceProfile& base);
// Apply a parsed override (a file's contents or ROCKY_TUNE's inline fragment) to `base`; `where`
// names it in errors and in the profile's name.
DeviceProfile apply_profile_json(const nlohmann::json& j, const DeviceProfile& base, const std::string& where);

// Why `t` cannot run ("" when it can): shape constraints (divisibility, BK a multiple of 32,
// derived invocations == wg ≤ max_invocations, the warp = (WM/TM)·(WN/TN)), `accumulators` (the
// kernel's accumulator registers per invocation) over the profile's budget, `shared_bytes` over the
// probed limit.
std::string check_tile(const MatmulTile& t, uint32_t accumulators, uint32_t shared_bytes, uint32_t max_accumulators,
                       uint32_t shared_limit, uint32_t max_invocations);

}  // namespace rocky::tune
