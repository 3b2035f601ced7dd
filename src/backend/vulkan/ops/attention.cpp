// attention — shaders/attention.comp: flash-style causal GQA attention over the KV cache.
#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/push_constants.hpp"
#include "core/error.hpp"

namespace rocky::vulkan::ops {

void attention(Env& e, Region q, Region k_cache, Region v_cache, const AttnArgs& a, Region out, const std::string& label) {
  constexpr uint32_t k_wg = 64, k_dpt = 8, k_hd_max = k_wg * k_dpt;  // DPT in attention.comp
  if (a.head_dim > k_hd_max) fail("{}: head_dim {} > {} supported by attention.comp", label, a.head_dim, k_hd_max);
  if (a.n_head_kv == 0 || a.n_head % a.n_head_kv) {
    fail("{}: n_head {} is not a multiple of n_head_kv {}", label, a.n_head, a.n_head_kv);
  }
  const Pipeline& p = e.pipes.get(
      "attention", {{ROCKY_SC_WG, k_wg}, {ROCKY_SC_KV_F16, e.kv_f16 ? 1u : 0u}, {ROCKY_SC_HD_MAX, k_hd_max}});
  const uint64_t elem = e.kv_f16 ? 2 : 4;
  const uint64_t used = uint64_t{a.n_past + a.n_tokens} * a.n_embd_kv * elem;  // columns read
  Region kr{k_cache.buf, k_cache.offset, used}, vr{v_cache.buf, v_cache.offset, used};
  Bound b[] = {bind(e, q, false), bind(e, kr, false), bind(e, vr, false), bind(e, out, true)};
  abi::AttnPC pc{a.head_dim, a.n_head, a.n_head_kv, a.n_tokens, a.n_past, a.n_embd_kv, f32_off(b[0]), f32_off(b[3]),
                 static_cast<uint32_t>(b[1].delta / elem), static_cast<uint32_t>(b[2].delta / elem), a.scale};
  e.rec.dispatch(p, b, &pc, sizeof pc, a.n_head, a.n_tokens, 1, label);
}

}  // namespace rocky::vulkan::ops
