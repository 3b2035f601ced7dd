// rocky doctor [--json] [--sysroot DIR] — check the Vulkan / Linux GPU stack and say how to fix it.
// Exit 0 when a Vulkan device rocky can use exists (a CPU rasterizer counts, with a warning), else 1.
#include <fmt/format.h>

#include "commands.hpp"
#include "doctor/doctor.hpp"

namespace rocky::cli {
namespace {

struct DoctorOpts {
  bool json = false;
  std::string sysroot;
};

int run_doctor(const DoctorOpts& o) {
  doctor::SystemProbe probe(o.sysroot);
  doctor::Report r = doctor::diagnose(probe);
  if (o.json) {
    fmt::print("{}\n", doctor::to_json(r).dump(2));
  } else {
    fmt::print("{}", doctor::render_text(r));
  }
  return r.exit_code();
}

}  // namespace

void add_doctor(CLI::App& app, Runner& run) {
  auto o = std::make_shared<DoctorOpts>();
  auto* sub = app.add_subcommand("doctor", "Diagnose the Vulkan and GPU driver stack and print fixes");
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->add_option("--sysroot", o->sysroot,
                  "Read sysfs, /dev, firmware and ICD folders under DIR (loader and instance checks stay real)")
      ->check(CLI::ExistingDirectory);
  sub->callback([&run, o] { run = [o] { return run_doctor(*o); }; });
}

}  // namespace rocky::cli
