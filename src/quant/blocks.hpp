// ggml block formats, laid out byte for byte as GGUF stores them.
//
// Source: ggml/src/ggml-common.h (llama.cpp commit 0253fb21f), the public definition of the block
// structs; the layouts below are restated from it, the code is rocky's own. All multi-byte fields
// are little-endian (rocky only runs on little-endian hosts, checked below). `half` fields hold IEEE
// binary16 bits (see quant.hpp f16_to_f32).
//
// Terms: a block covers `k_*` consecutive elements of a row (ne0 direction). Quant values ("q") are
// unsigned bit fields; "element i" is the i-th float of the block. Nibble = 4 bits, lo = bits 0..3,
// hi = bits 4..7.
//
// Alignment: tensor data in a GGUF file (and rows inside it) need not be aligned to alignof(Block).
// Code reading blocks from raw bytes must memcpy them (load_block below), never cast the pointer.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rocky::quant {

static_assert(std::endian::native == std::endian::little, "rocky's block formats assume a little-endian host");

inline constexpr int k_qk4_0 = 32;         // elements per q4_0 block
inline constexpr int k_qk4_1 = 32;         // elements per q4_1 block
inline constexpr int k_qk5_0 = 32;         // elements per q5_0 block
inline constexpr int k_qk5_1 = 32;         // elements per q5_1 block
inline constexpr int k_qk8_0 = 32;         // elements per q8_0 block
inline constexpr int k_qk8_1 = 32;         // elements per q8_1 block
inline constexpr int k_qk_k = 256;         // elements per K-quant super-block (QK_K)
inline constexpr int k_k_scale_size = 12;  // bytes of packed 6-bit scales/mins in q4_K / q5_K

// ---- plain types (one element per "block") -------------------------------------------------------

// f32: IEEE binary32.
struct BlockF32 {
  float v;
};
static_assert(sizeof(BlockF32) == 4);

// f16: IEEE binary16 bits.
struct BlockF16 {
  uint16_t v;
};
static_assert(sizeof(BlockF16) == 2);

// bf16: the upper 16 bits of an IEEE binary32.
struct BlockBF16 {
  uint16_t v;
};
static_assert(sizeof(BlockBF16) == 2);

// ---- 32-element blocks ---------------------------------------------------------------------------

// q4_0 (18 bytes): symmetric 4-bit.
//   element j      (j < 16) = ((qs[j] & 0xF) - 8) * d
//   element j + 16          = ((qs[j] >> 4)  - 8) * d
struct BlockQ4_0 {
  uint16_t d;      // half: scale
  uint8_t qs[16];  // nibbles: lo = elements 0..15, hi = elements 16..31
};
static_assert(sizeof(BlockQ4_0) == 18 && offsetof(BlockQ4_0, qs) == 2);

// q4_1 (20 bytes): 4-bit with offset.
//   element j (j < 16) = (qs[j] & 0xF) * d + m;  element j + 16 = (qs[j] >> 4) * d + m
struct BlockQ4_1 {
  uint16_t d;      // half: scale
  uint16_t m;      // half: offset (the block minimum)
  uint8_t qs[16];  // nibbles as in q4_0
};
static_assert(sizeof(BlockQ4_1) == 20 && offsetof(BlockQ4_1, qs) == 4);

// q5_0 (22 bytes): symmetric 5-bit. qh read as one little-endian uint32 H:
//   element j (j < 16) = (((qs[j] & 0xF) | bit(H, j)      << 4) - 16) * d
//   element j + 16     = (((qs[j] >> 4)  | bit(H, j + 16) << 4) - 16) * d
struct BlockQ5_0 {
  uint16_t d;      // half: scale
  uint8_t qh[4];   // 5th bit of each element, bit i = element i
  uint8_t qs[16];  // low 4 bits, nibbles as in q4_0
};
static_assert(sizeof(BlockQ5_0) == 22 && offsetof(BlockQ5_0, qh) == 2 && offsetof(BlockQ5_0, qs) == 6);

