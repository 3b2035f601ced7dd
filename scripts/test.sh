#!/usr/bin/env bash
# Builds both test trees and runs them:
#   build/       the main tree (gcc, Release): unit, op, model and CLI tests (Vulkan on lavapipe)
#   build-fuzz/  clang + libFuzzer + ASan/UBSan: bounded fuzz runs of the parsers
# Needs ../shared beside the checkout (reference models and outputs); tests fail without it.
set -euo pipefail
cd "$(dirname "$0")/.."
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$PWD/build/xdg-runtime}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 0700 "$XDG_RUNTIME_DIR"
jobs="$(nproc)"
bash scripts/build.sh
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROCKY_FUZZ=ON \
  -DROCKY_WERROR="${ROCKY_WERROR:-ON}" >/dev/null
cmake --build build-fuzz -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
ctest --test-dir build-fuzz --output-on-failure
