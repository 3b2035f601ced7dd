#!/usr/bin/env bash
# Builds the test trees and runs them:
#   build/       the main tree (gcc, Release): unit, op, model and CLI tests (Vulkan on lavapipe)
#   build-arm64/ on an x86-64 host with the cross tools (install-deps.sh --cross-arm64; CI installs
#                them): the same sources cross-built for aarch64, the CPU-only tests under qemu-user
#                and the arm64-vs-host greedy comparison (scripts/test-arm64.sh). ARM64_LEG=0 skips
#                it; ARM64_LEG=1 fails when the tools are missing; unset, a host without them says
#                it skipped the leg and how to add it.
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
# The arm64 leg (cross-build + CPU tests under qemu-user; ≈ 15–20 minutes on 2 cores, most of it the
# cross build).
if [ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] && [ "${ARM64_LEG:-}" != 0 ]; then
  if command -v aarch64-linux-gnu-g++ >/dev/null && command -v qemu-aarch64 >/dev/null || [ "${ARM64_LEG:-}" = 1 ]; then
    bash scripts/test-arm64.sh
  else
    echo "test.sh: the arm64 leg is SKIPPED: no cross compiler or qemu-aarch64 here" \
      "(bash scripts/install-deps.sh --cross-arm64 adds them; ARM64_LEG=0 skips it without this note)" >&2
  fi
fi
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DROCKY_FUZZ=ON \
  -DROCKY_WERROR="${ROCKY_WERROR:-ON}" >/dev/null
cmake --build build-fuzz -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"
ctest --test-dir build-fuzz --output-on-failure
