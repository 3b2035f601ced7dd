// The prefix KV cache (see prefix_cache.hpp).
#include "runtime/prefix_cache.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>

#include "core/error.hpp"
#include "model/model.hpp"
#include "runtime/batch.hpp"
#include "runtime/session.hpp"

namespace rocky::runtime {

// ---------------------------------------------------------------------------------------------
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

namespace {
template <class T>
uint64_t hash_pod(const T& v, uint64_t seed) {
  return hash64(&v, sizeof v, seed);
}

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

constexpr char k_magic[8] = {'R', 'K', 'Y', 'P', 'F', 'X', 'K', 'V'};
constexpr uint32_t k_disk_version = 1;

// Disk entry header (little-endian, as the host writes it; rocky's targets are all LE).
struct DiskHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;  // sizeof(DiskHeader)
  uint64_t model;         // CacheIdentity::model
  uint64_t identity;      // CacheIdentity::hash()
  uint32_t kv_type;
  int32_t n_layer;
  int32_t n_embd_kv;
  int32_t block;  // tokens per block of the cache that wrote it
  uint64_t key, parent;
  int32_t p0, n_tokens;
  uint64_t kv_bytes, state_bytes;
  uint64_t payload_bytes;     // 4 · n_tokens + kv_bytes + state_bytes
  uint64_t payload_checksum;  // hash64 of the payload
  uint64_t header_checksum;   // hash64 of every byte before this field
};
static_assert(sizeof(DiskHeader) == 112, "DiskHeader has no padding");

void warn(const std::string& s) {
  fmt::print(stderr, "rocky: warning: prefix cache: {}\n", s);
  std::fflush(stderr);
}

std::string errno_text(int e) { return std::strerror(e); }
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

// ---------------------------------------------------------------------------------------------
PrefixCache::PrefixCache(const CacheIdentity& id, PrefixCacheOptions o) : id_(id), o_(std::move(o)) {
  if (o_.block < 1 || o_.block > 256) fail("--cache-block must be 1 .. 256 tokens (got {})", o_.block);
  id_hash_ = id_.hash();
  seed_ = hash_pod(o_.block, id_hash_);
  st_.block = o_.block;
  st_.ram.limit = o_.ram_bytes;
  st_.disk.limit = o_.disk_bytes;
  if (!o_.dir.empty()) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(o_.dir, ec);
    // Probe: can this process create (and rename) a file there?
    const std::string probe = fmt::format("{}/.probe-{}-{}", o_.dir, ::getpid(), static_cast<const void*>(this));
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      warn(
          fmt::format("cannot write to --cache-dir {} ({}); running without the disk tier", o_.dir, errno_text(errno)));
    } else {
      ::close(fd);
      ::unlink(probe.c_str());
      disk_on_ = true;
      scan_dir();
      writer_ = std::thread([this] { writer(); });
    }
  }
  st_.disk_enabled = disk_on_;
}

