// Restoring a prompt's cached prefix into a context and saving its blocks back: a Session's
// cells or one sequence of a BatchEngine; attention models by blocks of K/V, hybrid models from
// the deepest recurrent-state checkpoint at hand (see prefix_cache.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <future>

#include "core/error.hpp"
#include "runtime/batch.hpp"
#include "runtime/prefix_cache.hpp"
#include "runtime/session.hpp"
#include "runtime/task_queue.hpp"

namespace rocky::runtime {

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
  bool can_keep(int32_t n) const { return s.can_keep(n); }
  int32_t live_from() const { return s.live_from(); }
  void import_kv(int32_t p0, int32_t n, std::span<const uint8_t> b) { s.import_kv(p0, n, b); }
  std::vector<uint8_t> export_kv(int32_t p0, int32_t n) { return s.export_kv(p0, n); }
};
struct BatchCells {
  BatchEngine& e;
  int32_t seq;
  int32_t n_past() const { return e.n_past(seq); }
  void reset() { e.truncate(seq, 0); }
  void truncate(int32_t n) { e.truncate(seq, n); }
  bool can_keep(int32_t n) const { return e.can_keep(seq, n); }
  int32_t live_from() const { return e.live_from(seq); }
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
  // A sliding-window ring that no longer holds what position `keep` reads: nothing is kept.
  if (keep > 0 && !s.can_keep(keep)) keep = 0;
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
      if (!blk || !s.can_keep(p0)) break;
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
  // A sliding-window ring holds the newest positions only: older blocks' K/V of those layers are gone.
  const int32_t live = s.live_from();
  for (size_t b = n_blocks; b-- > 0;) {
    const int32_t p0 = static_cast<int32_t>(b) * B;
    if (p0 < live) continue;
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
  e.wait_deferred(seq);  // a save of the sequence's cells still queued reads them first
  if (Session* s = e.session(seq)) {
    // A hybrid model's sequence: its own session (its state and checkpoints).
    PrefixHit hit;
    try {
      hit = restore_prefix(*s, cache, held, prompt, use);
    } catch (...) {
      s->reset();
      e.sync_session(seq);
      throw;
    }
    e.sync_session(seq);
    return hit;
  }
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
  if (Session* s = e.session(seq)) {
    save_prefix(*s, cache, tokens);
    return;
  }
  const auto n = std::min(tokens.size(), static_cast<size_t>(e.n_past(seq)));
  const std::vector<uint64_t> keys = cache.chain(tokens.first(n));
  std::vector<Session::StateCheckpoint> none;
  BatchCells c{e, seq};
  save_cells(c, cache, tokens, keys, keys.size(), none, 0);
}

void save_prefix_async(BatchEngine& e, int32_t seq, const std::shared_ptr<PrefixCache>& cache,
                       std::vector<int32_t> tokens, TaskQueue& writer) {
  if (!cache) return;
  const int32_t B = cache->block();
  if (static_cast<int32_t>(tokens.size()) < B) return;
  // On the engine's thread, between steps: which blocks the cache lacks, their cells in one copy.
  e.defer(seq, [&e, seq, cache, tokens = std::move(tokens), &writer, B]() mutable {
    Session* s = e.session(seq);
    const std::vector<uint64_t> keys = cache->chain(tokens);
    size_t n_blocks = keys.size();
    std::vector<Session::StateCheckpoint> ckpts;
    uint64_t state_bytes = 0;
    if (s) {
      // A hybrid model: its checkpoints go with their blocks; blocks past the deepest one are of no use.
      n_blocks = std::min(n_blocks, static_cast<size_t>(s->n_past() / B));
      ckpts = s->take_checkpoints();
      state_bytes = s->state_bytes();
      int32_t deepest = 0;
      for (const auto& c : ckpts)
        if (c.pos % B == 0 && c.pos / B <= static_cast<int32_t>(n_blocks)) deepest = std::max(deepest, c.pos);
      n_blocks = static_cast<size_t>(deepest / B);
    }
    std::vector<size_t> need;  // blocks to add (a held block without the checkpoint now at hand too)
    std::vector<BlockPtr> held(n_blocks);
    // A sliding-window ring holds the newest positions only: older blocks' K/V of those layers are gone.
    const int32_t live = s ? s->live_from() : e.live_from(seq);
    for (size_t b = 0; b < n_blocks; ++b) {
      held[b] = cache->peek(keys[b]);
      bool ck = false;
      for (const auto& c : ckpts)
        if (c.pos == static_cast<int32_t>(b + 1) * B && c.state.size() == state_bytes) ck = true;
      if (static_cast<int32_t>(b) * B >= live && (!held[b] || (ck && held[b]->state.empty()))) need.push_back(b);
    }
    if (need.empty()) {
      writer.post([cache, keys, n_blocks] { cache->touch_chain(std::span<const uint64_t>(keys).first(n_blocks)); });
      return;
    }
    const int32_t p0 = static_cast<int32_t>(need.front()) * B;
    const int32_t n = static_cast<int32_t>(need.back() + 1) * B - p0;
    std::vector<uint8_t> bytes = s ? s->export_kv(p0, n) : e.export_kv(seq, p0, n);
    // The copy holds, per layer, K then V of n positions (backend::Context::export_kv); a block's
    // bytes are the same with B positions.
    writer.post([cache, keys, n_blocks, need = std::move(need), held = std::move(held), ckpts = std::move(ckpts),
                 bytes = std::move(bytes), tokens = std::move(tokens), p0, n, B, state_bytes]() mutable {
      const size_t segs = 2 * static_cast<size_t>(cache->identity().n_layer);
      const size_t row = bytes.size() / (segs * static_cast<size_t>(n));
      if (segs == 0 || row * segs * static_cast<size_t>(n) != bytes.size())
        fail("prefix cache: an export of {} positions has {} bytes, not whole rows of {} layers", n, bytes.size(),
             segs / 2);
      for (size_t b : need) {
        auto blk = std::make_shared<Block>();
        blk->key = keys[b];
        blk->parent = b ? keys[b - 1] : cache->seed();
        blk->p0 = static_cast<int32_t>(b) * B;
        blk->tokens.assign(tokens.begin() + blk->p0, tokens.begin() + blk->p0 + B);
        if (held[b]) {
          blk->kv = held[b]->kv;
        } else {
          const size_t off = static_cast<size_t>(blk->p0 - p0) * row, len = static_cast<size_t>(B) * row;
          blk->kv.resize(segs * len);
          for (size_t k = 0; k < segs; ++k)
            std::memcpy(blk->kv.data() + k * len, bytes.data() + k * static_cast<size_t>(n) * row + off, len);
        }
        for (auto& c : ckpts)
          if (c.pos == blk->p0 + B && c.state.size() == state_bytes) blk->state = std::move(c.state);
        cache->put(std::move(blk));
      }
      cache->touch_chain(std::span<const uint64_t>(keys).first(n_blocks));
    });
  });
}
}  // namespace rocky::runtime
