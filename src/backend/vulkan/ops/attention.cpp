// attention — the kernels, chosen per call by the tuning profile's attn_rule (tune::AttnRule) and
// tiles, or forced by the lab switch (Env::attn: ROCKY_SWITCH attn=flash|simple|decode):
//   shaders/attention_flash.comp: tiled FlashAttention-2-style prefill (Br query rows × Bc keys per
//     step, K/V blocks staged once per GQA group, register tiles, online softmax) — head_dim % 4
//     == 0 (≤ 256) and n_tokens ≥ attn_rule.flash_min_tokens;
//   shaders/attention.comp: one workgroup per (head, token), keys across invocations — decode and
//     the shapes the tiled kernel does not take (odd head_dim).
//   shaders/attention_decode.comp: decode, batched decode and short ubatches (≤ attn_rule.decode_tokens)
//     where attn_rule.decode is 1, one workgroup per (KV head, token, key chunk) for all its query
//     heads (decode_capable);
// Decode at depth splits the key range (attention_split.comp + attention_merge.comp; see
// split_plan; attn_rule.split_chunk sets the chunk, attn_rule.split 0 never splits).
// The profile's attn_tile replaces the tile tables (tuning; rocky::Error when it does not fit the device).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/push_constants.hpp"
#include "core/error.hpp"

