// A synth preset is the same bytes on every architecture: the SHA-256 of `rocky synth`'s file for
// a small preset and for a real-shape preset (one layer, a cut vocabulary) equals a literal. The
// literals were taken on x86-64; the arm64 cross build runs this same test under qemu-user, so a
// draw made in a different order or a multiply-add fused into an FMA on one target fails it.
// When synth's output changes on purpose, update the literals (and say why in the commit).
#include <gtest/gtest.h>

#include <openssl/evp.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/shared.hpp"
#include "synth/synth.hpp"

namespace {

std::string sha256_hex(const std::vector<uint8_t>& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("EVP_Digest");
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string s;
  for (unsigned int i = 0; i < n; ++i) {
    s += k_hex[md[i] >> 4];
    s += k_hex[md[i] & 15];
  }
  return s;
}

std::string synth_sha256(const std::string& preset, rocky::synth::FileType type, std::optional<uint32_t> layers,
                         std::optional<uint32_t> vocab) {
  rocky::synth::SynthOptions o;
  o.preset = preset;
  o.out = rocky::test::scratch_dir("synth-checksum") + "/" + preset + ".gguf";
  o.type = type;
  o.layers = layers;
  o.vocab = vocab;
  o.progress = false;
  // One thread: the bytes do not depend on the thread count (test_synth_files checks that), and
  // qemu-user, which runs this test for arm64, makes every thread start and exit very slow.
  o.threads = 1;
  rocky::synth::synth_model(o);
  return sha256_hex(rocky::test::read_file_bytes(o.out));
}

}  // namespace

// `rocky synth --preset qwen2-test` (Q4_K_M, the default type): vocabulary, merges, f32 norms and
// quantized weights.
TEST(SynthChecksum, Qwen2TestQ4KM) {
  EXPECT_EQ(synth_sha256("qwen2-test", rocky::synth::FileType::Q4_K_M, std::nullopt, std::nullopt),
            "06f073cf51830cd001e4f6bb3978e25d01abbed52d359b0b96ab8985cfa76ab2");
}

// `rocky synth --preset qwen2-test --type f32`: every weight as drawn, before any quantization.
TEST(SynthChecksum, Qwen2TestF32) {
  EXPECT_EQ(synth_sha256("qwen2-test", rocky::synth::FileType::F32, std::nullopt, std::nullopt),
            "bd93ad76bda6b904b85731b76473aa37a7d1107a31055a6370da438cc53ac70a");
}

// `rocky synth --preset qwen2.5-0.5b --layers 1 --vocab 4096`: a real shape (896 wide, 4864 FFN,
// GQA 14/2) at one layer, the vocabulary cut to keep the file small.
TEST(SynthChecksum, Qwen25HalfBOneLayer) {
  EXPECT_EQ(synth_sha256("qwen2.5-0.5b", rocky::synth::FileType::Q4_K_M, 1u, 4096u),
            "3c0770bf50182a770b5af351619040b4e9aaf0c3076436a9974fd46995654f1c");
}
