// Nothing that changes the math is ignored (Deliver 6): a tensor the graph does not read, or
// an `<arch>.*` metadata key rocky does not honour, makes loading fail with an error naming it —
// unless it is known to be harmless. Each case is a copy of a reference model (stories260K, llama;
// synth-qwen2, qwen2) with one key or tensor added, written with gguf::Writer.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/error.hpp"
#include "gguf/names.hpp"
#include "gguf/writer.hpp"
#include "model/arch/arch.hpp"
#include "model/harness.hpp"

namespace rocky {
namespace {

using namespace rocky::test;

// A copy of `model` with `edit` applied to the writer after the metadata and before the tensors,
// and `extra` tensors added after them.
struct Extra {
  std::string name;
  uint64_t ne0;
  float value;
};
std::string edited_copy(const std::string& model, const std::string& out_name,
                        const std::function<void(gguf::Writer&)>& edit, const std::vector<Extra>& extra = {}) {
  const auto f = gguf::GgufFile::open(model_path(model));
  gguf::Writer w;
  for (const auto& [key, value] : f.metadata()) w.set(key, value);
  edit(w);
  for (const auto& t : f.tensors()) {
    w.add_tensor(t.name, t.type, std::span<const uint64_t>(t.ne.data(), t.n_dims),
                 std::span<const uint8_t>(t.data, t.n_bytes));
  }
  for (const Extra& e : extra) {
    std::vector<uint8_t> bytes(e.ne0 * 4);
    for (uint64_t i = 0; i < e.ne0; ++i) std::memcpy(bytes.data() + i * 4, &e.value, 4);
    const uint64_t ne[1] = {e.ne0};
    w.add_tensor(e.name, DType::F32, ne, std::move(bytes));
  }
  const std::string path = scratch_dir("strict_load") + "/" + out_name;
  w.write(path);
  return path;
}

std::string load_error(const std::string& path) {
  try {
    model::Model::load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_refused(const std::string& path, const std::string& name) {
  const std::string msg = load_error(path);
  EXPECT_NE(msg.find("'" + name + "'"), std::string::npos) << "expected an error naming '" << name << "', got: " << msg;
}

const char* k_llama = "stories260K.gguf";

TEST(StrictLoad, ReferenceModelsLoad) {
  for (const char* m : {"stories260K.gguf", "stories260K-f16.gguf", "llama-2-tiny-random.gguf",
                        "synth-llama-q4_k_m.gguf", "synth-qwen2-q4_k_m.gguf", "synth-qwen3-q4_k_m.gguf",
                        "synth-llama3-q4_k_m.gguf", "synth-qwen2-0.5b-shape-q4_k_m.gguf", "synth-llama-q5_k_m.gguf"}) {
    EXPECT_NO_THROW(model::Model::load(model_path(m))) << m;
  }
}

TEST(StrictLoad, UnknownArchKey) {
  expect_refused(edited_copy(k_llama, "unknown.gguf", [](gguf::Writer& w) { w.set_u32("llama.foo_layers", 3); }),
                 "llama.foo_layers");
}

TEST(StrictLoad, RopeScalingTypes) {
  for (const char* t : {"yarn", "longrope", "llama3"}) {
    const auto p = edited_copy(k_llama, std::string("scaling_") + t + ".gguf", [&](gguf::Writer& w) {
      w.set_string("llama.rope.scaling.type", t);
      w.set_f32("llama.rope.scaling.factor", 4.0f);
    });
    const std::string msg = load_error(p);
    EXPECT_NE(msg.find(std::string("'") + t + "'"), std::string::npos) << msg;
  }
  // linear is honoured (freq_scale = 1 / factor); none leaves the factor unapplied.
  auto lin = model::Model::load(edited_copy(k_llama, "linear.gguf", [](gguf::Writer& w) {
    w.set_string("llama.rope.scaling.type", "linear");
    w.set_f32("llama.rope.scaling.factor", 4.0f);
  }));
  EXPECT_FLOAT_EQ(lin->hparams().rope_freq_scale, 0.25f);
  auto none = model::Model::load(edited_copy(k_llama, "none.gguf", [](gguf::Writer& w) {
    w.set_string("llama.rope.scaling.type", "none");
    w.set_f32("llama.rope.scaling.factor", 4.0f);
  }));
  EXPECT_FLOAT_EQ(none->hparams().rope_freq_scale, 1.0f);
}

TEST(StrictLoad, KeysThatChangeTheMath) {
  struct Case {
    const char* key;
    std::function<void(gguf::Writer&, const std::string&)> set;
  };
  const std::vector<Case> cases = {
      {"llama.attention.sliding_window", [](gguf::Writer& w, const std::string& k) { w.set_u32(k, 4096); }},
      {"llama.attention.sliding_window_pattern", [](gguf::Writer& w, const std::string& k) { w.set_u32(k, 6); }},
      {"llama.rope.freq_base_swa", [](gguf::Writer& w, const std::string& k) { w.set_f32(k, 10000.0f); }},
      {"llama.final_logit_softcapping", [](gguf::Writer& w, const std::string& k) { w.set_f32(k, 30.0f); }},
      {"llama.attn_logit_softcapping", [](gguf::Writer& w, const std::string& k) { w.set_f32(k, 50.0f); }},
      {"llama.attention.scale", [](gguf::Writer& w, const std::string& k) { w.set_f32(k, 0.0625f); }},
      {"llama.expert_count", [](gguf::Writer& w, const std::string& k) { w.set_u32(k, 8); }},
      {"llama.expert_used_count", [](gguf::Writer& w, const std::string& k) { w.set_u32(k, 2); }},
      {"llama.logit_scale", [](gguf::Writer& w, const std::string& k) { w.set_f32(k, 0.5f); }},
      {"llama.embedding_scale", [](gguf::Writer& w, const std::string& k) { w.set_f32(k, 12.0f); }},
      {"llama.rope.scaling.attn_factor", [](gguf::Writer& w, const std::string& k) { w.set_f32(k, 1.2f); }},
      {"llama.rope.dimension_sections",
       [](gguf::Writer& w, const std::string& k) {
         const int32_t s[4] = {2, 1, 1, 0};
         w.set_i32_array(k, s);
       }},
      {"llama.attention.causal", [](gguf::Writer& w, const std::string& k) { w.set_bool(k, false); }},
  };
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    expect_refused(
        edited_copy(k_llama, "key" + std::to_string(i++) + ".gguf", [&](gguf::Writer& w) { c.set(w, c.key); }), c.key);
  }
}

TEST(StrictLoad, KeysKnownHarmless) {
  auto p = edited_copy(k_llama, "harmless.gguf", [](gguf::Writer& w) {
    w.set_u32("llama.rope.scaling.original_context_length", 8192);
    w.set_bool("llama.rope.scaling.finetuned", true);
    w.set_u32("llama.expert_count", 0);
    w.set_u32("llama.expert_used_count", 0);
    w.set_f32("llama.final_logit_softcapping", 0.0f);
    w.set_u32("llama.attention.sliding_window", 0);
    w.set_bool("llama.attention.causal", true);
    w.set_f32("llama.rope.scaling.attn_factor", 1.0f);
    w.set_string("rocky.anything", "not an <arch> key");
  });
  EXPECT_NO_THROW(model::Model::load(p)) << load_error(p);
}

TEST(StrictLoad, KeyOfWrongType) {
  expect_refused(
      edited_copy(k_llama, "type.gguf", [](gguf::Writer& w) { w.set_string("llama.attention.head_count_kv", "4"); }),
      "llama.attention.head_count_kv");
}

TEST(StrictLoad, TensorsTheGraphDoesNotRead) {
  // A llama file with a per-head q norm, a qwen2 file with rope factors, any file with a stray tensor.
  expect_refused(edited_copy(k_llama, "qnorm.gguf", [](gguf::Writer&) {}, {{"blk.0.attn_q_norm.weight", 8, 1.0f}}),
                 "blk.0.attn_q_norm.weight");
  expect_refused(edited_copy("synth-qwen2-q4_k_m.gguf", "qwen2_freqs.gguf", [](gguf::Writer&) {},
                             {{"rope_freqs.weight", 32, 2.0f}}),
                 "rope_freqs.weight");
  expect_refused(edited_copy(k_llama, "stray.gguf", [](gguf::Writer&) {}, {{"blk.0.attn_sinks.weight", 8, 0.5f}}),
                 "blk.0.attn_sinks.weight");
  // A rope_freqs of the wrong length (llama reads it: [n_rot/2] = [4] for stories260K).
  expect_refused(edited_copy(k_llama, "freqs_len.gguf", [](gguf::Writer&) {}, {{"rope_freqs.weight", 8, 1.0f}}),
                 "rope_freqs.weight");
}

TEST(StrictLoad, TensorsKnownHarmless) {
  // Old llama files' precomputed rope tables.
  auto p = edited_copy(k_llama, "rot_embd.gguf", [](gguf::Writer&) {}, {{"blk.0.attn_rot_embd.weight", 8, 0.0f}});
  EXPECT_NO_THROW(model::Model::load(p)) << load_error(p);
}

// rope_freqs is read by llama: all-ones factors leave the logits exactly as without them, other
// factors change them.
TEST(StrictLoad, LlamaRopeFreqsAreRead) {
  auto base = model::Model::load(model_path(k_llama));
  auto ones =
      model::Model::load(edited_copy(k_llama, "ones.gguf", [](gguf::Writer&) {}, {{"rope_freqs.weight", 4, 1.0f}}));
  auto fours =
      model::Model::load(edited_copy(k_llama, "fours.gguf", [](gguf::Writer&) {}, {{"rope_freqs.weight", 4, 4.0f}}));
  ASSERT_NE(ones->weights().rope_freqs, nullptr);
  const std::vector<int32_t> toks = {1, 403, 407, 261, 300, 12, 99, 7};
  auto a = make_session(*base, 64, 8)->eval(toks);
  auto b = make_session(*ones, 64, 8)->eval(toks);
  auto c = make_session(*fours, 64, 8)->eval(toks);
  EXPECT_EQ(a, b);
  EXPECT_GT(max_abs_diff(c, a), 1e-3);
  EXPECT_NE(model::arch::special_features(fours->hparams(), fours->weights()).find("rope_freqs"), std::string::npos);
}

}  // namespace
// qwen35: the hybrid keys are read and checked; IMROPE sections that would leave a rotated pair
// unturned for text (the fourth section) and inconsistent Gated DeltaNet shapes are refused, naming
// the key.
TEST(StrictLoad, Qwen35HybridKeys) {
  const char* m = "synth-qwen35-q4_k_m.gguf";
  auto ok = model::Model::load(model_path(m));
  EXPECT_EQ(ok->hparams().full_attn_interval, 4);
  EXPECT_EQ(ok->hparams().ssm_head_v_dim(), 128);
  EXPECT_EQ(ok->hparams().ssm_conv_channels(), 1024);
  expect_refused(edited_copy(m, "q35_sections.gguf",
                             [](gguf::Writer& w) {
                               const int32_t s[4] = {11, 11, 9, 1};
                               w.set_i32_array("qwen35.rope.dimension_sections", s);
                             }),
                 "qwen35.rope.dimension_sections");
  expect_refused(edited_copy(m, "q35_rank.gguf", [](gguf::Writer& w) { w.set_u32("qwen35.ssm.time_step_rank", 3); }),
                 "qwen35.ssm.inner_size");
  expect_refused(edited_copy(m, "q35_conv.gguf", [](gguf::Writer& w) { w.set_u32("qwen35.ssm.conv_kernel", 1); }),
                 "qwen35.ssm.conv_kernel");
}

}  // namespace rocky
