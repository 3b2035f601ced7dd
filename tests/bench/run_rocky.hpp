// Runs the built `rocky` binary with arguments (single-quoted; none of ours holds a quote).
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/shared.hpp"

namespace rocky::test {

struct RunResult {
  int rc = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline RunResult run_rocky(const std::string& scratch, const std::vector<std::string>& args,
                           const std::string& env = "") {
  const std::string dir = scratch_dir(scratch);
  std::string cmd = env + " '" ROCKY_BINARY_DIR "/rocky'";
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " >'" + dir + "/out' 2>'" + dir + "/err'";
  RunResult r;
  int st = std::system(cmd.c_str());
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp(dir + "/out");
  r.err = slurp(dir + "/err");
  return r;
}

}  // namespace rocky::test
