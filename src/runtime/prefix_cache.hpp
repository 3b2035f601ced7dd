// The prefix KV cache: a request computes only the prompt tokens no earlier request has.
//
// Blocks. A prompt is cut into blocks of `block` tokens (the last, partial block is never cached:
// it is recomputed). Block b covers positions [b·block, (b+1)·block); its key is a hash chain:
//   key(b) = hash64(key(b-1), tokens of block b)    key(-1) = hash64(identity, block)
// so a key names the whole prefix up to the block's end, for one model identity (content hash of
// the GGUF file, KV element type and shape, rope parameters; not n_ctx). A block holds the K/V of
// its positions for every layer (Context::export_kv's bytes) and, for later architectures whose
// state is not per position (recurrent / sliding-window layers), an opaque `state` checkpoint
// taken at the block's end. Blocks are immutable and shared (std::shared_ptr<const Block>): many
// requests may read one at once; loading into a context copies it, never moves it.
//
// Tiers, looked up in this order for each block of the chain:
//   device  a slot's own KV cells (the Scheduler keeps the common prefix of what the slot holds
//           and the new prompt: no copy; counted here through note_device()),
//   ram     host memory, at most `ram_bytes`, LRU; a chain is touched deepest block first, root
//           last, so the deepest blocks of a chain are evicted first (the root outlives them),
//   disk    optional (`dir`): one file per block, at most `disk_bytes`, LRU by last use; written
//           through by a background thread (flush() waits for it: SIGTERM, end of `rocky run`).
// A block found on disk is promoted to RAM.
//
// Disk entries (format version k_disk_version): a fixed little-endian header (magic, version,
// model identity, KV type and shape, block key and parent key, first position, token count,
// payload length, payload checksum, header checksum), then the block's token ids, K/V bytes and
// state bytes. A read checks everything (size, magic, version, identity, shape, key, tokens,
// checksums); an entry that fails is skipped with one warning line (and removed: the recomputed
// block is written again), never used. Writes go to a unique temp name in the same directory and
// are renamed into place, so readers (this server or another one sharing the directory) see
// whole entries or none. A directory that cannot be written (read-only, missing and not
// creatable) or a full disk turns the disk tier off with one warning.
//
// State checkpoints (hybrid models, e.g. qwen35's Gated DeltaNet layers). A recurrent state
// cannot be cut back to a shorter prefix, so on such a model a block may carry `state`: the state
// of every recurrent layer after the block's last token (Session::export_state: for each layer of
// Session::state_layers() ascending, its conv window then its delta-rule state, f32, exactly as the
// context holds them; CacheIdentity::state_bytes bytes, part of the identity). Restoring a hybrid
// prompt keeps or imports the K/V of the chain up to the deepest block that has a checkpoint (or
// the context's own state when it holds exactly the common prefix, or a checkpoint the session
// still holds), imports that state and recomputes the rest; with no usable checkpoint it starts
// from 0 (never a wrong answer). Where checkpoints come from: restore_prefix sets the session's
// checkpoint stride to the block size, so eval() stops a ubatch at the last block boundary of each
// prompt, at each boundary reached while decoding, and at the boundary where the prompt leaves a
// cached chain whose block there has no checkpoint (another prompt with the same head went on: a
// shared system prompt; Session::checkpoint_at), and snapshots the state there (at most
// Session::k_max_checkpoints per generation, oldest dropped); save_prefix stores each with its
// block and, on a hybrid model, saves only blocks up to the deepest checkpoint (deeper K/V alone
// could never be restored). Policy, for an agent's turns: the latest boundary of the prompt and of
// the completion are kept, so the next turn (history + completion + a new message) resumes at the
// last whole block it shares with this one; of clients sharing a system prompt, the second keeps
// the state where they diverge and the third and later ones resume there. Memory: a checkpoint counts in Block::bytes(), so the
// RAM tier's `ram_bytes` and the disk tier's `disk_bytes` (--cache-ram / --cache-disk MiB) bound
// K/V and checkpoints together; on disk it is the payload's last state_bytes bytes (covered by the
// payload checksum; a length other than 0 or this identity's state_bytes is a damaged entry).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"

namespace rocky::model {
class Model;
}

