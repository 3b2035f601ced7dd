// Files written by rocky synth / rocky quantize, read back with rocky's GGUF reader and tokenizer:
// tensors exactly as planned (names, types, shapes), metadata, weight statistics, determinism,
// quantize of an f32 synth model == synth at that type (same type mix and the same bytes) for many
// n_layer values, rejected inputs, and the generated tokenizers round-tripping text.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/shared.hpp"
#include "naive_forward.hpp"
#include "core/error.hpp"
#include "gguf/gguf.hpp"
#include "gguf/writer.hpp"
#include "quant/quant.hpp"
#include "synth/plan.hpp"
#include "synth/synth.hpp"
#include "synth/weights.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace rocky;
using namespace rocky::synth;
using rocky::gguf::GgufFile;

namespace {

std::string scratch(const std::string& name) { return rocky::test::scratch_dir("synth") + "/" + name; }

WriteSummary make(const std::string& preset, const std::string& path, FileType ft, uint32_t layers,
                  std::optional<uint32_t> vocab = std::nullopt, uint64_t seed = 7, unsigned threads = 0) {
  SynthOptions o;
  o.preset = preset;
  o.out = path;
  o.type = ft;
  o.layers = layers;
  o.vocab = vocab;
  o.seed = seed;
  o.threads = threads;
  o.progress = false;
  return synth_model(o);
}

void quantize(const std::string& in, const std::string& out, FileType ft) {
  QuantizeOptions q;
  q.in = in;
  q.out = out;
  q.type = ft;
  q.progress = false;
  quantize_model(q);
}

// The file's tensors are exactly `plan` (order, names, types, shapes).
void expect_matches_plan(const GgufFile& f, const std::vector<PlannedTensor>& plan) {
  ASSERT_EQ(f.tensors().size(), plan.size()) << f.path();
  for (size_t i = 0; i < plan.size(); ++i) {
    const auto& t = f.tensors()[i];
    EXPECT_EQ(t.name, plan[i].name) << i;
    EXPECT_EQ(t.type, plan[i].type) << plan[i].name << ": " << dtype_name(t.type) << " vs " << dtype_name(plan[i].type);
    EXPECT_EQ(t.n_dims, plan[i].n_dims) << plan[i].name;
    EXPECT_EQ(t.ne, plan[i].ne) << plan[i].name;
  }
}

std::vector<float> row_f32(const gguf::TensorInfo& t, uint64_t r) {
  std::vector<float> x(t.ne[0]);
  quant::dequantize_row(t.type, t.data + r * row_bytes(t.type, t.ne[0]), x.data(), static_cast<int64_t>(t.ne[0]));
  return x;
}

double rms_of(const std::vector<float>& x) {
  double s = 0;
  for (float v : x) s += static_cast<double>(v) * v;
  return std::sqrt(s / static_cast<double>(x.size()));
}

}  // namespace

