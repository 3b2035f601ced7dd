// Liveness planner: gives every node output an offset in ONE activation arena.
//
// A node's output is live from the node that produces it to the last node that reads it (the
// graph's output node stays live to the end). Offsets are reused greedily (first fit over freed
// intervals, sorted by offset), each aligned to `alignment` bytes. The arena size depends only on
// the graph's shapes, never on the number of submits; backends allocate it once per max ubatch.
// A VIEW node gets its source's offset and allocates nothing; reads of a view keep the source live
// (in both modes: reuse = false still aliases views).
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.hpp"

namespace rocky::graph {

inline constexpr uint64_t k_no_offset = ~0ull;

struct Plan {
  std::vector<uint64_t> offset;  // per node: byte offset in the arena, k_no_offset when no output
  uint64_t arena_bytes = 0;      // total arena size needed
};

// reuse = false gives every node its own region (for verify --bisect, which reads every node).
Plan plan_arena(const Graph& g, uint64_t alignment = 256, bool reuse = true);

}  // namespace rocky::graph
