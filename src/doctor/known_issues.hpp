// The one table of known problems `rocky doctor` flags, each with its fix and its source.
//
// Rows are data: the detection logic in doctor.cpp names a row by id and copies its problem, fix
// and source into the report. Add a row here (with a source a reader can check) before teaching
// doctor.cpp to detect it. Rows depending on a driver's features test the features the device
// reports, not its version; an unparseable version is itself a warning row, never a guess.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace rocky::doctor {

enum class Severity { warn, fail };

struct KnownIssue {
  std::string_view id;  // stable, used in check ids ("issue.<id>") and tests
  Severity severity;
  std::string_view when;     // what the detection matches, in words
  std::string_view problem;  // one line shown after ✘ / !
  std::string_view fix;      // one line: what the user runs or changes
  std::string_view source;   // URL or document reference the row rests on
};

std::span<const KnownIssue> known_issues();

// The row with this id; throws rocky::Error for an unknown id (a programming error in doctor.cpp,
// caught by the tests).
const KnownIssue& known_issue(std::string_view id);

// SoCs whose GPU the doctor knows: which Mali, its GPU id and the CSF firmware panthor loads.
struct KnownSoc {
  std::string_view compatible_prefix;  // device-tree root compatible, e.g. "rockchip,rk3588"
  std::string_view soc;
  std::string_view gpu;
  uint32_t gpu_id;
  int mali_arch_major;            // Mesa's PAN_ARCH (10 = Valhall CSF)
  std::string_view csf_firmware;  // relative to the firmware root; empty for non-CSF GPUs
  std::string_view source;
};

std::span<const KnownSoc> known_socs();

}  // namespace rocky::doctor
