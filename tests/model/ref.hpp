// Helpers for comparing with llama.cpp's reference outputs (../shared/reference/ref/<label>/).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/shared.hpp"

namespace rocky::test {

inline const std::vector<std::string> k_prompts = {"p1_short", "p2_paragraph", "p3_unicode_code"};

struct RefCase {
  nlohmann::json meta;               // <prompt>.json
  std::vector<int32_t> eval_tokens;  // prompt ids as llama.cpp evaluated them (BOS included)
  std::vector<int32_t> greedy_ids;   // cpu greedy continuation (32 tokens)
  int32_t n_vocab = 0;
  std::string prompt;
};

inline std::string ref_path(const std::string& label, const std::string& prompt, const std::string& suffix) {
  return shared_path("reference/ref/" + label + "/" + prompt + suffix);
}

inline RefCase load_ref(const std::string& label, const std::string& prompt) {
  RefCase r;
  std::ifstream f(ref_path(label, prompt, ".json"));
  r.meta = nlohmann::json::parse(f);
  r.eval_tokens = r.meta.at("eval_tokens").get<std::vector<int32_t>>();
  r.greedy_ids = r.meta.at("cpu").at("greedy_ids").get<std::vector<int32_t>>();
  r.n_vocab = r.meta.at("n_vocab").get<int32_t>();
  r.prompt = r.meta.at("prompt").get<std::string>();
  return r;
}

inline std::vector<float> load_f32(const std::string& path) {
  auto b = read_file_bytes(path);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

// max|a - ref| / max|ref|
inline double rel_err(const std::vector<float>& a, const std::vector<float>& ref) {
  double md = 0, mr = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    md = std::max(md, std::fabs(static_cast<double>(a[i]) - ref[i]));
    mr = std::max(mr, std::fabs(static_cast<double>(ref[i])));
  }
  return md / mr;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& ref) {
  double md = 0;
  for (size_t i = 0; i < ref.size(); ++i) md = std::max(md, std::fabs(static_cast<double>(a[i]) - ref[i]));
  return md;
}

}  // namespace rocky::test