PrefixCache::~PrefixCache() {
  flush();
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

std::string PrefixCache::path_of(uint64_t key) const {
  return fmt::format("{}/{:016x}-{:016x}.rkv", o_.dir, id_hash_, key);
}

void PrefixCache::scan_dir() {
  namespace fs = std::filesystem;
  const std::string prefix = fmt::format("{:016x}-", id_hash_);
  struct Found {
    uint64_t key, bytes;
    fs::file_time_type t;
  };
  std::vector<Found> found;
  std::error_code ec;
  for (fs::directory_iterator it(o_.dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() != 16 + 1 + 16 + 4 || name.compare(0, prefix.size(), prefix) != 0 || name.substr(33) != ".rkv")
      continue;
    std::error_code e2;
    const uint64_t bytes = it->file_size(e2);
    if (e2) continue;
    const auto t = it->last_write_time(e2);
    if (e2) continue;
    found.push_back({std::stoull(name.substr(17, 16), nullptr, 16), bytes, t});
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.t < b.t; });
  std::lock_guard lk(mu_);
  for (const Found& f : found) disk_touch(f.key, f.bytes, false);  // oldest first: the newest ends at the front
  disk_evict_to(o_.disk_bytes);
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

void PrefixCache::prefetch(std::span<const uint64_t> keys) {
  std::vector<std::string> paths;
  {
    std::lock_guard lk(mu_);
    if (!disk_on_) return;
    for (uint64_t k : keys)
      if (ram_.count(k) == 0 && disk_.count(k) != 0) paths.push_back(path_of(k));
  }
  for (const std::string& p : paths) {
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
    ::close(fd);
  }
}

bool PrefixCache::contains(uint64_t key) const {
  std::lock_guard lk(mu_);
  return ram_.count(key) != 0;
}

BlockPtr PrefixCache::peek(uint64_t key) const {
  std::lock_guard lk(mu_);
  auto it = ram_.find(key);
  return it == ram_.end() ? nullptr : it->second.b;
}

void PrefixCache::ram_evict_to(uint64_t limit) {
  while (ram_bytes_ > limit && !ram_lru_.empty()) {
    const uint64_t k = ram_lru_.back();
    ram_lru_.pop_back();
    auto it = ram_.find(k);
    ram_bytes_ -= it->second.b->bytes();
    ram_.erase(it);
    ++st_.ram.evictions;
  }
}

void PrefixCache::ram_insert(BlockPtr b) {
  if (auto it = ram_.find(b->key); it != ram_.end()) {
    if (b->state.empty() || !it->second.b->state.empty() || b->bytes() > o_.ram_bytes) {
      ram_lru_.splice(ram_lru_.begin(), ram_lru_, it->second.lru);
      return;
    }
    // The same block with a state checkpoint replaces the one without.
    ram_bytes_ -= it->second.b->bytes();
    ram_lru_.erase(it->second.lru);
    ram_.erase(it);
  }
  const uint64_t need = b->bytes();
  if (need > o_.ram_bytes) return;  // larger than the whole tier (or the tier is off: 0)
  ram_evict_to(o_.ram_bytes - need);
  const uint64_t key = b->key;
  ram_lru_.push_front(key);
  ram_bytes_ += need;
  ram_.emplace(key, RamEntry{std::move(b), ram_lru_.begin()});
}

void PrefixCache::disk_touch(uint64_t key, uint64_t bytes, bool verified, bool state) {
  if (auto it = disk_.find(key); it != disk_.end()) {
    disk_lru_.splice(disk_lru_.begin(), disk_lru_, it->second.lru);
    disk_bytes_ = disk_bytes_ - it->second.bytes + bytes;
    it->second.bytes = bytes;
    if (verified) it->second.state = state;
    it->second.verified = it->second.verified || verified;
    return;
  }
  disk_lru_.push_front(key);
  disk_.emplace(key, DiskEntry{bytes, verified, verified && state, disk_lru_.begin()});
  disk_bytes_ += bytes;
}

void PrefixCache::disk_forget(uint64_t key) {
  auto it = disk_.find(key);
  if (it == disk_.end()) return;
  disk_bytes_ -= it->second.bytes;
  disk_lru_.erase(it->second.lru);
  disk_.erase(it);
}

void PrefixCache::disk_evict_to(uint64_t limit) {
  while (disk_bytes_ > limit && !disk_lru_.empty()) {
    const uint64_t k = disk_lru_.back();
    ::unlink(path_of(k).c_str());
    disk_forget(k);
    ++st_.disk.evictions;
  }
}

void PrefixCache::disable_disk(const std::string& why) {
  if (!disk_on_) return;
  disk_on_ = false;
  st_.disk_enabled = false;
  warn(fmt::format("{}; running without the disk tier from now on", why));
}

BlockPtr PrefixCache::find(uint64_t key, uint64_t parent, int32_t p0, std::span<const int32_t> tokens, int* tier) {
  bool try_disk = false;
  {
    std::lock_guard lk(mu_);
    if (auto it = ram_.find(key); it != ram_.end()) {
      const Block& b = *it->second.b;
      if (b.p0 == p0 && b.parent == parent &&
          std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end())) {
        ram_lru_.splice(ram_lru_.begin(), ram_lru_, it->second.lru);
        ++st_.ram.hits;
        if (tier) *tier = 1;
        return it->second.b;
      }
    }
    ++st_.ram.misses;
    try_disk = disk_on_;
  }
  if (!try_disk) return nullptr;
  BlockPtr b = disk_read(key, parent, p0, tokens);
  std::lock_guard lk(mu_);
  if (!b) {
    ++st_.disk.misses;
    return nullptr;
  }
  ++st_.disk.hits;
  ram_insert(b);
  if (tier) *tier = 2;
  return b;
}

