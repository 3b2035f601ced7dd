// The sliding-window KV ring (graph.hpp KvShape): gemma3's local layers hold window + ubatch cells
// per sequence, position p at cell p mod ring. On the synth gemma3 (window 64 on layers 0–4, one
// global layer) at a context longer than the window, a ring context gives exactly the greedy
// tokens and the logits of a --swa-full one: prompt and decode past the ring's size, a rollback
// within reach and one out of reach (a clear error), the K/V moved to another context (a slot
// file's export/import), several sequences batched in one context, prefix-cache saves that skip
// the positions the ring no longer holds. CPU and Vulkan (lavapipe).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "model/model.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/batch.hpp"
#include "runtime/generator.hpp"
#include "runtime/kv_memory.hpp"
#include "runtime/prefix_cache.hpp"
#include "runtime/session.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky {
namespace {

constexpr int32_t k_ctx = 320, k_ub = 32, k_window = 64;  // ring: 64 + 32 = 96 cells < 320

// A Vulkan kernel choice: ROCKY_SWITCH attn=… (flash: the tiled kernel; simple: the per-(head, token)
// kernels; decode: attention_decode) and the tuning profile's split chunk (a decode token's keys cut
// into chunks merged after: attention_split / attention_decode's splits), f16 or f32 KV.
struct Kernels {
  const char* attn = nullptr;
  const char* split = nullptr;
  bool kv_f16 = false;
};

std::shared_ptr<backend::Backend> make(const std::string& dev, Kernels k = {}) {
  runtime::BackendOptions bo;
  bo.device = dev;
  bo.kv_f16 = k.kv_f16;
  bo.env.lab = runtime::parse_lab(k.split ? std::string(R"({"attn_rule": {"split_chunk": )") + k.split + "}}" : "",
                                  k.attn ? std::string("attn=") + k.attn : "");
  return runtime::make_backend(bo);
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = a.size() == b.size() ? 0.0f : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// Greedy decode of n tokens after `last` logits; the tokens and every step's logits.
struct Run {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};
Run decode(runtime::Session& s, std::vector<float> last, int32_t n) {
  Run r;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t t = argmax(last);
    r.tokens.push_back(t);
    last = s.eval(std::span<const int32_t>(&t, 1));
    r.logits.push_back(last);
  }
  return r;
}

void expect_same(const Run& a, const Run& b, float tol, const char* what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  float d = 0;
  for (size_t i = 0; i < std::min(a.logits.size(), b.logits.size()); ++i)
    d = std::max(d, max_diff(a.logits[i], b.logits[i]));
  EXPECT_LE(d, tol) << what;
}

void check_sessions(const std::string& dev, float tol, Kernels k = {}) {
  SCOPED_TRACE(dev + " attn=" + (k.attn ? k.attn : "auto") + " split=" + (k.split ? k.split : "-") +
               (k.kv_f16 ? " f16" : " f32"));
  auto m = model::Model::load(test::shared_path("reference/models/synth/synth-gemma3-q4_k_m.gguf"));
  ASSERT_EQ(m->hparams().n_swa, k_window);
  const int32_t nv = m->hparams().n_vocab;
  auto be = make(dev, k);
  runtime::Session full(*m, be, runtime::SessionOptions{k_ctx, k_ub, true, /*swa_full=*/true});
  runtime::Session ring(*m, be, runtime::SessionOptions{k_ctx, k_ub, true, false});
  ASSERT_EQ(full.context().kv().n_ring, 0);
  ASSERT_EQ(ring.context().kv().n_ring, k_window + k_ub);
  ASSERT_TRUE(ring.context().kv().ring_layer(0));
  ASSERT_FALSE(ring.context().kv().ring_layer(5));  // the global layer keeps every position
  // The ring holds (window + ubatch) cells of its 5 local layers, the global layer n_ctx.
  runtime::KvBytes pt;
  const runtime::KvBytes kb = runtime::kv_bytes(*m, k_ctx, 1, ring.context().kv_type(), &pt, k_window + k_ub);
  EXPECT_EQ(kb.sliding_window, pt.sliding_window * uint64_t(k_window + k_ub));
  EXPECT_EQ(kb.full, pt.full * uint64_t(k_ctx));
  EXPECT_EQ(kb.total(), ring.context().stats().memory.kv);

  // A prompt of 150 tokens (past the window and the ring) and 100 greedy tokens.
  const std::vector<int32_t> p = test::random_prompt(150, 7, nv);
  Run a = decode(full, full.eval(p), 100);
  Run b = decode(ring, ring.eval(p), 100);
  expect_same(a, b, tol, "prompt 150 + 100 decoded");
  EXPECT_GT(ring.live_from(), 0);

  // A rollback within reach (10 positions, the next token reads 64 back): both continue alike.
  const int32_t n = ring.n_past();
  ASSERT_TRUE(ring.can_keep(n - 10));
  full.truncate(n - 10);
  ring.truncate(n - 10);
  const std::vector<int32_t> more = test::random_prompt(20, 8, nv);
  a = decode(full, full.eval(more), 20);
  b = decode(ring, ring.eval(more), 20);
  expect_same(a, b, tol, "after a rollback of 10");
  // Out of reach: a clear error naming the way out, and nothing changes.
  EXPECT_FALSE(ring.can_keep(100));
  try {
    ring.truncate(100);
    ADD_FAILURE() << "truncate past the ring succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--swa-full"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(ring.can_keep(0));

  // The K/V of all positions into a fresh ring context (a slot file): it continues alike.
  const int32_t held = ring.n_past();
  const std::vector<uint8_t> bytes = ring.export_kv(0, held);
  runtime::Session other(*m, be, runtime::SessionOptions{k_ctx, k_ub, true, false});
  other.import_kv(0, held, bytes);
  const std::vector<int32_t> tail = test::random_prompt(5, 9, nv);
  a = decode(full, full.eval(tail), 10);
  b = decode(other, other.eval(tail), 10);
  expect_same(a, b, tol, "after moving the K/V to another context");
}

TEST(SwaRing, CpuEqualsFull) { check_sessions("cpu", 0.0f); }
TEST(SwaRing, VulkanEqualsFull) {
  check_sessions("vulkan", 1e-3f);                            // lavapipe's default: the tiled kernel everywhere
  check_sessions("vulkan", 1e-3f, {"simple", "32"});          // per-(head, token), split decode
  check_sessions("vulkan", 1e-3f, {"decode", "32"});          // attention_decode, split
  check_sessions("vulkan", 2e-2f, {"flash", nullptr, true});  // f16 KV
}

// Several sequences in one ring context (BatchEngine, prompts in chunks next to decoding
// sequences) give the tokens of each alone in a --swa-full session.
void check_batched(const std::string& dev, Kernels k = {}) {
  SCOPED_TRACE(dev + " attn=" + (k.attn ? k.attn : "auto"));
  auto m = model::Model::load(test::shared_path("reference/models/synth/synth-gemma3-q4_k_m.gguf"));
  auto tok = tok::Tokenizer::from_gguf(m->file());
  const int32_t nv = m->hparams().n_vocab;
  auto be = make(dev, k);
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(130, 21, nv), test::random_prompt(7, 22, nv),
                                                     test::random_prompt(90, 23, nv)};
  runtime::GenerateParams gp;
  gp.sampling.temp = 0;
  gp.max_tokens = 80;
  gp.ignore_eos = true;
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) {
    runtime::Session s(*m, be, runtime::SessionOptions{k_ctx, k_ub, true, true});
    runtime::SessionSource src(s);
    runtime::Generator g(src, tok);
    alone.push_back(g.generate(p, gp).tokens);
  }
  runtime::BatchOptions bo;
  bo.n_seq = 3;
  bo.n_ctx = k_ctx;
  bo.n_ubatch = k_ub;
  bo.prefill_chunk = 13;
  runtime::BatchEngine e(*m, be, bo);
  ASSERT_EQ(e.n_ring(), k_window + k_ub);
  // Prefix-cache saves of a sequence that outgrew its ring keep only the blocks it still holds whole.
  runtime::PrefixCacheOptions co;
  co.block = 16;
  co.ram_bytes = 64 << 20;
  runtime::PrefixCache cache(runtime::cache_identity(*m, e.context()), co);
  int32_t live0 = -1;
  std::vector<int32_t> held0;
  std::vector<std::vector<int32_t>> together(prompts.size());
  std::vector<std::thread> th;
  for (size_t i = 0; i < prompts.size(); ++i)
    th.emplace_back([&, i] {
      const auto seq = static_cast<int32_t>(i);
      e.begin(seq);
      runtime::BatchSource src(e, seq);
      runtime::Generator g(src, tok);
      together[i] = g.generate(prompts[i], gp).tokens;
      if (i == 0) {  // what sequence 0's cells hold: its prompt and every token but the last
        held0 = prompts[0];
        held0.insert(held0.end(), together[0].begin(), together[0].end() - 1);
        live0 = e.live_from(0);
        runtime::save_prefix(e, 0, cache, held0);
      }
      e.end(seq);
    });
  for (auto& t : th) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(together[i], alone[i]) << "sequence " << i;
  EXPECT_EQ(live0, int32_t(held0.size()) - (k_window + k_ub));
  const std::vector<uint64_t> keys = cache.chain(held0);
  ASSERT_GT(keys.size(), 2u);
  for (size_t b = 0; b < keys.size(); ++b)
    EXPECT_EQ(cache.peek(keys[b]) != nullptr, int32_t(b) * 16 >= live0) << "block " << b;
}

TEST(SwaRing, CpuBatched) { check_batched("cpu"); }
TEST(SwaRing, VulkanBatched) {
  check_batched("vulkan");
  check_batched("vulkan", {"decode", "32"});
}

}  // namespace
}  // namespace rocky
