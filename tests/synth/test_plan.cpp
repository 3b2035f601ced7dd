// Tensor plan and type rule of rocky synth / rocky quantize, against ../shared/anchors.md (the
// Qwen2.5-3B Q4_K_M tensor list) and llama.cpp's rule, computed independently here.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "gguf/gguf.hpp"
#include "synth/plan.hpp"
#include "synth/presets.hpp"

using namespace rocky;
using namespace rocky::synth;

namespace {

struct Totals {
  uint64_t params = 0, bytes = 0;
  std::map<DType, int> count;
};
Totals totals(const std::vector<PlannedTensor>& plan) {
  Totals t;
  for (const auto& x : plan) {
    t.params += x.n_elements();
    t.bytes += x.n_bytes();
    t.count[x.type]++;
  }
  return t;
}

}  // namespace

TEST(SynthPlan, Qwen25_3B_Q4KM_MatchesAnchors) {
  const Preset& p = find_preset("qwen2.5-3b");
  const auto plan = tensor_plan(p, p.n_layer, FileType::Q4_K_M);
  ASSERT_EQ(plan.size(), 434u);
  const Totals t = totals(plan);
  EXPECT_EQ(t.count.at(DType::Q6_K), 37);
  EXPECT_EQ(t.count.at(DType::Q4_K), 216);
  EXPECT_EQ(t.count.at(DType::F32), 181);
  EXPECT_EQ(t.count.size(), 3u);
  // 3.09 B parameters, ≈ 4.99 bits per weight (anchors.md).
  EXPECT_NEAR(t.params / 1e9, 3.09, 0.005) << t.params;
  const double bpw = 8.0 * static_cast<double>(t.bytes) / static_cast<double>(t.params);
  EXPECT_NEAR(bpw, 4.99, 0.01) << bpw;

  // The q6_K layers of attn_v / ffn_down listed in anchors.md: 0–3, 6, 9, …, 30, 31–35.
  const std::set<int> q6_layers = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 31, 32, 33, 34, 35};
  std::map<std::string, const PlannedTensor*> by_name;
  for (const auto& x : plan) by_name[x.name] = &x;
  ASSERT_EQ(by_name.size(), plan.size()) << "duplicate tensor names";
  const auto* emb = by_name.at("token_embd.weight");
  EXPECT_EQ(emb->type, DType::Q6_K);
  EXPECT_EQ(emb->ne[0], 2048u);
  EXPECT_EQ(emb->ne[1], 151936u);
  EXPECT_EQ(by_name.count("output.weight"), 0u);  // tied
  EXPECT_EQ(by_name.at("output_norm.weight")->type, DType::F32);
  for (int i = 0; i < 36; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const DType hi = q6_layers.count(i) ? DType::Q6_K : DType::Q4_K;
    EXPECT_EQ(by_name.at(b + "attn_v.weight")->type, hi) << i;
    EXPECT_EQ(by_name.at(b + "ffn_down.weight")->type, hi) << i;
    for (const char* n : {"attn_q.weight", "attn_k.weight", "attn_output.weight", "ffn_gate.weight", "ffn_up.weight"})
      EXPECT_EQ(by_name.at(b + n)->type, DType::Q4_K) << b << n;
    for (const char* n : {"attn_norm.weight", "ffn_norm.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias"}) {
      EXPECT_EQ(by_name.at(b + n)->type, DType::F32) << b << n;
      EXPECT_EQ(by_name.at(b + n)->n_dims, 1u) << b << n;
    }
    // Shapes (GGUF order): head dim 128, 2 KV heads → 256-wide K/V.
    const auto sh = [&](const char* n) {
      const auto* x = by_name.at(b + n);
      return std::make_pair(x->ne[0], x->ne[1]);
    };
    EXPECT_EQ(sh("attn_q.weight"), std::make_pair(uint64_t{2048}, uint64_t{2048}));
    EXPECT_EQ(sh("attn_k.weight"), std::make_pair(uint64_t{2048}, uint64_t{256}));
    EXPECT_EQ(sh("attn_v.weight"), std::make_pair(uint64_t{2048}, uint64_t{256}));
    EXPECT_EQ(sh("attn_output.weight"), std::make_pair(uint64_t{2048}, uint64_t{2048}));
    EXPECT_EQ(sh("ffn_gate.weight"), std::make_pair(uint64_t{2048}, uint64_t{11008}));
    EXPECT_EQ(sh("ffn_up.weight"), std::make_pair(uint64_t{2048}, uint64_t{11008}));
    EXPECT_EQ(sh("ffn_down.weight"), std::make_pair(uint64_t{11008}, uint64_t{2048}));
    EXPECT_EQ(sh("attn_k.bias").first, 256u);
  }
}

