#!/usr/bin/env bash
# Builds the test trees and runs them:
#   build/       the main tree (gcc, Release): unit, op, model and CLI tests (Vulkan on lavapipe)
#   build-arm64/ with ARM64_LEG=1 only: the same sources cross-built for aarch64, the CPU-only tests
#                under qemu-user and the arm64-vs-host greedy comparison (scripts/test-arm64.sh)
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
# Files ≤ 900 lines, functions ≤ 200 (scripts/check-size.sh), over the whole of src/ and apps/.
bash scripts/check-size.sh
bash scripts/build.sh
# The arm64 leg (cross-build + CPU tests under qemu-user) runs with ARM64_LEG=1 on an x86-64 host
# after `install-deps.sh --cross-arm64`; it is not yet part of the default run (its time on 2 cores
# is unmeasured).
if [ "${ARM64_LEG:-0}" = 1 ] && [ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ]; then bash scripts/test-arm64.sh; fi
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROCKY_FUZZ=ON \
  -DROCKY_WERROR="${ROCKY_WERROR:-ON}" >/dev/null
cmake --build build-fuzz -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
ctest --test-dir build-fuzz --output-on-failure
