// rocky doctor [--json] [--sysroot DIR] — check the Vulkan / Linux GPU stack and say how to fix it.
// Exit 0 when a Vulkan device rocky can use exists (a CPU rasterizer counts, with a warning), else 1.
#include <fmt/format.h>

#include <algorithm>

#include "commands.hpp"
#include "doctor/doctor.hpp"
#include "tune/store.hpp"

namespace rocky::cli {
namespace {

struct DoctorOpts {
  bool json = false;
  std::string sysroot;
};

// check `tune.profile` (section Tuning, before the result): the tuning profile the device rocky
// would pick runs with — the file `rocky tune` wrote for its vendor, device and driver version, or
// the built-in one (with a note for files of another driver version).
void add_profile_check(doctor::Report& r) {
  if (!r.usable_device) return;
  const doctor::VulkanDevice& d = r.vulkan.devices[*r.usable_device];
  doctor::Check c;
  c.id = "tune.profile";
  c.section = "Tuning";
  const std::string builtin = tune::select_profile(d.vendor_id, d.driver_name, d.is_cpu).name;
  const std::string dir = tune::profiles_dir(process_env().cache_dir);
  const tune::ProfileLookup found =
      tune::find_profile(dir, {d.vendor_id, d.device_id, d.driver_version, d.name, d.driver_name, d.driver_info});
  if (process_env().no_profile) {
    c.status = doctor::Status::info;
    c.title = fmt::format("tuning profile: built-in {} (--no-profile)", builtin);
  } else if (!found.path.empty()) {
    c.status = doctor::Status::ok;
    c.title = fmt::format("tuning profile: {} (rocky tune; --no-profile: the built-in {})", found.path, builtin);
  } else {
    c.status = doctor::Status::info;
    c.title = fmt::format("tuning profile: built-in {} (no profile for {:04x}-{:04x}-{:08x} in {})", builtin,
                          d.vendor_id, d.device_id, d.driver_version, dir.empty() ? "(no cache directory)" : dir);
    c.fix = "`rocky tune --quick` finds this device's tiles";
  }
  for (const std::string& n : found.notes) c.title += "; " + n;
  auto at =
      std::find_if(r.checks.begin(), r.checks.end(), [](const doctor::Check& x) { return x.section == "Result"; });
  r.checks.insert(at, c);
}

int run_doctor(const DoctorOpts& o) {
  doctor::SystemProbe probe(o.sysroot);
  doctor::Report r = doctor::diagnose(probe);
  add_profile_check(r);
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