TEST(SynthPlan, PresetsHaveRealShapes) {
  const Preset& q15 = find_preset("Qwen2.5-1.5B");
  EXPECT_EQ(q15.head_dim(), 128u);
  EXPECT_EQ(q15.n_embd_kv(), 256u);
  const Preset& q7 = find_preset("qwen2.5-7b");
  EXPECT_FALSE(q7.tied);
  EXPECT_EQ(q7.n_vocab, 152064u);
  const auto plan7 = tensor_plan(q7, q7.n_layer, FileType::Q4_K_M);
  EXPECT_EQ(plan7.size(), 2u + 12u * 28u + 1u);
  EXPECT_EQ(plan7.back().name, "output.weight");
  EXPECT_EQ(plan7.back().type, DType::Q6_K);
  EXPECT_EQ(plan7.front().type, DType::Q4_K);  // token_embd is not the LM head when untied
  EXPECT_NEAR(static_cast<double>(totals(plan7).params) / 1e9, 7.62, 0.01);
  const Preset& tl = find_preset("tinyllama-1.1b");
  EXPECT_EQ(tl.arch, Arch::LLAMA);
  const auto plantl = tensor_plan(tl, tl.n_layer, FileType::F16);
  EXPECT_EQ(plantl.size(), 2u + 9u * 22u + 1u);  // no biases
  EXPECT_NEAR(static_cast<double>(totals(plantl).params) / 1e9, 1.100, 0.001);
  EXPECT_NEAR(static_cast<double>(totals(tensor_plan(q15, 28, FileType::F32)).params) / 1e9, 1.544, 0.001);
  EXPECT_THROW(find_preset("qwen9"), Error);
}

