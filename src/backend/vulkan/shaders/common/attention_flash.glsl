// attention_flash (prefill): tiled causal GQA attention, FlashAttention-2 style (Dao 2023,
// "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning", Alg. 1):
// a workgroup owns BR query rows and walks the keys in blocks of BC positions, staging each K and
// V block once in shared memory; S = Q·Kᵀ is computed as register tiles, the softmax is online
// (running row max m and row sum l in f32, O rescaled by exp(m_old − m_new)) and O lives in
// registers until the single normalised store. No n_tokens × n_ctx scratch exists.
//
// Query rows. For KV head kvh the G = n_head / n_head_kv query heads that read it are processed
// together: flat row i ∈ [0, n_tokens·G) is (token j = i / G, head h = kvh·G + i % G), so one
// K/V block serves every head of the group. Grid: (ceil(n_tokens·G / BR), n_head_kv); row blocks
// are visited last-first so the long (late-token) blocks start first.
// Causality: token j sees positions p ≤ n_past + j; blocks past the workgroup's last visible
// position are never loaded, and the mask is evaluated only in blocks that cross the diagonal.
// Sliding window W = pc.window > 0: token j sees only p > n_past + j − W; the key loop starts
// at the first position any row of the workgroup sees, and blocks before the last row's first
// visible key are masked too. A row whose first blocks are all masked accumulates exp(0) terms
// against m = −1e30; its first visible key rescales them by exp(−1e30 − m) = 0.
//
// Invocations. WG invocations = RG row groups × CT column threads, RG = BR / TR. Invocation
// (rg, tc) owns rows rg·TR + i (i < TR); in S it owns keys tc + CT·k (k < TC), so BC = CT·TC; in O
// it owns dims 4·(tc + CT·u) … +3 (u < DPT4 = ceil(HD/4 / CT)). Registers: TR·TC scores + TR·DPT4
// vec4 accumulators (+ the TR + TC vec4 operands of the inner product).
// Shared memory: Q [BR][HD/4 + 1] vec4 (f32, scaled), K or V block [BC][HD/4 + 1] vec4 (the row
// pad of one vec4 spreads the CT keys read together over distinct banks) — or, KVH = 1 with an f16
// cache, uvec2 (4 packed halves: the cache's own bits, half the bytes, so a bigger tile fits the
// 48 KB of a desktop GPU; converted to f32 where the products read them) —, P [BR][BC/4 + 1] vec4
// (f32; the P·V loop reads 4 keys' probabilities per load when BC % 4 == 0), and [BR][CT] partial
// row maxima / sums (each invocation reduces its own TC keys first).
//
// Split keys (SPLIT = 1; few query rows over a long cache, e.g. an agent's next message at depth):
// workgroup z = s walks only keys [f + s·chunk, f + (s + 1)·chunk) of the workgroup's range (f: the
// window's first key for the ubatch's first token, else 0) and stores its partial softmax state
// (m, l, unnormalised o) to the scratch rows of attention_split.comp's layout (AttnSplitPC, abi.h),
// which attention_merge.comp combines — the flash-decoding identity, so a grid of a few dozen row
// blocks fills the GPU. A row with no visible key in its split stores m = −1e30 (merged as nothing).
//
// Requirements (host-checked in ops/attention.cpp): HD % 4 == 0, BR % TR == 0, WG % RG == 0.
// Bindings: 0 q [head_dim·n_head, N] f32, 1 K cache, 2 V cache (uint words: f32 bits, or packed
// f16 pairs when KV_F16 = 1), 3 out like q (SPLIT = 1: the scratch rows). Push constants:
// AttnSplitPC (its AttnPC `a` as attention.comp's; chunk / n_split / s_off used when SPLIT = 1).
// FA_SG = 1 (attention_flash_sg.comp; the host checks CT == the device's fixed subgroup size and
// subgroup arithmetic): a row group is one subgroup (rg = gl_SubgroupID, tc =
// gl_SubgroupInvocationID), so the row maxima and sums reduce with subgroupMax / subgroupAdd (no
// shared partials), each row group's P rows are written and read by its own subgroup (a subgroup
// barrier), and K and V have one buffer each, staged together: two workgroup barriers per key
// block instead of four.
// FA_ROLL = 1 (attention_flash_roll.comp; tile field `roll`): the q·k loop over head_dim is rolled in
// steps of 4 vec4 (an outer [[dont_unroll]] loop around an inner [[unroll]] of 4; a step past D4 is
// skipped, so any HD % 4 == 0 works) and the P·V loop over the block's keys is not unrolled either.
// Unrolled, the compiler keeps every step's operands live: on the H200 tiles of 4 rows per
// invocation took 122-176 registers and spilled; rolled, 256,32,4,2 takes 106 and none
// (docs/tuning-log.md #45).
#include "common/header.glsl"
#ifndef FA_SG
#define FA_SG 0
#endif
#ifndef FA_ROLL
#define FA_ROLL 0
#endif
#if FA_ROLL
#extension GL_EXT_control_flow_attributes : require
#endif
layout(constant_id = ROCKY_SC_KV_F16) const uint KV_F16 = 0;
layout(constant_id = ROCKY_SC_FA_BR) const uint BR = 32;
layout(constant_id = ROCKY_SC_FA_TR) const uint TR = 2;
layout(constant_id = ROCKY_SC_FA_TC) const uint TC = 4;
layout(constant_id = ROCKY_SC_FA_HD) const uint HD = 128;
layout(constant_id = ROCKY_SC_FA_PREFETCH) const uint PREFETCH = 0;
layout(constant_id = ROCKY_SC_FA_SPLIT) const uint SPLIT = 0;
layout(constant_id = ROCKY_SC_FA_KVH) const uint KVH_SC = 0;  // 1: K/V blocks as f16 in shared (KV_F16 only)
layout(push_constant) uniform PC { AttnSplitPC spc; };
#define pc spc.a
layout(binding = 0) readonly buffer Q { float q[]; };
layout(binding = 1) readonly buffer Kc { uint kc[]; };
layout(binding = 2) readonly buffer Vc { uint vc[]; };
layout(binding = 3) writeonly buffer Out { float outv[]; };
layout(constant_id = ROCKY_SC_POS_BUF) const uint POS_BUF = 0;
layout(binding = 4) readonly buffer Step { uint step_pos[]; };  // POS_BUF = 1: [0] = n_past