BlockPtr PrefixCache::disk_read(uint64_t key, uint64_t parent, int32_t p0, std::span<const int32_t> tokens) {
  const std::string path = path_of(key);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::lock_guard lk(mu_);
    disk_forget(key);  // evicted by another server sharing the directory, or never written
    return nullptr;
  }
  struct stat sb {};
  std::vector<uint8_t> bytes;
  bool io_ok = ::fstat(fd, &sb) == 0;
  if (io_ok) {
    bytes.resize(static_cast<size_t>(sb.st_size));
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t r = ::read(fd, bytes.data() + got, bytes.size() - got);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    io_ok = got == bytes.size();
  }
  ::close(fd);
  auto bad = [&](const std::string& why) -> BlockPtr {
    warn(fmt::format("{}: {}; skipped (recomputing)", path, why));
    ::unlink(path.c_str());
    std::lock_guard lk(mu_);
    disk_forget(key);
    ++st_.disk_errors;
    return nullptr;
  };
  if (!io_ok) return bad("read error");
  if (bytes.size() < sizeof(DiskHeader))
    return bad(fmt::format("truncated: {} bytes, shorter than the {}-byte header", bytes.size(), sizeof(DiskHeader)));
  DiskHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, k_magic, sizeof k_magic) != 0) return bad("not a rocky prefix-cache entry (bad magic)");
  if (hash64(bytes.data(), offsetof(DiskHeader, header_checksum)) != h.header_checksum)
    return bad("header checksum mismatch");
  if (h.version != k_disk_version)
    return bad(fmt::format("format version {} (this rocky reads {})", h.version, k_disk_version));
  if (h.header_bytes != sizeof(DiskHeader))
    return bad(fmt::format("header size {} (expected {})", h.header_bytes, sizeof(DiskHeader)));
  if (h.model != id_.model || h.identity != id_hash_) return bad("written for another model or KV type");
  if (h.kv_type != id_.kv_type || h.n_layer != id_.n_layer || h.n_embd_kv != id_.n_embd_kv)
    return bad(fmt::format("KV type/shape {}/{}×{} differs from this context's {}/{}×{}", h.kv_type, h.n_layer,
                           h.n_embd_kv, id_.kv_type, id_.n_layer, id_.n_embd_kv));
  if (h.key != key || h.parent != parent || h.p0 != p0 || h.block != o_.block ||
      h.n_tokens != static_cast<int32_t>(tokens.size()))
    return bad("block key, position or size differs from its file name");
  const uint64_t want_kv = id_.kv_bytes_per_pos * static_cast<uint64_t>(h.n_tokens);
  if (h.kv_bytes != want_kv) return bad(fmt::format("K/V length {} (expected {})", h.kv_bytes, want_kv));
  if (h.state_bytes != 0 && h.state_bytes != id_.state_bytes)
    return bad(
        fmt::format("state checkpoint length {} (this model's state has {} bytes)", h.state_bytes, id_.state_bytes));
  if (h.state_bytes > (1ull << 40) || h.payload_bytes != uint64_t(h.n_tokens) * 4 + h.kv_bytes + h.state_bytes)
    return bad("payload length does not add up");
  if (bytes.size() - sizeof(DiskHeader) != h.payload_bytes)
    return bad(fmt::format("truncated or padded: payload of {} bytes, header says {}",
                           bytes.size() - sizeof(DiskHeader), h.payload_bytes));
  const uint8_t* pl = bytes.data() + sizeof(DiskHeader);
  if (hash64(pl, static_cast<size_t>(h.payload_bytes)) != h.payload_checksum) return bad("payload checksum mismatch");
  auto b = std::make_shared<Block>();
  b->key = key;
  b->parent = parent;
  b->p0 = p0;
  b->tokens.resize(static_cast<size_t>(h.n_tokens));
  std::memcpy(b->tokens.data(), pl, b->tokens.size() * 4);
  if (!std::equal(b->tokens.begin(), b->tokens.end(), tokens.begin(), tokens.end()))
    return nullptr;  // a hash collision: a different prefix with the same key (keep the file)
  pl += b->tokens.size() * 4;
  b->kv.assign(pl, pl + h.kv_bytes);
  pl += h.kv_bytes;
  b->state.assign(pl, pl + h.state_bytes);
  std::lock_guard lk(mu_);
  disk_touch(key, bytes.size(), true, !b->state.empty());
  return b;
}

