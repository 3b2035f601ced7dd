// The prefix cache's keys: the model/context identity every entry is bound to (hash64 and
// CacheIdentity::hash are in hash64.cpp) and the chained block keys of a token sequence (see
// prefix_cache.hpp).
#include <algorithm>
#include <thread>
#include <vector>

#include "model/model.hpp"
#include "runtime/prefix_cache.hpp"
#include "runtime/prefix_cache_detail.hpp"

namespace rocky::runtime {

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
