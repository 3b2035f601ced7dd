// `rocky bench` end to end on a tiny reference model: -o json parses and carries every field of
// the table with consistent values (t/s from the samples, stddev, TFLOP/s, % of a given roofline);
// md and csv have the llama-bench shape; bad flags exit 2.
#include <gtest/gtest.h>

#include <tuple>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench/run_rocky.hpp"
#include "common/shared.hpp"

using nlohmann::json;
using rocky::test::run_rocky;
using rocky::test::shared_path;

namespace {

const char* k_model = "reference/models/stories260K.gguf";

std::string roofline_file() {
  const std::string p = rocky::test::scratch_dir("bench_cli") + "/roofline.json";
  std::ofstream(p) << R"({"device":"test","driver":"test","fp32_tflops":0.5,"fp16_tflops":1.0,
                          "int8_dot_tops":2.0,"int8_dot_accelerated":true,"copy_gbs":40.0})";
  return p;
}

std::vector<std::string> split(const std::string& s, char c) {
  std::vector<std::string> v;
  std::string cur;
  for (char ch : s) {
    if (ch == c) {
      v.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  v.push_back(cur);
  return v;
}

std::vector<std::string> lines(const std::string& s) {
  auto v = split(s, '\n');
  while (!v.empty() && v.back().empty()) v.pop_back();
  return v;
}

}  // namespace

// The record: every row says what built and ran it — the git commit (12 hex digits, "-dirty" with
// uncommitted changes; "unknown" outside git), the driver, the tuning profile, and the ROCKY_*
// overrides that were set (name → value; an empty object when none).
TEST(BenchCli, JsonRecordsBuildDriverProfileAndOverrides) {
  for (const std::string dev : {"cpu", "vulkan"}) {
    SCOPED_TRACE(dev);
    for (const bool with_override : {false, true}) {
      // ROCKY_VULKAN_TIMEOUT_S=1800 is the default: set, it changes nothing but the record.
      auto r = run_rocky("bench_cli_record",
                         {"bench", "-m", shared_path(k_model), "-p", "8", "-n", "2", "-r", "1", "--no-roofline", "-o",
                          "json", "--device", dev},
                         with_override ? "ROCKY_VULKAN_TIMEOUT_S=1800" : "");
      ASSERT_EQ(r.rc, 0) << r.err;
      const json rows = json::parse(r.out);
      ASSERT_EQ(rows.size(), 2u);
      for (const json& x : rows) {
        SCOPED_TRACE(x.dump());
        const std::string commit = x.at("build_commit").get<std::string>();
        const bool hex12 = commit.size() >= 12 && commit.find_first_not_of("0123456789abcdef") >= 12;
        EXPECT_TRUE(commit == "unknown" || (hex12 && (commit.size() == 12 || commit.substr(12) == "-dirty"))) << commit;
        const std::string driver = x.at("driver").get<std::string>();
        if (dev == "cpu") {
          EXPECT_EQ(driver, "cpu");
          EXPECT_EQ(x.at("tune_profile").get<std::string>(), "");
        } else {
          EXPECT_NE(driver, "cpu");
          EXPECT_FALSE(driver.empty());
          EXPECT_FALSE(x.at("tune_profile").get<std::string>().empty());
          EXPECT_EQ(x.at("tiles").get<std::string>().rfind(x.at("tune_profile").get<std::string>() + ": ", 0), 0u);
        }
        const json& ov = x.at("overrides");
        ASSERT_TRUE(ov.is_object());
        if (with_override)
          EXPECT_EQ(ov.value("ROCKY_VULKAN_TIMEOUT_S", ""), "1800");
        else
          EXPECT_TRUE(ov.empty() || !ov.contains("ROCKY_VULKAN_TIMEOUT_S"));  // the caller's environment may set others
      }
    }
  }
}

TEST(BenchCli, JsonCarriesEveryField) {
  for (const std::string dev : {"cpu", "vulkan"}) {
    SCOPED_TRACE(dev);
    auto r = run_rocky("bench_cli", {"bench", "-m", shared_path(k_model), "-p", "24", "-n", "5", "-ub", "8,32", "-r",
                                     "3", "-o", "json", "--device", dev, "--roofline-json", roofline_file()});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("rep 3/3"), std::string::npos) << "progress goes to stderr";
    json rows = json::parse(r.out);
    ASSERT_TRUE(rows.is_array());
    ASSERT_EQ(rows.size(), 4u);  // (pp24, tg5) × (ub 8, ub 32)
    const char* fields[] = {"model",
                            "model_file",
                            "model_size",
                            "model_n_params",
                            "backend",
                            "n_ubatch",
                            "n_prompt",
                            "n_gen",
                            "test",
                            "reps",
                            "samples_ts",
                            "avg_ts",
                            "stddev_ts",
                            "avg_ns",
                            "peak_device_memory",
                            "flops_per_token",
                            "tflops",
                            "bytes_per_token",
                            "gbs",
                            "roof_kind",
                            "roof_pct",
                            "matmul_path",
                            "profile"};
    for (size_t i = 0; i < rows.size(); ++i) {
      const json& x = rows[i];
      SCOPED_TRACE(x.dump());
      for (const char* f : fields) EXPECT_TRUE(x.contains(f)) << f;
      EXPECT_EQ(x["n_ubatch"].get<int>(), i < 2 ? 8 : 32);
      const bool pp = i % 2 == 0;
      EXPECT_EQ(x["test"].get<std::string>(), pp ? "pp24" : "tg5");
      EXPECT_EQ(x["n_prompt"].get<int>(), pp ? 24 : 0);
      EXPECT_EQ(x["n_gen"].get<int>(), pp ? 0 : 5);
      EXPECT_EQ(x["model_n_params"].get<uint64_t>(), 292800u);  // as `rocky info` counts it
      EXPECT_GT(x["model_size"].get<uint64_t>(), 0u);
      EXPECT_EQ(x["backend"].get<std::string>().rfind(dev, 0), 0u);
      // stories260K's weights are f32: the int8 path (default --matmul auto) does not apply.
      EXPECT_EQ(x["matmul_path"].get<std::string>(), dev == "cpu" ? "cpu" : "basic");
      // t/s: mean of the samples, stddev the sample standard deviation, avg_ns their mean time.
      auto s = x["samples_ts"].get<std::vector<double>>();
      ASSERT_EQ(s.size(), 3u);
      double mean = (s[0] + s[1] + s[2]) / 3, var = 0, ns = 0;
      const double toks = pp ? 24 : 5;
      for (double v : s) {
        EXPECT_GT(v, 0);
        var += (v - mean) * (v - mean);
        ns += toks * 1e9 / v / 3;
      }
      EXPECT_NEAR(x["avg_ts"].get<double>(), mean, 1e-9 * mean);
      EXPECT_NEAR(x["stddev_ts"].get<double>(), std::sqrt(var / 2), 1e-6 * mean);
      EXPECT_NEAR(x["avg_ns"].get<double>(), ns, 1e-6 * ns);
      // FLOP/token: 2·(weights a token multiplies; tied head counted once) + attention (see bench.hpp).
      // stories260K: 5 layers, n_embd 64, n_ff 172, 8 heads, 4 KV heads, head dim 8, vocab 512, tied.
      const double w = 5 * (64.0 * 64 * 2 + 64.0 * 32 * 2 + 64.0 * 172 * 3) + 64.0 * 512;
      const double ctx = pp ? 12.5 : 2.5;
      EXPECT_NEAR(x["flops_per_token"].get<double>(), 2 * w + 4.0 * 5 * 8 * 8 * ctx, 1e-6);
      const double tf = x["avg_ts"].get<double>() * x["flops_per_token"].get<double>() / 1e12;
      EXPECT_NEAR(x["tflops"].get<double>(), tf, 1e-9 * tf + 1e-15);
      if (pp) {
        EXPECT_EQ(x["roof_kind"].get<std::string>(), "fp32");
        EXPECT_NEAR(x["roof_pct"].get<double>(), 100 * tf / 0.5, 1e-6);
      } else {
        EXPECT_EQ(x["roof_kind"].get<std::string>(), "copy");
        // Weight bytes per decode token: every tensor but stories260K's 512 × 64 f32 embedding table
        // (it has its own output.weight), plus the one row a token looks up.
        EXPECT_EQ(x["bytes_per_token"].get<uint64_t>(), x["model_size"].get<uint64_t>() - 512 * 64 * 4 + 64 * 4);
        const double gbs = x["avg_ts"].get<double>() * double(x["bytes_per_token"].get<uint64_t>()) / 1e9;
        EXPECT_NEAR(x["gbs"].get<double>(), gbs, 1e-9 * gbs);
        EXPECT_NEAR(x["roof_pct"].get<double>(), 100 * gbs / 40.0, 1e-6);
      }
      if (dev == "vulkan") {
        EXPECT_GT(x["peak_device_memory"].get<uint64_t>(), x["model_size"].get<uint64_t>());
      }
    }
  }
}

