// Helpers shared by the quant tests: reference JSON loading, hex decoding, bit comparison and
// ggml's error statistic.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/shared.hpp"

namespace rocky::test {

inline nlohmann::json load_json(const std::string& rel) {
  const std::string path = shared_path(rel);
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(f);
}

inline std::vector<uint8_t> from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) throw std::runtime_error("odd-length hex string");
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw std::runtime_error(std::string("bad hex digit ") + c);
  };
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(nib(hex[2 * i]) << 4 | nib(hex[2 * i + 1]));
  return out;
}

// JSON numbers are exact float32 values written as shortest round-trip doubles ("-0.0" kept).
inline std::vector<float> json_floats(const nlohmann::json& arr) {
  std::vector<float> v;
  v.reserve(arr.size());
  for (const auto& x : arr) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

// Number of positions whose float bit patterns differ (so -0.0 != +0.0); reports the first few.
inline int64_t count_bit_mismatches(const std::vector<float>& got, const std::vector<float>& want,
                                    const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i])) {
      if (bad < 3) {
        ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " (0x" << std::hex
                      << std::bit_cast<uint32_t>(got[i]) << ") want " << want[i] << " (0x"
                      << std::bit_cast<uint32_t>(want[i]) << std::dec << ")";
      }
      ++bad;
    }
  }
  return bad;
}

// ggml's test-quantize-fns statistic: sqrt(Σ(x - y)²) / n, in double (not an RMSE).
inline double ggml_error_metric(const std::vector<float>& x, const std::vector<float>& y) {
  double s = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(y[i]);
    s += d * d;
  }
  return std::sqrt(s) / static_cast<double>(x.size());
}

}  // namespace rocky::test