bool PrefixCache::disk_write(const Block& b) {
  DiskHeader h{};
  std::memcpy(h.magic, k_magic, sizeof k_magic);
  h.version = k_disk_version;
  h.header_bytes = sizeof(DiskHeader);
  h.model = id_.model;
  h.identity = id_hash_;
  h.kv_type = id_.kv_type;
  h.n_layer = id_.n_layer;
  h.n_embd_kv = id_.n_embd_kv;
  h.block = o_.block;
  h.key = b.key;
  h.parent = b.parent;
  h.p0 = b.p0;
  h.n_tokens = static_cast<int32_t>(b.tokens.size());
  h.kv_bytes = b.kv.size();
  h.state_bytes = b.state.size();
  h.payload_bytes = b.tokens.size() * 4 + b.kv.size() + b.state.size();
  std::vector<uint8_t> buf(sizeof(DiskHeader) + h.payload_bytes);
  uint8_t* pl = buf.data() + sizeof(DiskHeader);
  std::memcpy(pl, b.tokens.data(), b.tokens.size() * 4);
  std::memcpy(pl + b.tokens.size() * 4, b.kv.data(), b.kv.size());
  if (!b.state.empty()) std::memcpy(pl + b.tokens.size() * 4 + b.kv.size(), b.state.data(), b.state.size());
  h.payload_checksum = hash64(pl, static_cast<size_t>(h.payload_bytes));
  std::memcpy(buf.data(), &h, sizeof h);
  h.header_checksum = hash64(buf.data(), offsetof(DiskHeader, header_checksum));
  std::memcpy(buf.data(), &h, sizeof h);

  {
    std::lock_guard lk(mu_);
    if (!disk_on_) return false;
    if (buf.size() > o_.disk_bytes) return false;
    disk_evict_to(o_.disk_bytes - buf.size());
  }
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = fmt::format("{}/.tmp-{:016x}-{}-{}", o_.dir, b.key, ::getpid(), counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  int err = fd < 0 ? errno : 0;
  size_t done = 0;
  while (fd >= 0 && err == 0 && done < buf.size()) {
    const ssize_t w = ::write(fd, buf.data() + done, buf.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      err = errno;
    } else {
      done += static_cast<size_t>(w);
    }
  }
  if (fd >= 0 && ::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path_of(b.key).c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    std::lock_guard lk(mu_);
    disable_disk(fmt::format("cannot write {} ({})", path_of(b.key), errno_text(err)));
    return false;
  }
  std::lock_guard lk(mu_);
  disk_touch(b.key, buf.size(), true, !b.state.empty());
  ++st_.disk_writes;
  return true;
}

void PrefixCache::writer() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stop_ and drained
    BlockPtr b = std::move(pending_.front());
    pending_.pop_front();
    writing_ = true;
    lk.unlock();
    disk_write(*b);
    lk.lock();
    pending_bytes_ -= b->bytes();
    writing_ = false;
    idle_cv_.notify_all();
  }
}

