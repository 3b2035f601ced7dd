// Compiled grammars kept between requests. An agent sends the same constraint every turn (its tool
// schema, its response format), and a CompiledGrammar's caches — the per-state masks, the key
// walks, a bounded string's counted-repetition sets — are what make its masks cheap after the first
// few steps; compiling afresh per request pays those walks again on every short answer. A compiled
// grammar serves one generation at a time (its caches are not thread-safe): acquire() lends an idle
// copy compiled from the same text or compiles a new one, and the copy comes back to the pool when
// the generation drops its last reference. Bounded: the texts kept (least recently used first out),
// the idle copies per text, and the bytes of all idle copies' caches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "grammar/matcher.hpp"

namespace rocky::grammar {

struct GrammarPoolLimits {
  size_t texts = 8;                      // distinct constraint texts kept
  size_t idle_per_text = 4;              // idle copies of one text (one per concurrent generation)
  uint64_t bytes = uint64_t{256} << 20;  // the idle copies' caches together
};

class GrammarPool {
 public:
  using Compile = std::function<std::shared_ptr<CompiledGrammar>(const std::string&)>;
  explicit GrammarPool(Compile compile, GrammarPoolLimits limits = {});
  ~GrammarPool();
  GrammarPool(const GrammarPool&) = delete;
  GrammarPool& operator=(const GrammarPool&) = delete;

  // A compiled grammar of `text` for one generation (compile's errors pass through).
  std::shared_ptr<CompiledGrammar> acquire(const std::string& text);

  struct Stats {
    uint64_t reused = 0, compiled = 0;
    size_t idle = 0;
    uint64_t idle_bytes = 0;
  };
  Stats stats() const;

 private:
  struct Shared;
  Compile compile_;
  std::shared_ptr<Shared> s_;
};

}  // namespace rocky::grammar
