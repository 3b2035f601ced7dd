// Tuning profiles as files: one per device and driver, written by `rocky tune` and loaded by
// every command that makes a Vulkan backend.
//
// Where: $XDG_CACHE_HOME/rocky/profiles/ (else ~/.cache/rocky/profiles/), named by the device key
// VVVV-DDDD-RRRRRRRR.json (PCI vendor id, device id, driver version; hex). A file for the same
// vendor and device but another driver version is ignored with a note (tiles that were fast, or
// spill-free, under one compiler need not be under the next).
//
// Format: the JSON override of src/tune/tile.hpp (every field the profile holds) plus rocky tune's
// record:
//   {"profile": "llvmpipe",                     // the built-in profile the search started from
//    "device": {"vendor_id": 4318, "device_id": 8994, "driver_version": 2243297280,
//               "name": "…", "driver_name": "…", "driver_info": "…"},
//    "modeled": 0,                              // 1: ranked by an offline compiler (rocky tune --offline)
//    "tune": {"tool": "rocky tune", "quick": 1, "model": "…", "complete": 1, "seconds": 41.2},
//    "max_accumulators": 32, "mmq": {…}, "mmq_alt": [...], "min_workgroups": 8, "mm": {…},
//    "mmv": {…}, "attn": [...], "attn_wide": [...], "attn_split": [...],
//    "deny": [{"kernel": "mul_mmq", "tile": "bm128 …", "reason": "spills …"}],
//    "results": [{"kernel": "mul_mmq", "type": "q4_K", "shape": [M, N, K], "tile": "…",
//                 "ms": 0.41, "spread": 0.03, "status": "ok"}]}  // every measurement (resume)
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tune/tile.hpp"

namespace rocky::tune {

struct DeviceKey {
  uint32_t vendor_id = 0, device_id = 0, driver_version = 0;
  std::string name, driver_name, driver_info;
};

// CACHE_DIR/rocky/profiles ("" when cache_dir is "": nothing is looked up or written).
std::string profiles_dir(const std::string& cache_dir);
// "VVVV-DDDD-RRRRRRRR.json".
std::string profile_file_name(const DeviceKey& k);

struct ProfileLookup {
  std::string path;                // the matching profile ("" = none)
  std::vector<std::string> notes;  // files for this device under another driver version (ignored)
};
// The profile for `k` in `dir`: the file named by the key whose "device" (when present) matches.
ProfileLookup find_profile(const std::string& dir, const DeviceKey& k);

// The key a profile file records ("device"), or nullopt-like {} with ok = false.
struct StoredKey {
  bool ok = false;
  DeviceKey key;
};
StoredKey stored_key(const nlohmann::json& j);

// `p` as JSON in the file format above (without "device", "tune", "results": the caller adds them).
nlohmann::json profile_to_json(const DeviceProfile& p, const std::string& base_name);
nlohmann::json key_to_json(const DeviceKey& k);

// Writes `j` to `path` (creating its directory; through a temporary file and a rename, so that a
// reader never sees half a profile). rocky::Error naming the path when it cannot.
void write_json_file(const std::string& path, const nlohmann::json& j);
// Parses `path` (rocky::Error naming it when it is not readable JSON).
nlohmann::json read_json_file(const std::string& path);

// One profile file for `rocky tune --list`.
struct ListedProfile {
  std::string path, device, driver, base;
  DeviceKey key;
  bool modeled = false, complete = true, readable = true;
  std::string error;  // when not readable
};
std::vector<ListedProfile> list_profiles(const std::string& dir);

}  // namespace rocky::tune
