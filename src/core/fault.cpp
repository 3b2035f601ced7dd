// The fault injector (see fault.hpp).
#include "core/fault.hpp"

#include <atomic>
#include <mutex>

namespace rocky::fault {

namespace {
std::atomic<bool> g_on{false};
std::atomic<bool> g_paused{false};
std::mutex g_mu;  // guards g_plan (install vs hit)
Plan g_plan;
std::array<std::atomic<uint64_t>, k_kinds> g_events{};
std::array<std::atomic<uint64_t>, k_kinds> g_injected{};
}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Alloc: return "alloc";
    case Kind::Lost: return "lost";
    case Kind::Disk: return "disk";
    case Kind::Kill: return "kill";
  }
  return "?";
}

void install(const Plan& p) {
  std::lock_guard lk(g_mu);
  g_plan = p;
  for (auto& c : g_events) c = 0;
  for (auto& c : g_injected) c = 0;
  g_on = !p.empty();
}

bool active() { return g_on.load(std::memory_order_relaxed); }

void pause(bool paused) { g_paused = paused; }

bool hit(Kind k) {
  if (!g_on.load(std::memory_order_relaxed) || g_paused.load(std::memory_order_relaxed)) return false;
  const auto i = static_cast<size_t>(k);
  const uint64_t n = ++g_events[i];
  std::lock_guard lk(g_mu);
  for (const Rule& r : g_plan.rules) {
    if (r.kind != k) continue;
    if (r.every ? n % r.n == 0 : n == r.n) {
      ++g_injected[i];
      return true;
    }
  }
  return false;
}

uint64_t injected(Kind k) { return g_injected[static_cast<size_t>(k)]; }
uint64_t events(Kind k) { return g_events[static_cast<size_t>(k)]; }

}  // namespace rocky::fault
