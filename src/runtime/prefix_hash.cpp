// The prefix cache's keys: hash64 (XXH64's construction), the model/context identity every
// entry is bound to, and the chained block keys of a token sequence (see prefix_cache.hpp).
#include <algorithm>
#include <thread>
#include <vector>

#include "model/model.hpp"
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

namespace {
// The whole file in 64 MiB chunks hashed on several threads, then the chunk hashes.
uint64_t hash_file_parallel(const uint8_t* data, uint64_t size) {
  constexpr uint64_t k_chunk = 64ull << 20;
  const uint64_t n_chunks = (size + k_chunk - 1) / k_chunk;
  std::vector<uint64_t> hs(n_chunks);
  const unsigned n_threads = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 8));
  std::atomic<uint64_t> next{0};
  auto work = [&] {
    for (uint64_t c; (c = next++) < n_chunks;)
      hs[c] = hash64(data + c * k_chunk, static_cast<size_t>(std::min(k_chunk, size - c * k_chunk)), c);
  };
  std::vector<std::thread> ts;
  for (unsigned t = 1; t < n_threads; ++t) ts.emplace_back(work);
  work();
  for (auto& t : ts) t.join();
  return hash64(hs.data(), hs.size() * sizeof(uint64_t), size);
}
}  // namespace

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

CacheIdentity cache_identity(const model::Model& m, const backend::Context& ctx) {
  const auto& f = m.file();
  const auto& hp = m.hparams();
  CacheIdentity id;
  uint64_t h = hash_file_parallel(f.file_data(), f.file_size());
  h = hash_pod(hp.rope_freq_base, h);
  h = hash_pod(hp.rope_freq_scale, h);
  h = hash_pod(static_cast<int32_t>(hp.rope_mode), h);
  h = hash_pod(hp.n_rot, h);
  id.model = h;
  id.kv_type = static_cast<uint32_t>(ctx.kv_type());
  id.n_layer = hp.n_layer;
  id.n_embd_kv = hp.n_embd_kv();
  id.kv_bytes_per_pos = ctx.kv_export_bytes(1);
  if (ctx.kv().recurrent()) {  // the layers whose state a graph reads (as Session::state_layers)
    const graph::Graph g = m.build_graph(model::UbatchSpec{1, 0, ctx.kv().n_ctx, model::Logits::LAST});
    std::vector<int32_t> layers;
    for (const graph::Node& n : g.nodes)
      if ((n.op == graph::Op::SSM_CONV || n.op == graph::Op::GATED_DELTA) && n.layer >= 0) layers.push_back(n.layer);
    std::sort(layers.begin(), layers.end());
    layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
    id.state_bytes = ctx.state_export_bytes(layers.size());
  }
  return id;
}

std::vector<uint64_t> PrefixCache::chain(std::span<const int32_t> tokens) const {
  std::vector<uint64_t> keys;
  uint64_t k = seed_;
  const size_t b = static_cast<size_t>(o_.block);
  for (size_t i = 0; i + b <= tokens.size(); i += b) {
    k = hash64(tokens.data() + i, b * sizeof(int32_t), k);
    keys.push_back(k);
  }
  return keys;
}
}  // namespace rocky::runtime