// --matmul on a quantized model: the pp row names the kernels the prefill used and takes its % of
// the matching peak (int8 dot for mmq, FP32 otherwise); every row carries the host split.
// -d (llama-bench's --n-depth): every test once per depth, named "pp24 @ d40" past depth 0, with
// n_depth in the row and the attention FLOPs counted over the keys the run sees (depth + its own).
TEST(BenchCli, DepthRows) {
  for (const std::string dev : {"cpu", "vulkan"}) {
    SCOPED_TRACE(dev);
    auto r = run_rocky("bench_cli", {"bench", "-m", shared_path(k_model), "-p", "24", "-n", "5", "-d", "0,40", "-r",
                                     "1", "-o", "json", "--device", dev, "--no-roofline"});
    ASSERT_EQ(r.rc, 0) << r.err;
    json rows = json::parse(r.out);
    ASSERT_EQ(rows.size(), 4u);
    const char* names[] = {"pp24", "pp24 @ d40", "tg5", "tg5 @ d40"};
    const int depths[] = {0, 40, 0, 40};
    const double w = 5 * (64.0 * 64 * 2 + 64.0 * 32 * 2 + 64.0 * 172 * 3) + 64.0 * 512;
    for (size_t i = 0; i < 4; ++i) {
      const json& x = rows[i];
      SCOPED_TRACE(x.dump());
      EXPECT_EQ(x["test"].get<std::string>(), names[i]);
      EXPECT_EQ(x["n_depth"].get<int>(), depths[i]);
      EXPECT_GT(x["avg_ts"].get<double>(), 0);
      const double ctx = depths[i] + (i < 2 ? 12.5 : 2.5);
      EXPECT_NEAR(x["flops_per_token"].get<double>(), 2 * w + 4.0 * 5 * 8 * 8 * ctx, 1e-6);
    }
  }
  auto bad = run_rocky("bench_cli", {"bench", "-m", shared_path(k_model), "-d", "-3", "--device", "cpu"});
  EXPECT_EQ(bad.rc, 2) << bad.err;
  EXPECT_NE(bad.err.find("--n-depth: value -3 is not ≥ 0"), std::string::npos) << bad.err;
  auto word = run_rocky("bench_cli", {"bench", "-m", shared_path(k_model), "-p", "abc", "--device", "cpu"});
  EXPECT_EQ(word.rc, 2) << word.err;
  EXPECT_NE(word.err.find("--n-prompt: value abc is not a whole number"), std::string::npos) << word.err;
  auto zero = run_rocky("bench_cli", {"bench", "-m", shared_path(k_model), "-npl", "0", "--device", "cpu"});
  EXPECT_EQ(zero.rc, 2) << zero.err;
  EXPECT_NE(zero.err.find("--npl: value 0 is not ≥ 1"), std::string::npos) << zero.err;
}

