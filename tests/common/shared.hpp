// Test helpers for the read-only reference data in ../shared (models, llama.cpp outputs).
// shared_path() FAILS the test (never skips) when the data is missing: CI places the clone beside
// shared/, and a test that silently skips proves nothing.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace rocky::test {

// Absolute path of `rel` under the shared folder (e.g. "reference/models/stories260K.gguf").
// Throws (failing the test with a clear message) when the file does not exist.
inline std::string shared_path(const std::string& rel) {
  std::filesystem::path p = std::filesystem::path(ROCKY_SHARED_DIR) / rel;
  if (!std::filesystem::exists(p)) {
    throw std::runtime_error("missing reference data: " + p.string() +
                             " (clone rocky beside the shared/ folder; see README.md)");
  }
  return p.string();
}

inline std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// A fresh scratch directory under the build tree for files a test makes.
inline std::string scratch_dir(const std::string& name) {
  std::filesystem::path p = std::filesystem::path(ROCKY_BINARY_DIR) / "test-scratch" / name;
  std::filesystem::create_directories(p);
  return p.string();
}

// n seeded random token ids in [3, n_vocab) with BOS (1) first: a prompt for the runtime tests.
inline std::vector<int32_t> random_prompt(size_t n, uint32_t seed, int32_t n_vocab) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(3, n_vocab - 1);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = d(rng);
  v[0] = 1;  // BOS
  return v;
}

}  // namespace rocky::test
