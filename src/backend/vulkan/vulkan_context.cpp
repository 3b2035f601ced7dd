// VulkanContext: its buffers (KV cache, recurrent state, arena, I/O, q8_1 slots, scratch), the
// per-ubatch compute() (token I/O, planning, recording or replaying the command buffer) and the
// replay key. Planning is in vulkan_lowering.cpp, recording each node in vulkan_record.cpp, KV /
// state import and export and the read-back in vulkan_kv_io.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "backend/vulkan/attention_calls.hpp"
#include "backend/vulkan/ops/matmul_fast.hpp"
#include "backend/vulkan/push_constants.hpp"
#include "backend/vulkan/vulkan_backend.hpp"
#include "core/error.hpp"

namespace rocky::vulkan {

using graph::Op;

VulkanContext::VulkanContext(VulkanBackend& be, const backend::ContextOptions& o) : be_(be), kv_(o.kv) {
  if (o.n_seq < 1) fail("Vulkan context: {} sequences asked for (at least 1)", o.n_seq);
  if (o.n_seq > 1 && (o.kv.conv_state > 0 || o.kv.ssm_state > 0))
    fail(
        "Vulkan context: {} sequences asked for, but a hybrid model's recurrent state is held for one sequence "
        "(batched decoding of recurrent layers is not implemented: use -np without --cont-batching)",
        o.n_seq);
  n_seq_ = o.n_seq;
  if (kv_.n_layer < 0 || kv_.n_embd_kv < 0 || kv_.n_ctx < 0) fail("Vulkan context: negative KV shape");
  recorder_ = std::make_unique<Recorder>(*be_.device_, be_.opts_.max_binding, be_.opts_.lab.vulkan_timeout_s);
  kv_f16_ = be_.opts_.kv_f16;
  const uint64_t elem = kv_f16_ ? 2 : 4;
  const uint64_t cells = uint64_t(kv_.n_ctx) * uint64_t(n_seq_);
  if (cells * uint64_t(kv_.n_embd_kv) > UINT32_MAX)
    fail(
        "Vulkan context: a KV cache of {} sequences × {} positions × {} values exceeds 32-bit indexing; lower -c or "
        "-np",
        n_seq_, kv_.n_ctx, kv_.n_embd_kv);
  for (int32_t l = 0; l < kv_.n_layer; ++l) {
    // A sliding-window layer's ring holds kv_.n_ring cells per sequence (graph.hpp KvShape).
    const int32_t per = kv_.cells(l);
    const char* what = kv_.ring_layer(l) ? "ring cells" : "positions";
    const uint64_t bytes = uint64_t(kv_.n_embd_kv) * uint64_t(per) * uint64_t(n_seq_) * elem;
    for (int kvi = 0; kvi < 2; ++kvi) {
      kv_buffers_.push_back(be_.memory_->create(
          n_seq_ == 1
              ? fmt::format("KV cache layer {} {} ({} {})", l, kvi ? "V" : "K", per, what)
              : fmt::format("KV cache layer {} {} ({} sequences × {} {})", l, kvi ? "V" : "K", n_seq_, per, what),
          bytes, BufferKind::DEVICE, MemUse::KV));
    }
  }
  if (kv_.recurrent()) {
    if (kv_.conv_state <= 0 || kv_.ssm_state <= 0) fail("Vulkan context: recurrent state shape without both parts");
    for (int32_t l = 0; l < kv_.n_layer; ++l) {
      state_buffers_.push_back(be_.memory_->create(fmt::format("conv state layer {}", l), uint64_t(kv_.conv_state) * 4,
                                                   BufferKind::DEVICE, MemUse::KV));
      state_buffers_.push_back(be_.memory_->create(fmt::format("delta-rule state layer {}", l),
                                                   uint64_t(kv_.ssm_state) * 4, BufferKind::DEVICE, MemUse::KV));
    }
  }
  reset();
}

VulkanContext::~VulkanContext() {
  recorder_.reset();  // waits for its frames still in flight
}

void VulkanContext::reset() {
  if (kv_buffers_.empty() && state_buffers_.empty()) return;
  // Zeros by the GPU, all layers in one submit (was one staged upload per buffer on discrete GPUs).
  recorder_->begin(false);
  for (const Buffer& b : kv_buffers_) recorder_->fill(b, 0);
  for (const Buffer& b : state_buffers_) recorder_->fill(b, 0);
  recorder_->submit_and_wait();
}

uint64_t VulkanContext::kv_bytes() const {
  uint64_t kv = 0;
  for (const auto& b : kv_buffers_) kv += b.size();
  for (const auto& b : state_buffers_) kv += b.size();
  return kv;
}

double VulkanContext::gpu_ms() const { return recorder_->gpu_ms(); }

backend::ContextStats VulkanContext::stats() const {
  backend::ContextStats s;
  s.memory.kv = kv_bytes();
  s.memory.arena = arena_bytes();
  for (const auto& [qs, ds] : q81_slots_) s.memory.other += qs.size() + ds.size();
  s.memory.other += tokens_.size() + readback_.size() + step_dev_.size() + attn_scratch_.size();
  s.host = timing_;
  for (const auto& t : recorder_->timings()) s.ops.push_back({t.label, t.ms});
  // The kernels the last prefill ubatch used: "mmq" (int8 path), else the option's f32 kernels.
  // Some prefill matmuls on the int8 path and some not (a weight type mul_mmq lacks): "mmq+mm" /
  // "mmq+basic", so a partial fallback is visible in `rocky bench` rather than reported as "mmq".
  const char* f32_path = be_.opts_.matmul == ops::MatmulPath::MM ? "mm" : "basic";
  // "mmv": matmuls of 2 … matvec_max_cols tokens as the multi-column matvec (a short ubatch's).
  std::string path = int8_matmuls_ > 0 ? "mmq" : "";
  if (mmv_matmuls_ > 0) path += path.empty() ? "mmv" : "+mmv";
  if (path.empty() || f32_prefill_matmuls_ > 0) path += path.empty() ? f32_path : std::string("+") + f32_path;
  s.matmul_path = path;
  s.int8_matmuls = int8_matmuls_;
  s.fused_epilogues = fused_epilogues_;
  s.dispatches = recorder_->dispatches();
  return s;
}

ops::Region VulkanContext::node_region(const graph::Graph& g, const graph::Plan& p, int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= g.nodes.size()) fail("graph: node id {} out of range", id);
  const auto& n = g.nodes[static_cast<size_t>(id)];
  if (p.offset.size() != g.nodes.size()) fail("plan has {} offsets for {} nodes", p.offset.size(), g.nodes.size());
  if (p.offset[static_cast<size_t>(id)] == graph::k_no_offset)
    fail("graph node {} ({}) has no arena output", id, n.name);
  if (n.out_type != DType::F32)
    fail("graph node {}: output type {} (the Vulkan backend keeps f32)", n.name, dtype_name(n.out_type));
  return {&arena_, p.offset[static_cast<size_t>(id)], n.out_bytes()};
}