// --spec: speculative rows after the tg rows: the lab drafter at alpha 1 has every draft accepted,
// at alpha 0 none; each row reports its drafted/accepted counts and the plain t/s beside it.
TEST(BenchCli, SpeculativeRows) {
  auto r =
      run_rocky("bench_cli", {"bench", "-m", shared_path(k_model), "-p", "0", "-n", "24", "--spec", "lab:1,lab:0,ngram",
                              "--draft-max", "4", "-r", "2", "-o", "json", "--device", "cpu", "--no-roofline"});
  ASSERT_EQ(r.rc, 0) << r.err;
  json rows = json::parse(r.out);
  ASSERT_EQ(rows.size(), 4u);
  const char* names[] = {"tg24", "tg24 lab:1", "tg24 lab:0", "tg24 ngram"};
  for (size_t i = 0; i < 4; ++i) {
    const json& x = rows[i];
    SCOPED_TRACE(x.dump());
    EXPECT_EQ(x["test"].get<std::string>(), names[i]);
    EXPECT_GT(x["avg_ts"].get<double>(), 0);
    if (i > 0) {
      EXPECT_GT(x["plain_ts"].get<double>(), 0);
    }
    EXPECT_LE(x["draft_n_accepted"].get<int64_t>(), x["draft_n"].get<int64_t>());
  }
  EXPECT_GT(rows[1]["draft_n"].get<int64_t>(), 0);
  EXPECT_EQ(rows[1]["draft_n_accepted"].get<int64_t>(), rows[1]["draft_n"].get<int64_t>());
  EXPECT_GT(rows[2]["draft_n"].get<int64_t>(), 0);
  EXPECT_EQ(rows[2]["draft_n_accepted"].get<int64_t>(), 0);
  auto bad = run_rocky("bench_cli", {"bench", "-m", shared_path(k_model), "-p", "0", "-n", "4", "--spec", "lab:2",
                                     "--device", "cpu", "--no-roofline"});
  EXPECT_EQ(bad.rc, 1) << bad.err;
  EXPECT_NE(bad.err.find("lab:2"), std::string::npos) << bad.err;
}

