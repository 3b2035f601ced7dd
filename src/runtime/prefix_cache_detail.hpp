// What the prefix cache's files share (not part of its interface): hashing a value, and the
// warning a tier that fails prints before the cache runs on without it.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/prefix_cache.hpp"

namespace rocky::runtime::prefix_detail {

template <class T>
uint64_t hash_pod(const T& v, uint64_t seed) {
  return hash64(&v, sizeof v, seed);
}

// "rocky: warning: prefix cache: …" on stderr.
void warn(const std::string& s);

// strerror(e).
std::string errno_text(int e);

}  // namespace rocky::runtime::prefix_detail
