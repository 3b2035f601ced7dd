#!/usr/bin/env bash
# Configures and builds rocky (Release) into build/. Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DROCKY_WERROR="${ROCKY_WERROR:-ON}" "$@" >/dev/null
cmake --build build -j "$(nproc)"
