// kv_store — shaders/kv_store.comp: write a ubatch's K or V columns into the cache at n_past.
#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/push_constants.hpp"
#include "core/error.hpp"

namespace rocky::vulkan::ops {

void kv_store(Env& e, Region x, uint32_t n_embd, uint32_t n_tokens, uint32_t n_past, Region cache,
              const std::string& label, KvRing ring) {
  if (e.kv_f16 && n_embd % 2) fail("{}: an f16 KV cache needs an even row size (got {})", label, n_embd);
  const Pipeline& p = e.pipes.get(
      "kv_store", {{ROCKY_SC_WG, e.wg}, {ROCKY_SC_KV_F16, e.kv_f16 ? 1u : 0u}, {ROCKY_SC_POS_BUF, pos_buf(e)}});
  const uint64_t elem = e.kv_f16 ? 2 : 4;
  // Bind only the columns written, so the hazard tracking sees the exact range (with the step
  // buffer the column is known on the device only, and a ring's columns wrap: the whole cache).
  const bool whole = e.step != nullptr || ring.ring > 0;
  Region dst =
      whole ? cache
            : Region{cache.buf, cache.offset + uint64_t{n_past} * n_embd * elem, uint64_t{n_tokens} * n_embd * elem};
  Bound b[] = {bind(e, x, false), bind(e, dst, true), bind_step(e, x)};
  abi::KvStorePC pc{
      n_embd,    n_tokens,      whole ? n_past : 0u, f32_off(b[0]), static_cast<uint32_t>(b[1].delta / elem),
      ring.ring, ring.seq_cells};
  const uint32_t items = e.kv_f16 ? n_embd / 2 : n_embd;
  e.rec.dispatch(p, b, &pc, sizeof pc, (items + e.wg - 1) / e.wg, n_tokens, 1, label);
}

}  // namespace rocky::vulkan::ops
