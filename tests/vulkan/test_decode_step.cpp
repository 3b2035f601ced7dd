// The decode step with little overhead (VulkanOptions::replay_decode, fuse_decode):
//  - rope_kv (rope Q + rope K + K and V cache stores in one dispatch) against a double-precision
//    CPU reference and against the unfused ops (rope, rope, kv_store, kv_store) on random data of
//    awkward shapes: odd head counts, n_rot < head_dim (pass-through dims), NEOX with an odd
//    n_rot/2 (a pair's two elements rotate with different partners), rope_freqs divisors, f32 and
//    f16 caches, several tokens, n_past from the push constant and from the step buffer; cache
//    columns outside the written ones keep their (random) contents;
//  - whole models: a decode of many tokens whose command buffer is recorded once and replayed
//    equals the path that records every token bit for bit, and the fused decode equals the unfused
//    one (f32 KV: within 1e-5 rel; measured: identical) and the CPU oracle within the reference
//    tolerance of a path with q8_1 activations (≤ 0.35 absolute, ../shared/reference/README.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/vulkan/ops/ops.hpp"
#include "backend/vulkan/shaders/abi.h"
#include "backend/vulkan/vulkan_backend.hpp"
#include "quant/quant.hpp"
#include "model/model.hpp"
#include "runtime/options.hpp"
#include "common/shared.hpp"
#include "vk_test_util.hpp"

namespace rocky::test {
namespace {

using vulkan::Buffer;
using vulkan::BufferKind;
using vulkan::ops::Region;

struct Harness {
  std::shared_ptr<vulkan::Instance> inst;
  std::unique_ptr<vulkan::Device> dev;
  std::unique_ptr<vulkan::Memory> mem;
  std::unique_ptr<vulkan::Pipelines> pipes;
  std::unique_ptr<vulkan::Recorder> rec;
  std::unique_ptr<vulkan::ops::Env> env;
  explicit Harness(bool kv_f16) {
    vulkan::InstanceOptions io;
    io.validation = true;
    inst = std::make_shared<vulkan::Instance>(io);
    dev = std::make_unique<vulkan::Device>(inst, 0);
    mem = std::make_unique<vulkan::Memory>(*dev, 0);
    pipes = std::make_unique<vulkan::Pipelines>(*dev, false);
    rec = std::make_unique<vulkan::Recorder>(*dev, dev->info().max_storage_buffer_range);
    env = std::make_unique<vulkan::ops::Env>(vulkan::ops::Env{*rec, *pipes, dev->info(), {}, 128, kv_f16});
  }
  Buffer upload(const std::vector<float>& v, const char* name) {
    Buffer b = mem->create(name, v.size() * 4, BufferKind::DEVICE);
    mem->upload(b, 0, v.data(), v.size() * 4);
    return b;
  }
  Buffer upload_bytes(const std::vector<uint8_t>& v, const char* name) {
    Buffer b = mem->create(name, v.size(), BufferKind::DEVICE);
    mem->upload(b, 0, v.data(), v.size());
    return b;
  }
  template <class T>
  std::vector<T> download(const Buffer& b, size_t n) {
    std::vector<T> v(n);
    mem->download(b, 0, v.data(), n * sizeof(T));
    return v;
  }
};

struct RopeCase {
  uint32_t hd, n_head, n_kv, n_rot, mode;
  bool ff;
};

// Rotation of one head (x: head_dim values) at position pos, in double.
std::vector<double> ref_rope(const float* x, const RopeCase& c, double pos, const std::vector<float>& ff) {
  std::vector<double> out(x, x + c.hd);
  for (uint32_t i = 0; i < c.n_rot / 2; ++i) {
    double theta = pos * std::pow(10000.0, -2.0 * i / c.n_rot);
    if (c.ff) theta /= ff[i];
    const uint32_t i0 = c.mode == vulkan::abi::k_rope_neox ? i : 2 * i;
    const uint32_t i1 = c.mode == vulkan::abi::k_rope_neox ? i + c.n_rot / 2 : 2 * i + 1;
    const double a = x[i0], b = x[i1];
    out[i0] = a * std::cos(theta) - b * std::sin(theta);
    out[i1] = a * std::sin(theta) + b * std::cos(theta);
  }
  return out;
}

// Cache words → floats (f32 bits or f16 pairs).
std::vector<float> cache_values(const std::vector<uint8_t>& bytes, bool f16) {
  std::vector<float> v;
  if (f16) {
    for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + i, 2);
      v.push_back(quant::f16_to_f32(h));
    }
  } else {
    v.resize(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), v.size() * 4);
  }
  return v;
}

