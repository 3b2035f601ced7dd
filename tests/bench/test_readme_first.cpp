// README's first command, minus install and build: every `./build/rocky …` step after them (synth a
// real-shape model, GPU prefill + `rocky verify`) runs here with the built binary and exits 0.
// Guards the quick start against drift (a renamed flag, a tolerance a q4_K_M synth cannot meet).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "bench/run_rocky.hpp"
#include "common/shared.hpp"

namespace {

std::vector<std::string> split_on(const std::string& s, const std::string& sep) {
  std::vector<std::string> v;
  size_t i = 0;
  while (true) {
    size_t j = s.find(sep, i);
    v.push_back(s.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) break;
    i = j + sep.size();
  }
  return v;
}

}  // namespace

TEST(ReadmeFirstCommand, SynthAndVerifyExitZero) {
  std::ifstream in(ROCKY_SOURCE_DIR "/README.md");
  ASSERT_TRUE(in) << "README.md not found";
  std::string line, first;
  while (std::getline(in, line)) {
    if (line.rfind("bash scripts/install-deps.sh && bash scripts/build.sh && ", 0) == 0) {
      first = line;
      break;
    }
  }
  ASSERT_FALSE(first.empty()) << "README's first command must start with install + build";
  auto steps = split_on(first, " && ");
  ASSERT_GE(steps.size(), 4u) << first;
  const std::string dir = rocky::test::scratch_dir("readme_first");
  bool verified = false;
  for (size_t i = 2; i < steps.size(); ++i) {
    SCOPED_TRACE(steps[i]);
    ASSERT_EQ(steps[i].rfind("./build/rocky ", 0), 0u) << "only rocky steps after the build";
    auto words = split_on(steps[i].substr(14), " ");
    for (auto& w : words) {
      if (w.rfind("/tmp/", 0) == 0) w = dir + "/" + w.substr(5);  // keep test files in the scratch dir
    }
    verified |= words[0] == "verify";
    auto r = rocky::test::run_rocky("readme_first", words);
    EXPECT_EQ(r.rc, 0) << r.out << r.err;
    if (words[0] == "verify") {
      EXPECT_NE(r.out.find("OK"), std::string::npos) << r.out;
    }
  }
  EXPECT_TRUE(verified) << "the first command must run rocky verify";
}
