// The built-in tuning profiles as the build embedded them (cmake/profiles.cmake): one entry per
// src/tune/profiles/*.json, in file-name order. builtin_profiles() (tile.cpp) parses them once.
#pragma once

#include <cstddef>

namespace rocky::tune {

struct EmbeddedProfile {
  const char* file;            // the file's stem: "nvidia" for profiles/nvidia.json
  const unsigned char* bytes;  // the file's bytes (JSON, not NUL-terminated)
  size_t size;
};
extern const EmbeddedProfile k_embedded_profiles[];
extern const size_t k_embedded_profile_count;

}  // namespace rocky::tune
