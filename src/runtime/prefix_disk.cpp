// The prefix cache's disk tier: one file per block under --cache-dir (a checksummed header, the
// tokens, the K/V and any recurrent state), an LRU over them bounded by --cache-disk, a writer
// thread that writes blocks through, and reads that refuse a damaged or foreign entry by name.
#include <fcntl.h>
#include <signal.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/fault.hpp"
#include "runtime/prefix_cache.hpp"
#include "runtime/prefix_cache_detail.hpp"

namespace rocky::runtime {

using prefix_detail::errno_text;
using prefix_detail::warn;

namespace {
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
}  // namespace

// --cache-dir: created where missing, probed for writing (else the cache runs without the disk
// tier, saying why), its entries of this identity scanned; then the writer thread starts.
void PrefixCache::open_disk() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(o_.dir, ec);
  // Probe: can this process create (and rename) a file there?
  const std::string probe = fmt::format("{}/.probe-{}-{}", o_.dir, ::getpid(), static_cast<const void*>(this));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    warn(fmt::format("cannot write to --cache-dir {} ({}); running without the disk tier", o_.dir, errno_text(errno)));
  } else {
    ::close(fd);
    ::unlink(probe.c_str());
    disk_on_ = true;
    scan_dir();
    writer_ = std::thread([this] { writer(); });
  }
}

std::string PrefixCache::path_of(uint64_t key) const {
  return fmt::format("{}/{:016x}-{:016x}.rkv", o_.dir, id_hash_, key);
}

namespace {
// ".tmp-KEY-PID-N": a disk write in progress (PID alive) or one that died (killed mid-write): the
// latter is deleted. It was never an entry (only a complete file is renamed to one), so nothing is
// lost.
void remove_stale_tmp(const std::string& path, const std::string& name) {
  const size_t a = name.find('-', 5);
  const size_t b = a == std::string::npos ? a : name.find('-', a + 1);
  if (b == std::string::npos) return;
  char* end = nullptr;
  const long pid = std::strtol(name.c_str() + a + 1, &end, 10);
  if (end != name.c_str() + b || pid <= 0) return;
  if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) return;  // its writer may still be there
  ::unlink(path.c_str());
}
}  // namespace

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
    if (name.rfind(".tmp-", 0) == 0) {  // a write that never finished: its writer is gone, or still writing
      remove_stale_tmp(it->path().string(), name);
      continue;
    }
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
  // ROCKY_FAULT=disk@N / kill@N (core/fault.hpp): this write dies half-way. `kill` is a real
  // kill -9 of the process there; `disk` leaves the same half-written temporary file and gives up
  // on the entry (the server goes on). Either way no entry file exists: only a complete temporary
  // file is ever renamed to one, and a later start deletes the leftovers (scan_dir).
  const bool die_disk = fd >= 0 && fault::hit(fault::Kind::Disk);
  const bool die_kill = fd >= 0 && !die_disk && fault::hit(fault::Kind::Kill);
  const size_t stop_at = die_disk || die_kill ? buf.size() / 2 : buf.size();
  while (fd >= 0 && err == 0 && done < stop_at) {
    const ssize_t w = ::write(fd, buf.data() + done, stop_at - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      err = errno;
    } else {
      done += static_cast<size_t>(w);
    }
  }
  if (die_kill) ::kill(::getpid(), SIGKILL);
  if (fd >= 0 && ::close(fd) != 0 && err == 0) err = errno;
  if (die_disk && err == 0) {
    warn(fmt::format("{}: write stopped half-way (injected fault, ROCKY_FAULT); the entry is not kept", tmp));
    std::lock_guard lk(mu_);
    ++st_.disk_errors;
    return false;
  }
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
}  // namespace rocky::runtime