// Real Qwen2.5-3B shapes with 2 blocks (and a small vocab, to keep the file ≈ 85 MB): the reader
// sees exactly the planned tensors; hyper-parameters and tokenizer keys are in place; weights have
// the planned scale.
TEST(SynthFiles, Qwen25_3B_TwoLayersQ4KM) {
  const std::string path = scratch("qwen3b-l2.gguf");
  SynthOptions so;
  so.preset = "qwen2.5-3b";
  so.vocab = 1024;
  const Preset p = synth_preset(so);
  const WriteSummary s = make("qwen2.5-3b", path, FileType::Q4_K_M, 2, 1024);
  {
    const auto f = GgufFile::open(path);
    const auto plan = tensor_plan(p, 2, FileType::Q4_K_M);
    expect_matches_plan(f, plan);
    EXPECT_EQ(s.n_tensors, 2u + 12u * 2u);
    EXPECT_EQ(f.tensors().size(), 26u);
    // Layer 0 of 2: q4_K; layer 1 (>= 7·2/8): q6_K; tied LM head q6_K.
    EXPECT_EQ(f.find_tensor("blk.0.attn_v.weight")->type, DType::Q4_K);
    EXPECT_EQ(f.find_tensor("blk.1.attn_v.weight")->type, DType::Q6_K);
    EXPECT_EQ(f.find_tensor("blk.1.ffn_down.weight")->type, DType::Q6_K);
    EXPECT_EQ(f.find_tensor("token_embd.weight")->type, DType::Q6_K);
    EXPECT_EQ(f.find_tensor("blk.0.ffn_down.weight")->ne[0], 11008u);
    EXPECT_EQ(f.architecture(), "qwen2");
    EXPECT_EQ(f.get_uint("qwen2.block_count"), 2u);
    EXPECT_EQ(f.get_uint("qwen2.embedding_length"), 2048u);
    EXPECT_EQ(f.get_uint("qwen2.feed_forward_length"), 11008u);
    EXPECT_EQ(f.get_uint("qwen2.attention.head_count"), 16u);
    EXPECT_EQ(f.get_uint("qwen2.attention.head_count_kv"), 2u);
    EXPECT_EQ(f.get_uint("qwen2.context_length"), 32768u);
    EXPECT_DOUBLE_EQ(*f.get_float("qwen2.rope.freq_base"), 1e6);
    EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("qwen2.attention.layer_norm_rms_epsilon")), 1e-6f);
    EXPECT_EQ(f.get_uint("general.file_type"), 15u);
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "qwen2");
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens")->size(), 1024u);
    EXPECT_EQ(f.get_string_array("tokenizer.ggml.merges")->size(), 1024u - 22u - 256u);
    // Weight scale: q ~ N(0, 1/2048) (q4_K error is a few % of that).
    const auto* q = f.find_tensor("blk.0.attn_q.weight");
    double acc = 0;
    for (uint64_t r = 0; r < 64; ++r) acc += rms_of(row_f32(*q, r * 31));
    EXPECT_NEAR(acc / 64, 1.0 / std::sqrt(2048.0), 0.05 / std::sqrt(2048.0));
    const auto* norm = f.find_tensor("blk.1.ffn_norm.weight");
    const auto nv = row_f32(*norm, 0);
    double mean = 0;
    for (float v : nv) mean += v;
    EXPECT_NEAR(mean / static_cast<double>(nv.size()), 1.0, 0.01);
  }
  std::filesystem::remove(path);
}

// quantize(f32 synth, T) has the plan's type mix for every n_layer, and the same tensor bytes as
// synth written directly at T (both quantize the same f32 rows); the metadata says T.
TEST(SynthFiles, QuantizeOfF32SynthMatchesPlanForAnyLayerCount) {
  for (const char* preset : {"qwen2-test", "llama-test"}) {
    const Preset& p = find_preset(preset);
    for (uint32_t n : {1u, 2u, 5u, 9u, 13u}) {
      SCOPED_TRACE(std::string(preset) + " n_layer " + std::to_string(n));
      const std::string f32 = scratch("f32.gguf"), q = scratch("q.gguf"), direct = scratch("direct.gguf");
      make(preset, f32, FileType::F32, n);
      const std::vector<FileType> types = n == 5
                                              ? std::vector<FileType>{FileType::Q4_K_M, FileType::Q6_K, FileType::Q8_0}
                                              : std::vector<FileType>{FileType::Q4_K_M};
      for (FileType ft : types) {
        SCOPED_TRACE(std::string(file_type_name(ft)));
        quantize(f32, q, ft);
        make(preset, direct, ft, n);
        const auto fq = GgufFile::open(q);
        const auto fd = GgufFile::open(direct);
        const auto plan = tensor_plan(p, n, ft);
        expect_matches_plan(fq, plan);
        expect_matches_plan(fd, plan);
        EXPECT_EQ(fq.get_uint("general.file_type"), llama_ftype(ft));
        EXPECT_EQ(fq.get_uint("general.quantization_version"), 2u);
        EXPECT_EQ(fq.get_uint(std::string(arch_name(p.arch)) + ".block_count"), n);
        EXPECT_EQ(fq.get_string_array("tokenizer.ggml.tokens")->size(), p.n_vocab);
        for (size_t i = 0; i < plan.size(); ++i) {
          const auto& a = fq.tensors()[i];
          const auto& b = fd.tensors()[i];
          ASSERT_EQ(a.n_bytes, b.n_bytes);
          EXPECT_EQ(std::memcmp(a.data, b.data, a.n_bytes), 0) << a.name;
        }
      }
      // Every fallback and k-quant type shows up in the test shapes at q4_K_M.
      if (n == 9) {
        std::map<DType, int> mix;
        for (const auto& t : tensor_plan(p, n, FileType::Q4_K_M)) mix[t.type]++;
        EXPECT_GT(mix[DType::Q4_K], 0);
        EXPECT_GT(mix[DType::Q6_K], 0);
        EXPECT_GT(mix[DType::Q5_0], 0);
        EXPECT_GT(mix[DType::Q8_0], 0);
        EXPECT_GT(mix[DType::F32], 0);
      }
    }
  }
}

