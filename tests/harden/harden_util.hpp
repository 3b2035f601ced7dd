// Helpers for the hardening tests: rewrite a GGUF file with edits (metadata,
// tensor data, shapes) to make the reproductions from public bug reports, and run the CLI.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/run_rocky.hpp"
#include "common/shared.hpp"
#include "gguf/gguf.hpp"
#include "gguf/writer.hpp"

namespace rocky::test {

// A tensor as it will be written: the edit may change the data (and the row count, ne[1]).
struct TensorEdit {
  std::array<uint64_t, 4> ne;
  std::vector<uint8_t> data;
};

// Copies `in` to `out`: each metadata key through `kv` (return false to drop it; it may set other
// values on the writer instead), each tensor through `tensor` (may change ne and data).
inline void rewrite_gguf(const std::string& in, const std::string& out,
                         const std::function<bool(std::string_view, const gguf::Value&, gguf::Writer&)>& kv,
                         const std::function<void(const gguf::TensorInfo&, TensorEdit&)>& tensor) {
  gguf::GgufFile f = gguf::GgufFile::open(in);
  gguf::Writer w;
  for (const auto& [key, v] : f.metadata()) {
    if (!kv || kv(key, v, w)) w.set(key, v);
  }
  for (const gguf::TensorInfo& t : f.tensors()) {
    TensorEdit e{t.ne, std::vector<uint8_t>(t.data, t.data + t.n_bytes)};
    if (tensor) tensor(t, e);
    w.add_tensor(t.name, t.type, std::span<const uint64_t>(e.ne.data(), t.n_dims), std::move(e.data));
  }
  w.write(out);
}

inline float get_f32(const std::vector<uint8_t>& d, size_t i) {
  float x;
  std::memcpy(&x, d.data() + i * 4, 4);
  return x;
}
inline void set_f32(std::vector<uint8_t>& d, size_t i, float x) { std::memcpy(d.data() + i * 4, &x, 4); }

inline bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace rocky::test