// presets: qwen3 (head_dim 128 · n_head ≠ n_embd, q/k norms, no biases), Llama 3.2 (tied,
// rope_freqs [head_dim/2]), Qwen2.5-0.5B (896-wide rows: Q4_K_M fallbacks). Parameter counts as
// published (Qwen3-1.7B 1.72 B, Qwen3-4B 4.02 B, Llama-3.2-1B 1.24 B, -3B 3.21 B, Qwen2.5-0.5B 0.494 B).
TEST(SynthPlan, N6PresetsHaveRealShapes) {
  struct Want {
    const char* name;
    double params_b;
  };
  for (const Want& w :
       {Want{"qwen3-1.7b", 1.721}, Want{"qwen3-4b", 4.022}, Want{"llama-3.2-1b", 1.236}, Want{"llama-3.2-3b", 3.213},
        Want{"qwen2.5-0.5b", 0.494}, Want{"gemma-3-1b", 1.000}, Want{"gemma-3-4b", 3.880}}) {
    SCOPED_TRACE(w.name);
    const Preset& p = find_preset(w.name);
    const auto plan = tensor_plan(p, p.n_layer, FileType::Q4_K_M);
    EXPECT_NEAR(static_cast<double>(totals(plan).params) / 1e9, w.params_b, 0.002);
    EXPECT_TRUE(p.tied);
    for (const auto& t : plan) EXPECT_NE(t.name, "output.weight");
  }
  const Preset& q4 = find_preset("qwen3-4b");
  EXPECT_EQ(q4.arch, Arch::QWEN3);
  EXPECT_EQ(q4.head_dim(), 128u);
  EXPECT_EQ(q4.n_embd_q(), 4096u);
  const auto plan = tensor_plan(q4, 2, FileType::Q4_K_M);
  std::map<std::string, PlannedTensor> by;
  for (const auto& t : plan) by[t.name] = t;
  EXPECT_EQ(by.at("blk.1.attn_q.weight").ne[0], 2560u);
  EXPECT_EQ(by.at("blk.1.attn_q.weight").ne[1], 4096u);
  EXPECT_EQ(by.at("blk.1.attn_output.weight").ne[0], 4096u);
  EXPECT_EQ(by.at("blk.1.attn_output.weight").ne[1], 2560u);
  EXPECT_EQ(by.at("blk.1.attn_q_norm.weight").ne[0], 128u);
  EXPECT_EQ(by.at("blk.0.attn_k_norm.weight").type, DType::F32);
  EXPECT_EQ(by.count("blk.0.attn_q.bias"), 0u);
  const Preset& l1 = find_preset("llama-3.2-1b");
  EXPECT_EQ(l1.vocab, VocabKind::BPE_LLAMA3);
  const auto pl = tensor_plan(l1, 2, FileType::Q4_K_M);
  ASSERT_EQ(pl[1].name, "rope_freqs.weight");
  EXPECT_EQ(pl[1].ne[0], 32u);
  EXPECT_EQ(pl[1].type, DType::F32);
  EXPECT_EQ(pl[0].type, DType::Q6_K);  // the tied LM head
  const auto p05 = tensor_plan(find_preset("qwen2.5-0.5b"), 2, FileType::Q4_K_M);
  EXPECT_EQ(p05[0].type, DType::Q8_0);  // tied LM head: q6_K → q8_0 (896 % 256 ≠ 0)
  EXPECT_EQ(p05[2].name, "blk.0.attn_q.weight");
  EXPECT_EQ(p05[2].type, DType::Q5_0);  // q4_K → q5_0
  // Gemma 3: head_dim 256, q/k norms, post-attention / post-FFN norms, sliding window, Gemma's SPM.
  const Preset& g1 = find_preset("gemma-3-1b");
  EXPECT_EQ(g1.arch, Arch::GEMMA3);
  EXPECT_EQ(g1.head_dim(), 256u);
  EXPECT_EQ(g1.vocab, VocabKind::SPM_GEMMA3);
  EXPECT_EQ(g1.sliding_window, 512u);
  EXPECT_EQ(find_preset("gemma-3-4b").sliding_window, 1024u);
  EXPECT_EQ(find_preset("gemma-3-4b").rope_linear, 8.0f);
  std::map<std::string, PlannedTensor> gb;
  for (const auto& t : tensor_plan(g1, 2, FileType::Q4_K_M)) gb[t.name] = t;
  EXPECT_EQ(gb.at("blk.1.post_attention_norm.weight").ne[0], 1152u);
  EXPECT_EQ(gb.at("blk.1.post_ffw_norm.weight").type, DType::F32);
  EXPECT_EQ(gb.at("blk.0.attn_q_norm.weight").ne[0], 256u);
  EXPECT_EQ(gb.at("blk.0.attn_q.weight").ne[1], 1024u);
  EXPECT_EQ(gb.at("blk.0.attn_q.weight").type, DType::Q5_0);  // 1152-wide rows: q4_K → q5_0
  EXPECT_EQ(gb.at("token_embd.weight").type, DType::Q8_0);    // tied head: q6_K → q8_0
}

// llama.cpp's use_more_bits written out for n = 36 from anchors.md, and checked for other n
// against a brute-force restatement of the formula.
TEST(SynthPlan, UseMoreBits) {
  for (int64_t n = 1; n <= 80; ++n) {
    int count = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t a = n / 8, b = 7 * n / 8;
      const bool want = i < a || i >= b || ((i - a) % 3 == 2);
      EXPECT_EQ(use_more_bits(i, n), want) << i << "/" << n;
      count += want;
    }
    EXPECT_GE(count, 1);
  }
  EXPECT_EQ(layer_of("blk.17.attn_v.weight"), 17);
  EXPECT_EQ(layer_of("blk.x.attn_v.weight"), -1);
  EXPECT_EQ(layer_of("token_embd.weight"), -1);
}