void check_rope_kv(const RopeCase& c, uint32_t n_tokens, uint32_t n_past, bool kv_f16, bool step) {
  SCOPED_TRACE(::testing::Message() << "hd " << c.hd << " heads " << c.n_head << "/" << c.n_kv << " n_rot " << c.n_rot
                                    << " mode " << c.mode << " ff " << c.ff << " N " << n_tokens << " n_past " << n_past
                                    << " f16 " << kv_f16 << " step " << step);
  Harness h(kv_f16);
  std::mt19937 rng(c.hd * 131 + c.n_head * 17 + n_tokens * 7 + n_past + (kv_f16 ? 1000 : 0) + (step ? 77 : 0));
  std::uniform_real_distribution<float> u(-2.f, 2.f), fu(0.5f, 4.f);
  const uint32_t n_ctx = n_past + n_tokens + 3, ekv = c.hd * c.n_kv, eq = c.hd * c.n_head;
  const uint64_t elem = kv_f16 ? 2 : 4;
  auto rnd = [&](size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = u(rng);
    return v;
  };
  std::vector<float> q = rnd(size_t(eq) * n_tokens), k = rnd(size_t(ekv) * n_tokens), v = rnd(size_t(ekv) * n_tokens);
  std::vector<float> ff(c.n_rot / 2);
  for (auto& x : ff) x = fu(rng);
  std::vector<uint8_t> cache0(size_t(ekv) * n_ctx * elem);
  {
    std::vector<float> fill = rnd(size_t(ekv) * n_ctx);  // finite random contents, also as f16
    for (size_t i = 0; i < fill.size(); ++i) {
      if (kv_f16) {
        const uint16_t hv = quant::f32_to_f16(fill[i]);
        std::memcpy(cache0.data() + 2 * i, &hv, 2);
      } else {
        std::memcpy(cache0.data() + 4 * i, &fill[i], 4);
      }
    }
  }
  Buffer qb = h.upload(q, "q"), kb = h.upload(k, "k"), vb = h.upload(v, "v"), fb = h.upload(ff, "ff");
  // Fused and unfused outputs, each with its own caches.
  Buffer qo_f = h.mem->create("qo fused", q.size() * 4, BufferKind::DEVICE);
  Buffer qo_u = h.mem->create("qo unfused", q.size() * 4, BufferKind::DEVICE);
  Buffer ko_u = h.mem->create("k roped unfused", k.size() * 4, BufferKind::DEVICE);
  Buffer kc_f = h.upload_bytes(cache0, "K fused"), vc_f = h.upload_bytes(cache0, "V fused");
  Buffer kc_u = h.upload_bytes(cache0, "K unfused"), vc_u = h.upload_bytes(cache0, "V unfused");
  Buffer stepb = h.mem->create("step", 16, BufferKind::DEVICE);
  const uint32_t pos[4] = {n_past, 0, 0, 0};
  h.mem->upload(stepb, 0, pos, sizeof pos);
  h.env->step = step ? &stepb : nullptr;
  // With the step buffer the host's n_past argument must be ignored: pass a wrong one.
  const uint32_t host_past = step ? n_past + 1 : n_past;
  vulkan::ops::RopeArgs a{c.hd, c.n_head, c.n_rot, n_tokens, host_past, c.mode, 10000.f, 1.f};
  vulkan::ops::RopeArgs ak = a;
  ak.n_head = c.n_kv;
  const Region ffr = c.ff ? Region{&fb, 0, fb.size()} : Region{};
  auto whole = [](const Buffer& b) { return Region{&b, 0, b.size()}; };
  h.rec->begin();
  vulkan::ops::rope_kv(*h.env, whole(qb), whole(kb), whole(vb), a, c.n_kv, whole(qo_f), whole(kc_f), whole(vc_f),
                       "rope_kv", ffr);
  if (!step) {  // the unfused ops take n_past from the host (they bind the written columns only)
    vulkan::ops::rope(*h.env, whole(qb), a, whole(qo_u), "rope q", ffr);
    vulkan::ops::rope(*h.env, whole(kb), ak, whole(ko_u), "rope k", ffr);
    vulkan::ops::kv_store(*h.env, whole(ko_u), ekv, n_tokens, n_past, whole(kc_u), "store k");
    vulkan::ops::kv_store(*h.env, whole(vb), ekv, n_tokens, n_past, whole(vc_u), "store v");
  } else {
    vulkan::ops::rope(*h.env, whole(qb), a, whole(qo_u), "rope q", ffr);
    vulkan::ops::rope(*h.env, whole(kb), ak, whole(ko_u), "rope k", ffr);
    vulkan::ops::kv_store(*h.env, whole(ko_u), ekv, n_tokens, host_past, whole(kc_u), "store k");
    vulkan::ops::kv_store(*h.env, whole(vb), ekv, n_tokens, host_past, whole(vc_u), "store v");
  }
  h.rec->submit_and_wait();
  EXPECT_EQ(h.inst->error_count(), 0u) << "Vulkan validation errors";
  const auto qf = h.download<float>(qo_f, q.size()), qu = h.download<float>(qo_u, q.size());
  const auto kf = cache_values(h.download<uint8_t>(kc_f, cache0.size()), kv_f16);
  const auto vf = cache_values(h.download<uint8_t>(vc_f, cache0.size()), kv_f16);
  const auto ku = cache_values(h.download<uint8_t>(kc_u, cache0.size()), kv_f16);
  const auto vu = cache_values(h.download<uint8_t>(vc_u, cache0.size()), kv_f16);
  const auto c0 = cache_values(cache0, kv_f16);
  // Against the double reference: f32 math (|Δ| ≤ 1e-5 at |x| ≤ 2·√2); f16 caches: half an ulp of f16.
  const double tol_q = 2e-5, tol_kv = kv_f16 ? 4e-3 : 2e-5;
  double max_q = 0, max_k = 0, max_v = 0, max_qu = 0, max_ku = 0;
  for (uint32_t j = 0; j < n_tokens; ++j) {
    const double p = double(n_past + j);
    for (uint32_t hh = 0; hh < c.n_head; ++hh) {
      const auto r = ref_rope(q.data() + (size_t(j) * c.n_head + hh) * c.hd, c, p, ff);
      for (uint32_t d = 0; d < c.hd; ++d) {
        const size_t i = (size_t(j) * c.n_head + hh) * c.hd + d;
        max_q = std::max(max_q, std::abs(qf[i] - r[d]));
        max_qu = std::max(max_qu, std::abs(double(qf[i]) - qu[i]));
      }
    }
    for (uint32_t hh = 0; hh < c.n_kv; ++hh) {
      const auto r = ref_rope(k.data() + (size_t(j) * c.n_kv + hh) * c.hd, c, p, ff);
      for (uint32_t d = 0; d < c.hd; ++d) {
        const size_t ci = size_t(n_past + j) * ekv + hh * c.hd + d, xi = size_t(j) * ekv + hh * c.hd + d;
        max_k = std::max(max_k, std::abs(kf[ci] - r[d]));
        max_ku = std::max(max_ku, std::abs(double(kf[ci]) - ku[ci]));
        max_v = std::max(max_v, std::abs(double(vf[ci]) - v[xi]));
        EXPECT_EQ(vf[ci], vu[ci]) << "V copy, column " << n_past + j << " element " << hh * c.hd + d;
      }
    }
  }
  EXPECT_LE(max_q, tol_q);
  EXPECT_LE(max_k, tol_kv);
  EXPECT_LE(max_v, kv_f16 ? 2e-3 : 0.0);
  EXPECT_LE(max_qu, 1e-5) << "fused vs unfused Q";
  EXPECT_LE(max_ku, kv_f16 ? 2e-3 : 1e-5) << "fused vs unfused K";
  // Untouched columns keep their contents.
  for (uint32_t col = 0; col < n_ctx; ++col) {
    if (col >= n_past && col < n_past + n_tokens) continue;
    for (uint32_t e = 0; e < ekv; ++e) {
      const size_t i = size_t(col) * ekv + e;
      ASSERT_EQ(kf[i], c0[i]) << "K column " << col << " written";
      ASSERT_EQ(vf[i], c0[i]) << "V column " << col << " written";
    }
  }
}