// rocky quantize … q5_k_m: the planned mix (q5_K, its q5_1 fallback for rows not multiples of
// 256, q6_K, q8_0), each row's bytes exactly quantize_row of the f32 row, and the round trip
// through dequantize_row within the 5-bit formats' error (q5_K, q5_1 ≤ 6 % of the row's RMS).
TEST(SynthFiles, QuantizeQ5KMRoundTrip) {
  const std::string f32 = scratch("q5src.gguf"), q = scratch("q5.gguf");
  const uint32_t n = 4;
  make("llama-test", f32, FileType::F32, n);
  quantize(f32, q, FileType::Q5_K_M);
  const auto a = GgufFile::open(f32);
  const auto b = GgufFile::open(q);
  expect_matches_plan(b, tensor_plan(find_preset("llama-test"), n, FileType::Q5_K_M));
  EXPECT_EQ(b.get_uint("general.file_type"), 17u);
  std::map<DType, int> mix;
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const auto& ta = a.tensors()[i];
    const auto& tb = b.tensors()[i];
    mix[tb.type]++;
    if (ta.n_dims == 1) continue;
    const uint64_t rb = row_bytes(tb.type, ta.ne[0]);
    std::vector<uint8_t> bytes(rb);
    for (uint64_t r = 0; r < ta.rows(); r += 13) {
      const auto x = row_f32(ta, r);
      quant::quantize_row(tb.type, x.data(), bytes.data(), static_cast<int64_t>(x.size()));
      ASSERT_EQ(std::memcmp(bytes.data(), tb.data + r * rb, rb), 0) << tb.name << " row " << r;
      const auto y = row_f32(tb, r);
      double e = 0, s = 0;
      for (size_t k = 0; k < x.size(); ++k) {
        e += (x[k] - y[k]) * static_cast<double>(x[k] - y[k]);
        s += static_cast<double>(x[k]) * x[k];
      }
      EXPECT_LE(std::sqrt(e / s), 0.06) << tb.name << " " << dtype_name(tb.type) << " row " << r;
    }
  }
  EXPECT_GT(mix[DType::Q5_K], 0);
  EXPECT_GT(mix[DType::Q5_1], 0);
  EXPECT_GT(mix[DType::Q6_K] + mix[DType::Q8_0], 0);
}

// Quantized values stay close to the f32 ones. The synth weights sit on a grid that q4_K, q6_K and
// q5_0 represent exactly (weights.hpp): only the fp16 rounding of block scales remains (≈ 0.05 %;
// q4_K ≈ 0.2 %, its scale·q − min subtracts two rounded terms);
// q8_0 rounds at ≈ 0.5 %. Also from an F16 input (grid values are exact in f16).
TEST(SynthFiles, QuantizedWeightsTrackF32) {
  const std::string f32 = scratch("t32.gguf"), f16 = scratch("t16.gguf"), q = scratch("tq.gguf");
  make("llama-test", f32, FileType::F32, 3);
  make("llama-test", f16, FileType::F16, 3);
  const std::map<DType, double> bound = {{DType::Q8_0, 0.008}, {DType::Q6_K, 0.002}, {DType::Q5_0, 0.002},
                                         {DType::Q4_K, 0.004}, {DType::F32, 0.0},    {DType::F16, 0.0}};
  for (const std::string& in : {f32, f16}) {
    for (FileType ft : {FileType::Q4_K_M, FileType::Q8_0}) {
      quantize(in, q, ft);
      const auto a = GgufFile::open(f32);
      const auto b = GgufFile::open(q);
      ASSERT_EQ(a.tensors().size(), b.tensors().size());
      for (size_t i = 0; i < a.tensors().size(); ++i) {
        const auto& ta = a.tensors()[i];
        const auto& tb = b.tensors()[i];
        for (uint64_t r = 0; r < ta.rows(); r += 97) {
          const auto x = row_f32(ta, r), y = row_f32(tb, r);
          double e = 0, s = 0;
          for (size_t k = 0; k < x.size(); ++k) {
            e += (x[k] - y[k]) * static_cast<double>(x[k] - y[k]);
            s += static_cast<double>(x[k]) * x[k];
          }
          if (ta.n_dims == 1) continue;  // norms and biases: plain f32 (Gaussian, not on the grid)
          EXPECT_LE(std::sqrt(e / s), bound.at(tb.type)) << ta.name << " " << dtype_name(tb.type) << " row " << r;
        }
      }
    }
  }
}

