// Strict validation: every corruption kind of the M1 issue, made by mutating a real model file,
// must throw rocky::Error naming the file, the field/key/tensor and the byte offset.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/shared.hpp"
#include "core/error.hpp"
#include "gguf/corrupt_cases.hpp"
#include "gguf/gguf.hpp"

using rocky::gguf::GgufFile;
using namespace rocky::test;

namespace {

const char* const k_base = "reference/models/stories260K-f16.gguf";

void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  ASSERT_TRUE(f.good()) << path;
}

// The error message of opening `b` (written to a scratch file), or "" when it opened.
std::string open_error(const std::string& path, const Bytes& b) {
  write_bytes(path, b);
  try {
    GgufFile::open(path);
  } catch (const rocky::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(GgufCorrupt, EveryKindIsRefusedWithFieldAndOffset) {
  const Bytes base = read_file_bytes(shared_path(k_base));
  const std::string dir = scratch_dir("gguf_corrupt");
  auto cases = corrupt_cases(base);
  EXPECT_GE(cases.size(), 30u);
  for (const CorruptCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir + "/" + c.name + ".gguf";
    std::string msg = open_error(path, c.bytes);
    ASSERT_FALSE(msg.empty()) << "opened without error";
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;  // starts with the file
    EXPECT_NE(msg.find("(at byte offset 0x"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;  // one line
    for (const std::string& s : c.expect) EXPECT_NE(msg.find(s), std::string::npos) << "want '" << s << "' in: " << msg;
  }
}

TEST(GgufCorrupt, TruncatedAtEveryPointOfTheHeaderAndManyOfTheData) {
  const Bytes base = read_file_bytes(shared_path(k_base));
  const Layout l = scan(base);
  const auto ok = GgufFile::from_bytes(base, "base.gguf");
  uint64_t data_end = 0;
  for (const auto& t : ok.tensors()) data_end = std::max(data_end, ok.data_offset() + t.offset + t.n_bytes);
  std::vector<size_t> cuts;
  for (size_t c = 0; c < l.infos_end + 64; ++c) cuts.push_back(c);  // every byte up to the data
  for (size_t c = l.infos_end + 64; c < data_end; c += 997) cuts.push_back(c);
  cuts.push_back(data_end - 1);
  size_t n_kv_named = 0;
  for (size_t cut : cuts) {
    std::string msg;
    try {
      GgufFile::from_bytes(Bytes(base.begin(), base.begin() + static_cast<long>(cut)), "cut.gguf");
    } catch (const rocky::Error& e) {
      msg = e.what();
    }
    ASSERT_FALSE(msg.empty()) << "cut at " << cut << " opened";
    ASSERT_TRUE(msg.find("truncated") != std::string::npos || msg.find("past the end") != std::string::npos) << msg;
    ASSERT_NE(msg.find("byte offset 0x"), std::string::npos) << msg;
    // A cut inside a value names its key; a cut inside a tensor info after the name names the tensor.
    for (const KvLoc& kv : l.kvs) {
      if (cut >= kv.type_at && cut < kv.end) {
        ASSERT_NE(msg.find("key '" + kv.key + "'"), std::string::npos) << "cut " << cut << ": " << msg;
        ++n_kv_named;
      }
    }
    for (const TensorLoc& t : l.tensors) {
      if (cut >= t.ndims_at && cut < t.end) {
        ASSERT_NE(msg.find("tensor '" + t.name + "'"), std::string::npos) << msg;
      }
    }
  }
  EXPECT_GT(n_kv_named, 1000u);
  // The whole file still opens, and so does the file cut right after its last tensor's data.
  EXPECT_NO_THROW(GgufFile::from_bytes(Bytes(base.begin(), base.begin() + static_cast<long>(data_end)), "end.gguf"));
}

TEST(GgufCorrupt, NestedArraysWithinTheLimitLoad) {
  const Bytes base = read_file_bytes(shared_path(k_base));
  // [[1, 2], []] of i32, then an array of 3 strings.
  Bytes p;
  append_le<uint32_t>(p, 9);
  append_le<uint64_t>(p, 2);
  append_le<uint32_t>(p, 5);
  append_le<uint64_t>(p, 2);
  append_le<int32_t>(p, 1);
  append_le<int32_t>(p, 2);
  append_le<uint32_t>(p, 5);
  append_le<uint64_t>(p, 0);
  Bytes s;
  append_le<uint32_t>(s, 8);
  append_le<uint64_t>(s, 3);
  for (const char* x : {"a", "", "ccc"}) append_str(s, x);
  Bytes recs = kv_record("test.nested", 9, p);
  Bytes r2 = kv_record("test.strings", 9, s);
  recs.insert(recs.end(), r2.begin(), r2.end());
  auto f = GgufFile::from_bytes(with_kv_first(base, recs, 2), "nested.gguf");
  const auto* v = f.find("test.nested");
  ASSERT_NE(v, nullptr);
  ASSERT_EQ(v->items.size(), 2u);
  EXPECT_EQ(v->items[0].count, 2u);
  EXPECT_EQ(v->items[1].count, 0u);
  EXPECT_EQ(rocky::gguf::load_le<int32_t>(v->items[0].raw + 4), 2);
  EXPECT_EQ(*f.get_string_array("test.strings"), (std::vector<std::string_view>{"a", "", "ccc"}));
  EXPECT_EQ(f.tensors().size(), GgufFile::from_bytes(base, "b").tensors().size());
}

TEST(GgufCorrupt, Version2LoadsLikeVersion3) {
  Bytes b = read_file_bytes(shared_path(k_base));
  put_le<uint32_t>(b, 4, 2);  // v2 has v3's layout (v3 only added big-endian files, which rocky refuses)
  auto f = GgufFile::from_bytes(b, "v2.gguf");
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.tensors().size(), scan(b).tensors.size());
}

TEST(GgufCorrupt, EmptyAndNonRegularFiles) {
  const std::string dir = scratch_dir("gguf_corrupt");
  std::string msg = open_error(dir + "/empty.gguf", {});
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_THROW(GgufFile::open(dir), rocky::Error);  // a directory
}
