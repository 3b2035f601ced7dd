// End-to-end: real GGUF models through the Vulkan backend against llama.cpp's CPU reference
// (../shared/reference/README.md: rel = max|Δlogit| / max|ref logit|). The llama graph here is a
// test-local stand-in built from graph.hpp nodes, until src/model's builders land on main.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/shared.hpp"
#include "gguf/gguf.hpp"
#include "vk_test_util.hpp"

namespace rocky::test {
namespace {

using graph::Graph;
using graph::Node;
using graph::Op;

struct Llama {
  const gguf::GgufFile* f = nullptr;
  int32_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_rot = 0, n_vocab = 0;
  float eps = 1e-5f, base = 10000;
  const gguf::TensorInfo* t(const std::string& name) const {
    const gguf::TensorInfo* x = f->find_tensor(name);
    if (!x) throw std::runtime_error("missing tensor " + name);
    return x;
  }
};

Llama load_llama(const gguf::GgufFile& f) {
  Llama m;
  m.f = &f;
  m.n_embd = static_cast<int32_t>(*f.get_uint("llama.embedding_length"));
  m.n_layer = static_cast<int32_t>(*f.get_uint("llama.block_count"));
  m.n_head = static_cast<int32_t>(*f.get_uint("llama.attention.head_count"));
  m.n_head_kv = static_cast<int32_t>(f.get_uint("llama.attention.head_count_kv").value_or(uint64_t(m.n_head)));
  m.n_rot = static_cast<int32_t>(f.get_uint("llama.rope.dimension_count").value_or(uint64_t(m.n_embd / m.n_head)));
  m.eps = static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon").value_or(1e-5));
  m.base = static_cast<float>(f.get_float("llama.rope.freq_base").value_or(10000.0));
  m.n_vocab = static_cast<int32_t>(m.t("token_embd.weight")->ne[1]);
  return m;
}

// One ubatch of n tokens at n_past; logits for every token (all = true) or the last only.
Graph build_llama(const Llama& m, int32_t n, int32_t n_past, int32_t n_ctx, bool all) {
  Graph g;
  g.n_tokens = n;
  g.n_past = n_past;
  const int32_t hd = m.n_embd / m.n_head;
  g.kv = {m.n_layer, hd * m.n_head_kv, n_ctx};
  auto node = [&](Op op, std::string name, int64_t ne0, int64_t ne1, int32_t s0 = -1, int32_t s1 = -1,
                  const gguf::TensorInfo* w = nullptr) {
    Node x;
    x.op = op;
    x.name = std::move(name);
    x.ne0 = ne0;
    x.ne1 = ne1;
    x.src = {s0, s1, -1};
    x.weight = w;
    return x;
  };
  int32_t cur = g.add(node(Op::GET_ROWS, "inp_embd", m.n_embd, n, -1, -1, m.t("token_embd.weight")));
  for (int32_t l = 0; l < m.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    Node nn = node(Op::RMS_NORM, b + "attn_norm", m.n_embd, n, cur, -1, m.t(b + "attn_norm.weight"));
    nn.eps = m.eps;
    int32_t norm = g.add(nn);
    int32_t q = g.add(node(Op::MATMUL, b + "Qcur", m.n_embd, n, norm, -1, m.t(b + "attn_q.weight")));
    int32_t k = g.add(node(Op::MATMUL, b + "Kcur", hd * m.n_head_kv, n, norm, -1, m.t(b + "attn_k.weight")));
    int32_t v = g.add(node(Op::MATMUL, b + "Vcur", hd * m.n_head_kv, n, norm, -1, m.t(b + "attn_v.weight")));
    Node rq = node(Op::ROPE, b + "Qrope", m.n_embd, n, q);
    rq.rope = {graph::RopeMode::NORMAL, hd, m.n_head, m.n_rot, m.base, 1.0f};
    int32_t qr = g.add(rq);
    Node rk = node(Op::ROPE, b + "Krope", hd * m.n_head_kv, n, k);
    rk.rope = {graph::RopeMode::NORMAL, hd, m.n_head_kv, m.n_rot, m.base, 1.0f};
    int32_t kr = g.add(rk);
    Node ks = node(Op::KV_STORE, b + "k_store", 0, 0, kr);
    ks.layer = l;
    int32_t iks = g.add(ks);
    Node vs = node(Op::KV_STORE, b + "v_store", 0, 0, v);
    vs.layer = l;
    vs.kv = 1;
    int32_t ivs = g.add(vs);
    Node at = node(Op::ATTENTION, b + "kqv_out", m.n_embd, n, qr, iks);
    at.src[2] = ivs;
    at.layer = l;
    at.attn = {hd, m.n_head, m.n_head_kv, 1.0f / std::sqrt(float(hd))};
    int32_t att = g.add(at);
    int32_t o = g.add(node(Op::MATMUL, b + "attn_out", m.n_embd, n, att, -1, m.t(b + "attn_output.weight")));
    int32_t res = g.add(node(Op::ADD, b + "ffn_inp", m.n_embd, n, o, cur));
    Node fn = node(Op::RMS_NORM, b + "ffn_norm", m.n_embd, n, res, -1, m.t(b + "ffn_norm.weight"));
    fn.eps = m.eps;
    int32_t fni = g.add(fn);
    const int64_t n_ff = static_cast<int64_t>(m.t(b + "ffn_up.weight")->ne[1]);
    int32_t gate = g.add(node(Op::MATMUL, b + "ffn_gate", n_ff, n, fni, -1, m.t(b + "ffn_gate.weight")));
    int32_t up = g.add(node(Op::MATMUL, b + "ffn_up", n_ff, n, fni, -1, m.t(b + "ffn_up.weight")));
    int32_t sm = g.add(node(Op::SILU_MUL, b + "ffn_swiglu", n_ff, n, gate, up));
    int32_t down = g.add(node(Op::MATMUL, b + "ffn_out", m.n_embd, n, sm, -1, m.t(b + "ffn_down.weight")));
    cur = g.add(node(Op::ADD, b + "l_out", m.n_embd, n, down, res));
  }
  if (!all) {
    Node tc = node(Op::TAKE_COLS, "inp_out_ids", m.n_embd, 1, cur);
    tc.first_col = n - 1;
    cur = g.add(tc);
  }
  const int64_t n_out = all ? n : 1;
  Node on = node(Op::RMS_NORM, "result_norm", m.n_embd, n_out, cur, -1, m.t("output_norm.weight"));
  on.eps = m.eps;
  int32_t outn = g.add(on);
  const gguf::TensorInfo* out_w = m.f->find_tensor("output.weight");
  g.output = g.add(node(Op::MATMUL, "result_output", m.n_vocab, n_out, outn, -1, out_w ? out_w : m.t("token_embd.weight")));
  return g;
}

std::vector<const gguf::TensorInfo*> all_weights(const Graph& g) {
  std::vector<const gguf::TensorInfo*> w;
  for (const auto& n : g.nodes)
    if (n.weight && std::find(w.begin(), w.end(), n.weight) == w.end()) w.push_back(n.weight);
  return w;
}

std::vector<float> read_f32(const std::string& path) {
  auto bytes = read_file_bytes(path);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

double rel_err(const float* got, const float* ref, size_t n) {
  double md = 0, mr = 0;
  for (size_t i = 0; i < n; ++i) {
    md = std::max(md, std::abs(double(got[i]) - ref[i]));
    mr = std::max(mr, std::abs(double(ref[i])));
  }
  return md / mr;
}

// stories260K, every prompt position, f32 and f16 KV cache; then greedy decode (mat-vec path).
TEST(VulkanModel, Stories260KMatchesLlamaCpp) {
  auto f = gguf::GgufFile::open(shared_path("reference/models/stories260K.gguf"));
  Llama m = load_llama(f);
  for (bool kv_f16 : {false, true}) {
    auto& be = shared_backend(kv_f16);
    for (const char* prompt : {"p1_short", "p2_paragraph"}) {
      const std::string dir = "reference/ref/stories260K__kvf32_faoff/";
      std::ifstream js(shared_path(dir + prompt + ".json"));
      auto j = nlohmann::json::parse(js);
      auto tokens = j["eval_tokens"].get<std::vector<int32_t>>();
      const int32_t n = static_cast<int32_t>(tokens.size()), n_ctx = n + 40;
      Graph g = build_llama(m, n, 0, n_ctx, true);
      auto w = all_weights(g);
      be.load_weights(w);
      be.init_kv(g.kv);
      std::vector<float> logits(size_t(m.n_vocab) * size_t(n));
      be.compute(g, own_plan(g), tokens, logits);
      auto ref = read_f32(shared_path(dir + prompt + ".cpu.all_logits.f32"));
      ASSERT_EQ(ref.size(), logits.size());
      const double rel = rel_err(logits.data(), ref.data(), ref.size());
      std::printf("stories260K %s kv_f16=%d: rel %.3g over %d positions\n", prompt, int(kv_f16), rel, n);
      EXPECT_LE(rel, kv_f16 ? 1e-2 : 1e-3) << prompt << " kv_f16=" << kv_f16;
      if (!kv_f16) {
        // Free-running greedy decode, one token per ubatch (N = 1: the mat-vec kernels).
        auto want = j["cpu"]["greedy_ids"].get<std::vector<int32_t>>();
        std::vector<int32_t> got;
        const float* last = logits.data() + size_t(n - 1) * size_t(m.n_vocab);
        int32_t next = int32_t(std::max_element(last, last + m.n_vocab) - last);
        std::vector<float> one(static_cast<size_t>(m.n_vocab));
        for (int32_t i = 0; i < 32 && n + i < n_ctx; ++i) {
          got.push_back(next);
          Graph gd = build_llama(m, 1, n + i, n_ctx, false);
          std::vector<int32_t> tk{next};
          be.compute(gd, own_plan(gd), tk, one);
          next = int32_t(std::max_element(one.begin(), one.end()) - one.begin());
        }
        EXPECT_EQ(got, want) << prompt;
      }
      be.release_weights();
      EXPECT_EQ(be.instance().error_count(), 0u);
    }
  }
}

// The quantized 2-layer synth model against the ideal (dequantized-f32) reference, with and
// without --max-binding smaller than its embedding (windowed get_rows and output matmul).
TEST(VulkanModel, SynthQ4KMWindowedEqualsUnwindowed) {
  auto f = gguf::GgufFile::open(shared_path("reference/models/synth/synth-llama-q4_k_m.gguf"));
  Llama m = load_llama(f);
  const std::string dir = "reference/ref/synth-llama-q4_k_m-dequant-f32__kvf32_faoff/";
  std::ifstream js(shared_path(dir + "p1_short.json"));
  auto tokens = nlohmann::json::parse(js)["eval_tokens"].get<std::vector<int32_t>>();
  const int32_t n = static_cast<int32_t>(tokens.size());
  Graph g = build_llama(m, n, 0, n + 8, false);
  const uint64_t emb_bytes = m.t("token_embd.weight")->n_bytes;
  std::vector<std::vector<float>> results;
  for (uint64_t mb : {uint64_t{0}, uint64_t{1} << 20}) {
    ASSERT_TRUE(mb == 0 || emb_bytes > 2 * mb);
    auto& be = shared_backend(false, mb);
    auto w = all_weights(g);
    be.load_weights(w);
    be.init_kv(g.kv);
    std::vector<float> logits(static_cast<size_t>(m.n_vocab));
    be.compute(g, own_plan(g), tokens, logits);
    results.push_back(logits);
    be.release_weights();
    EXPECT_EQ(be.instance().error_count(), 0u);
  }
  EXPECT_EQ(results[0], results[1]);
  auto ref = read_f32(shared_path(dir + "p1_short.cpu.last_logits.f32"));
  ASSERT_EQ(ref.size(), results[0].size());
  const double rel = rel_err(results[0].data(), ref.data(), ref.size());
  std::printf("synth-llama-q4_k_m p1_short vs dequant-f32 reference: rel %.3g\n", rel);
  EXPECT_LE(rel, 1e-3);
}

}  // namespace
}  // namespace rocky::test