TEST(SynthFiles, DeterministicAcrossThreadCountsAndSeedMatters) {
  const std::string a = scratch("d1.gguf"), b = scratch("d2.gguf"), c = scratch("d3.gguf");
  make("qwen2-test", a, FileType::Q4_K_M, 2, std::nullopt, 42, 1);
  make("qwen2-test", b, FileType::Q4_K_M, 2, std::nullopt, 42, 3);
  make("qwen2-test", c, FileType::Q4_K_M, 2, std::nullopt, 43, 2);
  const auto ba = rocky::test::read_file_bytes(a), bb = rocky::test::read_file_bytes(b),
             bc = rocky::test::read_file_bytes(c);
  EXPECT_EQ(ba, bb);
  EXPECT_EQ(ba.size(), bc.size());
  EXPECT_NE(ba, bc);
}

TEST(SynthFiles, BadInputsAreErrors) {
  const std::string qf = scratch("already.gguf"), out = scratch("never.gguf");
  make("qwen2-test", qf, FileType::Q8_0, 1);
  try {
    quantize(qf, out, FileType::Q4_K_M);
    FAIL() << "quantized input accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already q8_0"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".part"));
  EXPECT_THROW(quantize("/nonexistent/x.gguf", out, FileType::Q8_0), Error);
  EXPECT_THROW(make("nope", out, FileType::F32, 1), Error);
  EXPECT_THROW(make("qwen2-test", out, FileType::F32, 0), Error);
  EXPECT_THROW(make("qwen2-test", out, FileType::F32, 1, 100), Error);
  EXPECT_THROW(make("qwen2-test", "/nonexistent/dir/x.gguf", FileType::F32, 1), Error);
  // OUT a directory: refused before anything is written (no OUT.part left behind).
  const std::string dir = scratch("out_is_a_dir");
  std::filesystem::create_directories(dir);
  const std::string f32 = scratch("out_is_a_dir_in.gguf");
  make("qwen2-test", f32, FileType::F32, 1);
  for (bool synth : {true, false}) {
    try {
      if (synth)
        make("qwen2-test", dir, FileType::F32, 1);
      else
        quantize(f32, dir, FileType::Q8_0);
      FAIL() << "a directory accepted as the output file";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(std::filesystem::is_directory(dir));
    EXPECT_FALSE(std::filesystem::exists(dir + ".part"));
  }
}

namespace {

// A vocab-only GGUF (tokenizer metadata, no tensors) of preset `name` at full vocab size.
std::string vocab_file(const std::string& name) {
  const Preset& p = find_preset(name);
  gguf::Writer w;
  set_synth_metadata(w, p, p.n_layer, FileType::F32, 0, generate_vocab(p));
  const std::string path = scratch(name + "-vocab.gguf");
  w.write(path);
  return path;
}

const char* const k_texts[] = {
    "Hello world! This is a test of the synthetic tokenizer, with numbers 12345 and 3.14159.",
    "  leading spaces, trailing spaces  \n\nnew lines\ttabs\r\n",
    "Ünïcödé: 日本語のテキスト, 中文文本, emoji 🦀🚀, Ελληνικά, русский.",
    "code: for (int i = 0; i < n; ++i) { x[i] = y[i] * 2; } // done",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "a",
    "",
};

}  // namespace

