// hash64 (XXH64's construction) and CacheIdentity::hash: what the prefix cache's keys and both
// its disk entries and the slot files (slot_file.cpp) are checked with. Nothing here needs a
// model, so the slot-file parser links without the runtime (fuzz/slot_file_fuzz.cpp).
#include <cstring>

#include "runtime/prefix_cache.hpp"
#include "runtime/prefix_cache_detail.hpp"

namespace rocky::runtime {

// hash64: XXH64's construction (4 lanes of multiply-rotate rounds over 32-byte stripes, merged,
// then the tail and an avalanche).
namespace {
constexpr uint64_t k_p1 = 0x9E3779B185EBCA87ull, k_p2 = 0xC2B2AE3D27D4EB4Full, k_p3 = 0x165667B19E3779F9ull,
                   k_p4 = 0x85EBCA77C2B2AE63ull, k_p5 = 0x27D4EB2F165667C5ull;
inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t rd64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t rd32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t round64(uint64_t acc, uint64_t in) { return rotl(acc + in * k_p2, 31) * k_p1; }
inline uint64_t merge64(uint64_t acc, uint64_t v) { return (acc ^ round64(0, v)) * k_p1 + k_p4; }
}  // namespace

uint64_t hash64(const void* data, size_t n, uint64_t seed) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  const uint8_t* end = p + n;
  uint64_t h;
  if (n >= 32) {
    uint64_t v1 = seed + k_p1 + k_p2, v2 = seed + k_p2, v3 = seed, v4 = seed - k_p1;
    const uint8_t* limit = end - 32;
    do {
      v1 = round64(v1, rd64(p));
      v2 = round64(v2, rd64(p + 8));
      v3 = round64(v3, rd64(p + 16));
      v4 = round64(v4, rd64(p + 24));
      p += 32;
    } while (p <= limit);
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = merge64(h, v1);
    h = merge64(h, v2);
    h = merge64(h, v3);
    h = merge64(h, v4);
  } else {
    h = seed + k_p5;
  }
  h += static_cast<uint64_t>(n);
  for (; p + 8 <= end; p += 8) h = rotl(h ^ round64(0, rd64(p)), 27) * k_p1 + k_p4;
  if (p + 4 <= end) {
    h = rotl(h ^ (uint64_t(rd32(p)) * k_p1), 23) * k_p2 + k_p3;
    p += 4;
  }
  for (; p < end; ++p) h = rotl(h ^ (uint64_t(*p) * k_p5), 11) * k_p1;
  h ^= h >> 33;
  h *= k_p2;
  h ^= h >> 29;
  h *= k_p3;
  h ^= h >> 32;
  return h;
}

using prefix_detail::hash_pod;

uint64_t CacheIdentity::hash() const {
  uint64_t h = hash_pod(model, 0x726F636B79ull);
  h = hash_pod(kv_type, h);
  h = hash_pod(n_layer, h);
  h = hash_pod(n_embd_kv, h);
  h = hash_pod(kv_bytes_per_pos, h);
  // Only for hybrid models, so every pure-attention identity (and its disk files) is unchanged.
  if (state_bytes > 0) h = hash_pod(state_bytes, h);
  return h;
}

}  // namespace rocky::runtime
