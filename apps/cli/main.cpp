// rocky — command-line entry point. Exit codes: 0 ok, 1 error (bad input, device failure, a failed
// verification), 2 usage error.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <string>
#include <vector>

#include "commands.hpp"
#include "lab/lab.hpp"
#include "core/error.hpp"

namespace {
// llama.cpp spells some options with two or three letters after one dash (-ub, -np, -cnv); CLI11
// short names are one letter, so those are rewritten to their long form (--ub) before parsing.
std::string rewrite_two_letter(const char* arg) {
  static const char* const k_long[] = {"-ub",  "-np",  "-to",  "-cnv",  "-sys", "-st",   "-ngl", "-tb",   "-fa",
                                       "-ctk", "-ctv", "-npl", "-mmp",  "-kvu", "-rea",  "-cb",  "-nocb", "-md",
                                       "-hf",  "-hfr", "-mu",  "-cram", "-sp",  "-ngld", "-cd",  "-devd"};
  for (const char* l : k_long)
    if (std::string(arg) == l) return std::string("-") + l;
  return arg;
}
}  // namespace

namespace rocky::cli {
namespace {
runtime::EnvOptions g_env;
}  // namespace
const runtime::EnvOptions& process_env() { return g_env; }
}  // namespace rocky::cli

int main(int argc, char** argv) {
  try {
    rocky::cli::g_env = rocky::runtime::read_env();  // the one read of the environment
    rocky::fault::install(rocky::cli::g_env.fault);  // ROCKY_FAULT (tests of the recovery)
  } catch (const rocky::Error& e) {
    fmt::print(stderr, "rocky: error: {}\n", e.what());
    return 1;
  }
  CLI::App app{"rocky — LLM prefill on Vulkan GPUs without matrix cores", "rocky"};  // name: help says "Usage: rocky"
  app.require_subcommand(1);
  app.set_version_flag("--version", "rocky 0.1.0");
  rocky::cli::Runner run;
  // Accepted before or after the subcommand (subcommands fall through to these).
  bool no_profile = false;
  app.add_flag("--no-profile", no_profile,
               "Use the built-in tuning profile, not the one `rocky tune` wrote for this device");
  app.fallthrough();
  rocky::cli::add_info(app, run);
  rocky::cli::add_devices(app, run);
  rocky::cli::add_verify(app, run);
  rocky::cli::add_tokenize(app, run);
  rocky::cli::add_run(app, run);
  rocky::cli::add_doctor(app, run);
  rocky::cli::add_synth(app, run);
  rocky::cli::add_quantize(app, run);
  rocky::lab::add_roofline(app, run);  // kernel-lab commands (apps/lab)
  rocky::lab::add_bench_op(app, run);
  rocky::lab::add_tune(app, run);
  rocky::cli::add_bench(app, run);
  rocky::cli::add_serve(app, run);
  rocky::cli::add_bench_grammar(app, run);
  rocky::cli::add_report(app, run);
  try {
    std::vector<std::string> args;
    for (int i = argc - 1; i >= 1; --i) args.push_back(rewrite_two_letter(argv[i]));
    app.parse(args);  // CLI11 takes the arguments in reverse order
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);  // prints help/version (rc 0) or the usage error
    return rc == 0 ? 0 : 2;
  }
  rocky::cli::g_env.no_profile = no_profile;
  try {
    return run ? run() : 0;
  } catch (const rocky::Error& e) {
    fmt::print(stderr, "rocky: error: {}\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "rocky: error: out of host memory\n");
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "rocky: error: {}\n", e.what());
    return 1;
  }
}