void PrefixCache::put(BlockPtr b) {
  std::unique_lock lk(mu_);
  ram_insert(b);
  // Written through unless this process has seen the file whole (a scanned entry may be damaged:
  // rewriting it repairs it).
  if (!disk_on_) return;
  if (auto it = disk_.find(b->key); it != disk_.end() && it->second.verified && (it->second.state || b->state.empty()))
    return;
  // Write-through, bounded: wait while the queue holds more than a quarter of the RAM tier (at
  // least one block).
  const uint64_t bound = std::max<uint64_t>(o_.ram_bytes / 4, 1);
  idle_cv_.wait(lk, [&] { return pending_.empty() || pending_bytes_ + b->bytes() <= bound || !disk_on_; });
  if (!disk_on_) return;
  pending_bytes_ += b->bytes();
  pending_.push_back(std::move(b));
  cv_.notify_one();
}

void PrefixCache::touch_chain(std::span<const uint64_t> keys) {
  std::lock_guard lk(mu_);
  for (size_t i = keys.size(); i-- > 0;) {
    if (auto it = ram_.find(keys[i]); it != ram_.end()) ram_lru_.splice(ram_lru_.begin(), ram_lru_, it->second.lru);
    if (auto it = disk_.find(keys[i]); it != disk_.end())
      disk_lru_.splice(disk_lru_.begin(), disk_lru_, it->second.lru);
  }
}

void PrefixCache::note_device(int64_t hit_blocks, int64_t miss_blocks) {
  std::lock_guard lk(mu_);
  st_.device.hits += hit_blocks;
  st_.device.misses += miss_blocks;
}

void PrefixCache::flush() {
  std::unique_lock lk(mu_);
  idle_cv_.wait(lk, [&] { return pending_.empty() && !writing_; });
}

void PrefixCache::clear() {
  flush();
  std::lock_guard lk(mu_);
  ram_.clear();
  ram_lru_.clear();
  ram_bytes_ = 0;
  while (!disk_lru_.empty()) {
    const uint64_t k = disk_lru_.back();
    ::unlink(path_of(k).c_str());
    disk_forget(k);
  }
}

PrefixCacheStats PrefixCache::stats() const {
  std::lock_guard lk(mu_);
  PrefixCacheStats s = st_;
  s.ram.bytes = ram_bytes_;
  s.ram.blocks = static_cast<int64_t>(ram_.size());
  s.disk.bytes = disk_bytes_;
  s.disk.blocks = static_cast<int64_t>(disk_.size());
  s.pending_writes = static_cast<int64_t>(pending_.size());
  return s;
}