// --json-schema-file / --grammar-file: a constrained decode row after the tg row, with the
// unconstrained t/s beside it, the tokens generated under the constraint and its mask time.
TEST(BenchCli, ConstrainedRows) {
  const std::string dir = std::string(ROCKY_BINARY_DIR) + "/tests/bench";
  const std::string schema = dir + "/bench_cli_schema.json", gbnf = dir + "/bench_cli_grammar.gbnf";
  std::ofstream(schema) << R"({"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 5})";
  std::ofstream(gbnf) << "root ::= \"[\" [a-z ]{0,40} \"]\"\n";
  for (const auto& [flag, file, name] : {std::tuple{"--json-schema-file", schema, "tg16 json-schema"},
                                         std::tuple{"--grammar-file", gbnf, "tg16 grammar"}}) {
    auto r = run_rocky("bench_cli", {"bench", "-m", shared_path(k_model), "-p", "0", "-n", "16", flag, file, "-r", "2",
                                     "-o", "json", "--device", "cpu", "--no-roofline"});
    ASSERT_EQ(r.rc, 0) << r.err;
    json rows = json::parse(r.out);
    ASSERT_EQ(rows.size(), 2u);
    const json& x = rows[1];
    SCOPED_TRACE(x.dump());
    EXPECT_EQ(x["test"].get<std::string>(), name);
    EXPECT_EQ(x["constraint"].get<std::string>(), file);
    EXPECT_GT(x["avg_ts"].get<double>(), 0);
    EXPECT_GT(x["plain_ts"].get<double>(), 0);
    EXPECT_GE(x["constrained_tokens"].get<int64_t>(), 4);  // 2 repetitions of at least 2 tokens
    EXPECT_LE(x["constrained_tokens"].get<int64_t>(), 32);
    EXPECT_GT(x["grammar_ms_per_token"].get<double>(), 0);
    EXPECT_TRUE(rows[0]["constraint"].get<std::string>().empty());
  }
  auto md = run_rocky("bench_cli", {"bench", "-m", shared_path(k_model), "-p", "0", "-n", "8", "--grammar-file", gbnf,
                                    "-r", "1", "--device", "cpu", "--no-roofline"});
  ASSERT_EQ(md.rc, 0) << md.err;
  EXPECT_NE(md.out.find("| tg8 grammar | " + gbnf + " |"), std::string::npos) << md.out;
  const std::string bad_file = dir + "/bench_cli_bad.gbnf";
  std::ofstream(bad_file) << "root ::= \"a\" @\n";
  auto bad = run_rocky("bench_cli", {"bench", "-m", shared_path(k_model), "-p", "0", "-n", "4", "--grammar-file",
                                     bad_file, "--device", "cpu", "--no-roofline"});
  EXPECT_EQ(bad.rc, 1) << bad.err;
  EXPECT_NE(bad.err.find(bad_file + ": "), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("1:14"), std::string::npos) << bad.err;
  auto both = run_rocky("bench_cli", {"bench", "-m", shared_path(k_model), "-p", "0", "-n", "4", "--grammar-file", gbnf,
                                      "--json-schema-file", schema, "--device", "cpu", "--no-roofline"});
  EXPECT_EQ(both.rc, 1) << both.err;
  EXPECT_NE(both.err.find("not both"), std::string::npos) << both.err;
}

