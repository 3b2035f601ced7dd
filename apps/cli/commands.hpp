// The `rocky` subcommands. Each add_<name>() registers a CLI11 subcommand on `app`; when the user
// picks it, the subcommand's callback stores its work in `run`, which main() calls after parsing.
// A command returns the process exit code; it throws rocky::Error for bad input (main prints it,
// exit 1). Usage errors are CLI11 parse errors (exit 2).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace rocky::cli {

using Runner = std::function<int()>;

void add_info(CLI::App& app, Runner& run);
void add_devices(CLI::App& app, Runner& run);
void add_verify(CLI::App& app, Runner& run);
void add_tokenize(CLI::App& app, Runner& run);
void add_run(CLI::App& app, Runner& run);
void add_doctor(CLI::App& app, Runner& run);
void add_synth(CLI::App& app, Runner& run);
void add_quantize(CLI::App& app, Runner& run);
void add_roofline(CLI::App& app, Runner& run);
void add_bench_op(CLI::App& app, Runner& run);
void add_bench(CLI::App& app, Runner& run);

}  // namespace rocky::cli
