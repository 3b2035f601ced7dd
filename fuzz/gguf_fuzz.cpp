// libFuzzer target for the GGUF reader (and, on inputs the reader accepts, the writer).
//
// Any input must either open or throw rocky::Error — never crash, read out of bounds (ASan: the
// bytes are copied into an exactly sized buffer), hit undefined behaviour (UBSan aborts) or throw
// anything else. An accepted file must survive a read → write → read round trip unchanged.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "core/error.hpp"
#include "gguf/gguf.hpp"
#include "gguf/summary.hpp"
#include "gguf/writer.hpp"

namespace {

using namespace rocky::gguf;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "gguf_fuzz: %s\n", what);
  std::abort();
}

volatile uint64_t g_sink;

void touch(const GgufFile& f) {
  uint64_t acc = 0;
  for (const auto& [key, v] : f.metadata()) {
    acc += key.size() + format_value(v, 4).size();
    if (v.type == ValueType::ARRAY) {
      switch (v.elem_type) {
        case ValueType::STRING: acc += f.get_string_array(key)->size(); break;
        case ValueType::F32: acc += f.get_f32_array(key)->size(); break;
        case ValueType::ARRAY:
        case ValueType::F64:
        case ValueType::BOOL: break;
        default: try { acc += f.get_int_array(key)->size();
          } catch (const rocky::Error&) {  // a u64 element above INT64_MAX
          }
      }
    }
  }
  for (const TensorInfo& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) die("tensor index broken");
    acc += t.data[0] + t.data[t.n_bytes - 1];  // first and last byte are inside the file
  }
  Totals tot = totals(f);
  ArchSummary a = arch_summary(f);
  acc += tot.n_params + a.arch.size();
  g_sink = acc;
}

void round_trip(const GgufFile& f) {
  Writer w;
  for (const auto& [key, v] : f.metadata()) w.set(key, v);
  for (const TensorInfo& t : f.tensors())
    w.add_tensor(t.name, t.type, std::span<const uint64_t>(t.ne.data(), t.n_dims), {t.data, t.n_bytes});
  GgufFile g = GgufFile::from_bytes(w.to_bytes(), "round-trip.gguf");
  if (g.metadata().size() != f.metadata().size() || g.tensors().size() != f.tensors().size())
    die("round trip changed the counts");
  for (size_t k = 0; k < f.metadata().size(); ++k) {
    if (g.metadata()[k].first != f.metadata()[k].first) die("round trip changed a key");
    if (format_value(g.metadata()[k].second, 64) != format_value(f.metadata()[k].second, 64))
      die("round trip changed a value");
  }
  for (size_t k = 0; k < f.tensors().size(); ++k) {
    const TensorInfo& a = f.tensors()[k];
    const TensorInfo& b = g.tensors()[k];
    if (a.name != b.name || a.type != b.type || a.ne != b.ne || a.n_bytes != b.n_bytes ||
        std::memcmp(a.data, b.data, a.n_bytes) != 0)
      die("round trip changed a tensor");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<GgufFile> f;
  try {
    f.emplace(GgufFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.gguf"));
  } catch (const rocky::Error&) {
    return 0;  // refused: the expected outcome for most inputs
  }
  touch(*f);
  try {
    round_trip(*f);
  } catch (const rocky::Error& e) {
    std::fprintf(stderr, "gguf_fuzz: an accepted file failed the round trip: %s\n", e.what());
    std::abort();
  }
  return 0;
}