TEST(DecodeStep, RopeKvMatchesReferenceAndUnfused) {
  const uint32_t neox = vulkan::abi::k_rope_neox, normal = vulkan::abi::k_rope_normal;
  const RopeCase cases[] = {
      {6, 3, 1, 4, neox, true},        // pass-through dims, divisors
      {8, 5, 1, 6, neox, false},       // n_rot / 2 = 3: pairs straddle the halves
      {10, 2, 2, 10, normal, true},    // llama order, MHA
      {6, 3, 3, 2, normal, false},     // one rotated pair
      {128, 16, 2, 128, neox, false},  // qwen2.5-3b's heads
      {130, 3, 1, 64, normal, false},  // more pairs than one workgroup of 64
  };
  for (const RopeCase& c : cases)
    for (uint32_t n : {1u, 3u})
      for (bool f16 : {false, true})
        for (bool step : {false, true}) check_rope_kv(c, n, n == 1 ? 11u : 4u, f16, step);
}

// ---- whole models ----

struct Decode {
  std::vector<std::vector<float>> logits;  // per decoded token
  uint64_t replays = 0, dispatches = 0;
};

Decode run_decode(const model::Model& m, const std::vector<int32_t>& prompt, const std::vector<int32_t>& gen,
                  bool replay, bool fuse, bool kv_f16, bool host_io, const vulkan::LabOptions& lab = {}) {
  vulkan::VulkanOptions o;
  o.fold_norm = fuse;  // the folded norms (off by default) ride with the other decode fusions here
  o.lab = lab;
  o.host_io = host_io;  // as on a discrete GPU: token ids in host memory, the step copied to the device
  o.validation = true;
  o.persist_pipeline_cache = false;
  o.kv_f16 = kv_f16;
  o.replay_decode = replay;
  o.fuse_decode = fuse;
  vulkan::VulkanBackend be(o);
  const int32_t n = int32_t(prompt.size()), n_ctx = n + int32_t(gen.size()) + 4;
  graph::Graph g = m.build_graph({n, 0, n_ctx, model::Logits::LAST});
  be.load_weights(g.weights());
  be.init_kv(g.kv);
  std::vector<float> out(size_t(m.hparams().n_vocab));
  be.compute(g, graph::plan_arena(g), prompt, out);
  be.reset_host_timing();
  Decode d;
  for (size_t i = 0; i < gen.size(); ++i) {
    // A fresh graph and plan per token, as a caller without a shape cache would give them.
    graph::Graph gd = m.build_graph({1, n + int32_t(i), n_ctx, model::Logits::LAST});
    std::vector<int32_t> tk{gen[i]};
    be.compute(gd, graph::plan_arena(gd), tk, out);
    d.logits.push_back(out);
  }
  d.replays = be.host_timing().replays;
  d.dispatches = be.recorder().dispatches();
  EXPECT_EQ(be.instance().error_count(), 0u) << "Vulkan validation errors";
  return d;
}

