// VulkanContext's recording: one graph node into the ops' dispatches, as the lowering planned it
// (int8 path, epilogues, folded norms, rope_kv).
#include <string>

#include "backend/vulkan/attention_calls.hpp"
#include "backend/vulkan/ops/matmul_fast.hpp"
#include "backend/vulkan/push_constants.hpp"
#include "backend/vulkan/vulkan_backend.hpp"
#include "core/error.hpp"

namespace rocky::vulkan {

using graph::Op;

namespace {
// Source k of node id: an earlier node, else a rocky::Error naming the node.
const graph::Node& source(const graph::Graph& g, int32_t id, int k) {
  const graph::Node& n = g.nodes[static_cast<size_t>(id)];
  const int32_t s = n.src[static_cast<size_t>(k)];
  if (s < 0 || s >= id) fail("graph node {}: source {} invalid ({})", n.name, k, s);
  return g.nodes[static_cast<size_t>(s)];
}
}  // namespace

void VulkanContext::record_node(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id) {
  const graph::Node& n = g.nodes[static_cast<size_t>(id)];
  auto src = [&](int k) -> const graph::Node& { return source(g, id, k); };
  auto in = [&](int k) { return node_region(g, p, n.src[static_cast<size_t>(k)]); };
  const uint32_t ne0 = static_cast<uint32_t>(n.ne0), ne1 = static_cast<uint32_t>(n.ne1);
  switch (n.op) {
    case Op::GET_ROWS: {
      const ops::Weight& w = be_.weight(n.weight);
      if (w.ne0 != uint64_t(n.ne0) || n.ne1 != g.n_tokens)
        fail("graph node {}: shape does not match its weight / tokens", n.name);
      // Decode: word 0 of the token buffer is the step (n_past), the token id follows; a
      // multi-sequence ubatch: the ids follow the per-token table.
      const Buffer& tb = env.step != nullptr ? *env.step : tokens_;
      const uint64_t tok_off = env.tok_pos           ? (abi::k_tok_table + 2u * uint64_t(g.n_tokens)) * 4u
                               : env.step != nullptr ? 4u
                                                     : 0u;
      ops::get_rows(env, w, {&tb, tok_off, uint64_t(g.n_tokens) * 4}, ne1, node_region(g, p, id), n.name);
      break;
    }
    case Op::RMS_NORM:
      if (src(0).ne0 != n.ne0 || n.weight->n_elements != uint64_t(n.ne0)) fail("graph node {}: shape mismatch", n.name);
      if (q81_.fused[size_t(id)]) {  // every consumer is an int8 matmul: write only their q8_1 input
        const int32_t s = q81_.slot[size_t(id)];
        fast::rms_norm_q8_1(env, in(0), be_.weight_region(n.weight), ne0, ne1, n.eps,
                            slot_qs(s, fast::q8_1_qs_bytes(ne0, ne1)), slot_ds(s, fast::q8_1_ds_bytes(ne0, ne1)),
                            n.name);
        break;
      }
      ops::rms_norm(env, in(0), be_.weight_region(n.weight), ne0, ne1, n.eps, node_region(g, p, id), n.name);
      break;
    case Op::MATMUL: record_matmul(env, g, p, id); break;
    case Op::ADD_BIAS:
      if (n.weight->n_elements != uint64_t(n.ne0)) fail("graph node {}: bias size mismatch", n.name);
      if (q81_.epi_done[size_t(id)]) break;  // written by its matmul's epilogue
      ops::bias_add(env, in(0), be_.weight_region(n.weight), ne0, uint64_t(ne0) * ne1, node_region(g, p, id), n.name);
      break;
    case Op::ROPE: {
      ops::RopeArgs a{static_cast<uint32_t>(n.rope.head_dim),
                      static_cast<uint32_t>(n.rope.n_head),
                      static_cast<uint32_t>(n.rope.n_rot),
                      ne1,
                      static_cast<uint32_t>(g.n_past),
                      n.rope.mode == graph::RopeMode::NEOX ? abi::k_rope_neox : abi::k_rope_normal,
                      n.rope.freq_base,
                      n.rope.freq_scale};
      if (uint64_t(a.head_dim) * a.n_head != uint64_t(n.ne0)) fail("graph node {}: rope shape mismatch", n.name);
      ops::Region ff;
      if (n.weight != nullptr) {
        if (n.weight->n_elements * 2 != uint64_t(a.n_rot))
          fail("graph node {}: rope factors are not [n_rot/2]", n.name);
        ff = be_.weight_region(n.weight);
      }
      ops::rope(env, in(0), a, node_region(g, p, id), n.name, ff);
      break;
    }
    case Op::KV_STORE: {
      if (n.layer < 0 || n.layer >= kv_.n_layer) fail("graph node {}: layer {} outside the KV cache", n.name, n.layer);
      if (src(0).ne0 != kv_.n_embd_kv || (!g.multi_seq() && g.n_past + g.n_tokens > kv_.n_ctx)) {
        fail("graph node {}: KV write of [{}, {}] at {} does not fit the cache [{}, {}]", n.name, src(0).ne0,
             g.n_tokens, g.n_past, kv_.n_embd_kv, kv_.n_ctx);
      }
      const Buffer& c = kv_buffers_[size_t(n.layer) * 2 + (n.kv ? 1 : 0)];
      ops::kv_store(env, in(0), static_cast<uint32_t>(kv_.n_embd_kv), static_cast<uint32_t>(g.n_tokens),
                    static_cast<uint32_t>(g.n_past), {&c, 0, c.size()}, n.name, kv_ring(n.layer));
      break;
    }
    case Op::ATTENTION: record_attention(env, g, p, id); break;
    case Op::SILU_MUL:
      if (q81_.fused[size_t(id)]) {
        const int32_t s = q81_.slot[size_t(id)];
        fast::silu_mul_q8_1(env, in(0), in(1), ne0, ne1, slot_qs(s, fast::q8_1_qs_bytes(ne0, ne1)),
                            slot_ds(s, fast::q8_1_ds_bytes(ne0, ne1)), n.name);
        break;
      }
      ops::silu_mul(env, in(0), in(1), uint64_t(ne0) * ne1, node_region(g, p, id), n.name);
      break;
    case Op::ADD:
      if (q81_.epi_done[size_t(id)]) break;  // written by its matmul's epilogue
      ops::add(env, in(0), in(1), uint64_t(ne0) * ne1, node_region(g, p, id), n.name);
      break;
    case Op::TAKE_COLS:
      if (n.first_col + n.ne1 > src(0).ne1) fail("graph node {}: columns past the source", n.name);
      ops::take_cols(env, in(0), ne0, static_cast<uint32_t>(n.first_col), ne1, node_region(g, p, id), n.name);
      break;
    case Op::SCALE: ops::scale(env, in(0), n.scale, uint64_t(ne0) * ne1, node_region(g, p, id), n.name); break;
    case Op::GELU_MUL: ops::gelu_mul(env, in(0), in(1), uint64_t(ne0) * ne1, node_region(g, p, id), n.name); break;
    case Op::VIEW:  // shares its source's arena bytes (graph/planner.hpp): nothing to record
      if (uint64_t(src(0).ne0) * uint64_t(src(0).ne1) != uint64_t(ne0) * ne1)
        fail("graph node {}: view changes the size", n.name);
      break;
    case Op::SSM_CONV: {
      const graph::Node& x = src(0);
      if (size_t(n.layer) * 2 + 1 >= state_buffers_.size() || n.weight->ne[1] != uint64_t(x.ne0) ||
          uint64_t(kv_.conv_state) != (n.weight->ne[0] - 1) * uint64_t(x.ne0))
        fail("graph node {}: conv weight / state do not match the context's recurrent state", n.name);
      const Buffer& st = state_buffers_[size_t(n.layer) * 2];
      ops::ssm_conv(env, in(0), be_.weight_region(n.weight), static_cast<uint32_t>(n.weight->ne[0]), ne0, ne1,
                    {&st, 0, st.size()}, node_region(g, p, id), n.name);
      break;
    }
    case Op::GATED_DELTA: {
      const graph::SsmParams& sp = n.ssm;
      if (size_t(n.layer) * 2 + 1 >= state_buffers_.size() ||
          int64_t(sp.n_v_heads) * sp.d_k * sp.d_v != kv_.ssm_state || n.weight->n_elements != uint64_t(sp.n_v_heads))
        fail("graph node {}: delta-rule shape does not match the context's recurrent state", n.name);
      const Buffer& st = state_buffers_[size_t(n.layer) * 2 + 1];
      const ops::DeltaArgs d{
          uint32_t(sp.n_k_heads), uint32_t(sp.n_v_heads), uint32_t(sp.d_k), uint32_t(sp.d_v), ne1, sp.eps};
      ops::gated_delta(env, in(0), in(1), in(2), be_.weight_region(n.weight), d, {&st, 0, st.size()},
                       node_region(g, p, id), n.name);
      break;
    }
    case Op::TAKE_ROWS:
      ops::take_rows(env, in(0), static_cast<uint32_t>(src(0).ne0), static_cast<uint32_t>(n.first_row), ne0, ne1,
                     node_region(g, p, id), n.name);
      break;
    case Op::SIGMOID_MUL:
      ops::sigmoid_mul(env, in(0), in(1), uint64_t(ne0) * ne1, node_region(g, p, id), n.name);
      break;
  }
}

namespace {
// The label of a matmul that wrote its consumer's output through its epilogue:
// "blk.N.attn_q+attn_q_b", so that --profile groups it per op like the others.
std::string epilogue_label(const graph::Node& n, const graph::Node& consumer) {
  const std::string& cn = consumer.name;
  const std::string tail =
      cn.rfind("blk.", 0) == 0 && cn.find('.', 4) != std::string::npos ? cn.substr(cn.find('.', 4) + 1) : cn;
  return n.name + "+" + tail;
}
}  // namespace

fast::MmqEpilogue VulkanContext::epilogue_of(const graph::Graph& g, const graph::Plan& p, int32_t id, int32_t c) const {
  const graph::Node& cn = g.nodes[size_t(c)];
  fast::MmqEpilogue epi;
  if (cn.op == Op::ADD_BIAS) {
    epi.kind = fast::Epilogue::BIAS;
    epi.operand = be_.weight_region(cn.weight);
  } else {
    epi.kind = fast::Epilogue::RESIDUAL;
    epi.operand = node_region(g, p, cn.src[cn.src[0] == id ? 1 : 0]);
  }
  return epi;
}

void VulkanContext::record_matmul(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id) {
  const graph::Node& n = g.nodes[static_cast<size_t>(id)];
  const uint32_t ne1 = static_cast<uint32_t>(n.ne1);
  const ops::Weight& w = be_.weight(n.weight);
  const graph::Node& x = source(g, id, 0);
  if (w.ne0 != uint64_t(x.ne0) || w.rows != uint64_t(n.ne0) || x.ne1 != n.ne1) {
    fail("graph node {}: weight {} [{}, {}] does not fit x [{}, {}] → y [{}, {}]", n.name, w.name, w.ne0, w.rows, x.ne0,
         x.ne1, n.ne0, n.ne1);
  }
  if (q81_.mmq[size_t(id)]) {  // the int8 path reads the q8_1 copy of its input
    record_int8_matmul(env, g, p, id, w);
    return;
  }
  // A decode RMSNorm folded into this matvec (plan_norm_fold): x is the norm's input.
  const int32_t nf = id < int32_t(norm_into_.size()) ? norm_into_[size_t(id)] : -1;
  fast::MatvecNorm fold;
  if (nf >= 0) {
    const graph::Node& nn = g.nodes[size_t(nf)];
    fold.weight = be_.weight_region(nn.weight);
    fold.eps = nn.eps;
  }
  const ops::Region x_in = nf >= 0 ? node_region(g, p, g.nodes[size_t(nf)].src[0]) : node_region(g, p, n.src[0]);
  if (const int32_t c = q81_.epi_into[size_t(id)]; c >= 0) {  // decode matvec + bias / residual
    const ops::Region out = node_region(g, p, c);
    if (x_in.offset + x_in.bytes <= out.offset || out.offset + out.bytes <= x_in.offset) {
      const fast::MmqEpilogue epi = epilogue_of(g, p, id, c);
      fast::matvec_mmq(env, w, x_in, out, epilogue_label(n, g.nodes[size_t(c)]), epi, nf >= 0 ? &fold : nullptr, ne1);
      if (ne1 > 1) ++mmv_matmuls_;
      ++fused_epilogues_;
      return;
    }
    q81_.epi_into[size_t(id)] = -1;  // x shares memory with the consumer's output: unfused
    q81_.epi_done[size_t(c)] = 0;
  }
  if (nf >= 0) {
    fast::matvec_mmq(env, w, x_in, node_region(g, p, id), n.name, {}, &fold);
    return;
  }
  if (ne1 > 1 && ne1 <= env.mmv_cols && ops::matvec_uses_mmq(env, w)) {
    ++mmv_matmuls_;
  } else if (ne1 > 1) {
    ++f32_prefill_matmuls_;
  }
  ops::matmul(env, w, node_region(g, p, n.src[0]), ne1, node_region(g, p, id), n.name);
}

void VulkanContext::record_int8_matmul(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id,
                                       const ops::Weight& w) {
  const graph::Node& n = g.nodes[static_cast<size_t>(id)];
  const uint32_t ne1 = static_cast<uint32_t>(n.ne1);
  const int32_t s = q81_.slot[size_t(n.src[0])];
  if (s < 0) fail("graph node {}: int8 matmul without a q8_1 input (internal)", n.name);
  const ops::Region qs = slot_qs(s, fast::q8_1_qs_bytes(w.ne0, ne1)), ds = slot_ds(s, fast::q8_1_ds_bytes(w.ne0, ne1));
  ++int8_matmuls_;
  if (const int32_t c = q81_.epi_into[size_t(id)]; c >= 0) {
    // + bias / residual in mul_mmq's epilogue, written into the consumer's output (plan_q8_1).
    const fast::MmqEpilogue epi = epilogue_of(g, p, id, c);
    fast::mul_mmq(env, be_.mmq_profile_, w, qs, ds, ne1, node_region(g, p, c), env.info.int8_dot,
                  epilogue_label(n, g.nodes[size_t(c)]), epi);
    ++fused_epilogues_;
    return;
  }
  ops::matmul_q8_1(env, w, qs, ds, ne1, node_region(g, p, id), n.name);
}

void VulkanContext::record_attention(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id) {
  const graph::Node& n = g.nodes[static_cast<size_t>(id)];
  auto in = [&](int k) { return node_region(g, p, n.src[static_cast<size_t>(k)]); };
  if (n.layer < 0 || n.layer >= kv_.n_layer) fail("graph node {}: layer {} outside the KV cache", n.name, n.layer);
  const ops::AttnArgs a = attn_args(g, n, kv_);
  if (uint64_t(a.head_dim) * a.n_head_kv != uint64_t(kv_.n_embd_kv) ||
      uint64_t(a.head_dim) * a.n_head != uint64_t(n.ne0)) {
    fail("graph node {}: attention shape mismatch with the KV cache", n.name);
  }
  const Buffer& kc = kv_buffers_[size_t(n.layer) * 2];
  const Buffer& vc = kv_buffers_[size_t(n.layer) * 2 + 1];
  if (const LeadRun run = lead_run(g); run.n > 0) {
    // The prompt chunk: n_past = pos0 from the push constant, over its sequence's cells.
    ops::Env e1 = env;
    e1.step = nullptr;
    e1.tok_pos = false;
    const std::vector<AttnCall> calls = attn_calls(a, run, g.n_tokens);
    const ops::AttnArgs& a1 = calls[0].a;
    const uint64_t c0 = uint64_t(run.seq) * uint64_t(kv_.cells(n.layer)) * uint64_t(kv_.n_embd_kv) * (kv_f16_ ? 2 : 4);
    const ops::Region q = in(0), out = node_region(g, p, id);
    const uint64_t col = uint64_t(n.ne0) * 4, n1 = uint64_t(run.n);
    ops::attention(e1, {q.buf, q.offset, n1 * col}, {&kc, c0, kc.size() - c0}, {&vc, c0, vc.size() - c0}, a1,
                   {out.buf, out.offset, n1 * col}, n.name);
    if (run.n < g.n_tokens) {  // the rest (decode tokens, other sequences): the per-token table
      const ops::AttnArgs& a2 = calls[1].a;
      ops::attention(env, {q.buf, q.offset + n1 * col, q.bytes - n1 * col}, {&kc, 0, kc.size()}, {&vc, 0, vc.size()},
                     a2, {out.buf, out.offset + n1 * col, out.bytes - n1 * col}, n.name);
    }
    return;
  }
  ops::attention(env, in(0), {&kc, 0, kc.size()}, {&vc, 0, vc.size()}, a, node_region(g, p, id), n.name);
}

void VulkanContext::record_q8_1_output(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id) {
  const int32_t s = q81_.slot[size_t(id)];
  if (s < 0 || q81_.fused[size_t(id)]) return;
  // The f32 output is needed too (or its op has no q8_1 producer): quantize it once for all its
  // int8 consumers (e.g. the attention output before attn_output).
  const graph::Node& n = g.nodes[size_t(id)];
  const uint32_t k = static_cast<uint32_t>(n.ne0), cols = static_cast<uint32_t>(n.ne1);
  fast::quantize_q8_1(env, node_region(g, p, id), k, cols, slot_qs(s, fast::q8_1_qs_bytes(k, cols)),
                      slot_ds(s, fast::q8_1_ds_bytes(k, cols)), n.name + " q8_1");
}

void VulkanContext::record_rope_kv(ops::Env& env, const graph::Graph& g, const graph::Plan& p, int32_t id) {
  const graph::Node &q = g.nodes[size_t(id)], &k = g.nodes[size_t(id) + 1], &vs = g.nodes[size_t(id) + 3];
  if (vs.layer < 0 || vs.layer >= kv_.n_layer) fail("graph node {}: layer {} outside the KV cache", vs.name, vs.layer);
  if (!g.multi_seq() && g.n_past + g.n_tokens > kv_.n_ctx)
    fail("graph node {}: KV write at {} past the cache ({})", vs.name, g.n_past, kv_.n_ctx);
  ops::RopeArgs a{static_cast<uint32_t>(q.rope.head_dim),
                  static_cast<uint32_t>(q.rope.n_head),
                  static_cast<uint32_t>(q.rope.n_rot),
                  static_cast<uint32_t>(g.n_tokens),
                  static_cast<uint32_t>(g.n_past),
                  q.rope.mode == graph::RopeMode::NEOX ? abi::k_rope_neox : abi::k_rope_normal,
                  q.rope.freq_base,
                  q.rope.freq_scale};
  if (uint64_t(a.head_dim) * a.n_head != uint64_t(q.ne0)) fail("graph node {}: rope shape mismatch", q.name);
  ops::Region ff;
  if (q.weight != nullptr) {
    if (q.weight->n_elements * 2 != uint64_t(a.n_rot)) fail("graph node {}: rope factors are not [n_rot/2]", q.name);
    ff = be_.weight_region(q.weight);
  }
  const Buffer& kc = kv_buffers_[size_t(vs.layer) * 2];
  const Buffer& vc = kv_buffers_[size_t(vs.layer) * 2 + 1];
  const std::string label =
      q.name.rfind("blk.", 0) == 0 ? q.name.substr(0, q.name.find('.', 4) + 1) + "rope_kv" : "rope_kv";
  ops::rope_kv(env, node_region(g, p, q.src[0]), node_region(g, p, k.src[0]), node_region(g, p, vs.src[0]), a,
               static_cast<uint32_t>(k.rope.n_head), node_region(g, p, id), {&kc, 0, kc.size()}, {&vc, 0, vc.size()},
               label, ff, kv_ring(vs.layer));
}

}  // namespace rocky::vulkan