TEST(SynthPlan, TypeRuleAndFallbacks) {
  // 1-D tensors and non-weights stay f32 whatever the file type.
  for (FileType ft : {FileType::Q8_0, FileType::Q6_K, FileType::Q4_K_M, FileType::F16}) {
    EXPECT_EQ(tensor_type(ft, "blk.0.attn_norm.weight", 1, 2048, 4, false), DType::F32);
    EXPECT_EQ(tensor_type(ft, "blk.0.attn_q.bias", 1, 2048, 4, false), DType::F32);
  }
  EXPECT_EQ(tensor_type(FileType::Q8_0, "output.weight", 2, 2048, 4, true), DType::Q8_0);
  EXPECT_EQ(tensor_type(FileType::Q6_K, "blk.1.attn_q.weight", 2, 2048, 4, true), DType::Q6_K);
  EXPECT_EQ(tensor_type(FileType::Q6_K, "blk.1.ffn_down.weight", 2, 320, 4, true), DType::Q8_0);
  EXPECT_EQ(tensor_type(FileType::Q4_K_M, "blk.1.attn_q.weight", 2, 320, 4, true), DType::Q5_0);
  EXPECT_EQ(tensor_type(FileType::Q4_K_M, "blk.3.ffn_down.weight", 2, 320, 4, true), DType::Q8_0);
  EXPECT_EQ(tensor_type(FileType::Q4_K_M, "blk.0.ffn_down.weight", 2, 320, 4, true), DType::Q5_0);  // 0 of 4: q4_K
  EXPECT_EQ(tensor_type(FileType::Q4_K_M, "token_embd.weight", 2, 2048, 4, true), DType::Q4_K);
  EXPECT_EQ(tensor_type(FileType::Q4_K_M, "token_embd.weight", 2, 2048, 4, false), DType::Q6_K);
  EXPECT_EQ(tensor_type(FileType::F32, "token_embd.weight", 2, 2048, 4, false), DType::F32);
  EXPECT_EQ(tensor_type(FileType::BF16, "token_embd.weight", 2, 2048, 4, false), DType::BF16);
  EXPECT_THROW(tensor_type(FileType::Q8_0, "x.weight", 2, 100, 4, false), Error);
  EXPECT_EQ(parse_file_type("Q4_K_M"), FileType::Q4_K_M);
  EXPECT_EQ(parse_file_type("q6_k"), FileType::Q6_K);
  EXPECT_THROW(parse_file_type("q4_0"), Error);
  EXPECT_EQ(llama_ftype(FileType::Q8_0), 7u);
  EXPECT_EQ(llama_ftype(FileType::Q6_K), 18u);
  EXPECT_EQ(llama_ftype(FileType::Q4_K_M), 15u);
  // Q5_K_M: Q4_K_M's mix with q5_K as the base type; q5_K → q5_1 and q6_K → q8_0 for rows
  // that are not multiples of 256 (llama.cpp's llama_tensor_get_type).
  EXPECT_EQ(parse_file_type("Q5_K_M"), FileType::Q5_K_M);
  EXPECT_EQ(llama_ftype(FileType::Q5_K_M), 17u);
  EXPECT_EQ(file_type_name(FileType::Q5_K_M), "Q5_K_M");
  EXPECT_EQ(tensor_type(FileType::Q5_K_M, "blk.1.attn_q.weight", 2, 2048, 4, true), DType::Q5_K);
  EXPECT_EQ(tensor_type(FileType::Q5_K_M, "blk.1.attn_q.weight", 2, 320, 4, true), DType::Q5_1);
  EXPECT_EQ(tensor_type(FileType::Q5_K_M, "blk.3.ffn_down.weight", 2, 2048, 4, true), DType::Q6_K);
  EXPECT_EQ(tensor_type(FileType::Q5_K_M, "blk.3.ffn_down.weight", 2, 320, 4, true), DType::Q8_0);
  EXPECT_EQ(tensor_type(FileType::Q5_K_M, "blk.0.attn_v.weight", 2, 2048, 4, true), DType::Q5_K);  // 0 of 4
  EXPECT_EQ(tensor_type(FileType::Q5_K_M, "output.weight", 2, 2048, 4, true), DType::Q6_K);
  EXPECT_EQ(tensor_type(FileType::Q5_K_M, "token_embd.weight", 2, 2048, 4, true), DType::Q5_K);
  EXPECT_EQ(tensor_type(FileType::Q5_K_M, "token_embd.weight", 2, 2048, 4, false), DType::Q6_K);
  EXPECT_EQ(tensor_type(FileType::Q5_K_M, "blk.0.attn_norm.weight", 1, 2048, 4, false), DType::F32);
}