TEST(SynthTokenizer, Qwen2BpeRoundTrip) {
  for (const char* preset : {"qwen2.5-3b", "qwen2.5-7b", "qwen2-test"}) {
    SCOPED_TRACE(preset);
    const auto tok = tok::Tokenizer::load(vocab_file(preset));
    EXPECT_EQ(tok.vocab().size(), find_preset(preset).n_vocab);
    EXPECT_EQ(tok.vocab().type(), tok::VocabType::Bpe);
    EXPECT_EQ(tok.vocab().pre_type(), tok::PreType::Qwen2);
    for (const char* text : k_texts) {
      const auto ids = tok.tokenize(text, true, true);
      for (auto id : ids) ASSERT_TRUE(tok.vocab().valid(id));
      EXPECT_EQ(tok.detokenize(ids, false, true), text);
    }
    // Control tokens are recognised as single tokens.
    const auto ids = tok.tokenize("<|im_start|>hi<|im_end|>", false, true);
    ASSERT_GE(ids.size(), 3u);
    EXPECT_EQ(tok.vocab().token(ids.front()).text, "<|im_start|>");
    EXPECT_EQ(ids.back(), tok.vocab().eos());
  }
  // At full size the merges do real work: English text needs far fewer tokens than bytes.
  const auto tok = tok::Tokenizer::load(vocab_file("qwen2.5-3b"));
  const std::string en = "the quick brown fox jumps over the lazy dog and then it rests in the shade of the tree";
  EXPECT_LT(tok.tokenize(en, false, false).size(), en.size() * 6 / 10);
}

TEST(SynthTokenizer, LlamaSpmRoundTrip) {
  for (const char* preset : {"tinyllama-1.1b", "llama-test"}) {
    SCOPED_TRACE(preset);
    const auto tok = tok::Tokenizer::load(vocab_file(preset));
    EXPECT_EQ(tok.vocab().size(), find_preset(preset).n_vocab);
    EXPECT_EQ(tok.vocab().type(), tok::VocabType::Spm);
    EXPECT_EQ(tok.vocab().bos(), 1);
    for (const char* text : k_texts) {
      if (std::string(text).find("<|") != std::string::npos) continue;  // not SPM's specials
      EXPECT_EQ(tok.tokenize(text, true, true).front(), 1);             // BOS added
      // Without BOS, detokenize drops the space SPM prefixed (llama_detokenize's behaviour).
      const auto ids = tok.tokenize(text, false, true);
      for (auto id : ids) ASSERT_TRUE(tok.vocab().valid(id));
      EXPECT_EQ(tok.detokenize(ids, false, true), text);
    }
  }
  const auto tok = tok::Tokenizer::load(vocab_file("tinyllama-1.1b"));
  const std::string en = "the quick brown fox jumps over the lazy dog and then it rests in the shade of the tree";
  EXPECT_LT(tok.tokenize(en, false, false).size(), en.size() * 6 / 10);
}

// Llama 3's BPE (pre llama-bpe, 256 specials after the ranked tokens, <|eot_id|> as EOS, BOS added).
TEST(SynthTokenizer, Llama3BpeRoundTrip) {
  for (const char* preset : {"llama-3.2-1b"}) {
    SCOPED_TRACE(preset);
    const auto tok = tok::Tokenizer::load(vocab_file(preset));
    EXPECT_EQ(tok.vocab().size(), 128256u);
    EXPECT_EQ(tok.vocab().type(), tok::VocabType::Bpe);
    EXPECT_EQ(tok.vocab().pre_type(), tok::PreType::Llama3);
    EXPECT_EQ(tok.vocab().bos(), 128000);
    EXPECT_EQ(tok.vocab().eos(), 128009);
    EXPECT_EQ(tok.vocab().token(128009).text, "<|eot_id|>");
    EXPECT_EQ(tok.vocab().token(128255).text, "<|reserved_special_token_247|>");
    for (const char* text : k_texts) {
      const auto ids = tok.tokenize(text, false, true);
      for (auto id : ids) ASSERT_TRUE(tok.vocab().valid(id));
      EXPECT_EQ(tok.detokenize(ids, false, true), text);
    }
    EXPECT_EQ(tok.tokenize("hi", true, true).front(), 128000);
    const auto ids = tok.tokenize("<|start_header_id|>user<|end_header_id|>hi<|eot_id|>", false, true);
    ASSERT_GE(ids.size(), 4u);
    EXPECT_EQ(ids.front(), 128006);
    EXPECT_EQ(ids.back(), 128009);
  }
}

