// How VulkanContext issues an ATTENTION node: its kernel arguments, and the calls it splits into
// when a multi-sequence ubatch starts with a prompt chunk. Recording (vulkan_record.cpp), the split
// scratch sizing and the replay key (vulkan_context.cpp) use these same functions, so that each
// call's split plan is the one sized and keyed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/vulkan/ops/ops.hpp"
#include "graph/graph.hpp"

namespace rocky::vulkan {

// An ATTENTION node's kernel arguments (record_node, and compute's scratch sizing).
inline ops::AttnArgs attn_args(const graph::Graph& g, const graph::Node& n, const graph::KvShape& kv) {
  uint32_t n_kv_max = 0;  // a multi-sequence ubatch: its longest key range
  for (int32_t x : g.pos) n_kv_max = std::max(n_kv_max, static_cast<uint32_t>(x) + 1u);
  ops::AttnArgs a{static_cast<uint32_t>(n.attn.head_dim),
                  static_cast<uint32_t>(n.attn.n_head),
                  static_cast<uint32_t>(n.attn.n_head_kv),
                  static_cast<uint32_t>(n.ne1),
                  static_cast<uint32_t>(g.n_past),
                  static_cast<uint32_t>(kv.n_embd_kv),
                  n.attn.scale,
                  static_cast<uint32_t>(n.attn.window),
                  n_kv_max};
  if (kv.ring_layer(n.layer)) a.ring = {static_cast<uint32_t>(kv.n_ring), static_cast<uint32_t>(kv.n_ctx)};
  return a;
}

// A multi-sequence ubatch that starts with a prompt chunk: its first `n` tokens (≥ k_lead_min)
// belong to one sequence at consecutive positions pos0 … — their attention runs as an ordinary
// single-sequence ubatch (the tiled prefill kernel where it applies) over that sequence's cells,
// the rest with the per-token table. n = 0: no such run. Shorter runs — a speculative
// verification (a token and up to 16 drafts, llama.cpp's default --draft-max) — stay in the table:
// the decode kernels' numerics, and commands that do not depend on the positions (replayed).
constexpr int32_t k_lead_min = 18;
struct LeadRun {
  int32_t n = 0, pos0 = 0, seq = 0;
};
inline LeadRun lead_run(const graph::Graph& g) {
  if (!g.multi_seq() || g.n_tokens < k_lead_min) return {};
  int32_t r = 1;
  while (r < g.n_tokens && g.seq[size_t(r)] == g.seq[0] && g.pos[size_t(r)] == g.pos[0] + r) ++r;
  if (r < k_lead_min) return {};
  return {r, g.pos[0], g.seq[0]};
}
// The attention calls record_node makes for a node with a lead run: the prompt chunk (n_past
// = pos0 from the push constant, no step buffer, no per-token table) and the rest (per-token
// table), or the whole ubatch as one call. The scratch sizing and the replay key use these same
// arguments, so that each call's split plan is the one sized and keyed.
struct AttnCall {
  ops::AttnArgs a;
  bool lead = false;  // recorded with Env::step = nullptr, Env::tok_pos = false
};
inline std::vector<AttnCall> attn_calls(const ops::AttnArgs& a, const LeadRun& run, int32_t n_tokens) {
  if (run.n <= 0) return {{a, false}};
  ops::AttnArgs a1 = a;
  a1.n_tokens = static_cast<uint32_t>(run.n);
  a1.n_past = static_cast<uint32_t>(run.pos0);
  a1.n_kv_max = 0;
  std::vector<AttnCall> r{{a1, true}};
  if (run.n < n_tokens) {
    ops::AttnArgs a2 = a;
    a2.n_tokens = static_cast<uint32_t>(n_tokens - run.n);
    a2.tok0 = static_cast<uint32_t>(run.n);
    r.push_back({a2, false});
  }
  return r;
}

}  // namespace rocky::vulkan