void VulkanContext::ensure_bound(Buffer& b, uint64_t bytes, const std::string& label, BufferKind kind, MemUse use) {
  if (be_.memory_->ensure(b, bytes, label, kind, use)) ++buffers_gen_;
}

void VulkanContext::compute(const graph::Graph& g, const graph::Plan& p, std::span<const int32_t> tokens,
                            std::span<float> logits) {
  if (tokens.size() != static_cast<size_t>(g.n_tokens))
    fail("compute: {} tokens for a graph of {}", tokens.size(), g.n_tokens);
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  const auto t0 = Clock::now();
  if (g.output >= static_cast<int32_t>(g.nodes.size())) fail("compute: output node {} out of range", g.output);
  // Token ids: written by the host each ubatch; in host-visible memory so that no staging submit is
  // needed (UMA: device memory is host-visible already). A discrete GPU whose device memory is
  // host-visible through a resizable BAR is not treated as UMA here: CPU reads of that memory are
  // uncached PCIe reads (the H200 took 20–23 ms to read 608 KB of logits, docs/tuning-log.md #12),
  // so tokens and logits go through host memory and the ubatch's own command buffer copies them.
  const bool host_io =
      be_.opts_.host_io || !be_.device_->info().uma || be_.device_->info().type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  // Decode (one token): the token buffer holds {n_past, token id} — word 0 is the step the
  // decode kernels read (ops::Env::step), so the recorded commands do not depend on n_past and one
  // 8-byte host write per token updates both.
  // A multi-sequence ubatch: the token buffer holds the step block {0, per token (position,
  // sequence's first cache column), the token ids} (abi.h's k_tok_table), read like the decode step
  // (POS_BUF = 2), so its commands do not depend on the positions either and are replayed too.
  const bool multi = g.multi_seq();
  if (multi) g.check_seqs(n_seq_);
  if (kv_.has_ring()) g.check_ring(n_seq_);
  const bool decode = g.n_tokens == 1 && !multi;
  const uint64_t step_bytes = multi ? (abi::k_tok_table + 3u * tokens.size()) * 4u : decode ? 8u : 0u;
  const uint64_t tok_bytes = std::max<uint64_t>({step_bytes, 4, tokens.size() * 4});
  ensure_bound(tokens_, tok_bytes, "token ids", host_io ? BufferKind::HOST : BufferKind::DEVICE);
  if (multi) {
    std::vector<uint32_t> block(step_bytes / 4, 0u);
    for (size_t j = 0; j < tokens.size(); ++j) {
      block[abi::k_tok_table + 2 * j] = static_cast<uint32_t>(g.pos[j]);
      block[abi::k_tok_table + 2 * j + 1] = static_cast<uint32_t>(g.seq[j]) * static_cast<uint32_t>(kv_.n_ctx);
      block[abi::k_tok_table + 2 * tokens.size() + j] = static_cast<uint32_t>(tokens[j]);
    }
    be_.memory_->upload(tokens_, 0, block.data(), step_bytes);
  } else if (decode) {
    if (g.n_past < 0 || (!kv_buffers_.empty() && int64_t(g.n_past) + g.n_tokens > kv_.n_ctx))
      fail("compute: decode at position {} does not fit the KV cache ({} positions)", g.n_past, kv_.n_ctx);
    const uint32_t step[2] = {static_cast<uint32_t>(g.n_past), static_cast<uint32_t>(tokens[0])};
    be_.memory_->upload(tokens_, 0, step, sizeof step);
  } else {
    be_.memory_->upload(tokens_, 0, tokens.data(), tokens.size() * 4);
  }
  // (The size is checked first where the label is formatted, so that a decode token formats none.)
  if (p.arena_bytes > 0 && (!arena_ || arena_.size() < p.arena_bytes))
    ensure_bound(arena_, p.arena_bytes, fmt::format("activation arena ({} tokens)", g.n_tokens), BufferKind::DEVICE,
                 MemUse::ARENA);
  for (const auto& n : g.nodes) {
    if (n.op == Op::GET_ROWS && n.weight) {
      const ops::Weight& w = be_.weight(n.weight);
      for (int32_t t : tokens)
        if (t < 0 || uint64_t(t) >= w.rows)
          fail("token id {} outside the vocabulary ({} rows of {})", t, w.rows, w.name);
    }
  }
  // Logits: copied into a host buffer by the same command buffer unless the arena is host-visible.
  uint64_t out_bytes = 0;
  if (g.output >= 0) {
    const graph::Node& out = g.nodes[static_cast<size_t>(g.output)];
    out_bytes = uint64_t(out.ne0) * uint64_t(out.ne1) * 4;
  }
  const bool copy_out = out_bytes > 0 && (host_io || !arena_.mapped());
  // Replay: the same graph, plan and buffers as a captured command buffer — submit it again (the
  // host wrote the token ids and the step buffer above). Decode steps and multi-sequence steps
  // whose commands read their positions from the step buffer; not one that starts with a prompt
  // chunk (its attention records the chunk's position, so it would not recur: it is recorded
  // with flushes instead).
  const bool replay = (decode || (multi && lead_run(g).n == 0)) && be_.opts_.replay_decode && !be_.opts_.profile;
  uint32_t slot = 0;
  if (replay) {
    const uint64_t key = replay_key_of(g, p, copy_out);
    for (uint32_t i = 0; i < Recorder::k_captures; ++i)  // the slot to record into: empty, else least recently used
      if (!recorder_->captured(i) || (recorder_->captured(slot) && replay_used_[i] < replay_used_[slot])) slot = i;
    for (uint32_t i = 0; i < Recorder::k_captures; ++i)
      if (recorder_->captured(i) && replay_key_[i] == key) slot = i;
    replay_used_[slot] = ++replay_tick_;
    if (recorder_->captured(slot) && replay_key_[slot] == key) {
      const auto t1 = Clock::now();
      recorder_->replay(slot);
      const auto t3 = Clock::now();
      timing_.setup_ms += ms(t0, t1);
      timing_.submit_wait_ms += ms(t1, t3);
      timing_.computes += 1;
      timing_.replays += 1;
      timing_.dispatches += recorder_->dispatches();
      read_logits(g, p, copy_out, logits);
      timing_.readback_ms += ms(t3, Clock::now());
      return;
    }
  }
  ops::Env env{*recorder_, *be_.pipelines_, be_.device_->info(), be_.tile_, 128, be_.opts_.kv_f16};
  env.matmul = be_.opts_.matmul;
  env.prof = &be_.mmq_profile_;
  env.attn = be_.opts_.lab.attn;
  env.mmv_cols = std::clamp<uint32_t>(be_.matvec_max_cols_, 1, fast::k_matvec_max_cols);
  env.mmv_q8 = be_.matvec_q8_;
  env.delta.chunk = be_.delta_chunk_;
  // Discrete GPUs (host_io): the step and token id are copied into device memory first (one 8-byte
  // copy in the command buffer), so the decode kernels do not each read host memory over PCIe.
  if ((decode || multi) && host_io)
    ensure_bound(step_dev_, step_bytes, multi ? "ubatch step (positions, token ids)" : "decode step (n_past, token id)",
                 BufferKind::DEVICE);
  if (decode || multi) env.step = host_io ? &step_dev_ : &tokens_;
  env.tok_pos = multi;
  q81_ = plan_q8_1(env, g);
  plan_decode_fusion(g, p, env);
  while (q81_slots_.size() < q81_.n_slots) q81_slots_.emplace_back();
  for (uint32_t i = 0; i < q81_.n_slots; ++i) {  // grown only when a larger graph arrives
    auto& [qs, ds] = q81_slots_[i];
    if (!qs || qs.size() < q81_.qs_bytes)
      ensure_bound(qs, q81_.qs_bytes, fmt::format("q8_1 activations (slot {})", i), BufferKind::DEVICE);
    if (!ds || ds.size() < q81_.ds_bytes)
      ensure_bound(ds, q81_.ds_bytes, fmt::format("q8_1 activation scales (slot {})", i), BufferKind::DEVICE);
  }
  // Split decode attention's scratch: the largest any ATTENTION node of this graph needs.
  uint64_t attn_bytes = 0;
  const LeadRun lead = lead_run(g);
  for (const auto& n : g.nodes)
    if (n.op == Op::ATTENTION) {
      for (const AttnCall& c : attn_calls(attn_args(g, n, kv_), lead, g.n_tokens)) {
        ops::Env ec = env;
        if (c.lead) {  // the prompt chunk, as record_node issues it
          ec.step = nullptr;
          ec.tok_pos = false;
        }
        attn_bytes = std::max(attn_bytes, ops::attention_scratch_bytes(ec, c.a));
      }
    }
  if (attn_bytes > 0) ensure_bound(attn_scratch_, attn_bytes, "split attention scratch", BufferKind::DEVICE);
  env.attn_scratch = attn_scratch_ ? &attn_scratch_ : nullptr;
  int8_matmuls_ = 0;
  f32_prefill_matmuls_ = 0;
  mmv_matmuls_ = 0;
  fused_epilogues_ = 0;
  if (copy_out) ensure_bound(readback_, out_bytes, "logits readback", BufferKind::HOST);
  const auto t1 = Clock::now();
  if (replay) {
    recorder_->begin_capture(slot);  // one command buffer, kept for the next steps of this shape
  } else {
    recorder_->begin(be_.opts_.profile);
  }
  if ((decode || multi) && host_io) recorder_->copy(tokens_, 0, step_dev_, 0, step_bytes);
  uint32_t flushed = 0;
  for (int32_t i = 0; i < static_cast<int32_t>(g.nodes.size()); ++i) {
    if (fused_decode_[size_t(i)] == 1) {
      record_rope_kv(env, g, p, i);
    } else if (fused_decode_[size_t(i)] == 0) {
      record_node(env, g, p, i);
    }
    record_q8_1_output(env, g, p, i);
    // VulkanOptions::flush_dispatches: a 36-layer ubatch (≈ 760 dispatches) goes out in 8 submits.
    if (be_.opts_.flush_dispatches > 0 && recorder_->dispatches() - flushed >= be_.opts_.flush_dispatches) {
      recorder_->flush();
      flushed = recorder_->dispatches();
    }
  }
  if (copy_out) recorder_->copy(arena_, p.offset[static_cast<size_t>(g.output)], readback_, 0, out_bytes);
  const auto t2 = Clock::now();
  recorder_->submit_and_wait();
  if (replay) replay_key_[slot] = replay_key_of(g, p, copy_out);  // after this call's allocations
  const auto t3 = Clock::now();
  timing_.setup_ms += ms(t0, t1);
  timing_.record_ms += ms(t1, t2) - recorder_->flush_wait_ms();  // waits inside flush() are GPU time
  timing_.submit_wait_ms += ms(t2, t3) + recorder_->flush_wait_ms();
  timing_.computes += 1;
  timing_.dispatches += recorder_->dispatches();
  read_logits(g, p, copy_out, logits);
  timing_.readback_ms += ms(t3, Clock::now());
}

