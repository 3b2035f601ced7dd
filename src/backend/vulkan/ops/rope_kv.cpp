// rope_kv — shaders/rope_kv.comp: rope Q, rope K and store K and V in one decode dispatch.
#include <algorithm>

#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/push_constants.hpp"
#include "core/error.hpp"

namespace rocky::vulkan::ops {

void rope_kv(Env& e, Region q, Region k, Region v, const RopeArgs& a, uint32_t n_head_kv, Region qo, Region k_cache,
             Region v_cache, const std::string& label, Region factors, KvRing ring) {
  if (a.head_dim % 2 || a.n_rot % 2 || a.n_rot > a.head_dim || n_head_kv == 0) {
    fail(
        "{}: rope_kv needs even head_dim, n_rot ≤ head_dim even and n_head_kv > 0 (head_dim {}, n_rot {}, n_head_kv "
        "{})",
        label, a.head_dim, a.n_rot, n_head_kv);
  }
  const uint64_t elem = e.kv_f16 ? 2 : 4;
  const uint64_t n_embd_kv = uint64_t{a.head_dim} * n_head_kv, n_embd_q = uint64_t{a.head_dim} * a.n_head;
  if (q.bytes < n_embd_q * a.n_tokens * 4 || k.bytes < n_embd_kv * a.n_tokens * 4 ||
      v.bytes < n_embd_kv * a.n_tokens * 4 || qo.bytes < n_embd_q * a.n_tokens * 4) {
    fail("{}: rope_kv operands smaller than [{} / {}, {}]", label, n_embd_q, n_embd_kv, a.n_tokens);
  }
  const bool has_ff = factors.buf != nullptr;
  if (has_ff && factors.bytes < uint64_t(a.n_rot / 2) * 4)
    fail("{}: rope factors hold fewer than n_rot/2 values", label);
  // The whole caches are bound (the column, n_past + j, is the step buffer's or a.n_past + j).
  if (e.step == nullptr && ring.ring == 0 &&
      (uint64_t{a.n_past} + a.n_tokens) * n_embd_kv * elem > std::min(k_cache.bytes, v_cache.bytes))
    fail("{}: KV columns past the cache", label);
  const Region kd = k_cache, vd = v_cache;
  const uint32_t wg = 64;
  const Pipeline& p = e.pipes.get(
      "rope_kv", {{ROCKY_SC_WG, wg}, {ROCKY_SC_KV_F16, e.kv_f16 ? 1u : 0u}, {ROCKY_SC_POS_BUF, pos_buf(e)}});
  Bound b[] = {bind(e, q, false), bind(e, k, false), bind(e, v, false), bind(e, has_ff ? factors : q, false),
               bind(e, qo, true), bind(e, kd, true), bind(e, vd, true), bind_step(e, q)};
  if (b[5].delta % (2 * elem) || b[6].delta % (2 * elem)) fail("{}: KV cache columns not pair-aligned", label);
  abi::RopeKvPC pc{a.head_dim,
                   a.n_head,
                   n_head_kv,
                   a.n_rot,
                   a.n_tokens,
                   a.n_past,  // ignored with the step buffer
                   a.mode,
                   f32_off(b[0]),
                   f32_off(b[1]),
                   f32_off(b[2]),
                   f32_off(b[4]),
                   static_cast<uint32_t>(b[5].delta / elem),
                   static_cast<uint32_t>(b[6].delta / elem),
                   f32_off(b[3]),
                   has_ff ? 1u : 0u,
                   a.freq_base,
                   a.freq_scale,
                   ring.ring,
                   ring.seq_cells};
  e.rec.dispatch(p, b, &pc, sizeof pc, (a.head_dim / 2 + wg - 1) / wg, a.n_head + 2 * n_head_kv, a.n_tokens, label);
}

}  // namespace rocky::vulkan::ops
