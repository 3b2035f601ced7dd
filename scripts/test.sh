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
# Mali-G610 offline compiler for the `mali` CTest label (idempotent: seconds when built,
# ≈ 8–19 min the first time on 2 cores; needs root for apt-get). setup.sh uses bash features.
export MALI_G610_HOME="${MALI_G610_HOME:-/opt/mali-g610-offline}"
bash ../shared/mali/setup.sh
# The tree is formatted with Debian 12's clang-format 14 (.clang-format); a diff fails the run.
bash scripts/check-format.sh
# Files ≤ 900 lines, functions ≤ 200 (scripts/check-size.sh). The excluded areas are being split
# on another branch: they are listed but do not fail the run until their --exclude is dropped.
bash scripts/check-size.sh --exclude src/backend/vulkan --exclude src/tune --exclude apps/lab
bash scripts/build.sh
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROCKY_FUZZ=ON \
  -DROCKY_WERROR="${ROCKY_WERROR:-ON}" >/dev/null
cmake --build build-fuzz -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
ctest --test-dir build-fuzz --output-on-failure