// The captured command buffer's key: everything its recording read, except n_past and the token
// ids (the step and token buffers carry those). A change of any of it means re-recording.
uint64_t VulkanContext::replay_key_of(const graph::Graph& g, const graph::Plan& p, bool copy_out) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over 64-bit words
  auto mix = [&h](uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  };
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return uint64_t(u);
  };
  mix(be_.generation_);
  mix(buffers_gen_);
  mix(uint64_t(g.n_tokens));
  mix(uint64_t(int64_t(g.output)));
  mix(copy_out ? 1 : 0);
  mix(g.multi_seq() ? 1 : 0);       // POS_BUF = 2 kernels, the step block's layout (n_tokens above)
  const LeadRun run = lead_run(g);  // a prompt chunk's attention records its n_past and cells
  mix(uint64_t(uint32_t(run.n)) | uint64_t(uint32_t(run.pos0)) << 32);
  mix(uint64_t(uint32_t(run.seq)));
  mix(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const graph::Node& n = g.nodes[i];
    mix(uint64_t(n.op) | uint64_t(n.out_type) << 8 | uint64_t(uint32_t(n.layer)) << 16 | uint64_t(n.kv) << 48);
    mix(uint64_t(n.ne0));
    mix(uint64_t(n.ne1));
    for (int32_t s : n.src) mix(uint64_t(uint32_t(s)));
    mix(reinterpret_cast<uintptr_t>(n.weight));
    mix(uint64_t(n.first_col));
    mix(bits(n.eps));
    mix(uint64_t(n.rope.mode) | uint64_t(uint32_t(n.rope.head_dim)) << 8 | uint64_t(uint32_t(n.rope.n_rot)) << 32);
    mix(uint64_t(uint32_t(n.rope.n_head)) | bits(n.rope.freq_base) << 32);
    mix(bits(n.rope.freq_scale) | bits(n.attn.scale) << 32);
    mix(uint64_t(uint32_t(n.attn.head_dim)) | uint64_t(uint32_t(n.attn.n_head)) << 20 |
        uint64_t(uint32_t(n.attn.n_head_kv)) << 40);
    mix(i < p.offset.size() ? p.offset[i] : ~0ull);
    if (n.op == Op::ATTENTION)  // each call's split plan, as record_node issues them
      for (const AttnCall& c : attn_calls(attn_args(g, n, kv_), run, g.n_tokens))
        mix(ops::attention_split_signature(be_.mmq_profile_, be_.opts_.lab.attn, be_.device_->info(), c.a));
  }
  return h;
}

}  // namespace rocky::vulkan