// ---------------------------------------------------------------------------------------------
namespace {
// restore_prefix on a hybrid model (see prefix_cache.hpp): the deepest position ≤ the prompt's
// last token whose state is at hand, with the K/V of every position before it.
PrefixHit restore_hybrid(Session& s, PrefixCache* cache, std::span<const int32_t> held,
                         std::span<const int32_t> prompt) {
  PrefixHit hit;
  const int32_t np = static_cast<int32_t>(prompt.size());
  const size_t n_held = std::min(held.size(), static_cast<size_t>(s.n_past()));
  int32_t keep = 0;  // positions whose K/V the context holds for this prompt
  while (static_cast<size_t>(keep) < n_held && keep < np - 1 &&
         held[static_cast<size_t>(keep)] == prompt[static_cast<size_t>(keep)])
    ++keep;
  // Candidates, deepest wins: the context's own state (it holds exactly the common prefix), a
  // checkpoint the session holds, a checkpoint of a block whose K/V the context holds, a
  // checkpoint of a cached block past them (its K/V and its parents' imported).
  int32_t pos = keep == s.n_past() ? keep : 0;
  std::span<const uint8_t> state;  // empty: the context's own (pos == n_past) or none (pos == 0)
  for (const Session::StateCheckpoint& c : s.checkpoints())
    if (c.pos <= keep && c.pos > pos) {
      pos = c.pos;
      state = c.state;
    }
  BlockPtr state_block;        // holds `state` when it comes from the cache
  std::vector<BlockPtr> past;  // cached blocks after the device's, up to the deepest checkpoint
  std::vector<int> past_tier;
  int32_t dev_blocks = 0;
  int32_t shared_at = 0;  // a boundary where this eval should keep the state too (0 = none)
  if (cache) {
    const int32_t B = cache->block();
    const std::vector<uint64_t> keys = cache->chain(prompt);
    dev_blocks = keep / B;
    auto parent = [&](size_t b) { return b ? keys[b - 1] : cache->seed(); };
    if (static_cast<size_t>(dev_blocks) < keys.size())
      cache->prefetch(std::span<const uint64_t>(keys).subspan(static_cast<size_t>(dev_blocks)));
    std::vector<BlockPtr> found;
    std::vector<int> tiers;
    for (size_t b = static_cast<size_t>(dev_blocks); b < keys.size(); ++b) {
      const int32_t p0 = static_cast<int32_t>(b) * B;
      if (p0 + B > np - 1) break;  // a checkpoint past the last prompt token is of no use
      int tier = 0;
      BlockPtr blk =
          cache->find(keys[b], parent(b), p0, prompt.subspan(static_cast<size_t>(p0), static_cast<size_t>(B)), &tier);
      if (!blk) break;
      found.push_back(std::move(blk));
      tiers.push_back(tier);
    }
    // The chain this prompt shares with the cache ends at a boundary without a checkpoint (another
    // prompt with the same head, e.g. a shared system prompt, went on past it): keep the state
    // there this time, so the next prompt with that head resumes from it.
    const int32_t shared = (dev_blocks + static_cast<int32_t>(found.size())) * B;
    if (shared > pos && (found.empty() || found.back()->state.size() != s.state_bytes())) shared_at = shared;
    size_t deepest = found.size();
    while (deepest > 0 && found[deepest - 1]->state.size() != s.state_bytes()) --deepest;
    if (deepest > 0) {
      past.assign(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(deepest));
      past_tier.assign(tiers.begin(), tiers.begin() + static_cast<std::ptrdiff_t>(deepest));
      state_block = past.back();
      pos = (dev_blocks + static_cast<int32_t>(deepest)) * B;
      state = state_block->state;
    } else {
      // A checkpoint of a block the context holds (deepest first; only those deeper than pos).
      for (int32_t b = dev_blocks - 1; b >= 0 && (b + 1) * B > pos; --b) {
        const size_t ub = static_cast<size_t>(b);
        BlockPtr blk = cache->find(keys[ub], parent(ub), b * B,
                                   prompt.subspan(static_cast<size_t>(b * B), static_cast<size_t>(B)));
        if (blk && blk->state.size() == s.state_bytes()) {
          state_block = std::move(blk);
          pos = (b + 1) * B;
          state = state_block->state;
          break;
        }
      }
    }
    cache->note_device(std::min(dev_blocks, pos / B), static_cast<int64_t>(keys.size()) * B > pos ? 1 : 0);
  }
  if (pos == 0) {
    s.reset();
    if (shared_at > 0) s.checkpoint_at(shared_at);
    return hit;
  }
  const int32_t B = cache ? cache->block() : 1;
  for (size_t i = 0; i < past.size(); ++i) {
    const int32_t p0 = (dev_blocks + static_cast<int32_t>(i)) * B;
    s.context().import_kv(p0, B, past[i]->kv);  // positions below n_past: the Session's check does not apply
    (past_tier[i] == 2 ? hit.from_disk : hit.from_ram) += p0 + B - std::max(p0, keep);
  }
  hit.from_device = std::min(keep, pos);
  if (!state.empty()) s.import_state(pos, state);  // else pos == keep == n_past: the context's own state
  if (shared_at > pos) s.checkpoint_at(shared_at);
  hit.n_cached = pos;
  return hit;
}
}  // namespace

