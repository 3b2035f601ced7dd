// `rocky tune` end to end on lavapipe: --quick on a tiny synth model writes a profile for the
// device (a mul_mmq tile, every measurement, the device key) into $XDG_CACHE_HOME/rocky/profiles,
// which the next `rocky bench` loads and names on stderr (and prints its tiles); --no-profile skips
// it; `tune --list` and `doctor` name it; a profile of another driver version is ignored with a
// note; an interrupted run resumes and denies the candidate it was running.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/run_rocky.hpp"
#include "common/shared.hpp"

using nlohmann::json;
using rocky::test::run_rocky;
using rocky::test::scratch_dir;
using rocky::test::slurp;
namespace fs = std::filesystem;

namespace {

std::string model() {
  static const std::string m = [] {
    const std::string p = scratch_dir("tune_cli") + "/m.gguf";
    auto r =
        run_rocky("tune_cli", {"synth", "--preset", "llama-test", "-o", p, "--type", "q4_k_m", "--layers", "2", "-q"});
    EXPECT_EQ(r.rc, 0) << r.err;
    return p;
  }();
  return m;
}

std::vector<std::string> profiles(const std::string& cache) {
  std::vector<std::string> v;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cache + "/rocky/profiles", ec))
    if (e.path().extension() == ".json") v.push_back(e.path().string());
  return v;
}

TEST(TuneCli, QuickWritesAProfileTheNextBenchLoads) {
  const std::string cache = scratch_dir("tune_cli") + "/cache";
  fs::remove_all(cache);
  const std::string env = "XDG_CACHE_HOME='" + cache + "'";
  auto t = run_rocky("tune_cli", {"tune", "--quick", "--device", "vulkan:0", "-m", model()}, env);
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_NE(t.err.find("tune: [1] mul_mmq"), std::string::npos) << t.err;  // progress on stderr
  const auto files = profiles(cache);
  ASSERT_EQ(files.size(), 1u) << t.err;
  const std::string path = files[0];
  EXPECT_NE(t.out.find(path), std::string::npos) << t.out;
  const json j = json::parse(slurp(path));
  ASSERT_TRUE(j.contains("mmq")) << j.dump(2);
  for (const char* f : {"bm", "bn", "bk", "wm", "wn", "tm", "tn", "wg"}) {
    ASSERT_TRUE(j["mmq"].contains(f)) << f;
    EXPECT_GT(j["mmq"][f].get<int>(), 0) << f;
  }
  EXPECT_EQ(j["mmq"]["wg"].get<int>(), (j["mmq"]["bm"].get<int>() / j["mmq"]["tm"].get<int>()) *
                                           (j["mmq"]["bn"].get<int>() / j["mmq"]["tn"].get<int>()));
  EXPECT_EQ(j["modeled"], 0);
  EXPECT_EQ(j["tune"]["complete"], 1);
  EXPECT_EQ(j["profile"], "llvmpipe");
  ASSERT_TRUE(j["device"].is_object());
  // The file is named by the device key it records.
  char name[64];
  std::snprintf(name, sizeof name, "%04x-%04x-%08x.json", j["device"]["vendor_id"].get<unsigned>(),
                j["device"]["device_id"].get<unsigned>(), j["device"]["driver_version"].get<unsigned>());
  EXPECT_EQ(fs::path(path).filename().string(), name);
  // Every candidate was measured (or denied) and the measurements are real GPU times.
  int ok_mmq = 0, mmq_shapes = 0;
  std::set<std::string> shapes;
  for (const auto& r : j["results"]) {
    ASSERT_NE(r["status"], "running") << r.dump();
    if (r["kernel"] == "mul_mmq" && r["status"] == "ok") {
      ++ok_mmq;
      EXPECT_GT(r["ms"].get<double>(), 0.0);
      EXPECT_GE(r["spread"].get<double>(), 0.0);
      shapes.insert(r["shape"].dump());
    }
  }
  mmq_shapes = static_cast<int>(shapes.size());
  EXPECT_GE(ok_mmq, 4);
  EXPECT_GE(mmq_shapes, 2);  // the model's matrix shapes, not one

  // The next bench loads it and names it; it prints the tiles it used.
  auto b = run_rocky(
      "tune_cli", {"bench", "-m", model(), "-p", "16", "-n", "2", "-r", "1", "--device", "vulkan:0", "--no-roofline"},
      env);
  ASSERT_EQ(b.rc, 0) << b.err;
  EXPECT_NE(b.err.find("tuning profile " + path), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("tiles: tuned (" + path + "): mmq bm" + std::to_string(j["mmq"]["bm"].get<int>()) + " bn" +
                       std::to_string(j["mmq"]["bn"].get<int>())),
            std::string::npos)
      << b.err;
  // --no-profile (before or after the subcommand): the built-in one.
  auto nb = run_rocky("tune_cli",
                      {"bench", "--no-profile", "-m", model(), "-p", "16", "-n", "0", "-r", "1", "--device", "vulkan:0",
                       "--no-roofline"},
                      env);
  ASSERT_EQ(nb.rc, 0) << nb.err;
  EXPECT_EQ(nb.err.find("tuning profile"), std::string::npos) << nb.err;
  EXPECT_NE(nb.err.find("tiles: llvmpipe: mmq"), std::string::npos) << nb.err;

  // tune --list and doctor name it.
  auto l = run_rocky("tune_cli", {"tune", "--list"}, env);
  ASSERT_EQ(l.rc, 0) << l.err;
  EXPECT_NE(l.out.find(path), std::string::npos) << l.out;
  EXPECT_NE(l.out.find("from llvmpipe"), std::string::npos) << l.out;
  auto d = run_rocky("tune_cli", {"doctor"}, env);
  EXPECT_NE(d.out.find("tuning profile: " + path), std::string::npos) << d.out;

  // A profile of another driver version: ignored, with a note.
  const std::string key(name);
  const std::string other = cache + "/rocky/profiles/" + key.substr(0, key.rfind('-') + 1) + "deadbeef.json";
  fs::rename(path, other);
  auto o = run_rocky(
      "tune_cli", {"bench", "-m", model(), "-p", "16", "-n", "0", "-r", "1", "--device", "vulkan:0", "--no-roofline"},
      env);
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_NE(o.err.find("ignoring tuning profile " + other + ": made for driver version deadbeef"), std::string::npos)
      << o.err;
  EXPECT_EQ(o.err.find("rocky: tuning profile"), std::string::npos) << o.err;
}