// rope_freqs.weight as llama.cpp's converter computes it: the synth-llama3 reference file's tensor
// (head_dim 64, base 500000, factor 32, low 1, high 4, original context 8192; reference/README.md).
TEST(SynthFiles, RopeFreqFactorsMatchLlamaCppConverter) {
  const auto f = GgufFile::open(rocky::test::shared_path("reference/models/synth/synth-llama3-q4_k_m.gguf"));
  const auto* t = f.find_tensor("rope_freqs.weight");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->type, DType::F32);
  Preset p = find_preset("llama-3.2-1b");  // head_dim 64, base 5e5, llama3 scaling factor 32
  const std::vector<float> got = rope_freq_factors(p);
  ASSERT_EQ(got.size(), t->n_elements);
  for (size_t i = 0; i < got.size(); ++i) {
    float want;
    std::memcpy(&want, t->data + 4 * i, 4);
    EXPECT_NEAR(got[i], want, 1e-6 * want) << i;
  }
  EXPECT_EQ(got.front(), 1.0f);
  EXPECT_EQ(got.back(), 32.0f);
  p.rope_factor = 0;
  EXPECT_TRUE(rope_freq_factors(p).empty());
}

// The commands: exit codes (0 ok, 1 bad input, 2 usage) and type names in any case.
namespace {
int run_rocky(const std::string& args) {
  const std::string cmd = std::string(ROCKY_BINARY_DIR) + "/rocky " + args + " >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}
// Same, stdout to `out`.
int run_rocky_out(const std::string& args, const std::string& out) {
  const std::string cmd = std::string(ROCKY_BINARY_DIR) + "/rocky " + args + " >" + out + " 2>/dev/null";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}
}  // namespace

TEST(SynthCli, ExitCodes) {
  const std::string a = scratch("cli-f16.gguf"), b = scratch("cli-q.gguf"), c = scratch("cli-qq.gguf");
  ASSERT_EQ(run_rocky("synth --preset llama-test --layers 2 --type F16 -q -o " + a), 0);
  ASSERT_EQ(run_rocky("quantize -q " + a + " " + b + " Q4_K_M"), 0);
  const auto f = GgufFile::open(b);
  expect_matches_plan(f, tensor_plan(find_preset("llama-test"), 2, FileType::Q4_K_M));
  EXPECT_EQ(run_rocky("quantize -q " + b + " " + c + " q8_0"), 1);  // already quantized
  EXPECT_EQ(run_rocky("quantize -q " + a + " " + c + " f16"), 1);   // not a quantized type
  EXPECT_EQ(run_rocky("quantize -q " + a + " " + c + " q3_k"), 1);  // unknown type
  EXPECT_EQ(run_rocky("synth --preset nope -o " + c), 1);
  EXPECT_EQ(run_rocky("synth --preset llama-test --type q2 -o " + c), 1);
  EXPECT_EQ(run_rocky("synth -o " + c), 2);                                  // --preset missing
  EXPECT_EQ(run_rocky("synth --preset llama-test --vocab 300 -o " + c), 2);  // under the 512 fixed tokens
  EXPECT_EQ(run_rocky("quantize " + a), 2);
  EXPECT_FALSE(std::filesystem::exists(c));
}

// Done-when of : the teacher-forced logits (every position of one prompt) of a quantized model
// stay within 0.5 absolute of the f32 model's. Both files run through the naive f64 forward pass
// (naive_forward.hpp) on their dequantized weights.
TEST(SynthFiles, QuantizedLogitsTrackF32) {
  for (const char* preset : {"qwen2-test", "llama-test"}) {
    const Preset& p = find_preset(preset);
    const uint32_t n_layer = 6;
    const std::string f32 = scratch("lf32.gguf"), q = scratch("lq.gguf");
    make(preset, f32, FileType::F32, n_layer);
    const auto a = GgufFile::open(f32);
    std::vector<uint32_t> tokens;
    for (uint32_t i = 0; i < 16; ++i) tokens.push_back((i * 2654435761u) % p.n_vocab);
    const auto ref = rocky::synth::test::forward(p, n_layer, rocky::synth::test::file_weights(a), tokens, true);
    for (FileType ft : {FileType::Q4_K_M, FileType::Q6_K, FileType::Q8_0}) {
      quantize(f32, q, ft);
      const auto b = GgufFile::open(q);
      const auto got = rocky::synth::test::forward(p, n_layer, rocky::synth::test::file_weights(b), tokens, true);
      ASSERT_EQ(got.logits.size(), tokens.size());
      double max_diff = 0;
      for (size_t t = 0; t < tokens.size(); ++t)
        for (size_t v = 0; v < got.logits[t].size(); ++v)
          max_diff = std::max(max_diff, std::fabs(got.logits[t][v] - ref.logits[t][v]));
      std::printf("%s %s: max |logit - f32 logit| over %zu positions = %.4f\n", preset,
                  std::string(file_type_name(ft)).c_str(), tokens.size(), max_diff);
      EXPECT_LE(max_diff, 0.5) << preset << " " << file_type_name(ft);
      EXPECT_GT(max_diff, 0.0);  // the weights did change
    }
  }
}

// The streamed layout is byte-identical to what gguf::Writer makes of the same metadata and
// tensors held in memory (header, infos, alignment padding, data, final padding).
TEST(SynthFiles, StreamedFileEqualsInMemoryWriter) {
  const std::string path = scratch("stream.gguf");
  make("llama-test", path, FileType::Q4_K_M, 2);
  const auto f = GgufFile::open(path);
  gguf::Writer w;
  for (const auto& [key, value] : f.metadata()) w.set(key, value);
  for (const auto& t : f.tensors())
    w.add_tensor(t.name, t.type, std::span<const uint64_t>(t.ne.data(), t.n_dims),
                 std::span<const uint8_t>(t.data, t.n_bytes));
  EXPECT_EQ(w.to_bytes(), rocky::test::read_file_bytes(path));
}

// rocky's CPU oracle (`rocky run --dump-all-logits`) on synth files agrees with the naive f64
// forward pass: the files load in rocky's model code, and the scale checks above hold for the
// engine itself. qwen2 f32 and llama q4_K_M test shapes, and real Qwen2.5-3B widths (1 block).
TEST(SynthCli, RockyCpuForwardMatchesNaive) {
  struct Case {
    const char* preset;
    FileType type;
    uint32_t layers;
    std::optional<uint32_t> vocab;
  };
  const Case cases[] = {{"qwen2-test", FileType::F32, 4, std::nullopt},
                        {"llama-test", FileType::Q4_K_M, 3, std::nullopt},
                        {"qwen2.5-3b", FileType::Q4_K_M, 1, 2048u}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.preset);
    const std::string m = scratch("cpu.gguf"), lg = scratch("cpu.logits"), js = scratch("cpu.json");
    make(c.preset, m, c.type, c.layers, c.vocab);
    ASSERT_EQ(run_rocky_out("run -m " + m + " -p 'Hello world, the synthetic model speaks.' -n 1 --temp 0 --json " +
                                "--dump-all-logits " + lg,
                            js),
              0);
    const auto j = nlohmann::json::parse(std::ifstream(js));
    std::vector<uint32_t> ids;
    for (const auto& v : j.at("prompt_ids")) ids.push_back(v.get<uint32_t>());
    const auto f = GgufFile::open(m);
    SynthOptions so;
    so.preset = c.preset;
    so.vocab = c.vocab;
    const Preset p = synth_preset(so);
    const auto ref = rocky::synth::test::forward(p, c.layers, rocky::synth::test::file_weights(f), ids, true);
    const auto bytes = rocky::test::read_file_bytes(lg);
    ASSERT_EQ(bytes.size(), ids.size() * p.n_vocab * sizeof(float));
    double mx = 0;
    for (size_t t = 0; t < ids.size(); ++t)
      for (size_t v = 0; v < p.n_vocab; ++v) {
        float got;
        std::memcpy(&got, bytes.data() + (t * p.n_vocab + v) * sizeof(float), sizeof got);
        mx = std::max(mx, std::fabs(got - ref.logits[t][v]));
      }
    EXPECT_LE(mx, 1e-3) << c.preset;
  }
}