namespace {
// The cells restore_prefix / save_prefix move: a Session's, or one sequence's of a BatchEngine
// (attention models only: a batched context refuses recurrent state).
struct SessionCells {
  Session& s;
  int32_t n_past() const { return s.n_past(); }
  void reset() { s.reset(); }
  void truncate(int32_t n) { s.truncate(n); }
  void import_kv(int32_t p0, int32_t n, std::span<const uint8_t> b) { s.import_kv(p0, n, b); }
  std::vector<uint8_t> export_kv(int32_t p0, int32_t n) { return s.export_kv(p0, n); }
};
struct BatchCells {
  BatchEngine& e;
  int32_t seq;
  int32_t n_past() const { return e.n_past(seq); }
  void reset() { e.truncate(seq, 0); }
  void truncate(int32_t n) { e.truncate(seq, n); }
  void import_kv(int32_t p0, int32_t n, std::span<const uint8_t> b) { e.import_kv(seq, p0, n, b); }
  std::vector<uint8_t> export_kv(int32_t p0, int32_t n) { return e.export_kv(seq, p0, n); }
};

constexpr size_t k_read_ahead = 4;  // restore_cells: block lookups in flight at once

// An attention model's prefix: the cells' own (device tier), then cached blocks.
template <class Cells>
PrefixHit restore_cells(Cells& s, PrefixCache* cache, std::span<const int32_t> held, std::span<const int32_t> prompt) {
  PrefixHit hit;
  const int32_t np = static_cast<int32_t>(prompt.size());
  // Device tier: the common prefix of what the context holds and the prompt.
  const size_t n_held = std::min(held.size(), static_cast<size_t>(s.n_past()));
  int32_t keep = 0;
  while (static_cast<size_t>(keep) < n_held && keep < np - 1 &&
         held[static_cast<size_t>(keep)] == prompt[static_cast<size_t>(keep)])
    ++keep;
  if (keep == 0)
    s.reset();
  else
    s.truncate(keep);
  hit.from_device = keep;
  if (cache) {
    const int32_t B = cache->block();
    const std::vector<uint64_t> keys = cache->chain(prompt);
    const int32_t dev_blocks = keep / B;
    cache->note_device(dev_blocks, static_cast<int64_t>(keys.size()) > dev_blocks ? 1 : 0);
    if (static_cast<size_t>(dev_blocks) < keys.size())
      cache->prefetch(std::span<const uint64_t>(keys).subspan(static_cast<size_t>(dev_blocks)));
    // Lookups (a disk tier's reads and checksums) run on up to k_read_ahead threads ahead of the
    // imports, which stay in order here (a restart read 19 blocks one after another at
    // 12 ms each from the page cache). A miss ends the chain; reads already started finish (their
    // blocks join the RAM tier) before this returns.
    struct Found {
      BlockPtr blk;
      int tier = 0;
    };
    std::deque<std::future<Found>> ahead;
    size_t next = static_cast<size_t>(dev_blocks);
    auto launch = [&] {
      while (ahead.size() < k_read_ahead && next < keys.size() && static_cast<int32_t>(next) * B < np - 1) {
        const size_t b = next++;
        const int32_t p0 = static_cast<int32_t>(b) * B;
        const uint64_t key = keys[b], parent = b ? keys[b - 1] : cache->seed();
        const std::span<const int32_t> toks = prompt.subspan(static_cast<size_t>(p0), static_cast<size_t>(B));
        ahead.push_back(std::async(std::launch::async, [cache, key, parent, p0, toks] {
          Found f;
          f.blk = cache->find(key, parent, p0, toks, &f.tier);
          return f;
        }));
      }
    };
    for (size_t b = static_cast<size_t>(dev_blocks); b < keys.size(); ++b) {
      const int32_t p0 = static_cast<int32_t>(b) * B;
      if (p0 >= np - 1) break;  // the last prompt token is always evaluated (its logits)
      launch();
      Found got = ahead.front().get();
      ahead.pop_front();
      const int tier = got.tier;
      const BlockPtr blk = std::move(got.blk);
      if (!blk) break;
      s.truncate(p0);
      s.import_kv(p0, B, blk->kv);
      const int32_t gained = std::min(p0 + B, np - 1) - keep;
      (tier == 2 ? hit.from_disk : hit.from_ram) += gained;
      keep = std::min(p0 + B, np - 1);
    }
  }
  s.truncate(keep);
  hit.n_cached = keep;
  return hit;
}

// Every full block of `tokens` (the cells' first positions) the cache does not have yet, with its
// checkpoint where one was taken; blocks up to `n_blocks` only.
template <class Cells>
void save_cells(Cells& s, PrefixCache& cache, std::span<const int32_t> tokens, const std::vector<uint64_t>& keys,
                size_t n_blocks, std::vector<Session::StateCheckpoint>& ckpts, uint64_t state_bytes) {
  const int32_t B = cache.block();
  for (size_t b = n_blocks; b-- > 0;) {
    const int32_t p0 = static_cast<int32_t>(b) * B;
    Session::StateCheckpoint* ck = nullptr;
    for (auto& c : ckpts)
      if (c.pos == p0 + B && c.state.size() == state_bytes) ck = &c;
    const BlockPtr held = cache.peek(keys[b]);
    if (held && (!ck || !held->state.empty())) continue;
    auto blk = std::make_shared<Block>();
    blk->key = keys[b];
    blk->parent = b ? keys[b - 1] : cache.seed();
    blk->p0 = p0;
    blk->tokens.assign(tokens.begin() + blk->p0, tokens.begin() + blk->p0 + B);
    blk->kv = held ? held->kv : s.export_kv(blk->p0, B);
    if (ck) blk->state = std::move(ck->state);
    cache.put(std::move(blk));
  }
  cache.touch_chain(std::span<const uint64_t>(keys).first(n_blocks));
}
}  // namespace

