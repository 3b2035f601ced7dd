// `rocky report --quick` end to end on lavapipe, at a reduced size (1-layer models with a cut
// vocabulary, short bench and tune shapes): both files are written and hold every section, the
// quick tune lands beside the user's profile (its own file in the profile cache, nothing else
// touched), and a failing section (a device that does not exist) is recorded, not fatal.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "bench/run_rocky.hpp"

namespace rocky::test {
namespace {

const std::vector<std::string> k_sections = {"doctor", "devices",     "roofline",  "synth_1.5b", "synth_3b",
                                             "tune",   "verify_1.5b", "verify_3b", "bench"};

std::vector<std::string> small(const std::string& out) {
  return {"report", "--quick", "-o", out,    "--layers", "1",  "--vocab", "2048",          "-p",
          "32",     "-n",      "4",  "--ub", "16,32",    "-d", "0,64",    "--tune-tokens", "32"};
}

nlohmann::json check_files(const std::string& base) {
  EXPECT_TRUE(std::filesystem::exists(base + ".json")) << base;
  EXPECT_TRUE(std::filesystem::exists(base + ".md")) << base;
  const auto j = nlohmann::json::parse(slurp(base + ".json"));
  const std::string md = slurp(base + ".md");
  std::vector<std::string> names;
  for (const auto& s : j.at("sections")) {
    names.push_back(s.at("name"));
    EXPECT_TRUE(s.contains("exit_code") && s.contains("seconds") && s.contains("status")) << s.dump();
    EXPECT_NE(md.find("## " + s.at("title").get<std::string>()), std::string::npos) << s.at("title");
  }
  EXPECT_EQ(names, k_sections);
  return j;
}

TEST(ReportCli, QuickOnLavapipeWritesEverySection) {
  const std::string dir = scratch_dir("report_cli");
  const std::string cache = dir + "/cache";
  std::filesystem::remove_all(cache);
  std::filesystem::create_directories(cache);
  const std::string base = dir + "/report";
  auto r = run_rocky("report_cli", small(base), "XDG_CACHE_HOME='" + cache + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("report: [1/9] doctor"), std::string::npos) << r.err;  // progress on stderr
  const auto j = check_files(base);
  for (const auto& s : j.at("sections")) EXPECT_EQ(s.at("status"), "ok") << s.dump(1);
  // Every GPU section carries its command's JSON.
  for (const auto& s : j.at("sections")) {
    if (s.at("name") != "tune" && s.at("name").get<std::string>().rfind("synth", 0) != 0) {
      EXPECT_TRUE(s.contains("result")) << s.at("name");
    }
  }
  // The tune wrote its own file in the profile cache and nothing else there.
  std::set<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(cache + "/rocky/profiles"))
    files.insert(e.path().filename().string());
  EXPECT_EQ(files, std::set<std::string>{"report-quick-tune.json"});
}

TEST(ReportCli, AFailedSectionIsRecordedNotFatal) {
  const std::string dir = scratch_dir("report_cli_fail");
  const std::string base = dir + "/report";
  auto args = small(base);
  args.insert(args.end(), {"--device", "vulkan:7"});
  auto r = run_rocky("report_cli_fail", args, "XDG_CACHE_HOME='" + dir + "/cache'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = check_files(base);
  EXPECT_GT(j.at("failed_sections").get<int>(), 0);
  for (const auto& s : j.at("sections")) {
    const std::string n = s.at("name");
    if (n == "roofline" || n == "verify_1.5b" || n == "bench") {
      EXPECT_EQ(s.at("status"), "failed") << n;
      EXPECT_NE(s.at("stderr_tail").get<std::string>().find("device"), std::string::npos) << s.dump(1);
    }
    if (n == "synth_1.5b") {
      EXPECT_EQ(s.at("status"), "ok");
    }
  }
}

}  // namespace
}  // namespace rocky::test
