// The prefix cache's front and its RAM tier: blocks by key in an LRU bounded by --cache-ram,
// lookups that fall through to the disk tier, write-through to it, statistics (see
// prefix_cache.hpp). The disk tier is prefix_disk.cpp, the keys prefix_hash.cpp, and what moves
// blocks in and out of a context prefix_restore.cpp.
#include "runtime/prefix_cache.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/error.hpp"
#include "runtime/prefix_cache_detail.hpp"

namespace rocky::runtime {

namespace prefix_detail {
void warn(const std::string& s) {
  fmt::print(stderr, "rocky: warning: prefix cache: {}\n", s);
  std::fflush(stderr);
}

std::string errno_text(int e) { return std::strerror(e); }
}  // namespace prefix_detail

PrefixCache::PrefixCache(const CacheIdentity& id, PrefixCacheOptions o) : id_(id), o_(std::move(o)) {
  if (o_.block < 1 || o_.block > 256) fail("--cache-block must be 1 .. 256 tokens (got {})", o_.block);
  id_hash_ = id_.hash();
  seed_ = prefix_detail::hash_pod(o_.block, id_hash_);
  st_.block = o_.block;
  st_.ram.limit = o_.ram_bytes;
  st_.disk.limit = o_.disk_bytes;
  if (!o_.dir.empty()) open_disk();
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

void PrefixCache::put(BlockPtr b) {
  std::unique_lock lk(mu_);
  ram_insert(b);
  // Two saves of one block may race (a save queued before an earlier one's blocks reached the
  // cache): the RAM tier keeps the better version (with a checkpoint over without), and the disk
  // gets that one — a later copy without the checkpoint never overwrites it.
  if (auto it = ram_.find(b->key); it != ram_.end()) b = it->second.b;
  // Written through unless this process has seen the file whole (a scanned entry may be damaged:
  // rewriting it repairs it) or the same version or a better one is queued already.
  if (!disk_on_) return;
  if (auto it = disk_.find(b->key); it != disk_.end() && it->second.verified && (it->second.state || b->state.empty()))
    return;
  for (const BlockPtr& q : pending_)
    if (q->key == b->key && (!q->state.empty() || b->state.empty())) return;
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
}  // namespace rocky::runtime