// -npl: parallel-decode rows after the tg rows, S sequences × N tokens per repetition.
TEST(BenchCli, ParallelDecodeRows) {
  for (const std::string dev : {"cpu", "vulkan"}) {
    SCOPED_TRACE(dev);
    auto r = run_rocky("bench_cli", {"bench", "-m", shared_path(k_model), "-p", "20", "-n", "6", "-npl", "1,3", "-ub",
                                     "8", "-r", "2", "-o", "json", "--device", dev, "--no-roofline"});
    ASSERT_EQ(r.rc, 0) << r.err;
    json rows = json::parse(r.out);
    ASSERT_EQ(rows.size(), 4u);
    const char* names[] = {"pp20", "tg6", "pp20+tg6 x1", "pp20+tg6 x3"};
    const int pl[] = {0, 0, 1, 3};
    for (size_t i = 0; i < 4; ++i) {
      const json& x = rows[i];
      SCOPED_TRACE(x.dump());
      EXPECT_EQ(x["test"].get<std::string>(), names[i]);
      EXPECT_EQ(x["n_pl"].get<int>(), pl[i]);
      EXPECT_GT(x["avg_ts"].get<double>(), 0);
      EXPECT_EQ(x["samples_ts"].size(), 2u);
    }
    EXPECT_EQ(rows[3]["n_prompt"].get<int>(), 20);
    EXPECT_EQ(rows[3]["n_gen"].get<int>(), 6);
  }
  auto bad = run_rocky("bench_cli", {"bench", "-m", shared_path(k_model), "-npl", "0", "--device", "cpu"});
  EXPECT_EQ(bad.rc, 2) << bad.err;
}

TEST(BenchCli, MatmulPathOnQuantizedModel) {
  const std::string m = shared_path("reference/models/synth/synth-llama-q8_0.gguf");
  for (const std::string path : {"auto", "mm", "basic"}) {
    SCOPED_TRACE(path);
    auto r = run_rocky("bench_cli", {"bench", "-m", m, "-p", "16", "-n", "2", "-ub", "16", "-r", "1", "-o", "json",
                                     "--device", "vulkan", "--matmul", path, "--roofline-json", roofline_file()});
    ASSERT_EQ(r.rc, 0) << r.err;
    json rows = json::parse(r.out);
    ASSERT_EQ(rows.size(), 2u);
    const std::string used = path == "auto" ? "mmq" : path;
    EXPECT_EQ(rows[0]["matmul_path"].get<std::string>(), used);
    EXPECT_EQ(rows[0]["roof_kind"].get<std::string>(), used == "mmq" ? "int8_dot" : "fp32");
    for (const auto& row : rows) {
      const json& h = row["host_ms_per_ubatch"];
      for (const char* k : {"graph", "plan", "setup", "record", "submit_wait", "readback", "dispatches", "other"})
        EXPECT_TRUE(h.contains(k)) << k << " " << h.dump();
      EXPECT_GT(h["dispatches"].get<double>(), 0.0);
    }
  }
  auto bad = run_rocky("bench_cli", {"bench", "-m", m, "--matmul", "int4"});
  EXPECT_EQ(bad.rc, 2) << bad.err;
}

