// VulkanContext's lowering of a graph before it is recorded: which matmuls take the int8 path and
// where their q8_1 activations live (plan_q8_1, with the bias / residual epilogue choice), and the
// decode fusions (rope_kv, an RMSNorm folded into its matvecs). record_node follows these plans.
#include <algorithm>

#include "backend/vulkan/ops/matmul_fast.hpp"
#include "backend/vulkan/vulkan_backend.hpp"
#include "core/error.hpp"

namespace rocky::vulkan {

using graph::Op;

VulkanContext::Q81Plan VulkanContext::plan_q8_1(const ops::Env& env, const graph::Graph& g) const {
  const size_t nn = g.nodes.size();
  Q81Plan q;
  q.mmq.assign(nn, 0);
  q.slot.assign(nn, -1);
  q.fused.assign(nn, 0);
  // Which matmuls take the int8 path, and how many of each node's consumers do / do not.
  std::vector<uint32_t> mmq_uses(nn, 0), other_uses(nn, 0);
  for (size_t i = 0; i < nn; ++i) {
    const graph::Node& n = g.nodes[i];
    if (n.op == Op::MATMUL && n.weight && n.src[0] >= 0 && size_t(n.src[0]) < i) {
      auto it = be_.weights_.find(n.weight);
      if (it != be_.weights_.end() && ops::matmul_uses_q8_1(env, it->second, static_cast<uint32_t>(n.ne1)))
        q.mmq[i] = 1;
    }
    for (size_t k = 0; k < n.src.size(); ++k) {
      const int32_t s = n.src[k];
      if (s < 0 || size_t(s) >= i) continue;
      if (k == 0 && q.mmq[i]) {
        ++mmq_uses[size_t(s)];
      } else {
        ++other_uses[size_t(s)];
      }
    }
  }
  if (g.output >= 0 && size_t(g.output) < nn) ++other_uses[size_t(g.output)];
  // Slots: a node's q8_1 copy lives from its producer to its last int8 consumer; a slot is reused
  // once every consumer of its previous tenant has been recorded (graph order = recording order;
  // the recorder's hazard tracking puts the WAR barrier between the last read and the next write).
  std::vector<uint32_t> left;  // per slot: int8 consumers not yet recorded
  for (size_t i = 0; i < nn; ++i) {
    const graph::Node& n = g.nodes[i];
    if (q.mmq[i]) --left[size_t(q.slot[size_t(n.src[0])])];
    if (mmq_uses[i] == 0) continue;
    int32_t slot = -1;
    for (size_t k = 0; k < left.size() && slot < 0; ++k)
      if (left[k] == 0) slot = static_cast<int32_t>(k);
    if (slot < 0) {
      slot = static_cast<int32_t>(left.size());
      left.push_back(0);
    }
    left[size_t(slot)] = mmq_uses[i];
    q.slot[i] = slot;
    const uint64_t k = uint64_t(n.ne0), cols = uint64_t(n.ne1);
    q.qs_bytes = std::max(q.qs_bytes, fast::q8_1_qs_bytes(k, cols));
    q.ds_bytes = std::max(q.ds_bytes, fast::q8_1_ds_bytes(k, cols));
    // rms_norm and silu·mul write the q8_1 layout themselves when nothing else reads their output.
    q.fused[i] =
        be_.opts_.fuse_q8_1 && other_uses[i] == 0 && (n.op == Op::RMS_NORM || n.op == Op::SILU_MUL) && k % 32 == 0;
  }
  q.n_slots = static_cast<uint32_t>(left.size());
  // Epilogue fusion: an int8 matmul i whose output is read by exactly one node, the NEXT one (j =
  // i + 1): an ADD_BIAS with an f32 bias, or an ADD whose other source r was written before i.
  // mul_mmq then writes W·x + bias / W·x + r into j's region at i and j records nothing. Safe with
  // the arena planner (graph/planner.hpp): j's region never overlaps j's inputs (r, i's output);
  // what it may overlap are outputs freed after node i — i's own f32 input among them, which the
  // int8 matmul does not read (it reads the q8_1 slot) — and nothing runs between i and j.
  q.epi_into.assign(nn, -1);
  q.epi_done.assign(nn, 0);
  if (!be_.opts_.fuse_epilogue) return q;
  for (size_t i = 0; i + 1 < nn; ++i) {
    const graph::Node& n = g.nodes[i];
    // or a decode matvec over the repack (N = 1): fast::matvec_mmq's epilogue, same rule;
    // record_node also checks that j's region does not overlap the f32 x the matvec reads.
    bool decode = false;
    if (!q.mmq[i] && n.op == Op::MATMUL && n.ne1 >= 1 && n.ne1 <= env.mmv_cols && n.weight) {
      auto it = be_.weights_.find(n.weight);
      decode = it != be_.weights_.end() && ops::matvec_uses_mmq(env, it->second);
    }
    if ((!q.mmq[i] && !decode) || mmq_uses[i] != 0 || other_uses[i] != 1) continue;
    const graph::Node& c = g.nodes[i + 1];
    if (c.ne0 != n.ne0 || c.ne1 != n.ne1) continue;
    const int32_t me = static_cast<int32_t>(i);
    bool ok = false;
    if (c.op == Op::ADD_BIAS && c.src[0] == me && c.weight && c.weight->n_elements == uint64_t(n.ne0)) {
      auto it = be_.weights_.find(c.weight);
      ok = it != be_.weights_.end() && it->second.type == DType::F32;
    } else if (c.op == Op::ADD && (c.src[0] == me) != (c.src[1] == me)) {
      const int32_t r = c.src[c.src[0] == me ? 1 : 0];
      ok =
          r >= 0 && r < me && !q.fused[size_t(r)] && g.nodes[size_t(r)].ne0 == n.ne0 && g.nodes[size_t(r)].ne1 == n.ne1;
    }
    if (!ok) continue;
    q.epi_into[i] = static_cast<int32_t>(i + 1);
    q.epi_done[i + 1] = 1;
  }
  return q;
}

bool VulkanContext::node_written(int32_t id) const {
  if (id >= 0 && size_t(id) < fused_decode_.size() && fused_decode_[size_t(id)] >= 2)
    return false;  // inside rope_kv, or an RMSNorm folded into its matvecs
  return id < 0 || size_t(id) >= q81_.fused.size() || (!q81_.fused[size_t(id)] && q81_.epi_into[size_t(id)] < 0);
}

// rope_kv: nodes i … i+3 = ROPE (Q), ROPE (K), KV_STORE K of that rope, KV_STORE V of one
// layer (blocks::self_attention's order), with the K rope read by nothing else, go into one
// dispatch at node i; i+1 … i+3 record nothing (the K rope's f32 output is never written).
void VulkanContext::plan_decode_fusion(const graph::Graph& g, const graph::Plan& p, const ops::Env& env) {
  const size_t nn = g.nodes.size();
  fused_decode_.assign(nn, 0);
  norm_into_.assign(nn, -1);
  // a multi-sequence ubatch too (rope_kv reads each token's position and column, POS_BUF = 2).
  if (!be_.opts_.fuse_decode || (g.n_tokens != 1 && !g.multi_seq()) || kv_buffers_.empty()) return;
  std::vector<uint32_t> uses(nn, 0);
  for (const graph::Node& n : g.nodes)
    for (int32_t s : n.src)
      if (s >= 0 && size_t(s) < nn) ++uses[size_t(s)];
  if (g.output >= 0 && size_t(g.output) < nn) ++uses[size_t(g.output)];
  if (be_.opts_.fold_norm) plan_norm_fold(g, p, env, uses);
  for (size_t i = 0; i + 3 < nn; ++i) {
    const graph::Node &q = g.nodes[i], &k = g.nodes[i + 1], &ks = g.nodes[i + 2], &vs = g.nodes[i + 3];
    if (q.op != Op::ROPE || k.op != Op::ROPE || ks.op != Op::KV_STORE || vs.op != Op::KV_STORE) continue;
    if (ks.kv != 0 || vs.kv != 1 || ks.layer != vs.layer || ks.src[0] != int32_t(i + 1) || uses[i + 1] != 1) continue;
    if (q.rope.mode != k.rope.mode || q.rope.head_dim != k.rope.head_dim || q.rope.n_rot != k.rope.n_rot ||
        q.rope.freq_base != k.rope.freq_base || q.rope.freq_scale != k.rope.freq_scale || q.weight != k.weight)
      continue;
    if (q.src[0] < 0 || k.src[0] < 0 || vs.src[0] < 0 || q.src[0] >= int32_t(i) || k.src[0] >= int32_t(i) ||
        vs.src[0] >= int32_t(i))
      continue;
    const graph::Node& vn = g.nodes[size_t(vs.src[0])];
    if (k.ne0 != kv_.n_embd_kv || vn.ne0 != kv_.n_embd_kv || vn.ne1 != g.n_tokens ||
        int64_t(k.rope.head_dim) * k.rope.n_head != k.ne0)
      continue;
    fused_decode_[i] = 1;
    fused_decode_[i + 1] = fused_decode_[i + 2] = fused_decode_[i + 3] = 2;
    i += 3;
  }
}

// An RMSNorm (decode, one column) whose every reader is a matvec over the mmq repack (src 0,
// N = 1) is folded into those matvecs (fast::MatvecNorm): each reads the norm's input x and weight
// and scales its sums by 1 / rms(x) itself, and the norm records nothing. Safe when x's arena
// region is written by no node from the norm to one past its last reader (that reader's epilogue
// output included) — the planner may reuse a region once its last reader is done, and the norm was
// the last reader the plan knew of.
void VulkanContext::plan_norm_fold(const graph::Graph& g, const graph::Plan& p, const ops::Env& env,
                                   const std::vector<uint32_t>& uses) {
  const size_t nn = g.nodes.size();
  if (p.offset.size() != nn) return;
  std::vector<std::vector<int32_t>> readers(nn);
  for (size_t j = 0; j < nn; ++j)
    for (int32_t s : g.nodes[j].src)
      if (s >= 0 && size_t(s) < j) readers[size_t(s)].push_back(static_cast<int32_t>(j));
  for (size_t i = 0; i < nn; ++i) {
    const graph::Node& n = g.nodes[i];
    if (n.op != Op::RMS_NORM || n.ne1 != 1 || n.src[0] < 0 || !n.weight || size_t(g.output) == i) continue;
    if (readers[i].empty() || readers[i].size() != uses[i] || q81_.slot[i] >= 0) continue;
    bool ok = true;
    int32_t last = 0;
    for (int32_t j : readers[i]) {
      const graph::Node& c = g.nodes[size_t(j)];
      auto it = c.op == Op::MATMUL && c.weight ? be_.weights_.find(c.weight) : be_.weights_.end();
      ok = ok && c.src[0] == int32_t(i) && c.src[1] < 0 && c.ne1 == 1 && !q81_.mmq[size_t(j)] &&
           it != be_.weights_.end() && ops::matvec_uses_mmq(env, it->second) && it->second.ne0 == uint64_t(n.ne0);
      last = std::max(last, j);
    }
    auto wt = be_.weights_.find(n.weight);
    if (!ok || wt == be_.weights_.end() || wt->second.type != DType::F32) continue;
    const uint64_t x0 = p.offset[size_t(n.src[0])];
    if (x0 == graph::k_no_offset) continue;
    const uint64_t x1 = x0 + g.nodes[size_t(n.src[0])].out_bytes();
    for (size_t m = i + 1; ok && m <= std::min(nn - 1, size_t(last) + 1); ++m) {
      const graph::Node& o = g.nodes[m];
      if (o.op == Op::VIEW || p.offset[m] == graph::k_no_offset || o.out_bytes() == 0) continue;
      ok = p.offset[m] + o.out_bytes() <= x0 || x1 <= p.offset[m];
    }
    if (!ok) continue;
    fused_decode_[i] = 3;
    for (int32_t j : readers[i]) norm_into_[size_t(j)] = static_cast<int32_t>(i);
  }
}

}  // namespace rocky::vulkan