namespace rocky::runtime {

class Session;
class BatchEngine;
class TaskQueue;

// 64-bit hash (XXH64's construction, our own code): keys and checksums.
uint64_t hash64(const void* data, size_t n, uint64_t seed = 0);

// What makes two contexts' KV interchangeable.
struct CacheIdentity {
  uint64_t model = 0;    // content hash of the model file (+ hparams: rope base/scale/mode/n_rot)
  uint32_t kv_type = 0;  // backend::KvType
  int32_t n_layer = 0;
  int32_t n_embd_kv = 0;
  uint64_t kv_bytes_per_pos = 0;  // Context::kv_export_bytes(1)
  uint64_t state_bytes = 0;       // one state checkpoint (Session::state_bytes()); 0 = none
  uint64_t hash() const;          // everything above in one key (state_bytes only when > 0)
};
// The identity of `m` on a backend with KV type `kv` (hashes the whole file: ~1 s per 2-3 GiB).
CacheIdentity cache_identity(const model::Model& m, const backend::Context& ctx);

struct Block {
  uint64_t key = 0, parent = 0;  // parent: the previous block's key (the chain seed for block 0)
  int32_t p0 = 0;                // first position
  std::vector<int32_t> tokens;   // the block's token ids (checked on every hit)
  std::vector<uint8_t> kv;       // Context::export_kv(p0, tokens.size())
  std::vector<uint8_t> state;    // state checkpoint after position p0 + tokens.size() - 1 (or empty)
  uint64_t bytes() const { return kv.size() + state.size() + tokens.size() * sizeof(int32_t) + sizeof(Block); }
};
using BlockPtr = std::shared_ptr<const Block>;

struct PrefixCacheOptions {
  int32_t block = 256;  // tokens per block (1 .. 256)
  uint64_t ram_bytes = 2048ull << 20;
  std::string dir;  // empty: no disk tier
  uint64_t disk_bytes = 8192ull << 20;
};

struct TierStats {
  int64_t hits = 0, misses = 0;  // blocks
  int64_t evictions = 0;         // blocks
  uint64_t bytes = 0;            // in use now
  uint64_t limit = 0;
  int64_t blocks = 0;  // held now
};

struct PrefixCacheStats {
  TierStats device, ram, disk;
  bool disk_enabled = false;
  int64_t disk_errors = 0;  // damaged entries skipped
  int64_t disk_writes = 0;  // entries written
  int64_t pending_writes = 0;
  int32_t block = 0;
};

class PrefixCache {
 public:
  PrefixCache(const CacheIdentity& id, PrefixCacheOptions o);
  ~PrefixCache();  // flushes pending disk writes
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  int32_t block() const { return o_.block; }
  const CacheIdentity& identity() const { return id_; }
  // Keys of every full block of `tokens`.
  std::vector<uint64_t> chain(std::span<const int32_t> tokens) const;
  uint64_t seed() const { return seed_; }

  // Block `b` of the chain with key `key` (parent: key of b-1 or seed()) and these tokens: from
  // RAM, else from disk (promoted to RAM); nullptr when neither has it (counted as misses).
  // `tier` (optional) gets 1 for RAM, 2 for disk.
  BlockPtr find(uint64_t key, uint64_t parent, int32_t p0, std::span<const int32_t> tokens, int* tier = nullptr);
  bool contains(uint64_t key) const;  // in RAM (no counting, no disk access)
  // Asks the kernel to read ahead the disk entries of these keys that RAM lacks
  // (posix_fadvise WILLNEED), so that the files of a chain come in while earlier blocks are
  // checked and uploaded, not one after the other as find() reaches them. No counting; a missing
  // file is skipped.
  void prefetch(std::span<const uint64_t> keys);
  BlockPtr peek(uint64_t key) const;  // the RAM tier's block (no counting, no disk access), or nullptr
  // Adds a block (RAM, and written through to disk when enabled). A key already held is kept,
  // unless `b` carries a state checkpoint the held one lacks: then `b` replaces it.
  void put(BlockPtr b);
  // Makes these keys (a chain, root first) most recently used, the root last of all.
  void touch_chain(std::span<const uint64_t> keys);
  void note_device(int64_t hit_blocks, int64_t miss_blocks);
  // Drops every block of every tier (the disk files of this model identity too).
  void clear();
  // Waits until every pending disk write is done.
  void flush();
  PrefixCacheStats stats() const;

