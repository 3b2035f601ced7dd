// The GGUF name table (gguf/names.hpp): spellings as llama.cpp's, round trips of names and keys.
#include <gtest/gtest.h>

#include "gguf/names.hpp"

namespace rocky::gguf {
namespace {

TEST(Names, TensorNames) {
  EXPECT_EQ(tensor_name(Tensor::TOKEN_EMBD), "token_embd.weight");
  EXPECT_EQ(tensor_name(Tensor::ROPE_FREQS), "rope_freqs.weight");
  EXPECT_EQ(tensor_name(Tensor::ATTN_Q, 3, "bias"), "blk.3.attn_q.bias");
  EXPECT_EQ(tensor_name(Tensor::ATTN_K_NORM, 17), "blk.17.attn_k_norm.weight");
  for (int i = 0; i < static_cast<int>(Tensor::COUNT_); ++i) {
    const Tensor t = static_cast<Tensor>(i);
    const std::string n = tensor_name(t, 5, "weight");
    const auto p = parse_tensor_name(n);
    ASSERT_TRUE(p) << n;
    EXPECT_EQ(p->tensor, t) << n;
    EXPECT_EQ(p->layer, tensor_per_layer(t) ? 5 : -1) << n;
    EXPECT_EQ(p->suffix, "weight");
  }
  EXPECT_FALSE(parse_tensor_name("blk.0.attn_sinks.weight"));
  EXPECT_FALSE(parse_tensor_name("attn_q.weight"));  // per-layer base without a layer
  EXPECT_FALSE(parse_tensor_name("blk.1.token_embd.weight"));
  EXPECT_EQ(layer_of("blk.12.ffn_up.weight"), 12);
  EXPECT_EQ(layer_of("blk.x.ffn_up.weight"), -1);
  EXPECT_EQ(strip_layer("blk.12.ffn_up"), "ffn_up");
  EXPECT_EQ(strip_layer("result_norm"), "result_norm");
}

TEST(Names, KeysAndArchs) {
  EXPECT_EQ(arch_key("qwen3", Key::HEAD_COUNT_KV), "qwen3.attention.head_count_kv");
  EXPECT_EQ(arch_key("llama", Key::RMS_EPS), "llama.attention.layer_norm_rms_epsilon");
  EXPECT_EQ(arch_key("gemma3", Key::ROPE_FREQ_BASE_SWA), "gemma3.rope.freq_base_swa");
  for (int i = 0; i < static_cast<int>(Key::COUNT_); ++i) {
    const Key k = static_cast<Key>(i);
    EXPECT_EQ(parse_key_suffix(key_suffix(k)), k) << key_suffix(k);
  }
  EXPECT_FALSE(parse_key_suffix("attention.head_count_q"));
  for (Arch a : all_archs()) EXPECT_EQ(parse_arch(arch_name(a)), a);
  EXPECT_EQ(parse_arch("gemma3"), Arch::GEMMA3);
  EXPECT_EQ(parse_arch("qwen35"), Arch::QWEN35);
  EXPECT_FALSE(parse_arch("qwen35moe"));
  EXPECT_EQ(rope_type_of("qwen35"), "imrope");
  // qwen35's suffix-less per-layer tensor.
  const auto a = parse_tensor_name("blk.2.ssm_a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->tensor, Tensor::SSM_A);
  EXPECT_EQ(a->layer, 2);
  EXPECT_EQ(a->suffix, "");
  EXPECT_EQ(tensor_name(Tensor::SSM_A, 2, ""), "blk.2.ssm_a");
  EXPECT_EQ(rope_type_of("qwen3"), "neox");
  EXPECT_EQ(rope_type_of("llama"), "norm");
  EXPECT_EQ(rope_type_of("mamba"), "unknown");
}

}  // namespace
}  // namespace rocky::gguf