PrefixHit restore_prefix(Session& s, PrefixCache* cache, std::span<const int32_t> held, std::span<const int32_t> prompt,
                         bool use) {
  const int32_t np = static_cast<int32_t>(prompt.size());
  // On a hybrid model every evaluation snapshots the state at block boundaries (prefix_cache.hpp).
  s.set_checkpoint_stride(cache && s.recurrent() ? cache->block() : 0);
  if (!use || np <= 1) {
    s.reset();
    return {};
  }
  if (s.recurrent()) return restore_hybrid(s, cache, held, prompt);
  SessionCells c{s};
  return restore_cells(c, cache, held, prompt);
}

PrefixHit restore_prefix(BatchEngine& e, int32_t seq, PrefixCache* cache, std::span<const int32_t> held,
                         std::span<const int32_t> prompt, bool use) {
  if (e.recurrent()) fail("prefix cache: a batched context holds no recurrent state");
  BatchCells c{e, seq};
  if (!use || prompt.size() <= 1) {
    c.reset();
    return {};
  }
  return restore_cells(c, cache, held, prompt);
}

void save_prefix(Session& s, PrefixCache& cache, std::span<const int32_t> tokens) {
  const auto n = std::min(tokens.size(), static_cast<size_t>(s.n_past()));
  const std::vector<uint64_t> keys = cache.chain(tokens.first(n));
  const int32_t B = cache.block();
  // The session's checkpoints go with their blocks; on a hybrid model only blocks up to the
  // deepest checkpoint are worth their K/V (nothing can resume past it).
  std::vector<Session::StateCheckpoint> ckpts = s.take_checkpoints();
  size_t n_blocks = keys.size();
  if (s.recurrent()) {
    int32_t deepest = 0;
    for (const auto& c : ckpts)
      if (c.pos % B == 0 && static_cast<size_t>(c.pos) <= n) deepest = std::max(deepest, c.pos);
    n_blocks = std::min(n_blocks, static_cast<size_t>(deepest / B));
  }
  SessionCells c{s};
  save_cells(c, cache, tokens, keys, n_blocks, ckpts, s.state_bytes());
}

void save_prefix(BatchEngine& e, int32_t seq, PrefixCache& cache, std::span<const int32_t> tokens) {
  const auto n = std::min(tokens.size(), static_cast<size_t>(e.n_past(seq)));
  const std::vector<uint64_t> keys = cache.chain(tokens.first(n));
  std::vector<Session::StateCheckpoint> none;
  BatchCells c{e, seq};
  save_cells(c, cache, tokens, keys, keys.size(), none, 0);
}

}  // namespace rocky::runtime