TEST(BenchCli, MarkdownAndCsvShape) {
  const std::string m = shared_path(k_model);
  auto md = run_rocky("bench_cli", {"bench", "-m", m, "-p", "16", "-n", "3", "-ub", "8,16", "-b", "16", "-r", "2",
                                    "--device", "cpu", "--no-roofline"});
  ASSERT_EQ(md.rc, 0) << md.err;
  auto l = lines(md.out);
  ASSERT_EQ(l.size(), 6u) << md.out;  // header, separator, 4 rows
  EXPECT_EQ(l[0], "| model | size | params | backend | n_ubatch | test | t/s | peak mem | TFLOP/s | GB/s | % roof |");
  for (const auto& line : l) EXPECT_EQ(split(line, '|').size(), 13u) << line;  // 11 columns
  EXPECT_NE(l[2].find("| 8 | pp16 |"), std::string::npos) << l[2];
  EXPECT_NE(l[3].find("| 8 | tg3 |"), std::string::npos) << l[3];
  EXPECT_NE(l[4].find("| 16 | pp16 |"), std::string::npos) << l[4];
  EXPECT_NE(l[2].find(" ± "), std::string::npos);
  EXPECT_NE(l[2].find("| 0.29 M |"), std::string::npos) << "params in millions below 1 B (292,800), as llama-bench";
  EXPECT_EQ(l[2].rfind("| llama 0.3M all F32 |", 0), 0u) << "model column: arch, size, type guessed from the tensors";
  EXPECT_NE(l[2].find("MiB"), std::string::npos) << "size under 1 GiB in MiB";

  auto csv = run_rocky("bench_cli", {"bench", "-m", m, "-p", "16", "-n", "0", "-ub", "8,16", "-r", "1", "-o", "csv",
                                     "--device", "cpu", "--no-roofline", "--no-warmup"});
  ASSERT_EQ(csv.rc, 0) << csv.err;
  auto c = lines(csv.out);
  ASSERT_EQ(c.size(), 3u) << csv.out;  // header + 2 pp rows (-n 0: no tg rows)
  const size_t cols = split(c[0], ',').size();
  EXPECT_EQ(cols, 21u);
  EXPECT_EQ(c[0].rfind("model,model_file,model_size,model_n_params,backend,n_ubatch", 0), 0u);
  for (size_t i = 1; i < c.size(); ++i) {
    EXPECT_EQ(split(c[i], ',').size(), cols) << c[i];
    EXPECT_NE(c[i].find(",pp16,"), std::string::npos) << c[i];
  }
}

// roofline and bench-op take the device as run/verify/bench spell it (vulkan:N), or a bare index.
TEST(BenchCli, SingleDeviceToolsTakeVulkanN) {
  for (const char* dev : {"vulkan:0", "vulkan", "0"}) {
    auto r = run_rocky("bench_cli", {"bench-op", "--type", "q8_0", "--shape", "33,5,64", "--reps", "1", "--no-roofline",
                                     "--device", dev});
    EXPECT_EQ(r.rc, 0) << dev << "\n" << r.err;
    EXPECT_NE(r.out.find("NMSE"), std::string::npos) << r.out;
  }
}

