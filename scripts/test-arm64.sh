#!/usr/bin/env bash
# The arm64 leg of CI: cross-builds rocky and the CPU-only tests (CTest label `cpu`) for aarch64
# with Debian's cross compilers (cmake/toolchains/aarch64-linux-gnu.cmake) into build-arm64/, runs
# them under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR; build-arm64/rocky runs rocky.aarch64 under
# qemu), compares the arm64 build's greedy output with the host build's (test_arm64_greedy), and
# checks that install-deps.sh's package sets resolve on Debian 12 and 13 (scripts/check-deps.sh,
# in the background while the build runs).
# Needs: `install-deps.sh --cross-arm64` and the host build in build/ (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$PWD/build/xdg-runtime}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 0700 "$XDG_RUNTIME_DIR"
[ -x build/rocky ] || { echo "test-arm64: build/rocky is missing: run scripts/build.sh first" >&2; exit 1; }
command -v aarch64-linux-gnu-g++ >/dev/null && command -v qemu-aarch64 >/dev/null ||
  { echo "test-arm64: no cross compiler or qemu-aarch64: run scripts/install-deps.sh --cross-arm64" >&2; exit 1; }
jobs="$(nproc)"
# qemu-user makes thread start/exit and spinning very slow: OpenBLAS's pool stays at one thread.
export OPENBLAS_NUM_THREADS=1
start=$SECONDS
deps_log="$(mktemp)"
bash scripts/check-deps.sh >"$deps_log" 2>&1 &
deps_pid=$!
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build-arm64 -G Ninja --toolchain cmake/toolchains/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
  -DROCKY_WERROR="${ROCKY_WERROR:-ON}" -DROCKY_HOST_ROCKY="$PWD/build/rocky" "${launcher[@]}" >/dev/null
# Build only what the `cpu` tests run: their executables and rocky.
# Not under qemu: the slot-file and speculation server suites (each starts rocky serve a dozen times,
# 2+ minutes apiece emulated; architecture-independent logic the host build runs). The server on the
# CPU backend is still tested here (test_prefix_cache_http_cpu).
skip='^(test_slots_http_cpu|test_spec_http_cpu)$'
mapfile -t targets < <(ctest --test-dir build-arm64 -L cpu -E "$skip" --show-only=json-v1 | python3 -c '
import json, os, sys
for t in json.load(sys.stdin)["tests"]:
    for a in t.get("command", []):
        b = os.path.basename(a)
        if b.startswith("test_") and "/build-arm64/" in a:
            print(b)
')
cmake --build build-arm64 -j "$jobs" --target rocky "${targets[@]}"
built=$SECONDS
ctest --test-dir build-arm64 -L cpu -E "$skip" --output-on-failure -j "$jobs"
echo "test-arm64: build $((built - start)) s, tests under qemu $((SECONDS - built)) s"
if wait "$deps_pid"; then cat "$deps_log"; else cat "$deps_log" >&2; exit 1; fi
echo "test-arm64: done in $((SECONDS - start)) s"
