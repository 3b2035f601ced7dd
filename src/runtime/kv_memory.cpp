// KV memory by kind and the KV budget (see kv_memory.hpp).
#include "runtime/kv_memory.hpp"

#include <fmt/format.h>

#include <vector>

#include "core/error.hpp"

namespace rocky::runtime {

KvBytes kv_bytes(const model::Model& m, int32_t n_ctx, int32_t n_seq, backend::KvType t, KvBytes* per_token,
                 int32_t n_ring) {
  const graph::Graph g = m.build_graph(model::UbatchSpec{1, 0, n_ctx, model::Logits::LAST, 1, n_ring});
  const graph::KvShape& kv = g.kv;
  enum Use : uint8_t { NONE = 0, FULL = 1, SWA = 2, STATE = 4 };
  std::vector<uint8_t> use(static_cast<size_t>(std::max(kv.n_layer, 0)), NONE);
  for (const graph::Node& n : g.nodes) {
    if (n.layer < 0 || n.layer >= kv.n_layer) continue;
    if (n.op == graph::Op::ATTENTION) use[static_cast<size_t>(n.layer)] |= n.attn.window > 0 ? SWA : FULL;
    if (n.op == graph::Op::SSM_CONV || n.op == graph::Op::GATED_DELTA) use[static_cast<size_t>(n.layer)] |= STATE;
  }
  const uint64_t el = t == backend::KvType::F16 ? 2 : 4;
  const uint64_t pos_bytes = 2ull * static_cast<uint64_t>(kv.n_embd_kv) * el;  // K and V of one position, one layer
  const uint64_t cells = static_cast<uint64_t>(n_ctx) * static_cast<uint64_t>(n_seq);
  const uint64_t state = static_cast<uint64_t>(kv.conv_state + kv.ssm_state) * 4 * static_cast<uint64_t>(n_seq);
  KvBytes b, pt;
  for (size_t l = 0; l < use.size(); ++l) {
    const uint8_t u = use[l];
    if (u & SWA) {
      b.sliding_window += pos_bytes * static_cast<uint64_t>(kv.cells(static_cast<int32_t>(l))) * uint64_t(n_seq);
      pt.sliding_window += pos_bytes;
    } else if (u & FULL) {
      b.full += pos_bytes * cells;
      pt.full += pos_bytes;
    } else {
      b.unused += pos_bytes * cells;
    }
    if (u & STATE) {
      b.recurrent += state;
    } else {
      b.unused += state;
    }
  }
  if (per_token != nullptr) *per_token = pt;
  return b;
}

void check_kv_budget(const KvBytes& need, uint64_t budget_mib, const std::string& what) {
  if (budget_mib == 0) return;
  const uint64_t budget = budget_mib << 20;
  if (need.total() <= budget) return;
  auto mib = [](uint64_t x) { return static_cast<double>(x) / (1024.0 * 1024.0); };
  fail(
      "{} needs {:.1f} MiB of KV (full-attention {:.1f}, sliding-window {:.1f}, recurrent {:.1f}, unused {:.1f}), "
      "over --kv-budget {} MiB; lower -c or -np, use an f16 KV (-ctk f16 -ctv f16), or raise --kv-budget",
      what, mib(need.total()), mib(need.full), mib(need.sliding_window), mib(need.recurrent), mib(need.unused),
      budget_mib);
}

}  // namespace rocky::runtime
