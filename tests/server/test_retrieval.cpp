// /infill's prompt layout, embedding pooling and normalisation, and the rerank head, without HTTP:
// the FIM layout against literal id sequences written from llama-server's format_infill, pooling
// against values computed by hand on a fixed hidden-state matrix, the hidden states against the
// LM head applied by hand (logits = token_embd · h for a tied model) and CPU against Vulkan, and
// the rerank score against cls.output.weight applied by hand. Models: rocky synth's
// qwen2.5-coder-test, qwen2-test, llama-test, qwen3-embedding-test and qwen3-reranker-test.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "common/shared.hpp"
#include "model/model.hpp"
#include "quant/quant.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/session.hpp"
#include "server/embedding.hpp"
#include "server/infill.hpp"
#include "synth/synth.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::server {
namespace {

namespace fs = std::filesystem;

// rocky synth --preset NAME (f32 weights: exact head arithmetic), made once per process.
std::string synth_model(const std::string& preset) {
  const std::string p = test::scratch_dir("retrieval-models") + "/" + preset + ".gguf";
  if (!fs::exists(p)) {
    fs::create_directories(fs::path(p).parent_path());
    synth::SynthOptions o;
    o.preset = preset;
    o.out = p + ".tmp";
    o.type = synth::FileType::F32;
    o.progress = false;
    synth::synth_model(o);
    fs::rename(o.out, p);
  }
  return p;
}

struct Loaded {
  std::unique_ptr<model::Model> m;
  std::optional<tok::Tokenizer> tok;
  explicit Loaded(const std::string& preset) : m(model::Model::load(synth_model(preset))) {
    tok.emplace(tok::Tokenizer::from_gguf(m->file()));
  }
};

std::vector<int32_t> cat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// The BPE test vocab of 1024: 1002 text tokens, then Qwen2.5's 22 added tokens in Qwen's order.
constexpr int32_t k_fim_pre = 1018, k_fim_mid = 1019, k_fim_suf = 1020, k_fim_pad = 1021, k_repo = 1022,
                  k_file_sep = 1023;

TEST(InfillTokens, FromKeysFromSpellingsOrMissing) {
  const Loaded coder("qwen2.5-coder-test");
  const FimTokens f = find_fim_tokens(coder.m->file(), coder.tok->vocab());
  EXPECT_EQ(coder.m->file().get_uint("tokenizer.ggml.fim_pre_token_id"), uint64_t(k_fim_pre));
  EXPECT_EQ(f.pre, k_fim_pre);
  EXPECT_EQ(f.suf, k_fim_suf);
  EXPECT_EQ(f.mid, k_fim_mid);
  EXPECT_EQ(f.pad, k_fim_pad);
  EXPECT_EQ(f.rep, k_repo);
  EXPECT_EQ(f.sep, k_file_sep);
  EXPECT_EQ(f.missing(), "");
  // qwen2-test writes no fim keys: the same tokens are found by their spelling.
  const Loaded plain("qwen2-test");
  EXPECT_FALSE(plain.m->file().get_uint("tokenizer.ggml.fim_pre_token_id"));
  const FimTokens g = find_fim_tokens(plain.m->file(), plain.tok->vocab());
  EXPECT_EQ(g.pre, k_fim_pre);
  EXPECT_EQ(g.sep, k_file_sep);
  // An SPM vocab without FIM tokens: each missing one named.
  const Loaded llama("llama-test");
  const FimTokens h = find_fim_tokens(llama.m->file(), llama.tok->vocab());
  EXPECT_EQ(h.missing(),
            "tokenizer.ggml.fim_pre_token_id, tokenizer.ggml.fim_suf_token_id, tokenizer.ggml.fim_mid_token_id");
}

TEST(InfillLayout, RepoLevelAsLlamaServer) {
  const Loaded coder("qwen2.5-coder-test");
  const tok::Tokenizer& t = *coder.tok;
  const FimTokens f = find_fim_tokens(coder.m->file(), t.vocab());
  auto T = [&](const std::string& s) { return t.tokenize(s, false, false); };
  InfillRequest r;
  r.input_prefix = "def add(a, b):\n    ";
  r.input_suffix = "\n\nprint(add(1, 2))\n";
  r.input_extra = {{"util.py", "def sub(a, b):\n    return a - b\n"}, {"tmp", "x = 1\n"}};
  const std::vector<int32_t> prompt = T("return");
  // [FIM_REP]myproject\n [FIM_SEP]util.py\n<chunk> [FIM_SEP]tmp\n<chunk> [FIM_SEP]filename\n
  // [FIM_PRE]prefix prompt [FIM_SUF]suffix [FIM_MID]   (no BOS: Qwen adds none)
  const std::vector<int32_t> want = cat({{k_repo},
                                         T("myproject\n"),
                                         {k_file_sep},
                                         T("util.py\n"),
                                         T(r.input_extra[0].text),
                                         {k_file_sep},
                                         T("tmp\n"),
                                         T(r.input_extra[1].text),
                                         {k_file_sep},
                                         T("filename\n"),
                                         {k_fim_pre},
                                         T(r.input_prefix),
                                         prompt,
                                         {k_fim_suf},
                                         T(r.input_suffix),
                                         {k_fim_mid}});
  EXPECT_EQ(format_infill(t, f, r, prompt, 2048, -1, 4096), want);

  // Limits: the prefix keeps its last 3/4·n_batch tokens, the suffix its first n_batch/4 − 2 −
  // |prompt|, the extra context its last n_ctx − n_batch − 2·n_predict tokens.
  InfillRequest big;
  for (int i = 0; i < 40; ++i) {
    big.input_prefix += fmt::format("a{} ", i);
    big.input_suffix += fmt::format("b{} ", i);
  }
  big.input_extra = {{"f.py", "c = 3\n"}};
  const std::vector<int32_t> P = T(big.input_prefix), S = T(big.input_suffix);
  ASSERT_GT(P.size(), 24u);
  ASSERT_GT(S.size(), 8u);
  const std::vector<int32_t> p2 = {5, 6};
  const std::vector<int32_t> extra =
      cat({{k_repo}, T("myproject\n"), {k_file_sep}, T("f.py\n"), T("c = 3\n"), {k_file_sep}, T("filename\n")});
  const int32_t n_batch = 32, n_predict = 4, n_ctx = n_batch + 2 * n_predict + 5;  // 5 extra tokens kept
  const std::vector<int32_t> want2 = cat({std::vector<int32_t>(extra.end() - 5, extra.end()),
                                          {k_fim_pre},
                                          std::vector<int32_t>(P.end() - 24, P.end()),
                                          p2,
                                          {k_fim_suf},
                                          std::vector<int32_t>(S.begin(), S.begin() + (32 / 4 - 2 - 2)),
                                          {k_fim_mid}});
  EXPECT_EQ(format_infill(t, f, big, p2, n_batch, n_predict, n_ctx), want2);

  // Without a sep token the chunks are joined by llama-server's snippet marker.
  FimTokens no_sep = f;
  no_sep.sep = -1;
  no_sep.rep = -1;
  InfillRequest one;
  one.input_extra = {{"f.py", "c"}};
  EXPECT_EQ(format_infill(t, no_sep, one, {}, 2048, -1, 4096),
            cat({T("\n\n--- snippet ---\n\n"), T("c"), {k_fim_pre, k_fim_suf, k_fim_mid}}));
}

TEST(Pooling, HandComputed) {
  // 3 tokens × 4 dims.
  const std::vector<float> h = {1, 2, 3, 4, /**/ -1, 0, 1, 2, /**/ 3, -2, 2, 0};
  auto one = [&](Pooling p) {
    auto v = pool(h, 4, p);
    EXPECT_EQ(v.size(), 1u);
    return v[0];
  };
  EXPECT_EQ(one(Pooling::mean), (std::vector<float>{1, 0, 2, 2}));
  EXPECT_EQ(one(Pooling::cls), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(one(Pooling::last), (std::vector<float>{3, -2, 2, 0}));
  EXPECT_EQ(one(Pooling::rank), (std::vector<float>{3, -2, 2, 0}));
  const auto none = pool(h, 4, Pooling::none);
  ASSERT_EQ(none.size(), 3u);
  EXPECT_EQ(none[1], (std::vector<float>{-1, 0, 1, 2}));

  std::vector<float> v = {3, -4, 0, 0};
  normalize(v, 2);  // |v| = 5
  EXPECT_EQ(v, (std::vector<float>{0.6f, -0.8f, 0, 0}));
  v = {3, -4, 0, 1};
  normalize(v, 1);  // taxicab 8
  EXPECT_EQ(v, (std::vector<float>{0.375f, -0.5f, 0, 0.125f}));
  v = {3, -4, 0, 1};
  normalize(v, 0);  // max-abs 4 → 32760
  EXPECT_EQ(v, (std::vector<float>{24570, -32760, 0, 8190}));
  v = {3, -4};
  normalize(v, -1);
  EXPECT_EQ(v, (std::vector<float>{3, -4}));
  v = {0, 0};
  normalize(v, 2);
  EXPECT_EQ(v, (std::vector<float>{0, 0}));
  EXPECT_EQ(base64_floats({1.0f, -2.0f, 0.5f}), "AACAPwAAAMAAAAA/");
  EXPECT_EQ(base64_floats({1.0f}), "AACAPw==");

  EXPECT_EQ(parse_pooling("last"), Pooling::last);
  EXPECT_FALSE(parse_pooling("max"));
}

std::vector<float> tensor_f32(const gguf::TensorInfo& t) {
  std::vector<float> out(t.n_elements);
  quant::dequantize_row(t.type, t.data, out.data(), static_cast<int64_t>(t.n_elements));
  return out;
}

// The hidden states are what the LM head reads: for a tied model the last token's logits equal
// token_embd · h_last, computed here on the host; CPU and Vulkan agree (cosine ≥ 0.999 per token).
TEST(HiddenStates, FeedTheLmHeadAndAgreeAcrossBackends) {
  const Loaded e("qwen3-embedding-test");
  EXPECT_EQ(gguf_pooling(e.m->file()), Pooling::last);
  const int64_t n_embd = e.m->hparams().n_embd, n_vocab = e.m->hparams().n_vocab;
  const std::vector<int32_t> ids = e.tok->tokenize("The quick brown fox jumps over the lazy dog.", true, true);
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<std::vector<float>> by_device;
  for (const char* dev : {"cpu", "vulkan"}) {
    runtime::BackendOptions bo;
    bo.device = dev;
    runtime::Session s(*e.m, runtime::make_backend(bo), runtime::SessionOptions{256, 512});
    const std::vector<float> h = s.hidden_states(ids);
    ASSERT_EQ(static_cast<int64_t>(h.size()), n * n_embd) << dev;
    EXPECT_EQ(s.n_past(), n);
    s.reset();
    const std::vector<float> logits = s.eval(ids);
    ASSERT_EQ(static_cast<int64_t>(logits.size()), n_vocab);
    const std::vector<float> embd = tensor_f32(*e.m->file().find_tensor("token_embd.weight"));
    double max_err = 0, max_abs = 0;
    for (int64_t v = 0; v < n_vocab; ++v) {
      double dot = 0;
      for (int64_t j = 0; j < n_embd; ++j)
        dot += double(embd[size_t(v * n_embd + j)]) * h[size_t((n - 1) * n_embd + j)];
      max_err = std::max(max_err, std::fabs(dot - logits[size_t(v)]));
      max_abs = std::max(max_abs, std::fabs(dot));
    }
    EXPECT_LT(max_err, 2e-2 * std::max(1.0, max_abs)) << dev;
    by_device.push_back(h);
  }
  for (int64_t i = 0; i < n; ++i) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t j = 0; j < n_embd; ++j) {
      const double a = by_device[0][size_t(i * n_embd + j)], b = by_device[1][size_t(i * n_embd + j)];
      ab += a * b;
      aa += a * a;
      bb += b * b;
    }
    EXPECT_GE(ab / std::sqrt(aa * bb), 0.999) << "token " << i;
  }
}

TEST(RankHead, ScoreIsTheHeadAppliedByHand) {
  const Loaded r("qwen3-reranker-test");
  EXPECT_EQ(gguf_pooling(r.m->file()), Pooling::rank);
  const int64_t n_embd = r.m->hparams().n_embd;
  const auto head = RankHead::load(r.m->file(), n_embd);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->n_out(), 1);
  const std::vector<float> w = tensor_f32(*r.m->file().find_tensor("cls.output.weight"));
  std::vector<float> x(static_cast<size_t>(n_embd));
  for (int64_t j = 0; j < n_embd; ++j) x[size_t(j)] = std::sin(0.37f * float(j));
  double want = 0;
  for (int64_t j = 0; j < n_embd; ++j) want += double(w[size_t(j)]) * x[size_t(j)];
  EXPECT_NEAR(head->score(x), want, 1e-4 * std::max(1.0, std::fabs(want)));
  // A model without the head is not a reranker.
  const Loaded e("qwen3-embedding-test");
  EXPECT_FALSE(RankHead::load(e.m->file(), n_embd));
}

}  // namespace
}  // namespace rocky::server