const uint WG = gl_WorkGroupSize.x;
const uint RG = BR / TR;
const uint CT = WG / RG;
const uint BC = CT * TC;
const uint D4 = HD / 4u;
const uint QS = D4 + 1u;  // padded row stride, vec4 units
const uint DPT4 = (D4 + CT - 1u) / CT;
const uint KVH = KVH_SC * KV_F16;
const uint PS4 = BC / 4u + 1u;  // P row stride in vec4 (one vec4 of pad: rows on distinct banks)
const float k_neg = -1e30;

const uint NKV = FA_SG != 0 ? 2u : 1u;  // block buffers: K or V (K then V with FA_SG)
const uint VB = FA_SG != 0 ? BC * QS : 0u;  // V's first element in kvs / kvs_h
shared vec4 qs[BR * QS];
shared vec4 kvs[(1u - KVH) * NKV * BC * QS + KVH];  // KVH = 0: the K or V block as f32
shared uvec2 kvs_h[KVH * NKV * BC * QS + 1u - KVH]; // KVH = 1: as packed halves
shared float red[FA_SG != 0 ? 1u : BR * CT];        // per-thread partial row maxima (then, at the end, row sums)
shared vec4 ps[BR * PS4];                           // P: key c of row r at ps[r * PS4 + c / 4][c % 4]

