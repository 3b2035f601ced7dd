// rocky tune --offline TARGET: ranks tile candidates with an offline compiler instead of a
// device and writes a profile marked modeled (src/tune/store.hpp). TARGET: mali-g610 — Mesa
// 25.0.7's Valhall compiler through ../shared/mali/g610-stats (registers, spills, thread-local
// storage, static cycle estimate; see tune_offline.cpp for the model).
#pragma once

#include <string>

namespace rocky::lab {

// `compiler`: the g610-stats script ("" = g610-stats on PATH). Returns the exit code.
int run_offline_tune(const std::string& target, const std::string& out, bool quick, const std::string& compiler);

}  // namespace rocky::lab