namespace rocky::vulkan::ops {
namespace {

// attn_rule.flash_min_tokens: on GPUs (8) below this many tokens the per-(head, token) kernel keeps
// more workgroups in flight (the tiled one launches ceil(N·G / BR) · n_head_kv of them: 2 for one
// qwen2.5 decode token) — a guess until measured on a GPU. CPU drivers (0): the tiled kernel is
// faster at every N measured on lavapipe (1 … 512 tokens; docs/tuning-log.md, entry 8).
constexpr uint32_t k_flash_max_hd = 256;

// Tiles are data (tune::FlashTile, in the tuning profile: src/tune/tile.cpp): invocations, query
// rows per workgroup, rows and keys per invocation.
using tune::FlashTile;

// Candidates per device class, best first; the first whose shared memory and workgroup size the
// device allows is used. CPU drivers (lavapipe, 32 KB of shared memory): many accumulators per
// invocation. Arm Mali (Valhall): 16 rows × 16 keys, 1×2 scores and ≤ 4 vec4 of O per invocation
// (head_dim 256: 8 rows × 16 keys) — 0 spills, tls 0, work_regs 64 at head_dim 64, 80, 128, 256
// (g610-stats, tests/fast/test_mali.cpp). Other GPUs: 16 rows × 16 keys, 1×2 scores, K/V blocks
// prefetched through registers — on the H200 (qwen2.5-3b, 512 tokens, 36 layers) 4.7 ms against
// 26.4 ms for 32 rows × 32 keys, 2×4 scores (twice the workgroups, shorter causal critical path;
// docs/tuning-log.md #12); the 32 × 32 tile (38 KB of shared memory at head_dim 128) is the
// fallback order's second. The tables are the built-in profiles' attn / attn_wide.

// attention_flash_sg's row group is one subgroup: CT must equal a subgroup size the device
// cannot vary (VK_EXT_subgroup_size_control's range is one size), with subgroup arithmetic. (WG is
// then a multiple of the subgroup size: WG = RG · CT.)
bool sg_ok(const FlashTile& t, const DeviceInfo& d) {
  return d.subgroup_arith && d.subgroup_size == t.ct() && d.subgroup_min == d.subgroup_max &&
         d.subgroup_size == d.subgroup_min;
}

bool fits(const FlashTile& t, const DeviceInfo& d, uint32_t hd, bool kv_f16) {
  return t.shared_bytes(hd, kv_f16) <= d.shared_memory && t.wg <= d.max_workgroup_invocations && (!t.sg || sg_ok(t, d));
}

// The profile's attn_tile, checked against the device (cheap next to recording a dispatch).
const FlashTile* forced_tile(const tune::DeviceProfile& prof, const DeviceInfo& d, uint32_t hd, bool kv_f16) {
  if (!prof.has_attn_tile()) return nullptr;
  const FlashTile& t = prof.attn_tile;
  if (t.sg && !sg_ok(t, d)) {
    fail(
        "tuning profile {}: attn_tile {}: sg 1 needs WG / (BR / TR) = {} column threads to equal the device's fixed "
        "subgroup size (device: {}, range {} … {}, subgroup arithmetic {})",
        prof.name, t.str(), t.ct(), d.subgroup_size, d.subgroup_min, d.subgroup_max, d.subgroup_arith ? "yes" : "no");
  }
  if (!fits(t, d, hd, kv_f16)) {
    fail(
        "tuning profile {}: attn_tile {}: needs {} B of shared memory and {} invocations at head_dim {} (device: {} "
        "B, {})",
        prof.name, t.str(), t.shared_bytes(hd, kv_f16), t.wg, hd, d.shared_memory, d.max_workgroup_invocations);
  }
  return &t;
}

// The tile for this device and head_dim, or nullptr when none fits (then attention.comp runs).
const FlashTile* flash_tile(const tune::DeviceProfile& prof, const DeviceInfo& d, uint32_t hd, bool kv_f16) {
  if (hd % 4 != 0 || hd > k_flash_max_hd) return nullptr;
  if (const FlashTile* t = forced_tile(prof, d, hd, kv_f16)) return t;
  for (const FlashTile& t : prof.attn_tiles(hd))
    if (fits(t, d, hd, kv_f16)) return &t;
  return nullptr;
}

// Split decode ("flash-decoding"): attention.comp runs one workgroup per (head, token), i.e. 16
// for a qwen2.5-3b decode token, each walking all n_past + 1 keys — at depth 1,500 the H200 spent
// ≈ 0.5 ms per layer there (docs/tuning-log.md). Cut into chunks of k_split_chunk positions (a
// multiple of the workgroup size), every chunk gets its own workgroup and attention_merge combines
// them. Below two chunks nothing changes.
// Only few-token ubatches split (decode, batched decode): a long ubatch already has
// n_head · n_tokens workgroups, and its scratch would grow with n_tokens.
constexpr uint32_t k_split_chunk = 128, k_split_max = 128, k_split_max_tokens = 8;
constexpr uint32_t k_merge_wg = 64;  // attention_merge.comp's workgroup (n_split ≤ 4 · WG)

// attention_decode.comp serves few-token ubatches (decode, batched decode, short ubatches)
// where the profile's attn_rule.decode is 1 (NVIDIA, the measured GPUs; Mali spills with it, other
// GPUs are unmeasured: the per-(head, token) kernels stay there) on GPUs with subgroup arithmetic,
// when the shape fits its layout: head_dim a multiple of 8 up to 2·WG, ≤ 8 query heads per KV head
// (and, at dispatch, K 16-byte aligned, V pairs aligned). attn=simple keeps the per-(head, token)
// kernels; attn=decode uses this one wherever it fits (CPU drivers included: the tests). Its
// blocks are k_decode_bk keys, and so are its chunks: a decode token at depth 512 gets 16 chunks
// per KV head (the GPU's latency is hidden by workgroups, not by long loops).
// It takes ubatches up to attn_rule.decode_tokens (16) by default — an agent's next message at
// depth: pp16 @ d5000 18.3 ms with the split flash kernel, 12.2 ms with this one; pp50 30.1 against
// the split tile's 27.7 (docs/tuning-log.md #36) — and, forced, up to k_decode_max_tokens.
constexpr uint32_t k_decode_wg = 128, k_decode_gqa_max = 8, k_decode_bk = 32, k_decode_max_tokens = 64;

// attention_decode.comp's shared memory: qs4 (GQA·HD floats), sp / red_m / red_l (GQA·WG each),
// osum (2·GQA·WG), ps (GQA·BK), ml (2·GQA).
uint64_t decode_shared_bytes(const AttnArgs& a) {
  const uint64_t g = a.n_head_kv > 0 ? a.n_head / a.n_head_kv : 0;
  return 4 * (g * a.head_dim + 5 * g * k_decode_wg + g * k_decode_bk + 2 * g);
}

bool decode_capable(const tune::AttnRule& r, AttnKernel force, const DeviceInfo& d, const AttnArgs& a) {
  if (force == AttnKernel::SIMPLE) return false;
  const bool forced = force == AttnKernel::DECODE;
  if (!forced && !r.decode) return false;
  return d.subgroup_arith &&
         a.n_tokens <= (forced ? k_decode_max_tokens : std::min(r.decode_tokens, k_decode_max_tokens)) &&
         a.head_dim % 8 == 0 && a.head_dim <= 2 * k_decode_wg && a.n_head_kv > 0 &&
         a.n_head / a.n_head_kv <= k_decode_gqa_max && k_decode_wg <= d.max_workgroup_invocations &&
         decode_shared_bytes(a) <= d.shared_memory;
}

struct SplitPlan {
  uint32_t chunk = 0, n_split = 1;
};

// The replayed decode (n_past from the step buffer) uses the plan of the n_past it was recorded
// at: its (chunk, n_split) is part of the replay key (attention_split_signature), so the step is
// recorded again when a token crosses into the next chunk; in between, splits past a token's
// range write the empty state.
// Chunks: k_decode_bk positions for attention_decode, else k_split_chunk (either kernel takes any
// chunk; attn_rule.split_chunk, a multiple of k_decode_bk, replaces both).
SplitPlan split_plan(const tune::AttnRule& r, AttnKernel force, const DeviceInfo& d, const AttnArgs& a) {
  const uint32_t wg = decode_capable(r, force, d, a) ? k_decode_bk : 64;  // the rounding of longer chunks
  uint32_t chunk = wg == k_decode_bk ? k_decode_bk : k_split_chunk;
  if (!r.split) return {};
  if (r.split_chunk != 0) chunk = r.split_chunk;
  if (a.n_tokens > (wg == k_decode_bk ? k_decode_max_tokens : k_split_max_tokens)) return {};
  uint64_t n_kv = a.n_kv_max > 0 ? a.n_kv_max : uint64_t{a.n_past} + a.n_tokens;  // the longest key range
  if (a.window > 0) n_kv = std::min<uint64_t>(n_kv, a.window);                    // a sliding window bounds it
  uint64_t n_split = (n_kv + chunk - 1) / chunk;
  if (n_split > k_split_max) {  // longer chunks instead of more of them
    const uint64_t per = (n_kv + k_split_max - 1) / k_split_max;
    chunk = static_cast<uint32_t>((per + wg - 1) / wg * wg);
    n_split = (n_kv + chunk - 1) / chunk;
  }
  if (n_split < 2) return {};
  return {chunk, static_cast<uint32_t>(n_split)};
}

// /Flash attention with split keys: a ubatch of few query rows over a long cache (an
// agent's next message at depth 5,000: 50 tokens × 8 heads per KV head = 25 row blocks × 2 KV heads
// on qwen2.5-3b) gives a grid of a few dozen workgroups, each walking every key — most of a big
// GPU idles. Below k_fa_split_groups workgroups of the tile the key range is cut into chunks (a
// multiple of the tile's BC, ≥ k_fa_split_min_chunk keys) until the grid reaches it;
// attention_merge combines the partial states. Not under the replayed decode (n_past is on the
// device only there). attn_rule.fa_groups sets the target (0: never split).
constexpr uint32_t k_fa_split_min_chunk = 512, k_fa_split_max = 64;

SplitPlan flash_split_plan(const tune::AttnRule& r, const FlashTile& t, const AttnArgs& a, bool pos_on_device) {
  if (pos_on_device || !r.split) return {};
  const uint64_t rows = uint64_t{a.n_tokens} * (a.n_head / a.n_head_kv);
  const uint64_t grid = (rows + t.br - 1) / t.br * a.n_head_kv;
  const uint64_t target = uint64_t{r.fa_groups} * t.wg;  // in invocations
  if (grid == 0 || grid * t.wg >= target) return {};
  // Keys any row of the ubatch sees: from the window's first key of token 0 (or 0) to the last token.
  const uint64_t first = a.window > 0 && uint64_t{a.n_past} + 1 > a.window ? a.n_past + 1 - a.window : 0;
  const uint64_t n_kv = uint64_t{a.n_past} + a.n_tokens - first;
  const uint64_t want = std::min<uint64_t>((target + grid * t.wg - 1) / (grid * t.wg), k_fa_split_max);
  const uint64_t by_len = n_kv / k_fa_split_min_chunk;
  const uint64_t n = std::min(want, by_len);
  if (n < 2) return {};
  const uint64_t bc = t.bc();
  const uint64_t chunk = ((n_kv + n - 1) / n + bc - 1) / bc * bc;
  const uint64_t n_split = (n_kv + chunk - 1) / chunk;
  if (n_split < 2) return {};
  return {static_cast<uint32_t>(chunk), static_cast<uint32_t>(n_split)};
}

// The flash tile and its split plan: the profile's attn (attn_wide) table, and when that tile's
// grid is split (a short ubatch over a long cache) the profile's attn_split table instead, if it
// has a tile that fits (head_dim ≤ 128; the profile's attn_tile wins over both). attention() and
// attention_scratch_bytes() use this one choice, so the scratch fits the plan.
const FlashTile* pick_flash(const Env& e, const AttnArgs& a, SplitPlan* sp) {
  const tune::DeviceProfile& prof = profile(e);
  const FlashTile* t = flash_tile(prof, e.info, a.head_dim, e.kv_f16);
  if (t == nullptr) return nullptr;
  *sp = flash_split_plan(prof.attn_rule, *t, a, pos_buf(e) != 0);
  if (sp->n_split > 1 && !prof.has_attn_tile() && a.head_dim <= 128) {
    for (const FlashTile& c : prof.attn_split)
      if (fits(c, e.info, a.head_dim, e.kv_f16)) {
        const SplitPlan c_sp = flash_split_plan(prof.attn_rule, c, a, pos_buf(e) != 0);
        if (c_sp.n_split > 1) {
          *sp = c_sp;
          return &c;
        }
        break;
      }
  }
  return t;
}

bool want_flash(const Env& e, const AttnArgs& a) {
  if (e.tok_pos) return false;  // per-token key ranges: the per-(head, token) kernels
  if (e.attn == AttnKernel::SIMPLE || e.attn == AttnKernel::DECODE) return false;
  if (e.attn == AttnKernel::FLASH) return true;
  const tune::AttnRule& r = profile(e).attn_rule;
  if (decode_capable(r, e.attn, e.info, a)) return false;  // attention_decode (≤ decode_tokens tokens)
  return a.n_tokens >= r.flash_min_tokens;
}

// decode_capable, and K / V aligned for the kernel's 16-byte K and 32/64-bit V loads.
bool want_decode(const Env& e, const AttnArgs& a, const abi::AttnPC& pc) {
  return decode_capable(profile(e).attn_rule, e.attn, e.info, a) && pc.k_off % (e.kv_f16 ? 8 : 4) == 0 &&
         pc.v_off % 2 == 0;
}

// A split kernel's dispatch over grid (x, y, n_split) writing its partial states to
// Env::attn_scratch (`need` bytes, rows of head_dim + 2 floats), then attention_merge into b[3]
// (the output). b: the kernel's bindings 0 … 4 (q, K, V, out, step); binding 3 becomes the scratch.
void dispatch_split_merge(Env& e, const Pipeline& kernel, std::span<const Bound> b, abi::AttnSplitPC spc, uint64_t need,
                          uint32_t x, uint32_t y, const std::string& label) {
  if (e.attn_scratch == nullptr || e.attn_scratch->size() < need)
    fail("{}: split attention needs {} bytes of scratch, {} given", label, need,
         e.attn_scratch != nullptr ? e.attn_scratch->size() : 0);
  const Bound bs = e.rec.bind(*e.attn_scratch, 0, need, true);
  spc.s_off = f32_off(bs);
  Bound bsplit[] = {b[0], b[1], b[2], bs, b[4]};
  e.rec.dispatch(kernel, bsplit, &spc, sizeof spc, x, y, spc.n_split, label);
  const Bound br = e.rec.bind(*e.attn_scratch, 0, need, false);
  const Pipeline& pm = e.pipes.get("attention_merge", {{ROCKY_SC_WG, k_merge_wg}});
  Bound bmerge[] = {br, b[3]};
  spc.s_off = f32_off(br);
  e.rec.dispatch(pm, bmerge, &spc, sizeof spc, spc.a.n_head, spc.a.n_tokens, 1, label);
}

}  // namespace

void attention(Env& e, Region q, Region k_cache, Region v_cache, const AttnArgs& a, Region out,
               const std::string& label) {
  constexpr uint32_t k_wg = 64, k_dpt = 8, k_hd_max = k_wg * k_dpt;  // DPT in attention.comp
  // Dim pairs per invocation (one 32-bit load per two f16 V values; tuning-log #32) where the
  // profile says so (not on Mali, where they double the work registers: 64, half occupancy on the G610).
  const tune::AttnRule& rule = profile(e).attn_rule;
  const uint32_t pairs = rule.dim_pairs;
  if (a.head_dim > k_hd_max) fail("{}: head_dim {} > {} supported by attention.comp", label, a.head_dim, k_hd_max);
  if (a.n_head_kv == 0 || a.n_head % a.n_head_kv) {
    fail("{}: n_head {} is not a multiple of n_head_kv {}", label, a.n_head, a.n_head_kv);
  }
  const uint64_t elem = e.kv_f16 ? 2 : 4;
  // Columns read (with the step buffer: the whole cache, n_past is known on the device only).
  // A ring's columns wrap: the whole of it.
  const bool whole = e.step != nullptr || a.ring.ring > 0;
  const uint64_t used = whole ? k_cache.bytes : uint64_t{a.n_past + a.n_tokens} * a.n_embd_kv * elem;
  Region kr{k_cache.buf, k_cache.offset, used}, vr{v_cache.buf, v_cache.offset, whole ? v_cache.bytes : used};
  Bound b[] = {bind(e, q, false), bind(e, kr, false), bind(e, vr, false), bind(e, out, true), bind_step(e, q)};
  const std::span<const Bound> b4(b, 4);  // attention.comp: no step binding
  abi::AttnPC pc{a.head_dim,
                 a.n_head,
                 a.n_head_kv,
                 a.n_tokens,
                 a.n_past,
                 a.n_embd_kv,
                 f32_off(b[0]),
                 f32_off(b[3]),
                 static_cast<uint32_t>(b[1].delta / elem),
                 static_cast<uint32_t>(b[2].delta / elem),
                 a.scale,
                 a.window,
                 a.tok0,
                 a.ring.ring,
                 a.ring.seq_cells};
  // attention.comp's vector q·k (ROCKY_SC_ATTN_HD): K rows and K's offset in 16-byte units. With an
  // f32 cache only where attn_rule.vec_f32 (not on Mali: 64 work registers there, half occupancy;
  // f16, the GPU default: 32).
  const uint32_t kvec = e.kv_f16 ? 8 : 4;
  const bool vec_ok = e.kv_f16 || rule.vec_f32 != 0;
  const uint32_t attn_hd = vec_ok && a.head_dim % kvec == 0 && pc.k_off % kvec == 0 ? a.head_dim : 0;
  SplitPlan fsp;
  const FlashTile* tile = want_flash(e, a) ? pick_flash(e, a, &fsp) : nullptr;
  if (tile) {
    const FlashTile& t = *tile;
    const SplitPlan sp = fsp;
    const uint64_t need = uint64_t{a.n_head} * a.n_tokens * sp.n_split * (a.head_dim + 2u) * 4u;
    // The scratch is sized from the graph before recording (attention_scratch_bytes); a part
    // recorded without the step buffer (a batched step's lead run) may plan a split the scratch lacks: unsplit.
    const bool split = sp.n_split > 1 && e.attn_scratch != nullptr && e.attn_scratch->size() >= need;
    auto pipe = [&](uint32_t split_sc) -> const Pipeline& {
      const char* name = t.sg ? "attention_flash_sg" : t.roll ? "attention_flash_roll" : "attention_flash";
      return e.pipes.get(name, {{ROCKY_SC_WG, t.wg},
                                {ROCKY_SC_KV_F16, e.kv_f16 ? 1u : 0u},
                                {ROCKY_SC_FA_BR, t.br},
                                {ROCKY_SC_FA_TR, t.tr},
                                {ROCKY_SC_FA_TC, t.tc},
                                {ROCKY_SC_FA_HD, a.head_dim},
                                {ROCKY_SC_FA_PREFETCH, t.prefetch},
                                {ROCKY_SC_POS_BUF, pos_buf(e)},
                                {ROCKY_SC_FA_SPLIT, split_sc},
                                {ROCKY_SC_FA_KVH, t.kvh}});
    };
    const uint64_t rows = uint64_t{a.n_tokens} * (a.n_head / a.n_head_kv);
    const auto blocks = static_cast<uint32_t>((rows + t.br - 1) / t.br);
    abi::AttnSplitPC spc{pc, sp.chunk, sp.n_split, 0};
    if (!split) {
      spc.n_split = 1;
      e.rec.dispatch(pipe(0), b, &spc, sizeof spc, blocks, a.n_head_kv, 1, label);
      return;
    }
    dispatch_split_merge(e, pipe(1), b, spc, need, blocks, a.n_head_kv, label);
    return;
  }
  // attention_decode.comp: decode and batched decode with the GQA heads of a KV head in one
  // workgroup (each K/V value read once per token), split like attention_split.comp.
  const SplitPlan sp = split_plan(rule, e.attn, e.info, a);
  if (want_decode(e, a, pc)) {
    const uint32_t gqa = a.n_head / a.n_head_kv;
    const Pipeline& pd = e.pipes.get("attention_decode", {{ROCKY_SC_WG, k_decode_wg},
                                                          {ROCKY_SC_KV_F16, e.kv_f16 ? 1u : 0u},
                                                          {ROCKY_SC_ATTN_HD, a.head_dim},
                                                          {ROCKY_SC_ATTN_GQA, gqa},
                                                          {ROCKY_SC_POS_BUF, pos_buf(e)}});
    abi::AttnSplitPC spc{pc, sp.chunk, sp.n_split, 0};
    const uint64_t need = uint64_t{a.n_head} * a.n_tokens * sp.n_split * (a.head_dim + 2u) * 4u;
    // Unsplit when the scratch lacks room for the plan (a part recorded without the graph's sizing):
    // one workgroup per (KV head, token) covers any key range.
    if (sp.n_split < 2 || e.attn_scratch == nullptr || e.attn_scratch->size() < need) {
      spc.n_split = 1;
      e.rec.dispatch(pd, b, &spc, sizeof spc, a.n_head_kv, a.n_tokens, 1, label);
      return;
    }
    dispatch_split_merge(e, pd, b, spc, need, a.n_head_kv, a.n_tokens, label);
    return;
  }
  // attention_step.comp (and attention_split with POS_BUF): n_past from the step buffer (binding
  // 4), for the replayed decode.
  const bool step = e.step != nullptr;
  const uint64_t need_split = uint64_t{a.n_head} * a.n_tokens * sp.n_split * (a.head_dim + 2u) * 4u;
  if (sp.n_split > 1 && e.attn_scratch != nullptr && e.attn_scratch->size() >= need_split) {
    const uint64_t need = need_split;
    const Pipeline& ps = e.pipes.get("attention_split", {{ROCKY_SC_WG, k_wg},
                                                         {ROCKY_SC_KV_F16, e.kv_f16 ? 1u : 0u},
                                                         {ROCKY_SC_HD_MAX, k_hd_max},
                                                         {ROCKY_SC_POS_BUF, pos_buf(e)},
                                                         {ROCKY_SC_ATTN_HD, attn_hd},
                                                         {ROCKY_SC_ATTN_PAIRS, pairs},
                                                         {ROCKY_SC_KV_RING, a.ring.ring > 0 ? 1u : 0u}});
    dispatch_split_merge(e, ps, b, abi::AttnSplitPC{pc, sp.chunk, sp.n_split, 0}, need, a.n_head, a.n_tokens, label);
    return;
  }
  const Pipeline& p =
      e.tok_pos ? e.pipes.get("attention_step", {{ROCKY_SC_WG, k_wg},
                                                 {ROCKY_SC_KV_F16, e.kv_f16 ? 1u : 0u},
                                                 {ROCKY_SC_HD_MAX, k_hd_max},
                                                 {ROCKY_SC_ATTN_HD, attn_hd},
                                                 {ROCKY_SC_ATTN_PAIRS, pairs},
                                                 {ROCKY_SC_KV_RING, a.ring.ring > 0 ? 1u : 0u},
                                                 {ROCKY_SC_POS_BUF, 2u}})
                : e.pipes.get(step ? "attention_step" : "attention", {{ROCKY_SC_WG, k_wg},
                                                                      {ROCKY_SC_KV_F16, e.kv_f16 ? 1u : 0u},
                                                                      {ROCKY_SC_HD_MAX, k_hd_max},
                                                                      {ROCKY_SC_ATTN_HD, attn_hd},
                                                                      {ROCKY_SC_ATTN_PAIRS, pairs},
                                                                      {ROCKY_SC_KV_RING, a.ring.ring > 0 ? 1u : 0u}});
  if (step) {
    e.rec.dispatch(p, b, &pc, sizeof pc, a.n_head, a.n_tokens, 1, label);
  } else {
    e.rec.dispatch(p, b4, &pc, sizeof pc, a.n_head, a.n_tokens, 1, label);
  }
}

uint64_t attention_scratch_bytes(const Env& e, const AttnArgs& a) {
  SplitPlan fsp;
  if (want_flash(e, a) && pick_flash(e, a, &fsp) != nullptr)
    return fsp.n_split > 1 ? uint64_t{a.n_head} * a.n_tokens * fsp.n_split * (a.head_dim + 2u) * 4u : 0;
  const SplitPlan sp = split_plan(profile(e).attn_rule, e.attn, e.info, a);
  if (sp.n_split < 2) return 0;
  return uint64_t{a.n_head} * a.n_tokens * sp.n_split * (a.head_dim + 2u) * 4u;
}

uint64_t attention_split_signature(const tune::DeviceProfile& prof, AttnKernel attn, const DeviceInfo& d,
                                   const AttnArgs& a) {
  const SplitPlan sp = split_plan(prof.attn_rule, attn, d, a);
  return uint64_t{sp.chunk} << 32 | sp.n_split;
}

}  // namespace rocky::vulkan::ops