// The CPU oracle's decode logits for the same tokens.
std::vector<std::vector<float>> cpu_decode(const model::Model& m, const std::vector<int32_t>& prompt,
                                           const std::vector<int32_t>& gen) {
  auto be = backend::cpu::make_cpu_backend();
  const int32_t n = int32_t(prompt.size()), n_ctx = n + int32_t(gen.size()) + 4;
  graph::Graph g = m.build_graph({n, 0, n_ctx, model::Logits::LAST});
  be->load_weights(g.weights());
  auto ctx = be->make_context(backend::ContextOptions{g.kv, 1});
  std::vector<float> out(size_t(m.hparams().n_vocab));
  ctx->compute(g, graph::plan_arena(g), prompt, out);
  std::vector<std::vector<float>> r;
  for (size_t i = 0; i < gen.size(); ++i) {
    graph::Graph gd = m.build_graph({1, n + int32_t(i), n_ctx, model::Logits::LAST});
    std::vector<int32_t> tk{gen[i]};
    ctx->compute(gd, graph::plan_arena(gd), tk, out);
    r.push_back(out);
  }
  return r;
}

double max_abs(const std::vector<float>& a, const std::vector<float>& ref) {
  double md = 0;
  for (size_t i = 0; i < ref.size(); ++i) md = std::max(md, std::abs(double(a[i]) - ref[i]));
  return md;
}