// Four consecutive cache elements starting at element e (f32 words, or f16 halves).
vec4 load4(bool is_k, uint e) {
  if (KV_F16 == 0u) {
    if (is_k) return vec4(uintBitsToFloat(kc[e]), uintBitsToFloat(kc[e + 1u]), uintBitsToFloat(kc[e + 2u]),
                          uintBitsToFloat(kc[e + 3u]));
    return vec4(uintBitsToFloat(vc[e]), uintBitsToFloat(vc[e + 1u]), uintBitsToFloat(vc[e + 2u]),
                uintBitsToFloat(vc[e + 3u]));
  }
  uint w = e >> 1;
  uint w0 = is_k ? kc[w] : vc[w];
  uint w1 = is_k ? kc[w + 1u] : vc[w + 1u];
  if ((e & 1u) == 0u) return vec4(unpackHalf2x16(w0), unpackHalf2x16(w1));
  uint w2 = is_k ? kc[w + 2u] : vc[w + 2u];
  return vec4(unpackHalf2x16(w0).y, unpackHalf2x16(w1), unpackHalf2x16(w2).x);
}

// The same four elements as packed halves (KVH: f16 cache; aligned: the cache's words as they are).
uvec2 load4h(bool is_k, uint e) {
  if ((e & 1u) == 0u) {
    const uint w = e >> 1;
    return is_k ? uvec2(kc[w], kc[w + 1u]) : uvec2(vc[w], vc[w + 1u]);
  }
  const vec4 v = load4(is_k, e);
  return uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw));
}

// The staged block's element (key c, dims 4·d4 … +3) as f32.
vec4 kv_at(uint i) {
  if (KVH != 0u) return vec4(unpackHalf2x16(kvs_h[i].x), unpackHalf2x16(kvs_h[i].y));
  return kvs[i];
}

// Stage positions k0 … k0 + BC − 1 of KV head kvh (zeros at p ≥ p_end) into kvs / kvs_h.
void load_block(bool is_k, uint k0, uint p_end, uint kvh_i) {
  const uint base = (is_k ? pc.k_off : pc.v_off) + kvh_i * HD;
  for (uint idx = gl_LocalInvocationID.x; idx < BC * D4; idx += WG) {
    const uint c = idx / D4, d4 = idx % D4;
    const uint p = k0 + c;
    const uint e = base + kv_col(0u, p, pc.ring, pc.seq_cells) * pc.n_embd_kv + 4u * d4;
    const uint at = (is_k ? 0u : VB) + c * QS + d4;
    if (KVH != 0u)
      kvs_h[at] = p < p_end ? load4h(is_k, e) : uvec2(0u);
    else
      kvs[at] = p < p_end ? load4(is_k, e) : vec4(0.0);
  }
}

// PREFETCH = 1: blocks travel through registers so their global loads overlap compute — V(k0) is
// fetched before S = Q·Kᵀ and stored after it, K(k0 + BC) is fetched before the P·V product.
// KVH: the registers hold the packed halves (half the registers).
// FA_SG: K and V of the next block are fetched together (n ≥ NPRE: V's registers).
const uint NPRE = (BC * D4 + WG - 1u) / WG;
vec4 pre[(1u - KVH) * NKV * NPRE + KVH];
uvec2 preh[KVH * NKV * NPRE + 1u - KVH];
void fetch(bool is_k, uint k0, uint p_end, uint kvh_i) {
  const uint base = (is_k ? pc.k_off : pc.v_off) + kvh_i * HD;
  const uint r0 = FA_SG != 0u && !is_k ? NPRE : 0u;
  for (uint n = 0u; n < NPRE; ++n) {
    const uint idx = gl_LocalInvocationID.x + n * WG;
    const uint c = idx / D4, d4 = idx % D4;
    const uint p = k0 + c;
    const bool live = idx < BC * D4 && p < p_end;
    const uint e = base + kv_col(0u, p, pc.ring, pc.seq_cells) * pc.n_embd_kv + 4u * d4;
    if (KVH != 0u)
      preh[r0 + n] = live ? load4h(is_k, e) : uvec2(0u);
    else
      pre[r0 + n] = live ? load4(is_k, e) : vec4(0.0);
  }
}
void commit() {  // FA_SG: K and V
  for (uint b = 0u; b < NKV; ++b)
    for (uint n = 0u; n < NPRE; ++n) {
      const uint idx = gl_LocalInvocationID.x + n * WG;
      if (idx >= BC * D4) continue;
      const uint at = b * BC * QS + (idx / D4) * QS + idx % D4;
      if (KVH != 0u)
        kvs_h[at] = preh[b * NPRE + n];
      else
        kvs[at] = pre[b * NPRE + n];
    }
}

