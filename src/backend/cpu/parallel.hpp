// A minimal fork-join loop for the CPU oracle's own loops (dequantization, attention). Each index
// is processed by exactly one thread, so results do not depend on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace rocky::backend::cpu {

// Calls fn(i) for i in [0, n), split into contiguous ranges over up to hardware_concurrency()
// threads; runs inline when `work` (a rough cost in scalar operations) is small. The first
// exception thrown by fn is rethrown on the calling thread.
template <typename Fn>
void parallel_for(int64_t n, double work, Fn&& fn) {
  const int64_t hw = std::max<int64_t>(1, static_cast<int64_t>(std::thread::hardware_concurrency()));
  const int64_t n_threads = std::min<int64_t>({hw, n, static_cast<int64_t>(work / 4e6) + 1});
  if (n_threads <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n_threads));
  for (int64_t t = 0; t < n_threads; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int64_t i = n * t / n_threads; i < n * (t + 1) / n_threads; ++i) fn(i);
      } catch (...) {
        errors[static_cast<size_t>(t)] = std::current_exception();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace rocky::backend::cpu
