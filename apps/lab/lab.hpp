// The kernel-lab subcommands of `rocky` (apps/lab): tools that drive the Vulkan backend's kernels
// and device directly, apart from the user-facing commands of apps/cli (which see only runtime/).
// Registered on the one `rocky` binary like the others (main.cpp), so their CLI is unchanged.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"

namespace rocky::lab {

void add_roofline(CLI::App& app, cli::Runner& run);  // rocky roofline: measured FMA / int8-dot / copy peaks
void add_bench_op(CLI::App& app, cli::Runner& run);  // rocky bench-op: one prefill matmul, % of roofline
void add_tune(CLI::App& app, cli::Runner& run);      // rocky tune: search tiles per device (src/tune)

}  // namespace rocky::lab
