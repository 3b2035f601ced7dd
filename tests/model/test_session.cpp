// Ubatching invariance, context limits and bad-model errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "gguf/writer.hpp"
#include "graph/planner.hpp"
#include "model/harness.hpp"

namespace rocky {
namespace {

using namespace rocky::test;

// -ub 1, 7, 32 and 512 give logits within 1e-5 · max|logit| of each other (all positions).
void check_ubatch_invariance(const std::string& model_file, const std::string& label, const std::string& prompt,
                             bool all_logits) {
  auto m = model::Model::load(model_path(model_file));
  auto r = load_ref(label, prompt);
  std::vector<float> base;
  for (int32_t ub : {512, 1, 7, 32}) {
    auto s = make_session(*m, 1024, ub);
    auto got = s->eval(r.eval_tokens, all_logits);
    EXPECT_EQ(s->n_past(), static_cast<int32_t>(r.eval_tokens.size()));
    if (base.empty()) {
      base = got;
      continue;
    }
    ASSERT_EQ(got.size(), base.size());
    double md = 0, mx = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      md = std::max(md, std::fabs(static_cast<double>(got[i]) - base[i]));
      mx = std::max(mx, std::fabs(static_cast<double>(base[i])));
    }
    EXPECT_LE(md, 1e-5 * mx) << model_file << " -ub " << ub;
    std::printf("%s -ub %d vs 512: max diff %.3g (max|logit| %.3g)\n", model_file.c_str(), ub, md, mx);
  }
}

TEST(Session, UbatchInvarianceStories) {
  check_ubatch_invariance("stories260K.gguf", "stories260K__kvf32_faoff", "p2_paragraph", true);
}

TEST(Session, UbatchInvarianceQuantized) {
  // Last position only: the qwen2 vocab is 151,936 wide.
  check_ubatch_invariance("synth-qwen2-q4_k_m.gguf", "synth-qwen2-q4_k_m-dequant-f32__kvf32_faoff", "p2_paragraph",
                          false);
  check_ubatch_invariance("synth-llama-q4_k_m.gguf", "synth-llama-q4_k_m-dequant-f32__kvf32_faoff", "p3_unicode_code",
                          true);
}

TEST(Session, PromptLongerThanContextFails) {
  auto m = model::Model::load(model_path("stories260K.gguf"));
  auto s = make_session(*m, 16, 8);
  std::vector<int32_t> toks(17, 5);
  try {
    s->eval(toks);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("raise -c"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s->n_past(), 0);
  // Filling exactly to the limit works; one more token fails.
  toks.resize(16);
  s->eval(toks);
  int32_t t = 3;
  EXPECT_THROW(s->eval(std::span<const int32_t>(&t, 1)), Error);
}

TEST(Session, TokenOutOfRangeFails) {
  auto m = model::Model::load(model_path("stories260K.gguf"));
  auto s = make_session(*m, 16, 8);
  std::vector<int32_t> toks = {1, 512};
  EXPECT_THROW(s->eval(toks), Error);
}

std::string load_error(const std::string& path) {
  try {
    model::Model::load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// stories260K.gguf without tensor `drop` (written with gguf::Writer). A renamed tensor would not do:
// a tensor the graph does not read is refused (test_strict_load.cpp).
std::string copy_without_tensor(const std::string& name, const std::string& drop) {
  const auto f = gguf::GgufFile::open(shared_path("reference/models/stories260K.gguf"));
  gguf::Writer w;
  for (const auto& [key, value] : f.metadata()) w.set(key, value);
  for (const auto& t : f.tensors()) {
    if (t.name == drop) continue;
    w.add_tensor(t.name, t.type, std::span<const uint64_t>(t.ne.data(), t.n_dims),
                 std::span<const uint8_t>(t.data, t.n_bytes));
  }
  const std::string path = scratch_dir("model_errors") + "/" + name;
  w.write(path);
  return path;
}

TEST(ModelBinding, LlamaWithoutOutputFallsBackToTokenEmbd) {
  auto path = copy_without_tensor("tied.gguf", "output.weight");
  auto m = model::Model::load(path);
  EXPECT_TRUE(m->weights().tied_output);
  EXPECT_EQ(m->weights().output, m->weights().tok_embd);
  auto s = make_session(*m, 32, 8);
  std::vector<int32_t> toks = {1, 403, 407, 261};
  auto logits = s->eval(toks);
  // The logits node reads token_embd.weight.
  graph::Graph g = m->build_graph(model::UbatchSpec{4, 0, 32, model::Logits::LAST});
  EXPECT_EQ(g.nodes[static_cast<size_t>(g.output)].weight->name, "token_embd.weight");
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

TEST(ModelErrors, UnsupportedArchitecture) {
  // general.architecture "llama" → "llamb" (the value follows the key and its u32 type + u64 length).
  std::string key = "general.architecture";
  auto path = patched_copy("arch.gguf", key, key, 4 + 8, {'l', 'l', 'a', 'm', 'b'});
  auto msg = load_error(path);
  EXPECT_NE(msg.find("unsupported architecture 'llamb'"), std::string::npos) << msg;
}

// A NUL inside the value does not cut the message (what() is a C string): it shows as \x00 and
// the rest of the message (the key, what is supported) follows.
TEST(ModelErrors, ArchitectureWithANulIsQuotedWhole) {
  std::string key = "general.architecture";
  auto path = patched_copy("arch_nul.gguf", key, key, 4 + 8, {'l', 'l', '\0', 'm', 'a'});
  auto msg = load_error(path);
  EXPECT_NE(msg.find("unsupported architecture 'll\\x00ma' (general.architecture); rocky supports: "),
            std::string::npos)
      << msg;
}

TEST(ModelErrors, MissingTensor) {
  auto path = patched_copy("missing.gguf", "blk.3.ffn_up.weight", "blk.3.ffn_uX.weight");
  auto msg = load_error(path);
  EXPECT_NE(msg.find("missing tensor 'blk.3.ffn_up.weight'"), std::string::npos) << msg;
}

TEST(ModelErrors, UnsupportedType) {
  // The tensor info after the name: u32 n_dims, u64 ne[2], u32 type. f32 (0) → i32 (26): same size.
  std::string name = "blk.2.attn_q.weight";
  auto path = patched_copy("type.gguf", name, name, 4 + 16, {26, 0, 0, 0});
  auto msg = load_error(path);
  EXPECT_NE(msg.find("blk.2.attn_q.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("i32"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rocky

namespace rocky {
namespace {

// The backend API as verify --bisect uses it: with a no-reuse plan every node can be read back;
// logits do not depend on the plan; intermediate nodes are what their definition says.
TEST(CpuBackend, ReadNodeAndPlanIndependence) {
  auto m = model::Model::load(test::model_path("synth-qwen2-q4_k_m.gguf"));
  auto r = test::load_ref("synth-qwen2-q4_k_m-dequant-f32__kvf32_faoff", "p1_short");
  const int32_t n = static_cast<int32_t>(r.eval_tokens.size());
  graph::Graph g = m->build_graph(model::UbatchSpec{n, 0, 64, model::Logits::LAST});
  std::vector<float> a(static_cast<size_t>(r.n_vocab)), b(a.size());
  auto be = backend::cpu::make_cpu_backend();
  be->load_weights(g.weights());
  auto ctx = be->make_context({g.kv, 1});
  ctx->compute(g, graph::plan_arena(g), r.eval_tokens, a);
  graph::Plan full = graph::plan_arena(g, 256, false);
  ctx->reset();
  ctx->compute(g, full, r.eval_tokens, b);
  EXPECT_EQ(a, b);
  auto ref =
      test::load_f32(test::ref_path("synth-qwen2-q4_k_m-dequant-f32__kvf32_faoff", "p1_short", ".cpu.last_logits.f32"));
  EXPECT_LE(test::rel_err(b, ref), 1e-3);
  EXPECT_GT(be->device_memory_bytes(), full.arena_bytes);

  auto find = [&](const std::string& name) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (g.nodes[i].name == name) return static_cast<int32_t>(i);
    ADD_FAILURE() << "no node " << name;
    return 0;
  };
  // ffn_inp = attn_out + inp_embd (layer 0 residual), exactly.
  auto emb = ctx->read_node(g, full, find("inp_embd"));
  auto att = ctx->read_node(g, full, find("blk.0.attn_out"));
  auto res = ctx->read_node(g, full, find("blk.0.ffn_inp"));
  ASSERT_EQ(res.size(), static_cast<size_t>(m->hparams().n_embd) * static_cast<size_t>(n));
  for (size_t i = 0; i < res.size(); ++i) ASSERT_EQ(res[i], att[i] + emb[i]);
  // result_last is the last column of the last layer's output.
  auto lout = ctx->read_node(g, full, find("blk.1.l_out"));
  auto last = ctx->read_node(g, full, find("result_last"));
  const size_t ne = static_cast<size_t>(m->hparams().n_embd);
  ASSERT_EQ(last.size(), ne);
  for (size_t i = 0; i < ne; ++i) ASSERT_EQ(last[i], lout[(static_cast<size_t>(n) - 1) * ne + i]);
  // KV_STORE nodes have no arena output.
  EXPECT_TRUE(ctx->read_node(g, full, find("blk.0.k_cache_store")).empty());
}

}  // namespace
}  // namespace rocky
