// What the build knows about itself (cmake/build_info.cmake writes the definition at build time).
#pragma once

namespace rocky {

// The git commit the binary was built from: 12 hex digits, "-dirty" appended when tracked files
// had uncommitted changes; "unknown" when built outside a git checkout.
const char* build_commit();

}  // namespace rocky