// bench-op with N = 1 runs the decode matvec: GB/s of the bytes it reads (the mmq repack + x +
// y) and the % of the copy bandwidth (from --roofline-json... measured here: lavapipe), NMSE checked.
TEST(BenchCli, BenchOpN1IsTheDecodeMatvec) {
  // q6_K is stored as nibble pairs too (its high bits in the scale groups: 21 words per 8 blocks).
  for (auto [type, k, row_q, nib, s_row] :
       {std::tuple{"q4_K", 512u, 256u, true, 40u}, std::tuple{"q6_K", 256u, 128u, true, 84u}}) {
    auto r = run_rocky("bench_cli",
                       {"bench-op", "--type", type, "--shape", "77,1," + std::to_string(k), "--reps", "2", "--json"});
    ASSERT_EQ(r.rc, 0) << r.err;
    const json j = json::parse(r.out);
    SCOPED_TRACE(j.dump());
    EXPECT_EQ(j["kernel"].get<std::string>(), "matvec_mmq");
    EXPECT_EQ(j["q4k_nibbles"].get<bool>(), nib);
    // Values (q_row_bytes per row) + scale groups (s_row bytes per row) at a 256-aligned offset, x, y.
    const uint64_t q = 77ull * row_q, s_off = (q + 255) / 256 * 256, rep = s_off + 77ull * s_row;
    EXPECT_EQ(j["bytes"].get<uint64_t>(), rep + k * 4ull + 77 * 4);
    EXPECT_GT(j["gbs"].get<double>(), 0.0);
    EXPECT_NEAR(j["gbs"].get<double>(), double(j["bytes"].get<uint64_t>()) / (j["matvec_ms"].get<double>() * 1e6),
                1e-6 * j["gbs"].get<double>());
    EXPECT_NEAR(j["pct_copy"].get<double>(), 100 * j["gbs"].get<double>() / j["roofline"]["copy_gbs"].get<double>(),
                1e-6);
    EXPECT_LE(j["nmse_sampled"].get<double>(), 1e-8);
  }
}

TEST(BenchCli, BadFlagsExit2) {
  const std::string m = shared_path(k_model);
  const std::vector<std::vector<std::string>> bad = {
      {"bench"},                                   // no -m
      {"bench", "-m", m, "-r", "0"},               // zero repetitions
      {"bench", "-m", m, "-o", "xml"},             // unknown format
      {"bench", "-m", m, "-ub", "0"},              // zero ubatch
      {"bench", "-m", m, "-ub", "64,x"},           // not a number
      {"bench", "-m", m, "-p", "-5"},              // negative prompt
      {"bench", "-m", m, "--frobnicate"},          // unknown flag
      {"bench", "-m", "/nonexistent/model.gguf"},  // missing file
      {"bench", "-m", m, "--roofline-json", "/nonexistent.json"},
      {"bench", "-m", m, "-p", "0", "-n", "0"},  // nothing to measure
      {"roofline", "--device", "vulkan:x"},      // not an index
      {"bench-op", "--type", "q4_K", "--shape", "64,8,256", "--device", "gpu:0"},
  };
  for (const auto& args : bad) {
    auto r = run_rocky("bench_cli", args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.rc, 2) << joined << "\n" << r.err;
    EXPECT_EQ(r.out, "") << joined;
  }
}

// q5_0, q5_1 and q5_K weights go through the int8 path: the q5_K_M reference file (q5_K,
// q6_K), the 0.5B-shape file (q5_0, q8_0, q4_K, q6_K) and a synth q5_k_m file whose 320-wide
// ffn_down rows fall back to q5_1; the pp row says mmq and nothing reports an f32 fallback.
TEST(BenchCli, Q5TypesTakeTheInt8Path) {
  const std::string dir = rocky::test::scratch_dir("bench_cli");
  const std::string q51 = dir + "/llama-test-q5_k_m.gguf";
  auto s =
      run_rocky("bench_cli", {"synth", "--preset", "llama-test", "-o", q51, "--type", "q5_k_m", "--layers", "2", "-q"});
  ASSERT_EQ(s.rc, 0) << s.err;
  for (const std::string& m : {shared_path("reference/models/synth/synth-llama-q5_k_m.gguf"),
                               shared_path("reference/models/synth/synth-qwen2-0.5b-shape-q4_k_m.gguf"), q51}) {
    SCOPED_TRACE(m);
    auto r = run_rocky("bench_cli", {"bench", "-m", m, "-p", "16", "-n", "1", "-ub", "16", "-r", "1", "-o", "json",
                                     "--device", "vulkan", "--roofline-json", roofline_file()});
    ASSERT_EQ(r.rc, 0) << r.err;
    json rows = json::parse(r.out);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0]["matmul_path"].get<std::string>(), "mmq");
    EXPECT_EQ(r.err.find("no int8"), std::string::npos) << r.err;
  }
}