double rel(const std::vector<float>& a, const std::vector<float>& ref) {
  double md = 0, ma = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    md = std::max(md, std::abs(double(a[i]) - ref[i]));
    ma = std::max(ma, std::abs(double(ref[i])));
  }
  return ma > 0 ? md / ma : md;
}

void check_model(const char* file, bool kv_f16, int n_gen, bool host_io = false) {
  SCOPED_TRACE(std::string(file) + (kv_f16 ? " f16 KV" : " f32 KV") + (host_io ? " host_io" : ""));
  auto m = model::Model::load(shared_path(std::string("reference/models/synth/") + file));
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> tok(0, m->hparams().n_vocab - 1);
  std::vector<int32_t> prompt(7);
  std::vector<int32_t> gen(static_cast<size_t>(n_gen));
  for (auto& t : prompt) t = tok(rng);
  for (auto& t : gen) t = tok(rng);
  const Decode replayed = run_decode(*m, prompt, gen, true, true, kv_f16, host_io);
  const Decode recorded = run_decode(*m, prompt, gen, false, true, kv_f16, host_io);
  const Decode unfused = run_decode(*m, prompt, gen, false, false, kv_f16, host_io);
  const auto cpu = cpu_decode(*m, prompt, gen);
  EXPECT_EQ(replayed.replays, uint64_t(n_gen - 1)) << "recorded once, replayed for every later token";
  EXPECT_EQ(recorded.replays, 0u);
  EXPECT_EQ(replayed.dispatches, recorded.dispatches);
  const int32_t n_layer = m->hparams().n_layer;
  int32_t n_attn = 0;  // attention layers (a hybrid model's recurrent layers have no rope / KV)
  for (int il = 0; il < n_layer; ++il) n_attn += m->hparams().is_recurrent_layer(il) ? 0 : 1;
  // rope_kv: 4 dispatches → 1 per attention layer; the folded norms (fold_norm): attn_norm and
  // ffn_norm of every pure-attention layer (result_norm stays: the planner may reuse its input's
  // region for the head's output); a hybrid model folds at least every layer's ffn_norm.
  const uint32_t saved = uint32_t(unfused.dispatches - recorded.dispatches);
  if (n_attn == n_layer) {
    EXPECT_EQ(saved, 5u * uint32_t(n_layer)) << "rope_kv and the two folded norms: 5 dispatches fewer per layer";
  } else {
    EXPECT_GE(saved, 3u * uint32_t(n_attn) + uint32_t(n_layer)) << "rope_kv per attention layer + the folded norms";
  }
  std::printf("dispatches saved by the decode fusions: %u (%d layers, %d attention)\n", saved, n_layer, n_attn);
  double worst_unfused = 0, worst_cpu = 0;
  for (int i = 0; i < n_gen; ++i) {
    ASSERT_EQ(replayed.logits[size_t(i)], recorded.logits[size_t(i)]) << "token " << i << ": replay is not bit-exact";
    worst_unfused = std::max(worst_unfused, rel(recorded.logits[size_t(i)], unfused.logits[size_t(i)]));
    worst_cpu = std::max(worst_cpu, max_abs(recorded.logits[size_t(i)], cpu[size_t(i)]));
  }
  std::printf(
      "%s kv_f16=%d: %d tokens, %llu replays, %llu dispatches per token (unfused %llu); rel vs unfused %.3g, "
      "vs CPU %.3g absolute\n",
      file, int(kv_f16), n_gen, (unsigned long long)replayed.replays, (unsigned long long)recorded.dispatches,
      (unsigned long long)unfused.dispatches, worst_unfused, worst_cpu);
  // f32 KV: 2e-5 (the folded norms sum x² per workgroup in another order than rms_norm_vec).
  EXPECT_LE(worst_unfused, kv_f16 ? 1e-3 : 2e-5) << "fused vs unfused decode";
  // The prompt's KV comes from the int8 prefill path (q8_1 activations): ≤ 0.35 absolute
  // (../shared/reference/README.md), as every q8_1 path is held to; 1.35 on the hybrid qwen35.
  EXPECT_LE(worst_cpu, m->hparams().full_attn_interval > 0 ? 1.35 : 0.35) << "GPU decode vs the CPU oracle";
}

