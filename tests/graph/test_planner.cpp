// Graph names/weights and the liveness planner: no two simultaneously live outputs overlap, offsets
// are aligned, reuse shrinks the arena, the output survives to the end. Graphs: the real stories260K
// and qwen2 synth graphs plus random DAGs.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include <fmt/format.h>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "graph/planner.hpp"
#include "model/model.hpp"

namespace rocky::graph {
namespace {

// Checks the plan against the liveness definition of planner.hpp.
void check_plan(const Graph& g, const Plan& p, uint64_t align) {
  const size_t n = g.nodes.size();
  ASSERT_EQ(p.offset.size(), n);
  std::vector<size_t> last(n);
  for (size_t i = 0; i < n; ++i) last[i] = i;
  for (size_t i = 0; i < n; ++i)
    for (int32_t s : g.nodes[i].src)
      if (s >= 0) last[static_cast<size_t>(s)] = std::max(last[static_cast<size_t>(s)], i);
  if (g.output >= 0) last[static_cast<size_t>(g.output)] = n;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bi = g.nodes[i].out_bytes();
    if (bi == 0) {
      EXPECT_EQ(p.offset[i], k_no_offset) << g.nodes[i].name;
      continue;
    }
    ASSERT_NE(p.offset[i], k_no_offset);
    EXPECT_EQ(p.offset[i] % align, 0u);
    EXPECT_LE(p.offset[i] + bi, p.arena_bytes);
    for (size_t j = i + 1; j < n; ++j) {
      const uint64_t bj = g.nodes[j].out_bytes();
      if (bj == 0 || j > last[i]) continue;  // i is dead once j is produced (j > last use of i)
      const bool disjoint = p.offset[i] + bi <= p.offset[j] || p.offset[j] + bj <= p.offset[i];
      EXPECT_TRUE(disjoint) << g.nodes[i].name << " overlaps " << g.nodes[j].name;
    }
  }
}

Graph random_graph(uint32_t seed, int n_nodes) {
  std::mt19937 r(seed);
  Graph g;
  for (int i = 0; i < n_nodes; ++i) {
    Node nd;
    nd.op = i == 0 ? Op::GET_ROWS : Op::ADD;
    nd.name = fmt::format("n{}", i);
    nd.ne0 = 1 + static_cast<int64_t>(r() % 300);
    nd.ne1 = 1 + static_cast<int64_t>(r() % 7);
    if (r() % 9 == 0) nd.ne0 = nd.ne1 = 0;  // no-output nodes (KV_STORE-like)
    for (int k = 0; k < 2 && i > 0; ++k)
      nd.src[static_cast<size_t>(k)] = static_cast<int32_t>(r() % static_cast<uint32_t>(i));
    g.add(nd);
  }
  g.output = n_nodes - 1;
  return g;
}

TEST(Planner, RandomGraphs) {
  for (uint32_t s = 0; s < 40; ++s) {
    Graph g = random_graph(s, 5 + static_cast<int>(s) * 3);
    for (uint64_t a : {4u, 256u}) {
      Plan p = plan_arena(g, a, true);
      check_plan(g, p, a);
      Plan q = plan_arena(g, a, false);
      check_plan(g, q, a);
      EXPECT_LE(p.arena_bytes, q.arena_bytes);
      // Without reuse no two outputs share bytes at all.
      std::set<uint64_t> offs;
      for (size_t i = 0; i < g.nodes.size(); ++i) {
        if (q.offset[i] != k_no_offset) {
          EXPECT_TRUE(offs.insert(q.offset[i]).second);
        }
      }
    }
  }
}

TEST(Planner, ModelGraphs) {
  for (const char* f : {"reference/models/stories260K.gguf", "reference/models/synth/synth-qwen2-q4_k_m.gguf"}) {
    auto m = model::Model::load(test::shared_path(f));
    for (auto lg : {model::Logits::LAST, model::Logits::ALL, model::Logits::NONE}) {
      Graph g = m->build_graph(model::UbatchSpec{13, 5, 64, lg});
      Plan p = plan_arena(g);
      check_plan(g, p, 256);
      Plan q = plan_arena(g, 256, false);
      EXPECT_LT(p.arena_bytes, q.arena_bytes);
      if (lg == model::Logits::NONE) {  // with logits, the vocab-sized output dominates
        EXPECT_LT(p.arena_bytes, q.arena_bytes / 3) << "reuse should shrink the arena a lot";
      }
      if (lg == model::Logits::NONE) {
        EXPECT_EQ(g.output, -1);
        continue;
      }
      const Node& out = g.nodes[static_cast<size_t>(g.output)];
      EXPECT_EQ(out.name, "result_output");
      EXPECT_EQ(out.ne0, m->hparams().n_vocab);
      EXPECT_EQ(out.ne1, lg == model::Logits::ALL ? 13 : 1);
    }
  }
}

TEST(Graph, NamesAndWeights) {
  auto m = model::Model::load(test::shared_path("reference/models/synth/synth-qwen2-q4_k_m.gguf"));
  Graph g = m->build_graph(model::UbatchSpec{4, 0, 16, model::Logits::LAST});
  std::set<std::string> names;
  for (const Node& n : g.nodes) {
    EXPECT_FALSE(n.name.empty());
    EXPECT_TRUE(names.insert(n.name).second) << "duplicate name " << n.name;
    EXPECT_STRNE(op_name(n.op), "unknown");
  }
  for (const char* want : {"inp_embd", "blk.0.attn_norm", "blk.0.attn_q", "blk.0.attn_q_b", "blk.1.Kcur",
                           "blk.1.kqv_out", "blk.1.ffn_out", "blk.1.l_out", "result_norm", "result_output"}) {
    EXPECT_TRUE(names.count(want)) << want;
  }
  auto w = g.weights();
  // qwen2: tied output → token_embd read twice, listed once. 2 layers × 12 tensors + embd + norm.
  EXPECT_EQ(w.size(), 2u * 12u + 2u);
  EXPECT_EQ(w.front()->name, "token_embd.weight");
  EXPECT_TRUE(m->weights().tied_output);
}

// Views (Op::VIEW): a view gets its source's offset and allocates nothing; reads of a view keep
// the source live, so no other output overlaps a source while one of its views is still read.
// Checked on qwen3's graph (per-head q/k RMSNorm through views) and on a hand-made chain, in both
// planner modes.
void check_views(const Graph& g, const Plan& p) {
  const size_t n = g.nodes.size();
  std::vector<size_t> last(n);
  for (size_t i = 0; i < n; ++i) last[i] = i;
  for (size_t i = 0; i < n; ++i)
    for (int32_t s : g.nodes[i].src)
      if (s >= 0) {
        const size_t r = static_cast<size_t>(g.storage_of(s));
        last[r] = std::max(last[r], i);
      }
  if (g.output >= 0) last[static_cast<size_t>(g.storage_of(g.output))] = n;
  for (size_t i = 0; i < n; ++i) {
    if (g.nodes[i].op == Op::VIEW) {
      EXPECT_EQ(p.offset[i], p.offset[static_cast<size_t>(g.storage_of(static_cast<int32_t>(i)))]) << g.nodes[i].name;
      EXPECT_EQ(g.nodes[i].out_bytes(), g.nodes[static_cast<size_t>(g.nodes[i].src[0])].out_bytes());
      continue;
    }
    const uint64_t bi = g.nodes[i].out_bytes();
    if (bi == 0) continue;
    for (size_t j = i + 1; j < n; ++j) {
      const uint64_t bj = g.nodes[j].out_bytes();
      if (bj == 0 || g.nodes[j].op == Op::VIEW || j > last[i]) continue;
      const bool disjoint = p.offset[i] + bi <= p.offset[j] || p.offset[j] + bj <= p.offset[i];
      EXPECT_TRUE(disjoint) << g.nodes[i].name << " (live to " << last[i] << ") and " << g.nodes[j].name;
    }
  }
}

TEST(Planner, Views) {
  auto m = model::Model::load(test::shared_path("reference/models/synth/synth-qwen3-q4_k_m.gguf"));
  for (int32_t nt : {1, 9}) {
    Graph g = m->build_graph(model::UbatchSpec{nt, 3, 64, model::Logits::LAST});
    int views = 0;
    for (const Node& nd : g.nodes) views += nd.op == Op::VIEW;
    EXPECT_EQ(views, 2 * 2 * m->hparams().n_layer);  // q and k, to heads and back, per layer
    check_views(g, plan_arena(g));
    check_views(g, plan_arena(g, 256, false));
  }
  // A chain: a → view → view → b(reads the last view), c allocated while the view is live.
  Graph g;
  Node a;
  a.op = Op::ADD;
  a.name = "a";
  a.ne0 = 8;
  a.ne1 = 6;
  const int32_t ia = g.add(a);
  const int32_t v1 = g.view(ia, 16, 3, "v1");
  const int32_t v2 = g.view(v1, 48, 1, "v2");
  Node c = a;
  c.name = std::string("c");  // (a GCC 12 -Wrestrict false positive on the const char* assign)
  c.src = {ia, ia, -1};
  const int32_t ic = g.add(c);
  Node b = a;
  b.name = "b";
  b.ne0 = 48;
  b.ne1 = 1;
  b.src = {v2, -1, -1};
  g.output = g.add(b);
  EXPECT_EQ(g.storage_of(v2), ia);
  EXPECT_EQ(g.storage_of(ic), ic);
  const Plan p = plan_arena(g);
  check_views(g, p);
  EXPECT_NE(p.offset[static_cast<size_t>(ic)], p.offset[static_cast<size_t>(ia)]);
  EXPECT_THROW(g.view(ia, 7, 7, "bad"), Error);
}

}  // namespace
}  // namespace rocky::graph
