// rope — shaders/rope.comp: one invocation per rotated pair slot of each (head, token).
#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/push_constants.hpp"
#include "core/error.hpp"

namespace rocky::vulkan::ops {

void rope(Env& e, Region x, const RopeArgs& a, Region out, const std::string& label, Region factors) {
  if (a.head_dim % 2 || a.n_rot % 2 || a.n_rot > a.head_dim) {
    fail("{}: rope needs even head_dim and n_rot ≤ head_dim (head_dim {}, n_rot {})", label, a.head_dim, a.n_rot);
  }
  const uint32_t wg = 64;
  const Pipeline& p = e.pipes.get("rope", {{ROCKY_SC_WG, wg}, {ROCKY_SC_POS_BUF, pos_buf(e)}});
  const bool has_ff = factors.buf != nullptr;
  if (has_ff && factors.bytes < uint64_t(a.n_rot / 2) * 4)
    fail("{}: rope factors hold fewer than n_rot/2 values", label);
  // Without factors binding 2 is x again (read-only; the shader does not read it).
  Bound b[] = {bind(e, x, false), bind(e, out, true), bind(e, has_ff ? factors : x, false), bind_step(e, x)};
  abi::RopePC pc{a.head_dim,    a.n_head,      a.n_rot,     a.n_tokens,   a.n_past,      a.mode,
                 f32_off(b[0]), f32_off(b[1]), a.freq_base, a.freq_scale, f32_off(b[2]), has_ff ? 1u : 0u};
  e.rec.dispatch(p, b, &pc, sizeof pc, (a.head_dim / 2 + wg - 1) / wg, a.n_head, a.n_tokens, label);
}

}  // namespace rocky::vulkan::ops