// An interrupted run (the file says incomplete, one candidate "running") resumes: the finished
// measurements are kept, the running candidate is denied (a hung GPU is never tried twice).
TEST(TuneCli, ResumeDeniesTheCandidateThatWasRunning) {
  const std::string dir = scratch_dir("tune_cli");
  const std::string out = dir + "/resume.json";
  fs::remove(out);
  const std::vector<std::string> args{"tune", "--quick", "--tokens", "32", "-m", model(), "-o", out};
  auto a = run_rocky("tune_cli", args);
  ASSERT_EQ(a.rc, 0) << a.err;
  json j = json::parse(slurp(out));
  // Pretend the process ended while the second mul_mmq candidate ran.
  std::string victim;
  int n = 0;
  for (auto& r : j["results"])
    if (r["kernel"] == "mul_mmq" && r["status"] == "ok" && ++n == 2) {
      r["status"] = "running";
      victim = r["tile"].get<std::string>();
    }
  ASSERT_FALSE(victim.empty());
  j["tune"]["complete"] = 0;
  std::ofstream(out) << j.dump(2);
  auto b = run_rocky("tune_cli", args);
  ASSERT_EQ(b.rc, 0) << b.err;
  EXPECT_NE(b.err.find("resuming with"), std::string::npos) << b.err;
  const json k = json::parse(slurp(out));
  bool denied = false;
  for (const auto& d : k["deny"])
    if (d["kernel"] == "mul_mmq" && d["tile"] == victim)
      denied = d["reason"].get<std::string>().find("did not finish") != std::string::npos;
  EXPECT_TRUE(denied) << k["deny"].dump(2);
  EXPECT_EQ(k["tune"]["complete"], 1);
  // The chosen tiles never include a denied one.
  EXPECT_NE(k["mmq"].dump(), "");
}

}  // namespace