// The workgroup's Q block (rows i0 … i0 + BR − 1) into qs, pre-scaled; rows past n_rows are zero
// (their results are never stored).
void stage_q(uint i0, uint n_rows, uint G, uint kvh) {
  for (uint idx = gl_LocalInvocationID.x; idx < BR * D4; idx += WG) {
    const uint r = idx / D4, d4 = idx % D4;
    const uint i = i0 + r;
    vec4 v = vec4(0.0);
    if (i < n_rows) {
      const uint j = i / G, h = kvh * G + i % G;
      const uint e = pc.q_off + (j * pc.n_head + h) * HD + 4u * d4;
      v = vec4(q[e], q[e + 1u], q[e + 2u], q[e + 3u]) * pc.scale;
    }
    qs[r * QS + d4] = v;
  }
}

// SPLIT = 1: this invocation's rows' partial softmax state (m, l and the unnormalised o) into the
// scratch rows attention_merge.comp reads.
void store_partial(uint i0, uint n_rows, uint G, uint kvh, uint rg, uint tc, float m[TR], float l[TR],
                   vec4 o[TR][DPT4]) {
  for (uint i = 0u; i < TR; ++i) {
    const uint row = i0 + rg * TR + i;
    if (row >= n_rows) continue;
    const uint j = row / G, h = kvh * G + row % G;
    const uint r = spc.s_off + ((j * pc.n_head + h) * spc.n_split + gl_WorkGroupID.z) * (HD + 2u);
    if (tc == 0u) {
      outv[r] = m[i];
      outv[r + 1u] = l[i];
    }
    for (uint u = 0u; u < DPT4; ++u) {
      const uint d4 = tc + CT * u;
      if (d4 >= D4) continue;
      outv[r + 2u + 4u * d4] = o[i][u].x;
      outv[r + 3u + 4u * d4] = o[i][u].y;
      outv[r + 4u + 4u * d4] = o[i][u].z;
      outv[r + 5u + 4u * d4] = o[i][u].w;
    }
  }
}

// This invocation's rows of the output, normalised by their row sums.
void store_rows(uint i0, uint n_rows, uint G, uint kvh, uint rg, uint tc, float l[TR], vec4 o[TR][DPT4]) {
  for (uint i = 0u; i < TR; ++i) {
    const uint row = i0 + rg * TR + i;
    if (row >= n_rows) continue;
    const uint j = row / G, h = kvh * G + row % G;
    const uint e = pc.out_off + (j * pc.n_head + h) * HD;
    const float inv = 1.0 / l[i];
    for (uint u = 0u; u < DPT4; ++u) {
      const uint d4 = tc + CT * u;
      if (d4 >= D4) continue;
      const vec4 v = o[i][u] * inv;
      outv[e + 4u * d4] = v.x;
      outv[e + 4u * d4 + 1u] = v.y;
      outv[e + 4u * d4 + 2u] = v.z;
      outv[e + 4u * d4 + 3u] = v.w;
    }
  }
}