// q5_1 (24 bytes): 5-bit with offset; like q5_0 but value = q * d + m with q in 0..31 (no -16).
struct BlockQ5_1 {
  uint16_t d;      // half: scale
  uint16_t m;      // half: offset
  uint8_t qh[4];   // 5th bits as in q5_0
  uint8_t qs[16];  // low 4 bits as in q5_0
};
static_assert(sizeof(BlockQ5_1) == 24 && offsetof(BlockQ5_1, qh) == 4 && offsetof(BlockQ5_1, qs) == 8);

// q8_0 (34 bytes): element j = qs[j] * d.
struct BlockQ8_0 {
  uint16_t d;  // half: scale = amax / 127
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34 && offsetof(BlockQ8_0, qs) == 2);

// q8_1 (36 bytes): activation format of the q4_1/q5_1 dot products; element j = qs[j] * d.
// s = half(d32 * Σ qs) where d32 is the unrounded float scale (not half(d)).
struct BlockQ8_1 {
  uint16_t d;  // half: scale = amax / 127
  uint16_t s;  // half: d32 * sum(qs)
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_1) == 36 && offsetof(BlockQ8_1, qs) == 4);

// ---- 256-element K-quant super-blocks ------------------------------------------------------------
// Element order inside a super-block (all K types): the 256 elements form two halves of 128
// (q2_K, q3_K, q6_K) or four quarters of 64 (q4_K, q5_K); the bit planes / nibbles of one run of
// 32 (or 16) packed bytes give consecutive runs of 32 elements.

// q2_K (84 bytes): 16 sub-blocks of 16 elements, 2-bit quants, 4-bit scale and min per sub-block.
//   element e = n + 32*j + l   (n in {0, 128}, j in 0..3, l in 0..31):
//     q  = (qs[n/4 + l] >> 2j) & 3
//     sc = scales[n/16 + 2j + l/16]
//     value = (d * (sc & 0xF)) * q - dmin * (sc >> 4)
struct BlockQ2_K {
  uint8_t scales[16];  // lo nibble: scale, hi nibble: min, per 16-element sub-block
  uint8_t qs[64];      // 2-bit quants, four bit planes per byte
  uint16_t d;          // half: super-block scale for the scales
  uint16_t dmin;       // half: super-block scale for the mins
};
static_assert(sizeof(BlockQ2_K) == 84 && offsetof(BlockQ2_K, qs) == 16 && offsetof(BlockQ2_K, d) == 80);

// q3_K (110 bytes): 16 sub-blocks of 16 elements, 3-bit quants (2 low bits in qs, high bit in
// hmask), signed 6-bit scales.
//   element e = n + 32*j + l   (n in {0, 128}, j in 0..3, l in 0..31):
//     q  = ((qs[n/4 + l] >> 2j) & 3) - (bit(hmask[l], n/32 + j) ? 0 : 4)        (-4..3)
//     s  = scale6(n/16 + 2j + l/16) - 32                                          (-32..31)
//     value = (d * s) * q
//   scale6(k) (k in 0..15) = lo4 | hi2 << 4 with
//     lo4 = k < 8 ? scales[k] & 0xF : scales[k - 8] >> 4
//     hi2 = (scales[8 + k % 4] >> (2 * (k / 4))) & 3
struct BlockQ3_K {
  uint8_t hmask[32];   // high bit of each quant; bit b of hmask[l] belongs to element 32*b + l
  uint8_t qs[64];      // low 2 bits, four bit planes per byte
  uint8_t scales[12];  // 16 packed 6-bit scales, see scale6 above
  uint16_t d;          // half: super-block scale
};
static_assert(sizeof(BlockQ3_K) == 110 && offsetof(BlockQ3_K, qs) == 32 && offsetof(BlockQ3_K, scales) == 96 &&
              offsetof(BlockQ3_K, d) == 108);

