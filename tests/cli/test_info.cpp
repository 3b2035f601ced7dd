// `rocky info` end to end: parameter counts, architecture summary, --json, vocab-only files, exit
// codes (1 with one clear line for every corrupt-file kind, 2 for bad usage).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/shared.hpp"
#include "gguf/corrupt_cases.hpp"
#include "gguf/gguf.hpp"

using nlohmann::json;
using rocky::test::shared_path;

namespace {

struct RunResult {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs `rocky ARGS` (arguments are single-quoted; none of ours contains a quote).
RunResult run_rocky(const std::vector<std::string>& args) {
  static const std::string dir = rocky::test::scratch_dir("cli_info");
  std::string cmd = "'" ROCKY_BINARY_DIR "/rocky'";
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " >'" + dir + "/out' 2>'" + dir + "/err'";
  RunResult r;
  int st = std::system(cmd.c_str());
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp(dir + "/out");
  r.err = slurp(dir + "/err");
  return r;
}

json info_json(const std::string& path) {
  RunResult r = run_rocky({"info", path, "--json"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  return json::parse(r.out);  // throws (failing the test) when it is not JSON
}

// Sum over tensors of the product of their dimensions, computed here from the shapes.
uint64_t element_sum(const std::string& path) {
  auto f = rocky::gguf::GgufFile::open(path);
  uint64_t n = 0;
  for (const auto& t : f.tensors()) {
    uint64_t p = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) p *= t.ne[d];
    n += p;
  }
  return n;
}

}  // namespace

TEST(CliInfo, ParameterCounts) {
  struct Case {
    const char* file;
    uint64_t params;
  };
  for (const Case& c :
       {Case{"reference/models/stories260K.gguf", 292800}, Case{"reference/models/stories260K-f16.gguf", 292800},
        Case{"reference/models/llama-2-tiny-random.gguf", 513048}}) {
    SCOPED_TRACE(c.file);
    json j = info_json(shared_path(c.file));
    EXPECT_EQ(j["totals"]["n_params"].get<uint64_t>(), c.params);
    RunResult r = run_rocky({"info", shared_path(c.file)});
    EXPECT_EQ(r.rc, 0);
    std::string grouped = std::to_string(c.params);
    grouped.insert(grouped.size() - 3, ",");
    EXPECT_NE(r.out.find("totals: " + grouped + " parameters"), std::string::npos) << r.out;
  }
  for (const char* s :
       {"reference/models/synth/synth-llama-q4_k_m.gguf", "reference/models/synth/synth-llama-q8_0.gguf",
        "reference/models/synth/synth-qwen2-q4_k_m.gguf"}) {
    SCOPED_TRACE(s);
    json j = info_json(shared_path(s));
    uint64_t want = element_sum(shared_path(s));
    EXPECT_GT(want, 1000000u);
    EXPECT_EQ(j["totals"]["n_params"].get<uint64_t>(), want);
    uint64_t bytes = 0;
    for (const auto& t : j["tensors"]) bytes += t["bytes"].get<uint64_t>();
    EXPECT_EQ(j["totals"]["n_bytes"].get<uint64_t>(), bytes);
  }
}

TEST(CliInfo, ArchitectureSummaryAndTable) {
  json j = info_json(shared_path("reference/models/stories260K.gguf"));
  const json& a = j["architecture"];
  EXPECT_EQ(a["arch"], "llama");
  EXPECT_EQ(a["n_layer"], 5);
  EXPECT_EQ(a["n_embd"], 64);
  EXPECT_EQ(a["n_head"], 8);
  EXPECT_EQ(a["n_head_kv"], 4);
  EXPECT_EQ(a["head_dim"], 8);
  EXPECT_EQ(a["n_ff"], 172);
  EXPECT_EQ(a["n_vocab"], 512);
  EXPECT_EQ(a["rope_type"], "norm");
  EXPECT_EQ(a["n_ctx_train"], 2048);
  EXPECT_EQ(j["tensors"].size(), 48u);
  EXPECT_EQ(j["totals"]["bits_per_weight"].get<double>(), 32.0);
  const json& t0 = j["tensors"][0];
  EXPECT_EQ(t0["name"], "token_embd.weight");
  EXPECT_EQ(t0["type"], "f32");
  EXPECT_EQ(t0["shape"], json::array({64, 512}));
  EXPECT_EQ(t0["bytes"], 64 * 512 * 4);
  EXPECT_EQ(t0["offset"].get<uint64_t>() % 32, 0u);
  // Long arrays are summarised: count + the first elements.
  const json& toks = j["metadata"]["tokenizer.ggml.tokens"];
  EXPECT_EQ(toks["count"], 512);
  EXPECT_EQ(toks["first"][1], "<s>");

  json q = info_json(shared_path("reference/models/synth/synth-qwen2-q4_k_m.gguf"));
  EXPECT_EQ(q["architecture"]["arch"], "qwen2");
  EXPECT_EQ(q["architecture"]["rope_type"], "neox");
  EXPECT_EQ(q["architecture"]["rope_base"].get<double>(), 1e6);
  EXPECT_EQ(q["architecture"]["n_vocab"], 151936);
  EXPECT_EQ(q["architecture"]["head_dim"], 64);
  EXPECT_EQ(q["architecture"]["n_head_kv"], 2);
}

// rocky info prints the architecture's special features (q/k norm, rope scaling, bias, tied output)
// when rocky runs the file, and the loader's reason when it does not.
TEST(CliInfo, SpecialFeatures) {
  json q3 = info_json(shared_path("reference/models/synth/synth-qwen3-q4_k_m.gguf"));
  ASSERT_TRUE(q3["architecture"]["rocky_runs"].get<bool>()) << q3["architecture"]["refused"];
  const std::string f3 = q3["architecture"]["features"];
  EXPECT_NE(f3.find("q/k RMSNorm per head"), std::string::npos) << f3;
  EXPECT_NE(f3.find("head_dim·n_head = 512 ≠ n_embd 256"), std::string::npos) << f3;
  EXPECT_NE(f3.find("tied output"), std::string::npos) << f3;
  json l3 = info_json(shared_path("reference/models/synth/synth-llama3-q4_k_m.gguf"));
  const std::string fl = l3["architecture"]["features"];
  EXPECT_NE(fl.find("rope scaling: rope_freqs factors [32]"), std::string::npos) << fl;
  EXPECT_NE(fl.find("untied output"), std::string::npos) << fl;
  EXPECT_NE(fl.find("GQA 4:1"), std::string::npos) << fl;
  json q2 = info_json(shared_path("reference/models/synth/synth-qwen2-q4_k_m.gguf"));
  EXPECT_NE(q2["architecture"]["features"].get<std::string>().find("q/k/v bias"), std::string::npos);
  RunResult t = run_rocky({"info", shared_path("reference/models/synth/synth-qwen3-q4_k_m.gguf")});
  EXPECT_NE(t.out.find("  features: rope neox, q/k RMSNorm per head"), std::string::npos) << t.out;
  // gemma3: the sliding-window pattern and its two rope bases, post norms, GeGLU, √n_embd.
  json g3 = info_json(shared_path("reference/models/synth/synth-gemma3-q4_k_m.gguf"));
  const std::string fg = g3["architecture"]["features"];
  EXPECT_NE(fg.find("sliding window 64 on 5 of 6 layers (pattern 6: rope base 10000 local, 1e+06 global)"),
            std::string::npos)
      << fg;
  EXPECT_NE(fg.find("post-attention and post-FFN RMSNorm"), std::string::npos) << fg;
  EXPECT_NE(fg.find("GELU-tanh FFN"), std::string::npos) << fg;
  EXPECT_NE(fg.find("embeddings ×√n_embd (16)"), std::string::npos) << fg;
  EXPECT_NE(fg.find("q/k RMSNorm per head"), std::string::npos) << fg;
  // qwen35 (hybrid): the linear-attention layers and the gated attention are named.
  json q35 = info_json(shared_path("reference/models/synth/synth-qwen35-q4_k_m.gguf"));
  EXPECT_TRUE(q35["architecture"]["rocky_runs"].get<bool>());
  const std::string f35 = q35["architecture"]["features"];
  EXPECT_NE(f35.find("Gated DeltaNet linear attention on 6 of 8 layers (2 k / 4 v heads, dims 128 / 128, conv 4)"),
            std::string::npos)
      << f35;
  EXPECT_NE(f35.find("gated full attention every 4th with partial rope 64 of 256"), std::string::npos) << f35;
}

TEST(CliInfo, VocabOnlyFilesLoad) {
  for (const char* v : {"reference/vocab/ggml-vocab-llama-spm.gguf", "reference/vocab/ggml-vocab-qwen2-rebuilt.gguf"}) {
    SCOPED_TRACE(v);
    json j = info_json(shared_path(v));
    EXPECT_EQ(j["totals"]["n_tensors"], 0);
    EXPECT_EQ(j["totals"]["n_params"], 0);
    EXPECT_GT(j["architecture"]["n_vocab"].get<uint64_t>(), 1000u);
    EXPECT_EQ(j["architecture"]["n_vocab"], j["metadata"]["tokenizer.ggml.tokens"]["count"]);
    EXPECT_EQ(run_rocky({"info", shared_path(v)}).rc, 0);
  }
}

TEST(CliInfo, PositionalAndOptionAgree) {
  const std::string m = shared_path("reference/models/llama-2-tiny-random.gguf");
  RunResult a = run_rocky({"info", m}), b = run_rocky({"info", "-m", m}), c = run_rocky({"info", "--model", m});
  EXPECT_EQ(a.rc, 0);
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.out, c.out);
  EXPECT_NE(a.out.find("513,048 parameters"), std::string::npos);
}

TEST(CliInfo, BadUsageExits2) {
  const std::string m = shared_path("reference/models/stories260K.gguf");
  for (const auto& args : std::vector<std::vector<std::string>>{{"info"},
                                                                {"info", "--bogus", m},
                                                                {"info", m, "-m", m},
                                                                {"info", "-m"},
                                                                {"info", m, "extra"},
                                                                {},
                                                                {"nocommand"}}) {
    RunResult r = run_rocky(args);
    EXPECT_EQ(r.rc, 2) << (args.empty() ? "" : args.back()) << ": " << r.err;
    EXPECT_EQ(r.out, "");
  }
}

// Help names the program (the arguments are parsed from a vector, so CLI11 never sees argv[0]).
TEST(CliInfo, HelpNamesTheProgram) {
  RunResult r = run_rocky({"--help"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Usage: rocky [OPTIONS] SUBCOMMAND"), std::string::npos) << r.out;
}

TEST(CliInfo, CorruptFilesExit1WithOneLine) {
  const auto base = rocky::test::read_file_bytes(shared_path("reference/models/stories260K-f16.gguf"));
  const std::string dir = rocky::test::scratch_dir("cli_corrupt");
  auto cases = rocky::test::corrupt_cases(base);
  ASSERT_GE(cases.size(), 30u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir + "/" + c.name + ".gguf";
    {
      std::ofstream f(path, std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(c.bytes.data()), static_cast<std::streamsize>(c.bytes.size()));
    }
    for (bool js : {false, true}) {
      RunResult r = js ? run_rocky({"info", path, "--json"}) : run_rocky({"info", path});
      EXPECT_EQ(r.rc, 1) << r.err;
      EXPECT_EQ(r.out, "");
      ASSERT_FALSE(r.err.empty());
      EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // exactly one line
      EXPECT_EQ(r.err.rfind("rocky: error: " + path + ": ", 0), 0u) << r.err;
      for (const auto& s : c.expect) EXPECT_NE(r.err.find(s), std::string::npos) << "want '" << s << "' in " << r.err;
    }
  }
  RunResult r = run_rocky({"info", dir + "/does-not-exist.gguf"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("cannot open"), std::string::npos);
}
