// `rocky run` end to end: greedy JSON output and logit dumps vs the reference, -ub/-f parsing, and
// bad input → exit 1 with a clear message.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "model/ref.hpp"

namespace rocky {
namespace {

struct Result {
  int rc = -1;
  std::string out;  // stdout + stderr
};

Result rocky(const std::string& args) {
  const std::string cmd = std::string(ROCKY_BINARY_DIR) + "/rocky " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  Result r;
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string model(const std::string& f) { return test::shared_path("reference/models/" + f); }
std::string prompt(const std::string& p) { return test::shared_path("reference/prompts/" + p + ".txt"); }

TEST(CliRun, GreedyJsonAndDumpsMatchReference) {
  const std::string dir = test::scratch_dir("cli_run");
  for (const auto& p : test::k_prompts) {
    auto r = test::load_ref("stories260K__kvf32_faoff", p);
    const std::string last = dir + "/" + p + ".last.f32", all = dir + "/" + p + ".all.f32";
    auto res =
        rocky("run --device cpu -m " + model("stories260K.gguf") + " -f " + prompt(p) +
              " -n 32 --temp 0 --ignore-eos --json -c 1024 -ub 7 --dump-logits " + last + " --dump-all-logits " + all);
    ASSERT_EQ(res.rc, 0) << res.out;
    auto j = nlohmann::json::parse(res.out);
    EXPECT_EQ(j.at("prompt_ids").get<std::vector<int32_t>>(), r.eval_tokens) << p;
    EXPECT_EQ(j.at("generated_ids").get<std::vector<int32_t>>(), r.greedy_ids) << p;
    EXPECT_FALSE(j.at("text").get<std::string>().empty()) << p;
    EXPECT_GT(j.at("timings").at("prompt_tps").get<double>(), 0.0);
    auto ref_last = test::load_f32(test::ref_path("stories260K__kvf32_faoff", p, ".cpu.last_logits.f32"));
    auto ref_all = test::load_f32(test::ref_path("stories260K__kvf32_faoff", p, ".cpu.all_logits.f32"));
    auto got_last = test::load_f32(last), got_all = test::load_f32(all);
    ASSERT_EQ(got_last.size(), ref_last.size());
    ASSERT_EQ(got_all.size(), ref_all.size());
    EXPECT_LE(test::rel_err(got_last, ref_last), 1e-3);
    EXPECT_LE(test::rel_err(got_all, ref_all), 1e-3);
  }
}

TEST(CliRun, StreamsTextAndTimings) {
  auto res =
      rocky("run --device cpu -m " + model("stories260K.gguf") + " -p 'Once upon a time' -n 8 --temp 0.8 --seed 3");
  ASSERT_EQ(res.rc, 0) << res.out;
  EXPECT_EQ(res.out.rfind("Once upon a time", 0), 0u) << res.out;
  EXPECT_NE(res.out.find("t/s"), std::string::npos) << res.out;
  // Same seed, same text.
  EXPECT_EQ(rocky("run --device cpu -m " + model("stories260K.gguf") +
                  " -p 'Once upon a time' -n 8 --temp 0.8 --seed 3 --json")
                .rc,
            0);
}

// Speculative decoding at temperature 0: the reference's greedy ids with every drafter (the n-gram
// lookup, a draft model — stories260K-f16, the same vocabulary — and the lab drafter), with the
// drafted/accepted counts in the JSON timings.
TEST(CliRun, SpeculationKeepsTheGreedyOutput) {
  const std::vector<std::string> specs = {"--spec-type ngram-simple --spec-ngram-size-n 2",
                                          "-md " + model("stories260K-f16.gguf") + " --draft-max 4 --draft-p-min 0",
                                          "--spec-type lab-alpha --spec-lab-alpha 0.5 --draft-max 6"};
  for (const auto& p : test::k_prompts) {
    auto r = test::load_ref("stories260K__kvf32_faoff", p);
    for (const auto& spec : specs) {
      auto res = rocky("run --device cpu -m " + model("stories260K.gguf") + " -f " + prompt(p) +
                       " -n 32 --temp 0 --ignore-eos --json -c 1024 " + spec);
      ASSERT_EQ(res.rc, 0) << res.out;
      auto j = nlohmann::json::parse(res.out.substr(res.out.find('{')));
      EXPECT_EQ(j.at("generated_ids").get<std::vector<int32_t>>(), r.greedy_ids) << p << " " << spec;
      EXPECT_GE(j.at("timings").at("draft_n").get<int>(), j.at("timings").at("draft_n_accepted").get<int>());
    }
  }
}

TEST(CliRun, SpeculationRefusalsNameTheReason) {
  // A draft model of another vocabulary: the error names both files and what differs.
  auto res = rocky("run --device cpu -m " + model("stories260K.gguf") + " -p hi -n 4 -md " +
                   model("llama-2-tiny-random.gguf"));
  EXPECT_EQ(res.rc, 1) << res.out;
  EXPECT_NE(res.out.find("llama-2-tiny-random.gguf"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("differ"), std::string::npos) << res.out;
  res = rocky("run --device cpu -m " + model("stories260K.gguf") + " -p hi -n 4 --spec-type ngram-simple -md " +
              model("stories260K.gguf"));
  EXPECT_EQ(res.rc, 1) << res.out;
  EXPECT_NE(res.out.find("give one"), std::string::npos) << res.out;
  res = rocky("run --device cpu -m " + model("stories260K.gguf") + " -p hi -n 4 --spec-type medusa");
  EXPECT_EQ(res.rc, 2) << res.out;
  // A drafter's tuning flag without that drafter is a usage error, not ignored.
  res = rocky("run --device cpu -m " + model("stories260K.gguf") + " -p hi -n 4 --draft-max 4");
  EXPECT_EQ(res.rc, 2) << res.out;
  EXPECT_NE(res.out.find("--draft-max"), std::string::npos) << res.out;
  res = rocky("run --device cpu -m " + model("stories260K.gguf") +
              " -p hi -n 4 --spec-type ngram-simple --draft-p-min 0.5");
  EXPECT_EQ(res.rc, 2) << res.out;
  // A hybrid target (Gated DeltaNet layers): speculation is refused, saying why.
  const std::string hybrid = test::scratch_dir("cli_run") + "/qwen35-test.gguf";
  ASSERT_EQ(rocky("synth --preset qwen35-test -o " + hybrid).rc, 0);
  res = rocky("run --device cpu -m " + hybrid + " -p 'a b a b' -n 4 --spec-type ngram-simple");
  EXPECT_EQ(res.rc, 1) << res.out;
  EXPECT_NE(res.out.find("recurrent"), std::string::npos) << res.out;
}

TEST(CliRun, BadInputExitsOne) {
  auto res =
      rocky("run --device cpu -m " + model("stories260K.gguf") + " -f " + prompt("p2_paragraph") + " -n 4 -c 64");
  EXPECT_EQ(res.rc, 1) << res.out;
  EXPECT_NE(res.out.find("raise -c"), std::string::npos) << res.out;
  res = rocky("run --device cpu -m /nonexistent/model.gguf -p hi -n 1");
  EXPECT_EQ(res.rc, 1) << res.out;
  res = rocky("run -m " + model("stories260K.gguf") + " -p hi -n 1 --device tpu");
  EXPECT_EQ(res.rc, 1) << res.out;
  EXPECT_NE(res.out.find("unknown device 'tpu'"), std::string::npos) << res.out;
  // A model rocky cannot run: unsupported architecture, missing tensor, unsupported type.
  std::string key = "general.architecture";
  res = rocky("run --device cpu -m " + test::patched_copy("cli_arch.gguf", key, key, 4 + 8, {'l', 'l', 'a', 'm', 'b'}) +
              " -p hi -n 1");
  EXPECT_EQ(res.rc, 1) << res.out;
  EXPECT_NE(res.out.find("unsupported architecture 'llamb'"), std::string::npos) << res.out;
  res = rocky("run --device cpu -m " +
              test::patched_copy("cli_missing.gguf", "output_norm.weight", "output_norX.weight") + " -p hi -n 1");
  EXPECT_EQ(res.rc, 1) << res.out;
  EXPECT_NE(res.out.find("missing tensor 'output_norm.weight'"), std::string::npos) << res.out;
  std::string name = "blk.4.ffn_down.weight";
  res = rocky("run --device cpu -m " + test::patched_copy("cli_type.gguf", name, name, 4 + 16, {26, 0, 0, 0}) +
              " -p hi -n 1");
  EXPECT_EQ(res.rc, 1) << res.out;
  EXPECT_NE(res.out.find("'blk.4.ffn_down.weight' has type i32"), std::string::npos) << res.out;
  // Usage errors are exit 2.
  res = rocky("run --device cpu -m " + model("stories260K.gguf") + " -n 1");
  EXPECT_EQ(res.rc, 2) << res.out;
}

// -f naming a directory is an error, not an empty prompt (an ifstream opens a directory and reads
// nothing).
TEST(CliRun, PromptFileThatIsADirectoryExitsOne) {
  auto res =
      rocky("run --device cpu -m " + model("stories260K.gguf") + " -f " + test::scratch_dir("cli_run_dir") + " -n 1");
  EXPECT_EQ(res.rc, 1) << res.out;
  EXPECT_NE(res.out.find("it is a directory"), std::string::npos) << res.out;
}

// NaN/inf sampler settings (and a repetition penalty ≤ 0, which divides by zero or flips signs) are
// usage errors, not silently NaN logits.
TEST(CliRun, NonFiniteSamplerSettingsAreUsageErrors) {
  const std::string base = "run --device cpu -m " + model("stories260K.gguf") + " -p hi -n 1 ";
  for (const char* opt : {"--temp nan", "--temp inf", "--top-p nan", "--min-p -inf", "--repeat-penalty 0",
                          "--repeat-penalty -1", "--repeat-penalty nan", "--temp abc"}) {
    auto res = rocky(base + opt);
    EXPECT_EQ(res.rc, 2) << opt << ": " << res.out;
    EXPECT_NE(res.out.find("is not a finite number"), std::string::npos) << opt << ": " << res.out;
  }
  EXPECT_EQ(rocky(base + "--temp -1 --top-p 1 --min-p 0 --repeat-penalty 1.1").rc, 0);
}

// Negative counts are usage errors (exit 2, naming the option), like non-numbers; they used to exit 1.
TEST(CliRun, NegativeCountsAreUsageErrors) {
  const std::string base = "run --device cpu -m " + model("stories260K.gguf") + " -p hi ";
  for (const char* opt : {"-n -2", "-c -5", "-ub 0", "-ub -3", "--seed -2"}) {
    auto res = rocky(base + opt);
    EXPECT_EQ(res.rc, 2) << opt << ": " << res.out;
    EXPECT_NE(res.out.find("not in range"), std::string::npos) << opt << ": " << res.out;
  }
}

// llama.cpp's -1s: -n -1 generates until end-of-generation or a full context, --seed -1 is random.
TEST(CliRun, MinusOneMeansUnlimitedAndRandom) {
  auto res = rocky("run --device cpu -m " + model("stories260K.gguf") + " -p hi -c 24 -n -1 --ignore-eos --seed -1");
  ASSERT_EQ(res.rc, 0) << res.out;
  EXPECT_NE(res.out.find("context full (24 tokens)"), std::string::npos) << res.out;
}

// A llama-cli command line runs: -ngl, -t, -b … are accepted and named in a note.
TEST(CliRun, LlamaCliFlagsWithoutAMeaningAreNoted) {
  auto res = rocky("run --device cpu -m " + model("stories260K.gguf") + " -p Once -n 2 -t 4 -ngl 99 -b 32 -fa on");
  ASSERT_EQ(res.rc, 0) << res.out;
  for (const char* f : {"--ngl", "--threads", "--batch-size", "--fa"})
    EXPECT_NE(res.out.find(std::string("note: ") + f + " does not apply to rocky; ignored"), std::string::npos)
        << f << ": " << res.out;
}

// -cnv -st without -p answers stdin's first line (one turn), and stops there.
TEST(CliRun, SingleTurnWithoutPromptTakesTheFirstStdinLine) {
  const std::string in = ::testing::TempDir() + "/rocky-st-stdin.txt";
  {
    std::ofstream f(in);
    f << "Once upon a time\nand then?\n";
  }
  auto res = rocky("run --device cpu -m " + model("stories260K.gguf") + " -cnv -st -n 4 --temp 0 --json < " + in);
  ASSERT_EQ(res.rc, 0) << res.out;
  size_t turns = 0;  // --json: one object per turn, each on its own line
  std::istringstream lines(res.out);
  for (std::string l; std::getline(lines, l);) turns += !l.empty() && l[0] == '{';
  EXPECT_EQ(turns, 1u) << res.out;
}

// The default device is auto: the first Vulkan GPU, else the CPU — which it says. This machine
// (and CI) has only lavapipe, a CPU Vulkan driver, so auto must fall back and say so.
TEST(CliRun, DefaultDeviceIsAutoAndNamesTheFallback) {
  auto res = rocky("run -m " + model("stories260K.gguf") + " -p 'Once upon a time' -n 4 --temp 0");
  ASSERT_EQ(res.rc, 0) << res.out;
  EXPECT_NE(res.out.find("using the CPU backend"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("Once upon a time"), std::string::npos) << res.out;
}

// With --device vulkan the GPU path runs and prints weights + KV + arena at start.
TEST(CliRun, VulkanPrintsDeviceMemory) {
  auto res = rocky("run --device vulkan -m " + model("stories260K.gguf") + " -p 'Once upon a time' -n 4 --temp 0");
  ASSERT_EQ(res.rc, 0) << res.out;
  EXPECT_NE(res.out.find("device memory weights"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find(" + KV "), std::string::npos) << res.out;
  EXPECT_NE(res.out.find(" + arena "), std::string::npos) << res.out;
}

}  // namespace
}  // namespace rocky