void main() {
  const uint t = gl_LocalInvocationID.x;
#if FA_SG
  const uint tc = gl_SubgroupInvocationID, rg = gl_SubgroupID;
#else
  const uint tc = t % CT, rg = t / CT;
#endif
  const uint G = pc.n_head / pc.n_head_kv;
  const uint kvh = gl_WorkGroupID.y;
  const uint n_rows = pc.n_tokens * G;
  const uint i0 = (gl_NumWorkGroups.x - 1u - gl_WorkGroupID.x) * BR;
  const uint j_lo = i0 / G, j_hi = min(i0 + BR - 1u, n_rows - 1u) / G;
  const uint n_past = POS_BUF != 0u ? step_pos[0] : pc.n_past;
  const uint kv_end = n_past + j_hi + 1u;   // keys past this are invisible to every row
  const uint full_end = n_past + j_lo + 1u;  // keys before this are visible to every row (causally)
  const uint W = pc.window;
  const uint kv_begin = W > 0u && full_end > W ? full_end - W : 0u;  // first key of the first row
  const uint win_full = W > 0u && kv_end > W ? kv_end - W : 0u;       // keys from here: in every row's window
  uint k_lo = kv_begin, k_hi = kv_end;  // this workgroup's keys (SPLIT: one chunk of them)
  if (SPLIT != 0u) {
    const uint f = W > 0u && n_past + 1u > W ? n_past + 1u - W : 0u;
    k_lo = max(kv_begin, f + gl_WorkGroupID.z * spc.chunk);
    k_hi = min(kv_end, f + (gl_WorkGroupID.z + 1u) * spc.chunk);
  }

  stage_q(i0, n_rows, G, kvh);

  uint last[TR];  // last visible position of each owned row (first: last + 1 − W when W > 0)
  float m[TR], l[TR];
  vec4 o[TR][DPT4];
  for (uint i = 0u; i < TR; ++i) {
    last[i] = n_past + (i0 + rg * TR + i) / G;
    m[i] = k_neg;
    l[i] = 0.0;
    for (uint u = 0u; u < DPT4; ++u) o[i][u] = vec4(0.0);
  }

  if (PREFETCH != 0u) {
    fetch(true, k_lo, k_hi, kvh);
    if (FA_SG != 0u) fetch(false, k_lo, k_hi, kvh);
  }
  for (uint k0 = k_lo; k0 < k_hi; k0 += BC) {
    if (PREFETCH != 0u) {
      commit();
    } else {
      load_block(true, k0, k_hi, kvh);
      if (FA_SG != 0u) load_block(false, k0, k_hi, kvh);
    }
    barrier();
    if (PREFETCH != 0u) {
      if (FA_SG == 0u) {
        fetch(false, k0, k_hi, kvh);
      } else if (k0 + BC < k_hi) {
        fetch(true, k0 + BC, k_hi, kvh);
        fetch(false, k0 + BC, k_hi, kvh);
      }
    }

    float s[TR][TC];
    for (uint i = 0u; i < TR; ++i)
      for (uint k = 0u; k < TC; ++k) s[i][k] = 0.0;
#if FA_ROLL
    [[dont_unroll]] for (uint d4o = 0u; d4o < D4; d4o += 4u) {
      [[unroll]] for (uint u = 0u; u < 4u; ++u) {
        const uint d4 = d4o + u;
        if (D4 % 4u != 0u && d4 >= D4) continue;  // the last step of a head_dim / 4 not a multiple of 4
#else
    {
      for (uint d4 = 0u; d4 < D4; ++d4) {
#endif
        vec4 qv[TR], kv[TC];
        for (uint i = 0u; i < TR; ++i) qv[i] = qs[(rg * TR + i) * QS + d4];
        for (uint k = 0u; k < TC; ++k) kv[k] = kv_at((tc + CT * k) * QS + d4);
        for (uint i = 0u; i < TR; ++i)
          for (uint k = 0u; k < TC; ++k) s[i][k] += dot(qv[i], kv[k]);
      }
    }
    if (k0 + BC > full_end) {  // the block crosses the diagonal of some row
      for (uint i = 0u; i < TR; ++i)
        for (uint k = 0u; k < TC; ++k)
          if (k0 + tc + CT * k > last[i]) s[i][k] = k_neg;
    }
    if (k0 < win_full) {  // the block starts before some row's window
      for (uint i = 0u; i < TR; ++i)
        for (uint k = 0u; k < TC; ++k)
          if (k0 + tc + CT * k + W <= last[i]) s[i][k] = k_neg;
    }
    if (SPLIT != 0u && k0 + BC > k_hi) {  // the split's last block: keys of the next split are not ours
      for (uint i = 0u; i < TR; ++i)
        for (uint k = 0u; k < TC; ++k)
          if (k0 + tc + CT * k >= k_hi) s[i][k] = k_neg;
    }
#if FA_SG
    float bmx[TR];  // the block's row maxima over the subgroup
#endif
    for (uint i = 0u; i < TR; ++i) {
      float mx = s[i][0];
      for (uint k = 1u; k < TC; ++k) mx = max(mx, s[i][k]);
#if FA_SG
      bmx[i] = subgroupMax(mx);
#else
      red[(rg * TR + i) * CT + tc] = mx;
#endif
    }
    if (FA_SG == 0u) barrier();

    // Row max over the block from the CT partial maxima of the row group (broadcast reads), then
    // this thread's probabilities and its partial row sum; meanwhile V replaces K in kvs.
    float alpha[TR];
    for (uint i = 0u; i < TR; ++i) {
      float mx = m[i];
#if FA_SG
      mx = max(mx, bmx[i]);
#else
      for (uint c = 0u; c < CT; ++c) mx = max(mx, red[(rg * TR + i) * CT + c]);
#endif
      alpha[i] = exp(m[i] - mx);
      m[i] = mx;
      float sum = 0.0;
      for (uint k = 0u; k < TC; ++k) {
        const float p = exp(s[i][k] - mx);
        sum += p;
        const uint c = tc + CT * k;
        ps[(rg * TR + i) * PS4 + c / 4u][c % 4u] = p;
      }
      l[i] = l[i] * alpha[i] + sum;
      for (uint u = 0u; u < DPT4; ++u) o[i][u] *= alpha[i];
    }
#if FA_SG
    subgroupMemoryBarrierShared();  // this row group's P rows, written and read by its own subgroup
    subgroupBarrier();
#else
    if (PREFETCH != 0u) {
      commit();
      if (k0 + BC < k_hi) fetch(true, k0 + BC, k_hi, kvh);
    } else {
      load_block(false, k0, k_hi, kvh);
    }
    barrier();
#endif

    if (BC % 4u == 0u) {  // four keys' probabilities per shared load
#if FA_ROLL
      [[dont_unroll]]
#endif
      for (uint c4 = 0u; c4 < BC / 4u; ++c4) {
        vec4 pr[TR];
        for (uint i = 0u; i < TR; ++i) pr[i] = ps[(rg * TR + i) * PS4 + c4];
        for (uint cc = 0u; cc < 4u; ++cc) {
          const uint c = 4u * c4 + cc;
          vec4 vv[DPT4];
          for (uint u = 0u; u < DPT4; ++u) vv[u] = tc + CT * u < D4 ? kv_at(VB + c * QS + tc + CT * u) : vec4(0.0);
          for (uint i = 0u; i < TR; ++i)
            for (uint u = 0u; u < DPT4; ++u) o[i][u] += pr[i][cc] * vv[u];
        }
      }
    } else {
      for (uint c = 0u; c < BC; ++c) {
        vec4 vv[DPT4];
        for (uint u = 0u; u < DPT4; ++u) vv[u] = tc + CT * u < D4 ? kv_at(VB + c * QS + tc + CT * u) : vec4(0.0);
        for (uint i = 0u; i < TR; ++i) {
          const float p = ps[(rg * TR + i) * PS4 + c / 4u][c % 4u];
          for (uint u = 0u; u < DPT4; ++u) o[i][u] += p * vv[u];
        }
      }
    }
    barrier();
  }

  // Row sums: each thread holds the sum over its own keys (all scaled to the final m).
#if FA_SG
  for (uint i = 0u; i < TR; ++i) l[i] = subgroupAdd(l[i]);
#else
  for (uint i = 0u; i < TR; ++i) red[(rg * TR + i) * CT + tc] = l[i];
  barrier();
  for (uint i = 0u; i < TR; ++i) {
    float sum = 0.0;
    for (uint c = 0u; c < CT; ++c) sum += red[(rg * TR + i) * CT + c];
    l[i] = sum;
  }
#endif

  if (SPLIT != 0u) {
    store_partial(i0, n_rows, G, kvh, rg, tc, m, l, o);
    return;
  }
  store_rows(i0, n_rows, G, kvh, rg, tc, l, o);
}
