// GET /metrics: the server's counters in Prometheus' text format (names rocky:…, as
// llama-server's llamacpp:…), from the request counters here and the scheduler's, backend's and
// prefix cache's own statistics.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "backend/backend.hpp"
#include "runtime/generator.hpp"
#include "runtime/kv_memory.hpp"
#include "runtime/prefix_cache.hpp"
#include "runtime/scheduler.hpp"

namespace rocky::server {

// The request counters (updated by the handlers, read by /metrics).
struct Metrics {
  std::atomic<int64_t> requests{0}, errors{0}, rejected{0}, prompt_tokens{0}, predicted_tokens{0};
  // Prompt tokens of the generations that ran, and of them the ones the prefix cache supplied.
  std::atomic<int64_t> prompt_tokens_all{0}, prompt_tokens_cached{0};
  std::atomic<int64_t> device_faults{0};  // requests failed by a device fault (503; the context made again)
  std::mutex m;
  double prompt_ms = 0, predicted_ms = 0;  // guarded by m
  // A generation that ran: its evaluated prompt tokens, predicted tokens and their times.
  void record(const runtime::GenerateResult& r);
};

// The text of /metrics. `be` and `cache` may be null (still loading): their lines are left out.
// `kv` / `kv_per_token` (may be null): the contexts' KV by kind of layer and one position's share.
std::string prometheus_text(Metrics& m, const runtime::SchedulerStats& st, const backend::Backend* be,
                            const runtime::PrefixCache* cache, const runtime::KvBytes* kv = nullptr,
                            const runtime::KvBytes* kv_per_token = nullptr);

}  // namespace rocky::server