// q4_K (144 bytes): 8 sub-blocks of 32 elements, 4-bit quants, 6-bit scale and min each.
//   element e = 64*p + 32*h + l  (p in 0..3, h in {0,1}, l in 0..31), sub-block k = 2p + h:
//     q = h == 0 ? qs[32p + l] & 0xF : qs[32p + l] >> 4
//     value = (d * sc(k)) * q - dmin * m(k)
//   sc(k), m(k) (6 bits each) from scales[12]:
//     k < 4:  sc = scales[k] & 63,                              m = scales[k + 4] & 63
//     k >= 4: sc = (scales[k + 4] & 0xF) | (scales[k - 4] >> 6) << 4,
//             m  = (scales[k + 4] >> 4)  | (scales[k]     >> 6) << 4
struct BlockQ4_K {
  uint16_t d;                      // half: super-block scale for the scales
  uint16_t dmin;                   // half: super-block scale for the mins
  uint8_t scales[k_k_scale_size];  // packed 6-bit scales and mins, see above
  uint8_t qs[128];                 // nibbles
};
static_assert(sizeof(BlockQ4_K) == 144 && offsetof(BlockQ4_K, scales) == 4 && offsetof(BlockQ4_K, qs) == 16);

// q5_K (176 bytes): as q4_K plus a 5th bit per quant:
//     q = (q4_K's nibble) + (bit(qh[l], k) ? 16 : 0)     with k = 2p + h the sub-block index
//     value = (d * sc(k)) * q - dmin * m(k)
struct BlockQ5_K {
  uint16_t d;                      // half: super-block scale for the scales
  uint16_t dmin;                   // half: super-block scale for the mins
  uint8_t scales[k_k_scale_size];  // packed as in q4_K
  uint8_t qh[32];                  // 5th bits: bit k of qh[l] belongs to element 32k + l
  uint8_t qs[128];                 // low 4 bits, nibbles as in q4_K
};
static_assert(sizeof(BlockQ5_K) == 176 && offsetof(BlockQ5_K, scales) == 4 && offsetof(BlockQ5_K, qh) == 16 &&
              offsetof(BlockQ5_K, qs) == 48);

// q6_K (210 bytes): 16 sub-blocks of 16 elements, 6-bit quants, signed 8-bit scales.
//   element e = n + 32*r + l  (n in {0, 128}, r in 0..3, l in 0..31):
//     lo4 = r is 0/1: ql[n/2 + 32r + l] & 0xF;  r is 2/3: ql[n/2 + 32(r-2) + l] >> 4
//     hi2 = (qh[n/4 + l] >> 2r) & 3
//     q   = (lo4 | hi2 << 4) - 32                                                 (-32..31)
//     value = (d * scales[n/16 + 2r + l/16]) * q
struct BlockQ6_K {
  uint8_t ql[128];    // low 4 bits
  uint8_t qh[64];     // high 2 bits, four planes per byte
  int8_t scales[16];  // per 16-element sub-block
  uint16_t d;         // half: super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210 && offsetof(BlockQ6_K, qh) == 128 && offsetof(BlockQ6_K, scales) == 192 &&
              offsetof(BlockQ6_K, d) == 208);

// q8_K (292 bytes): activation format of the K-quant dot products; element j = d * qs[j].
// d = 1 / (-127 / max) where max is the signed value of largest magnitude (so d may be negative).
struct BlockQ8_K {
  float d;  // f32 scale
  int8_t qs[256];
  int16_t bsums[16];  // sum of qs over each group of 16
};
static_assert(sizeof(BlockQ8_K) == 292 && offsetof(BlockQ8_K, qs) == 4 && offsetof(BlockQ8_K, bsums) == 260);

// Reads block `i` of type B from raw (possibly unaligned) bytes.
template <typename B>
inline B load_block(const void* src, int64_t i) {
  B b;
  std::memcpy(&b, static_cast<const unsigned char*>(src) + i * static_cast<int64_t>(sizeof(B)), sizeof(B));
  return b;
}

// Writes block `i` of type B to raw (possibly unaligned) bytes.
template <typename B>
inline void store_block(void* dst, int64_t i, const B& b) {
  std::memcpy(static_cast<unsigned char*>(dst) + i * static_cast<int64_t>(sizeof(B)), &b, sizeof(B));
}

}  // namespace rocky::quant
