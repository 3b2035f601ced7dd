#include "grammar/pool.hpp"

#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rocky::grammar {

struct GrammarPool::Shared {
  struct Entry {
    std::vector<std::shared_ptr<CompiledGrammar>> idle;
    std::list<std::string>::iterator lru;
  };
  GrammarPoolLimits limits;
  mutable std::mutex mu;
  std::unordered_map<std::string, Entry> entries;
  std::list<std::string> lru;  // most recently used first
  Stats stats;

  void touch(Entry& e, const std::string& text) {
    lru.erase(e.lru);
    lru.push_front(text);
    e.lru = lru.begin();
  }
  // Drops least recently used idle copies (whole texts first) until the bounds hold.
  void trim() {
    while (!lru.empty() && (entries.size() > limits.texts || stats.idle_bytes > limits.bytes)) {
      auto it = entries.find(lru.back());
      for (const auto& g : it->second.idle) {
        stats.idle -= 1;
        stats.idle_bytes -= g->cache_bytes();
      }
      entries.erase(it);
      lru.pop_back();
    }
  }
  void give_back(const std::string& text, std::shared_ptr<CompiledGrammar> g) {
    std::lock_guard<std::mutex> lock(mu);
    auto [it, added] = entries.try_emplace(text);
    if (added) {
      lru.push_front(text);
      it->second.lru = lru.begin();
    } else {
      touch(it->second, text);
    }
    if (it->second.idle.size() >= limits.idle_per_text) return;  // the copy is freed
    stats.idle += 1;
    stats.idle_bytes += g->cache_bytes();
    it->second.idle.push_back(std::move(g));
    trim();
  }
};

GrammarPool::GrammarPool(Compile compile, GrammarPoolLimits limits)
    : compile_(std::move(compile)), s_(std::make_shared<Shared>()) {
  s_->limits = limits;
}

GrammarPool::~GrammarPool() = default;

std::shared_ptr<CompiledGrammar> GrammarPool::acquire(const std::string& text) {
  std::shared_ptr<CompiledGrammar> g;
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    auto it = s_->entries.find(text);
    if (it != s_->entries.end() && !it->second.idle.empty()) {
      g = std::move(it->second.idle.back());
      it->second.idle.pop_back();
      s_->stats.idle -= 1;
      s_->stats.idle_bytes -= g->cache_bytes();
      s_->stats.reused += 1;
      s_->touch(it->second, text);
    }
  }
  if (!g) {
    g = compile_(text);  // outside the lock: compiling may take a while
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->stats.compiled += 1;
  }
  // The lent handle: when the generation drops it, the copy goes back (if the pool still exists).
  CompiledGrammar* raw = g.get();
  std::weak_ptr<Shared> pool = s_;
  return std::shared_ptr<CompiledGrammar>(raw, [pool, text, g = std::move(g)](CompiledGrammar*) mutable {
    if (auto s = pool.lock()) s->give_back(text, std::move(g));
  });
}

GrammarPool::Stats GrammarPool::stats() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->stats;
}

}  // namespace rocky::grammar
