// Liveness planner (see planner.hpp): first-fit reuse of freed arena intervals.
#include "graph/planner.hpp"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <map>

namespace rocky::graph {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Free intervals of the arena, keyed by offset, merged on release.
class FreeList {
 public:
  // First fit over free intervals (lowest offset first); grows the arena when none fits.
  uint64_t take(uint64_t size, uint64_t& arena_end) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second >= size) {
        uint64_t off = it->first;
        uint64_t rest = it->second - size;
        free_.erase(it);
        if (rest > 0) free_[off + size] = rest;
        return off;
      }
    }
    // Extend: a free interval touching the end can be reused and grown.
    if (!free_.empty()) {
      auto last = std::prev(free_.end());
      if (last->first + last->second == arena_end) {
        uint64_t off = last->first;
        free_.erase(last);
        arena_end = off + size;
        return off;
      }
    }
    uint64_t off = arena_end;
    arena_end += size;
    return off;
  }
  void give(uint64_t off, uint64_t size) {
    auto it = free_.emplace(off, size).first;
    // Merge with the next interval.
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    // Merge with the previous interval.
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }

 private:
  std::map<uint64_t, uint64_t> free_;
};

}  // namespace

Plan plan_arena(const Graph& g, uint64_t alignment, bool reuse) {
  assert(alignment > 0);
  const size_t n = g.nodes.size();
  Plan p;
  p.offset.assign(n, k_no_offset);

  // A VIEW owns no bytes: its reads count as reads of the node whose storage it shares (root).
  std::vector<size_t> root(n);
  for (size_t i = 0; i < n; ++i) {
    root[i] = i;
    if (g.nodes[i].op == Op::VIEW) {
      const int32_t s = g.nodes[i].src[0];
      assert(s >= 0 && static_cast<size_t>(s) < i && "a view comes after its source");
      root[i] = root[static_cast<size_t>(s)];
    }
  }
  // last_use[r] = index of the last node reading storage r (r itself when unread).
  std::vector<size_t> last_use(n);
  for (size_t i = 0; i < n; ++i) last_use[i] = i;
  for (size_t i = 0; i < n; ++i) {
    for (int32_t s : g.nodes[i].src) {
      if (s >= 0) {
        assert(static_cast<size_t>(s) < i && "graph nodes must come after their sources");
        const size_t r = root[static_cast<size_t>(s)];
        last_use[r] = std::max(last_use[r], i);
      }
    }
  }
  if (g.output >= 0) last_use[root[static_cast<size_t>(g.output)]] = n;  // live to the end

  std::vector<uint64_t> size(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (root[i] == i) size[i] = align_up(g.nodes[i].out_bytes(), alignment);
  }

  uint64_t end = 0;
  FreeList fl;
  // releases[k] = nodes whose last use is node k.
  std::vector<std::vector<size_t>> releases(n);
  // An output whose last reader is a MATMUL is released one node later: a backend may fuse
  // the matmul with the next node (the decode matvec's bias / residual epilogue writes the next
  // node's output while the matmul still reads its f32 input, so the two must not alias).
  for (size_t i = 0; i < n; ++i) {
    if (size[i] == 0 || last_use[i] >= n) continue;
    size_t k = last_use[i];
    if (g.nodes[k].op == Op::MATMUL && k + 1 < n) ++k;
    releases[k].push_back(i);
  }
  for (size_t i = 0; i < n; ++i) {
    if (root[i] != i) {
      p.offset[i] = p.offset[root[i]];  // a view: the source's bytes
    } else if (size[i] > 0) {
      if (reuse) {
        p.offset[i] = fl.take(size[i], end);
      } else {
        p.offset[i] = end;
        end += size[i];
      }
    }
    // Outputs whose last reader is node i are free once node i has run (node i's own output was
    // allocated above, so it never aliases its inputs).
    if (reuse) {
      for (size_t r : releases[i]) fl.give(p.offset[r], size[r]);
    }
  }
  p.arena_bytes = end;
  return p;
}

}  // namespace rocky::graph
