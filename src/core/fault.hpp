// The fault injector: makes the Nth device allocation, step submit or disk-cache write fail the way
// the real failure does, so that the server's recovery from it can be tested (ROCKY_FAULT, parsed
// once by runtime/options.cpp, installed by the program's main; never set: every check is one
// relaxed atomic load that says no).
//
// Kinds and where they are counted:
//   alloc  each Vulkan device allocation (vulkan::Memory::create) and each CPU context's KV cache:
//          the chosen one fails as VK_ERROR_OUT_OF_DEVICE_MEMORY (an OutOfMemoryError)
//   lost   each step submitted (a Vulkan vkQueueSubmit of a compute, a CPU Context::compute): the
//          chosen one reports VK_ERROR_DEVICE_LOST (a DeviceLostError)
//   disk   each prefix-cache disk write: the chosen one stops half-way and leaves its temporary file
//          as a process killed there would (runtime/prefix_disk.cpp); the server goes on
//   kill   each prefix-cache disk write: the chosen one is half-written, then the process sends
//          itself SIGKILL (a real kill -9 mid-write; the next start must not serve the entry)
// A rule `kind@N` fails the Nth event of its kind only; `kind%N` every Nth (N, 2N, …). Rules are
// joined with commas: ROCKY_FAULT=alloc@3,lost%40,disk%5.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace rocky::fault {

enum class Kind : uint8_t { Alloc = 0, Lost = 1, Disk = 2, Kill = 3 };
constexpr size_t k_kinds = 4;
const char* kind_name(Kind k);

struct Rule {
  Kind kind = Kind::Alloc;
  uint64_t n = 0;      // ≥ 1
  bool every = false;  // kind%N: every Nth; kind@N: the Nth only
};

struct Plan {
  std::vector<Rule> rules;
  bool empty() const { return rules.empty(); }
};

// Makes `p` the process's plan and zeroes the counters (an empty plan turns injection off).
void install(const Plan& p);
// A plan is installed (ROCKY_FAULT set).
bool active();
// While paused, events are neither counted nor failed: `rocky serve` pauses while it loads the
// model and makes its contexts, so N counts from the moment it serves (a fault at start-up would
// only be an exit 1).
void pause(bool paused);
// Counts one event of kind `k`: true when the plan says this one fails.
bool hit(Kind k);
// Faults of kind `k` injected since install() (for logs and tests).
uint64_t injected(Kind k);
// Events of kind `k` counted since install().
uint64_t events(Kind k);

}  // namespace rocky::fault