// The reference file synth-llama-q5_k_m (llama-quantize … Q5_K_M, 2 layers, untied) has q5_K 13,
// q6_K 3 (output, blk.1.attn_v, blk.1.ffn_down): the same rule on its tensor list.
TEST(SynthPlan, Q5KMMatchesLlamaQuantizeOnTheReferenceFile) {
  const auto f = gguf::GgufFile::open(rocky::test::shared_path("reference/models/synth/synth-llama-q5_k_m.gguf"));
  int n = 0;
  for (const auto& t : f.tensors()) {
    EXPECT_EQ(tensor_type(FileType::Q5_K_M, t.name, t.n_dims, t.ne[0], 2, f.find_tensor("output.weight") != nullptr),
              t.type)
        << t.name;
    ++n;
  }
  EXPECT_EQ(n, 21);
}

// qwen35: llama-quantize's Q4_K_M types on the reference file (attn_qkv counted with attn_v,
// ssm_conv1d kept f32, the 1-D ssm_a / ssm_dt.bias / norms f32), and the presets' real shapes.
TEST(SynthPlan, Qwen35TypesMatchLlamaQuantizeAndPresetShapes) {
  const auto f = gguf::GgufFile::open(rocky::test::shared_path("reference/models/synth/synth-qwen35-q4_k_m.gguf"));
  int n = 0;
  for (const auto& t : f.tensors()) {
    EXPECT_EQ(tensor_type(FileType::Q4_K_M, t.name, t.n_dims, t.ne[0], 8, false), t.type) << t.name;
    ++n;
  }
  EXPECT_EQ(n, 108);
  const Preset& p = find_preset("qwen3.5-4b");
  EXPECT_EQ(p.arch, Arch::QWEN35);
  EXPECT_EQ(p.n_vocab, 248320u);
  const auto plan = tensor_plan(p, 8, FileType::Q4_K_M);
  std::map<std::string, PlannedTensor> by;
  for (const auto& t : plan) by[t.name] = t;
  // Layers 0–2, 4–6 recurrent; 3 and 7 gated full attention.
  EXPECT_EQ(by.at("blk.0.attn_qkv.weight").ne[1], 2u * 16 * 128 + 32 * 128);
  EXPECT_EQ(by.at("blk.0.attn_gate.weight").ne[1], 32u * 128);
  EXPECT_EQ(by.at("blk.0.ssm_conv1d.weight").ne[0], 4u);
  EXPECT_EQ(by.at("blk.0.ssm_conv1d.weight").type, DType::F32);
  EXPECT_EQ(by.at("blk.0.ssm_a").ne[0], 32u);
  EXPECT_EQ(by.at("blk.2.ssm_out.weight").ne[0], 32u * 128);
  EXPECT_EQ(by.count("blk.0.attn_q.weight"), 0u);
  EXPECT_EQ(by.at("blk.3.attn_q.weight").ne[1], 2u * 16 * 256);  // query | gate per head
  EXPECT_EQ(by.at("blk.3.attn_k.weight").ne[1], 4u * 256);
  EXPECT_EQ(by.at("blk.3.attn_output.weight").ne[0], 16u * 256);
  EXPECT_EQ(by.count("blk.3.attn_qkv.weight"), 0u);
  EXPECT_EQ(by.at("blk.7.post_attention_norm.weight").ne[0], 2560u);
  EXPECT_EQ(by.count("blk.7.ffn_norm.weight"), 0u);
  EXPECT_EQ(find_preset("qwen3.5-0.8b").ssm_v_heads, 16u);
  EXPECT_EQ(find_preset("qwen3.5-0.8b").n_embd, 1024u);
  EXPECT_EQ(find_preset("qwen3.5-2b").n_embd, 2048u);
}
