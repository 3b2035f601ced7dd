// Makes the GGUF fuzzer's seed corpus from real files: gguf_seeds OUT_DIR FILE.gguf...
//
// For each file it writes (1) a small valid GGUF with the same metadata keys and types (arrays cut
// to their first 16 elements) and up to 16 tensors cut to their first row, and (2) the file's first
// 4 KiB. Seeds stay a few KiB, so each fuzz execution is fast. Model bytes are never committed:
// the corpus is made in the build tree by a CTest fixture. Exit 1 (naming the file) on any error,
// e.g. when ../shared is missing.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gguf/gguf.hpp"
#include "gguf/writer.hpp"

namespace {

using namespace rocky::gguf;

constexpr uint64_t k_max_array = 16;
constexpr size_t k_max_tensors = 16;
constexpr uint64_t k_max_row_bytes = 2048;

Value cut(const Value& v) {
  Value c = v;
  if (v.type != ValueType::ARRAY || v.count <= k_max_array) return c;
  c.count = k_max_array;
  if (v.elem_type == ValueType::STRING) c.strings.resize(k_max_array);
  if (v.elem_type == ValueType::ARRAY) c.items.resize(k_max_array);
  return c;
}

void write_file(const std::filesystem::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: gguf_seeds OUT_DIR FILE.gguf...\n");
    return 2;
  }
  try {
    std::filesystem::path out(argv[1]);
    std::filesystem::create_directories(out);
    for (int a = 2; a < argc; ++a) {
      GgufFile f = GgufFile::open(argv[a]);
      const std::string stem = std::filesystem::path(argv[a]).stem().string();
      Writer w;
      for (const auto& [key, v] : f.metadata()) w.set(key, cut(v));
      size_t n = 0;
      for (const TensorInfo& t : f.tensors()) {
        uint64_t rb = rocky::row_bytes(t.type, t.ne[0]);
        if (rb > k_max_row_bytes || n == k_max_tensors) continue;
        const uint64_t ne[1] = {t.ne[0]};
        w.add_tensor(t.name, t.type, ne, {t.data, rb});
        ++n;
      }
      write_file(out / (stem + ".small.gguf"), w.to_bytes());
      std::vector<uint8_t> head(f.file_data(), f.file_data() + std::min<uint64_t>(f.file_size(), 4096));
      write_file(out / (stem + ".head4k.gguf"), head);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gguf_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