// The int8-dot decode matvec (the profile's mmv.q8 through ROCKY_TUNE; fast::matvec_q8 fed
// by the q8_1 producers): replayed = recorded bit for bit, the CPU oracle within the q8_1 paths'
// bound (0.35 absolute; 1.35 on the hybrid qwen35), and close to the f32-activation matvec's decode.
void check_q8_decode(const char* file, bool kv_f16, int n_gen) {
  SCOPED_TRACE(std::string(file) + " matvec_q8" + (kv_f16 ? " f16 KV" : ""));
  auto m = model::Model::load(shared_path(std::string("reference/models/synth/") + file));
  std::mt19937 rng(6);
  std::uniform_int_distribution<int32_t> tok(0, m->hparams().n_vocab - 1);
  std::vector<int32_t> prompt(9), gen(static_cast<size_t>(n_gen));
  for (auto& t : prompt) t = tok(rng);
  for (auto& t : gen) t = tok(rng);
  const vulkan::LabOptions on = runtime::parse_lab(R"({"mmv": {"q8": 8}})", ""),
                           off = runtime::parse_lab(R"({"mmv": {"q8": 0}})", "");
  const Decode replayed = run_decode(*m, prompt, gen, true, false, kv_f16, false, on);
  const Decode recorded = run_decode(*m, prompt, gen, false, false, kv_f16, false, on);
  const Decode f32x = run_decode(*m, prompt, gen, false, false, kv_f16, false, off);
  const auto cpu = cpu_decode(*m, prompt, gen);
  EXPECT_EQ(replayed.replays, uint64_t(n_gen - 1));
  const double bound = m->hparams().full_attn_interval > 0 ? 1.35 : 0.35;
  double worst_cpu = 0, worst_f32x = 0;
  for (int i = 0; i < n_gen; ++i) {
    ASSERT_EQ(replayed.logits[size_t(i)], recorded.logits[size_t(i)]) << "token " << i << ": replay is not bit-exact";
    worst_cpu = std::max(worst_cpu, max_abs(recorded.logits[size_t(i)], cpu[size_t(i)]));
    worst_f32x = std::max(worst_f32x, max_abs(recorded.logits[size_t(i)], f32x.logits[size_t(i)]));
  }
  std::printf("%s matvec_q8: %d tokens, %llu dispatches per token (f32 x: %llu); vs CPU %.3g, vs f32 x %.3g absolute\n",
              file, n_gen, (unsigned long long)recorded.dispatches, (unsigned long long)f32x.dispatches, worst_cpu,
              worst_f32x);
  EXPECT_LE(worst_cpu, bound) << "GPU decode with q8_1 activations vs the CPU oracle";
  EXPECT_LE(worst_f32x, bound) << "q8_1 vs f32 activations";
  EXPECT_GT(worst_f32x, 0.0) << "mmv.q8 changed nothing: the int8-dot matvec did not run";
}

TEST(DecodeStep, Q8MatvecDecodeQwen2) { check_q8_decode("synth-qwen2-q4_k_m.gguf", true, 16); }
TEST(DecodeStep, Q8MatvecDecodeLlama) { check_q8_decode("synth-llama-q4_k_m.gguf", false, 12); }
TEST(DecodeStep, Q8MatvecDecodeQwen35) { check_q8_decode("synth-qwen35-q4_k_m.gguf", false, 8); }

TEST(DecodeStep, ReplayedDecodeQwen2) { check_model("synth-qwen2-q4_k_m.gguf", false, 40); }
TEST(DecodeStep, ReplayedDecodeQwen2F16) { check_model("synth-qwen2-q4_k_m.gguf", true, 24); }
TEST(DecodeStep, ReplayedDecodeLlamaHostIo) { check_model("synth-llama-q4_k_m.gguf", false, 12, true); }
TEST(DecodeStep, ReplayedDecodeLlama) { check_model("synth-llama-q4_k_m.gguf", false, 24); }
TEST(DecodeStep, ReplayedDecodeQwen3) { check_model("synth-qwen3-q4_k_m.gguf", false, 16); }
// the recurrent states (conv window, delta-rule state) advance under replay too.
TEST(DecodeStep, ReplayedDecodeQwen35) { check_model("synth-qwen35-q4_k_m.gguf", false, 16); }

