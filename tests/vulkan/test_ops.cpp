// Every Vulkan op against a naive f64 reference on random data of awkward shapes (≥ 50 shapes
// per op; row counts and inner dimensions not multiples of any tile; token counts 1, 7, 33, 64,
// 65, 513), run through the real backend path (graph → recorder → one command buffer) with the
// validation layer and synchronization validation on: zero validation errors are asserted.
// NMSE ≤ 1e-6 for f32 math, ≤ 5e-4 with an f16 KV cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "vk_test_util.hpp"

namespace rocky::test {
namespace {

using graph::Graph;
using graph::Node;
using graph::Op;

constexpr int k_token_counts[] = {1, 7, 33, 64, 65, 513};

class VulkanOps : public ::testing::Test {
 protected:
  void TearDown() override {
    for (auto& [key, be] : shared_backends()) {
      EXPECT_EQ(be->instance().error_count(), 0u) << "validation errors (kv_f16=" << std::get<0>(key) << ")";
      be->release_weights();
    }
  }
};

std::vector<int32_t> random_tokens(std::mt19937& rng, int n, int64_t rows) {
  std::uniform_int_distribution<int64_t> d(0, rows - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(d(rng));
  return t;
}

int64_t random_k(std::mt19937& rng, DType t, int64_t max_blocks) {
  const int64_t be = dtype_info(t).block_elems;
  if (be == 1) return std::uniform_int_distribution<int64_t>(1, 300)(rng) | 1;  // odd: no tile multiple
  return be * std::uniform_int_distribution<int64_t>(1, max_blocks)(rng);
}

const DType k_all_types[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                             DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

TEST_F(VulkanOps, GetRowsEveryType) {
  auto& be = shared_backend();
  std::mt19937 rng(1);
  int shapes = 0;
  for (DType t : k_all_types) {
    for (int rep = 0; rep < 4; ++rep, ++shapes) {
      const int64_t k = random_k(rng, t, dtype_info(t).block_elems == 256 ? 3 : 9);
      const int64_t rows = std::uniform_int_distribution<int64_t>(3, 97)(rng);
      const int n = k_token_counts[(shapes + rep) % 6];
      auto w = make_weight(t, k, rows, rng, "emb");
      Graph g;
      g.n_tokens = n;
      g.output = g.add(get_rows_node(*w, n, "inp_embd"));
      auto tok = random_tokens(rng, n, rows);
      const gguf::TensorInfo* ws[] = {&w->info};
      be.load_weights(ws);
      auto plan = own_plan(g);
      std::vector<float> out(static_cast<size_t>(k * n));
      be.compute(g, plan, tok, out);
      std::vector<double> ref;
      for (int j = 0; j < n; ++j)
        for (int64_t i = 0; i < k; ++i) ref.push_back(w->at(tok[static_cast<size_t>(j)], i));
      EXPECT_LE(nmse(out, ref), 1e-12) << dtype_name(t) << " k=" << k << " rows=" << rows << " n=" << n;
      be.release_weights();
    }
  }
  EXPECT_GE(shapes, 50);
}

TEST_F(VulkanOps, MatmulAndMatvec) {
  std::mt19937 rng(2);
  const DType types[] = {DType::F32,  DType::F16,  DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::BF16,
                         DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::Q5_K};
  int shapes = 0;
  for (int s = 0; s < 66; ++s, ++shapes) {
    const DType t = types[s % 13];
    const int n = k_token_counts[s % 6];
    // Alternate the lavapipe tile and the GPU tile (both are device-class data).
    auto& be = shared_backend(false, 0, s % 2 == 1);
    const bool big = n == 513;
    const int64_t k = random_k(rng, t, big ? 1 : 3);
    const int64_t m = std::uniform_int_distribution<int64_t>(1, big ? 70 : 150)(rng) | 1;
    auto w = make_weight(t, k, m, rng, "blk.0.ffn_up.weight");
    auto emb = make_weight(DType::F32, k, 37, rng, "token_embd.weight");
    Graph g;
    g.n_tokens = n;
    int32_t x = g.add(get_rows_node(*emb, n, "inp_embd"));
    Node mm;
    mm.op = Op::MATMUL;
    mm.name = "ffn_up";
    mm.ne0 = m;
    mm.ne1 = n;
    mm.src[0] = x;
    mm.weight = &w->info;
    g.output = g.add(mm);
    auto tok = random_tokens(rng, n, 37);
    const gguf::TensorInfo* ws[] = {&emb->info, &w->info};
    be.load_weights(ws);
    std::vector<float> out(static_cast<size_t>(m * n));
    be.compute(g, own_plan(g), tok, out);
    std::vector<double> ref(out.size());
    for (int j = 0; j < n; ++j)
      for (int64_t r = 0; r < m; ++r) {
        double acc = 0;
        for (int64_t i = 0; i < k; ++i) acc += w->at(r, i) * emb->at(tok[static_cast<size_t>(j)], i);
        ref[static_cast<size_t>(j * m + r)] = acc;
      }
    EXPECT_LE(nmse(out, ref), 1e-6) << dtype_name(t) << " M=" << m << " K=" << k << " N=" << n
                                    << " tile bm=" << be.tile().bm;
    be.release_weights();
  }
  EXPECT_GE(shapes, 50);
}

double silu(double x) { return x / (1 + std::exp(-x)); }

// rms_norm, add, bias_add, silu_mul, take_cols and rope in one graph per shape.
TEST_F(VulkanOps, NormAddBiasSiluTakeColsRope) {
  auto& be = shared_backend();
  std::mt19937 rng(3);
  for (int s = 0; s < 54; ++s) {
    const int n = k_token_counts[s % 6];
    const int32_t head_dim = 2 * std::uniform_int_distribution<int32_t>(1, n == 513 ? 20 : 40)(rng);
    const int32_t n_head = std::uniform_int_distribution<int32_t>(1, 5)(rng);
    const int64_t ne0 = int64_t(head_dim) * n_head;
    const int32_t n_rot = s % 3 == 0 ? 2 * std::uniform_int_distribution<int32_t>(1, head_dim / 2)(rng) : head_dim;
    const bool neox = s % 2 == 1;
    const int32_t n_past = std::uniform_int_distribution<int32_t>(0, 300)(rng);
    const float base = s % 4 == 0 ? 1e6f : 1e4f;
    const float fscale = s % 5 == 0 ? 0.5f : 1.0f;
    auto ea = make_weight(DType::F32, ne0, 41, rng, "a");
    auto eb = make_weight(DType::F32, ne0, 41, rng, "b");
    auto wn = make_weight(DType::F32, ne0, 1, rng, "norm");
    auto bias = make_weight(DType::F32, ne0, 1, rng, "bias");
    Graph g;
    g.n_tokens = n;
    g.n_past = n_past;
    int32_t a = g.add(get_rows_node(*ea, n, "a"));
    int32_t b = g.add(get_rows_node(*eb, n, "b"));
    auto node = [&](Op op, const char* name, int32_t s0, int32_t s1 = -1) {
      Node x;
      x.op = op;
      x.name = name;
      x.ne0 = ne0;
      x.ne1 = n;
      x.src = {s0, s1, -1};
      return x;
    };
    Node nn = node(Op::RMS_NORM, "norm", a);
    nn.weight = &wn->info;
    nn.eps = 1e-5f;
    int32_t i_norm = g.add(nn);
    int32_t i_add = g.add(node(Op::ADD, "add", a, b));
    Node nb = node(Op::ADD_BIAS, "bias", a);
    nb.weight = &bias->info;
    int32_t i_bias = g.add(nb);
    int32_t i_silu = g.add(node(Op::SILU_MUL, "silu", a, b));
    Node nr = node(Op::ROPE, "rope", a);
    nr.rope = {neox ? graph::RopeMode::NEOX : graph::RopeMode::NORMAL, head_dim, n_head, n_rot, base, fscale};
    int32_t i_rope = g.add(nr);
    const int64_t first = std::uniform_int_distribution<int64_t>(0, n - 1)(rng);
    const int64_t ncols = std::uniform_int_distribution<int64_t>(1, n - first)(rng);
    Node nt = node(Op::TAKE_COLS, "take", i_add);
    nt.first_col = first;
    nt.ne1 = ncols;
    g.output = g.add(nt);

    auto tok = random_tokens(rng, n, 41);
    const gguf::TensorInfo* ws[] = {&ea->info, &eb->info, &wn->info, &bias->info};
    be.load_weights(ws);
    auto plan = own_plan(g);
    std::vector<float> out(static_cast<size_t>(ne0 * ncols));
    be.compute(g, plan, tok, out);

    auto A = [&](int j, int64_t i) { return ea->at(tok[static_cast<size_t>(j)], i); };
    auto B = [&](int j, int64_t i) { return eb->at(tok[static_cast<size_t>(j)], i); };
    std::vector<double> r_norm, r_add, r_bias, r_silu, r_rope(static_cast<size_t>(ne0 * n)), r_take;
    for (int j = 0; j < n; ++j) {
      double ss = 0;
      for (int64_t i = 0; i < ne0; ++i) ss += A(j, i) * A(j, i);
      const double inv = 1.0 / std::sqrt(ss / double(ne0) + 1e-5);
      for (int64_t i = 0; i < ne0; ++i) {
        r_norm.push_back(A(j, i) * inv * wn->at(0, i));
        r_add.push_back(A(j, i) + B(j, i));
        r_bias.push_back(A(j, i) + bias->at(0, i));
        r_silu.push_back(silu(A(j, i)) * B(j, i));
      }
      const double pos = n_past + j;
      for (int32_t h = 0; h < n_head; ++h) {
        const int64_t base_i = int64_t(j) * ne0 + int64_t(h) * head_dim;
        for (int32_t d = 0; d < head_dim; ++d) r_rope[static_cast<size_t>(base_i + d)] = A(j, h * head_dim + d);
        for (int32_t p = 0; p < n_rot / 2; ++p) {
          const double theta = pos * fscale * std::pow(double(base), -2.0 * p / n_rot);
          const int32_t i0 = neox ? p : 2 * p, i1 = neox ? p + n_rot / 2 : 2 * p + 1;
          const double x0 = A(j, h * head_dim + i0), x1 = A(j, h * head_dim + i1);
          r_rope[static_cast<size_t>(base_i + i0)] = x0 * std::cos(theta) - x1 * std::sin(theta);
          r_rope[static_cast<size_t>(base_i + i1)] = x0 * std::sin(theta) + x1 * std::cos(theta);
        }
      }
    }
    // take_cols copies the GPU's f32 add output exactly.
    const std::vector<float> gpu_add = be.read_node(g, plan, i_add);
    for (int64_t j = first; j < first + ncols; ++j)
      for (int64_t i = 0; i < ne0; ++i) r_take.push_back(gpu_add[static_cast<size_t>(j * ne0 + i)]);
    const std::string what = "shape " + std::to_string(s) + " ne0=" + std::to_string(ne0) + " n=" + std::to_string(n);
    EXPECT_LE(nmse(be.read_node(g, plan, i_norm), r_norm), 1e-6) << "rms_norm " << what;
    EXPECT_LE(nmse(be.read_node(g, plan, i_add), r_add), 1e-12) << "add " << what;
    EXPECT_LE(nmse(be.read_node(g, plan, i_bias), r_bias), 1e-12) << "bias_add " << what;
    EXPECT_LE(nmse(be.read_node(g, plan, i_silu), r_silu), 1e-6) << "silu_mul " << what;
    EXPECT_LE(nmse(be.read_node(g, plan, i_rope), r_rope), 1e-6)
        << "rope " << what << " head_dim=" << head_dim << " n_rot=" << n_rot << " neox=" << neox
        << " n_past=" << n_past;
    EXPECT_LE(nmse(out, r_take), 0.0) << "take_cols " << what;
    be.release_weights();
  }
}

// Per-head RMSNorm through views ([hd·nh, N] → [hd, nh·N] → rms_norm → back) and rope with
// rope_freqs divisors (Llama 3.1), as qwen3 / llama 3 graphs use them; f64 references.
TEST_F(VulkanOps, ViewsPerHeadNormAndRopeFactors) {
  auto& be = shared_backend();
  std::mt19937 rng(11);
  for (int s = 0; s < 12; ++s) {
    const int n = k_token_counts[s % 6];
    const int32_t head_dim = 2 * std::uniform_int_distribution<int32_t>(2, 64)(rng);
    const int32_t n_head = std::uniform_int_distribution<int32_t>(1, 6)(rng);
    const int64_t ne0 = int64_t(head_dim) * n_head;
    const int32_t n_rot = s % 3 == 0 ? 2 * std::uniform_int_distribution<int32_t>(1, head_dim / 2)(rng) : head_dim;
    const bool neox = s % 2 == 1;
    const int32_t n_past = std::uniform_int_distribution<int32_t>(0, 500)(rng);
    const float base = 5e5f;
    auto ea = make_weight(DType::F32, ne0, 41, rng, "a");
    auto wn = make_weight(DType::F32, head_dim, 1, rng, "head norm");
    // Divisors in [1, 32], as Llama 3.1's (1 for high frequencies … 32 for low ones).
    std::vector<float> ff(static_cast<size_t>(n_rot / 2));
    for (auto& f : ff) f = std::uniform_real_distribution<float>(1.0f, 32.0f)(rng);
    HostWeight fw;
    fw.info.name = "rope_freqs.weight";
    fw.info.type = DType::F32;
    fw.info.n_dims = 1;
    fw.info.ne = {ff.size(), 1, 1, 1};
    fw.info.n_elements = ff.size();
    fw.info.n_bytes = ff.size() * 4;
    fw.info.data = reinterpret_cast<const uint8_t*>(ff.data());
    Graph g;
    g.n_tokens = n;
    g.n_past = n_past;
    const int32_t a = g.add(get_rows_node(*ea, n, "a"));
    auto view = [&](int32_t src, int64_t v0, int64_t v1, const char* name) {  // as Graph::view builds it
      Node v;
      v.op = Op::VIEW;
      v.name = name;
      v.ne0 = v0;
      v.ne1 = v1;
      v.src = {src, -1, -1};
      return g.add(v);
    };
    const int32_t heads = view(a, head_dim, int64_t(n_head) * n, "a_heads");
    Node nn;
    nn.op = Op::RMS_NORM;
    nn.name = "head_norm";
    nn.ne0 = head_dim;
    nn.ne1 = int64_t(n_head) * n;
    nn.src = {heads, -1, -1};
    nn.weight = &wn->info;
    nn.eps = 1e-6f;
    const int32_t normed = g.add(nn);
    const int32_t cols = view(normed, ne0, n, "normed_cols");
    Node nr;
    nr.op = Op::ROPE;
    nr.name = "rope";
    nr.ne0 = ne0;
    nr.ne1 = n;
    nr.src = {cols, -1, -1};
    nr.rope = {neox ? graph::RopeMode::NEOX : graph::RopeMode::NORMAL, head_dim, n_head, n_rot, base, 1.0f};
    nr.weight = &fw.info;
    g.output = g.add(nr);
    auto tok = random_tokens(rng, n, 41);
    const gguf::TensorInfo* ws[] = {&ea->info, &wn->info, &fw.info};
    be.load_weights(ws);
    auto plan = own_plan(g);  // every node its own region; a view shares its source's (planner.hpp)
    plan.offset[size_t(heads)] = plan.offset[size_t(a)];
    plan.offset[size_t(cols)] = plan.offset[size_t(normed)];
    std::vector<float> out(static_cast<size_t>(ne0 * n));
    be.compute(g, plan, tok, out);
    std::vector<double> r_norm(static_cast<size_t>(ne0 * n)), r_rope(r_norm.size());
    for (int j = 0; j < n; ++j) {
      for (int32_t h = 0; h < n_head; ++h) {
        const int64_t b0 = int64_t(j) * ne0 + int64_t(h) * head_dim;
        double ss = 0;
        for (int32_t d = 0; d < head_dim; ++d) ss += std::pow(ea->at(tok[size_t(j)], h * head_dim + d), 2);
        const double inv = 1.0 / std::sqrt(ss / head_dim + 1e-6);
        for (int32_t d = 0; d < head_dim; ++d)
          r_norm[size_t(b0 + d)] = ea->at(tok[size_t(j)], h * head_dim + d) * inv * wn->at(0, d);
        for (int32_t d = 0; d < head_dim; ++d) r_rope[size_t(b0 + d)] = r_norm[size_t(b0 + d)];
        for (int32_t p = 0; p < n_rot / 2; ++p) {
          const double theta = double(n_past + j) * std::pow(double(base), -2.0 * p / n_rot) / ff[size_t(p)];
          const int32_t i0 = neox ? p : 2 * p, i1 = neox ? p + n_rot / 2 : 2 * p + 1;
          const double x0 = r_norm[size_t(b0 + i0)], x1 = r_norm[size_t(b0 + i1)];
          r_rope[size_t(b0 + i0)] = x0 * std::cos(theta) - x1 * std::sin(theta);
          r_rope[size_t(b0 + i1)] = x0 * std::sin(theta) + x1 * std::cos(theta);
        }
      }
    }
    const std::string what = "shape " + std::to_string(s) + " head_dim=" + std::to_string(head_dim) +
                             " n_head=" + std::to_string(n_head) + " n=" + std::to_string(n);
    EXPECT_LE(nmse(be.read_node(g, plan, cols), r_norm), 1e-6) << "per-head rms_norm " << what;
    EXPECT_LE(nmse(out, r_rope), 1e-6) << "rope with factors " << what << " n_past=" << n_past;
    be.release_weights();
  }
}

// KV_STORE + ATTENTION over two ubatches (the second sees the first's cache), f32 or f16 cache.
void attention_shapes(bool kv_f16, int n_shapes, uint32_t seed, double tol) {
  auto& be = shared_backend(kv_f16);
  std::mt19937 rng(seed);
  const int32_t head_dims[] = {16, 32, 64, 50, 80, 128, 6};
  for (int s = 0; s < n_shapes; ++s) {
    const int n2 = k_token_counts[s % 6];
    const int n1 = s % 3 == 0 ? 0 : std::uniform_int_distribution<int>(1, 40)(rng);
    const int32_t hd = head_dims[s % 7];
    const int32_t n_kv = std::uniform_int_distribution<int32_t>(1, n2 == 513 ? 1 : 3)(rng);
    const int32_t group = std::uniform_int_distribution<int32_t>(1, n2 == 513 ? 2 : 3)(rng);
    const int32_t n_head = n_kv * group;
    const int32_t n_ctx = n1 + n2 + std::uniform_int_distribution<int32_t>(0, 9)(rng);
    const int64_t vocab = 53;
    auto eq = make_weight(DType::F32, int64_t(hd) * n_head, vocab, rng, "q");
    auto ek = make_weight(DType::F32, int64_t(hd) * n_kv, vocab, rng, "k");
    auto ev = make_weight(DType::F32, int64_t(hd) * n_kv, vocab, rng, "v");
    const gguf::TensorInfo* ws[] = {&eq->info, &ek->info, &ev->info};
    be.load_weights(ws);
    be.init_kv({1, hd * n_kv, n_ctx});
    const float scale = 1.0f / std::sqrt(float(hd));
    auto all_tok = random_tokens(rng, n1 + n2, vocab);

    std::vector<float> out;
    for (int ub = (n1 == 0 ? 1 : 0); ub < 2; ++ub) {
      const int n = ub == 0 ? n1 : n2;
      Graph g;
      g.n_tokens = n;
      g.n_past = ub == 0 ? 0 : n1;
      g.kv = {1, hd * n_kv, n_ctx};
      int32_t q = g.add(get_rows_node(*eq, n, "q"));
      int32_t k = g.add(get_rows_node(*ek, n, "k"));
      int32_t v = g.add(get_rows_node(*ev, n, "v"));
      g.output = add_kv_store_attention(g, q, k, v, hd, n_head, n_kv, scale);
      std::vector<int32_t> tok(all_tok.begin() + g.n_past, all_tok.begin() + g.n_past + n);
      if (ub == 0) {  // an early prefill ubatch: no logits wanted, only the KV cache filled
        g.output = -1;
        be.compute(g, own_plan(g), tok, {});
        continue;
      }
      out.assign(static_cast<size_t>(int64_t(hd) * n_head * n), 0.0f);
      be.compute(g, own_plan(g), tok, out);
    }
    // Reference over all n1 + n2 positions; check the second ubatch's tokens.
    std::vector<double> ref;
    for (int j = 0; j < n2; ++j) {
      const int pos = n1 + j;
      const int32_t tq = all_tok[static_cast<size_t>(pos)];
      for (int32_t h = 0; h < n_head; ++h) {
        const int32_t kvh = h / group;
        std::vector<double> sc(static_cast<size_t>(pos + 1));
        double mx = -1e300;
        for (int p = 0; p <= pos; ++p) {
          double d = 0;
          for (int32_t i = 0; i < hd; ++i)
            d += eq->at(tq, h * hd + i) * ek->at(all_tok[static_cast<size_t>(p)], kvh * hd + i);
          sc[static_cast<size_t>(p)] = d * scale;
          mx = std::max(mx, d * scale);
        }
        double sum = 0;
        for (auto& x : sc) sum += (x = std::exp(x - mx));
        for (int32_t i = 0; i < hd; ++i) {
          double o = 0;
          for (int p = 0; p <= pos; ++p)
            o += sc[static_cast<size_t>(p)] * ev->at(all_tok[static_cast<size_t>(p)], kvh * hd + i);
          ref.push_back(o / sum);
        }
      }
    }
    EXPECT_LE(nmse(out, ref), tol) << "kv_f16=" << kv_f16 << " shape " << s << " hd=" << hd << " n_head=" << n_head
                                   << " n_kv=" << n_kv << " n1=" << n1 << " n2=" << n2;
    be.release_weights();
  }
}

TEST_F(VulkanOps, AttentionF32Kv) { attention_shapes(false, 50, 4, 1e-6); }
TEST_F(VulkanOps, AttentionF16Kv) { attention_shapes(true, 50, 5, 5e-4); }

}  // namespace
}  // namespace rocky::test
