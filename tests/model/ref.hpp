// Helpers for comparing with llama.cpp's reference outputs (../shared/reference/ref/<label>/).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
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

// Copies stories260K.gguf with `from` replaced by `to` (same length) and `extra` written at
// `extra_offset` bytes after it, so the file stays valid GGUF (bad-model tests).
inline std::string patched_copy(const std::string& name, const std::string& from, const std::string& to,
                                size_t extra_offset = 0, std::vector<uint8_t> extra = {}) {
  auto bytes = read_file_bytes(shared_path("reference/models/stories260K.gguf"));
  auto it = std::search(bytes.begin(), bytes.end(), from.begin(), from.end());
  if (it == bytes.end()) throw std::runtime_error("patched_copy: '" + from + "' not found");
  std::copy(to.begin(), to.end(), it);
  const size_t pos = static_cast<size_t>(it - bytes.begin());
  std::copy(extra.begin(), extra.end(), bytes.begin() + static_cast<std::ptrdiff_t>(pos + from.size() + extra_offset));
  std::string path = scratch_dir("model_errors") + "/" + name;
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

}  // namespace rocky::test