// The split decode attention under replay (chunks of 64 positions, as a GPU decodes at depth; the
// per-(head, token) kernel, attn=simple, and the GPUs' GQA kernel, attn=decode): its
// (chunk, n_split) is in the replay key, so the step is recorded again when a token's key range
// crosses into a new chunk (n_kv 65 and 129 here) and replayed in between — bit-exact against
// re-recording every token, and within the q8_1 bound of the CPU oracle.
void check_split_replay(const char* kernel) {
  auto m = model::Model::load(shared_path("reference/models/synth/synth-llama-q4_k_m.gguf"));
  std::mt19937 rng(9);
  std::uniform_int_distribution<int32_t> tok(0, m->hparams().n_vocab - 1);
  std::vector<int32_t> prompt(7), gen(140);
  for (auto& t : prompt) t = tok(rng);
  for (auto& t : gen) t = tok(rng);
  const vulkan::LabOptions lab =
      runtime::parse_lab(R"({"attn_rule": {"split_chunk": 64}})", std::string("attn=") + kernel);
  const Decode replayed = run_decode(*m, prompt, gen, true, true, false, false, lab);
  const Decode recorded = run_decode(*m, prompt, gen, false, true, false, false, lab);
  const auto cpu = cpu_decode(*m, prompt, gen);
  EXPECT_EQ(replayed.replays, uint64_t(gen.size() - 3)) << "recorded at token 0 and when n_kv reaches 65 and 129";
  double worst_cpu = 0;
  for (size_t i = 0; i < gen.size(); ++i) {
    ASSERT_EQ(replayed.logits[i], recorded.logits[i]) << "token " << i << ": replay is not bit-exact";
    worst_cpu = std::max(worst_cpu, max_abs(recorded.logits[i], cpu[i]));
  }
  EXPECT_LE(worst_cpu, 0.35) << kernel << ": GPU decode vs the CPU oracle";
}
TEST(DecodeStep, ReplayedSplitAttentionCrossesChunks) { check_split_replay("simple"); }
TEST(DecodeStep, ReplayedGqaAttentionCrossesChunks) { check_split_replay("decode"); }

// The captured command buffer goes stale when what it binds changes: a larger prefill in between
// (a larger arena and q8_1 slots) means one more recording, and the result stays exact.
TEST(DecodeStep, ReplayRecordsAgainAfterALargerGraph) {
  auto m = model::Model::load(shared_path("reference/models/synth/synth-llama-q4_k_m.gguf"));
  vulkan::VulkanOptions o;
  o.validation = true;
  o.persist_pipeline_cache = false;
  std::vector<std::vector<float>> results;
  for (bool replay : {true, false}) {
    o.replay_decode = replay;
    vulkan::VulkanBackend be(o);
    const int32_t n_ctx = 64;
    graph::Graph g0 = m->build_graph({2, 0, n_ctx, model::Logits::LAST});
    be.load_weights(g0.weights());
    be.init_kv(g0.kv);
    std::vector<float> out(size_t(m->hparams().n_vocab));
    std::vector<int32_t> two{3, 5}, many(20, 7), one{9};
    be.compute(g0, graph::plan_arena(g0), two, out);
    int32_t pos = 2;
    std::vector<float> all;
    auto step = [&] {
      graph::Graph gd = m->build_graph({1, pos, n_ctx, model::Logits::LAST});
      be.compute(gd, graph::plan_arena(gd), one, out);
      all.insert(all.end(), out.begin(), out.end());
      ++pos;
    };
    step();
    step();
    graph::Graph gb = m->build_graph({20, pos, n_ctx, model::Logits::LAST});  // larger arena
    be.compute(gb, graph::plan_arena(gb), many, out);
    pos += 20;
    be.reset_host_timing();
    step();
    step();
    step();
    EXPECT_EQ(be.host_timing().replays, replay ? 2u : 0u);
    results.push_back(all);
    EXPECT_EQ(be.instance().error_count(), 0u);
  }
  EXPECT_EQ(results[0], results[1]);
}

}  // namespace
}  // namespace rocky::test