 private:
  struct RamEntry {
    BlockPtr b;
    std::list<uint64_t>::iterator lru;
  };
  struct DiskEntry {
    uint64_t bytes = 0;
    bool verified = false;  // written or read back whole by this process (scanned entries: not yet)
    bool state = false;     // the verified entry carries a state checkpoint
    std::list<uint64_t>::iterator lru;
  };
  std::string path_of(uint64_t key) const;
  void ram_insert(BlockPtr b);        // mu_ held
  void ram_evict_to(uint64_t limit);  // mu_ held
  BlockPtr disk_read(uint64_t key, uint64_t parent, int32_t p0, std::span<const int32_t> tokens);
  bool disk_write(const Block& b);                                                   // writer thread
  void disk_forget(uint64_t key);                                                    // mu_ held
  void disk_touch(uint64_t key, uint64_t bytes, bool verified, bool state = false);  // mu_ held
  void disk_evict_to(uint64_t limit);                                                // mu_ held; unlinks files
  void disable_disk(const std::string& why);                                         // mu_ held
  void open_disk();  // the constructor's, for a --cache-dir
  void scan_dir();
  void writer();

  CacheIdentity id_;
  PrefixCacheOptions o_;
  uint64_t id_hash_ = 0, seed_ = 0;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, RamEntry> ram_;
  std::list<uint64_t> ram_lru_;  // front = most recent
  uint64_t ram_bytes_ = 0;
  std::unordered_map<uint64_t, DiskEntry> disk_;
  std::list<uint64_t> disk_lru_;
  uint64_t disk_bytes_ = 0;
  bool disk_on_ = false;
  PrefixCacheStats st_;
  // Write-through queue (bounded in bytes: put() waits when it is full).
  std::deque<BlockPtr> pending_;
  uint64_t pending_bytes_ = 0;
  bool writing_ = false, stop_ = false;
  std::condition_variable cv_, idle_cv_;
  std::thread writer_;
};

// --- One context and the cache ---
// How much of `prompt` a context must not recompute, after loading blocks into it.
struct PrefixHit {
  int32_t n_cached = 0;  // leading prompt tokens now in the context (≤ prompt.size() - 1)
  int32_t from_device = 0, from_ram = 0, from_disk = 0;  // tokens per tier
};
// Before a prefill: `held` are the tokens `s` holds now (its n_past first ones). Keeps their
// common prefix with `prompt` (device tier), then loads the following cached blocks (cache may be
// null: device tier only). Leaves s.n_past() == n_cached. With use == false: resets s, returns 0.
PrefixHit restore_prefix(Session& s, PrefixCache* cache, std::span<const int32_t> held, std::span<const int32_t> prompt,
                         bool use = true);
// After a generation: `tokens` are what `s` holds (its first n_past positions); every full block
// of them the cache does not have yet is exported and added; the whole chain is touched.
void save_prefix(Session& s, PrefixCache& cache, std::span<const int32_t> tokens);
// The same for sequence `seq` of a BatchEngine: `held` are the tokens its cells hold from
// position 0 (end() leaves them; for an attention model the engine's n_past of the sequence must
// be set to their count before the call). A hybrid model's sequence goes through its own Session
// (BatchEngine::session), checkpoints included.
PrefixHit restore_prefix(BatchEngine& e, int32_t seq, PrefixCache* cache, std::span<const int32_t> held,
                         std::span<const int32_t> prompt, bool use = true);
void save_prefix(BatchEngine& e, int32_t seq, PrefixCache& cache, std::span<const int32_t> tokens);
// save_prefix off the request's path: the engine's thread copies the cells of the blocks the cache
// lacks in one export between two steps (BatchEngine::defer; a later begin/restore of `seq` waits
// for it), `writer` cuts the copy into blocks and adds them (the disk tier writes behind put()).
void save_prefix_async(BatchEngine& e, int32_t seq, const std::shared_ptr<PrefixCache>& cache,
                       std::vector<int32_t> tokens, TaskQueue& writer);

}  // namespace rocky::runtime
