#!/usr/bin/env bash
# Installs every build and test dependency of rocky from Debian packages (idempotent).
#
#   bash scripts/install-deps.sh                 this machine's own architecture: Debian 12 or 13 on
#                                                x86-64, or on arm64 (an RK3588 board) with the same
#                                                package names; Ubuntu 24.04 is untested
#   bash scripts/install-deps.sh --cross-arm64   also the arm64 cross build on an x86-64 host:
#                                                dpkg --add-architecture arm64, Debian's cross
#                                                compilers, the :arm64 -dev libraries and qemu-user
#                                                (cmake/toolchains/aarch64-linux-gnu.cmake uses them)
#   bash scripts/install-deps.sh --print native|cross-arm64
#                                                the package list only (scripts/check-deps.sh
#                                                resolves it against other Debian releases)
set -euo pipefail

# clang's runtime (libFuzzer, sanitizers) is versioned by name: the one matching the clang that
# apt would install (Debian 12: 14, Debian 13: 19).
clang_rt() {
  local v
  v="$(apt-cache depends clang 2>/dev/null | sed -n 's/.*Depends: clang-\([0-9][0-9]*\)$/\1/p' | head -n1)"
  echo "libclang-rt-${v:-14}-dev"
}

native_pkgs() {
  local rt="${1:-$(clang_rt)}"
  echo build-essential cmake ninja-build pkg-config git ccache \
    glslc spirv-tools libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers vulkan-tools \
    libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev \
    libpcre2-dev libopenblas-dev libcpp-httplib-dev \
    clang "$rt" clang-format \
    python3 python3-jsonschema haproxy
}

# Cross-building for arm64 on an x86-64 host: the compilers and qemu run on the host, the libraries
# rocky links are the :arm64 ones (headers-only packages are architecture-independent and come from
# native_pkgs); mesa-vulkan-drivers:arm64 gives qemu an arm64 lavapipe (its Vulkan init must fail
# with a clear error, never abort).
cross_arm64_pkgs() {
  echo g++-aarch64-linux-gnu qemu-user \
    libfmt-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64 libbenchmark-dev:arm64 libpcre2-dev:arm64 \
    libopenblas-dev:arm64 libcpp-httplib-dev:arm64 libvulkan-dev:arm64 mesa-vulkan-drivers:arm64
}

cross=0
case "${1:-}" in
  "") ;;
  --cross-arm64) cross=1 ;;
  --print)
    case "${2:-}" in
      native) native_pkgs "${3:-}" ;;
      cross-arm64) cross_arm64_pkgs ;;
      *) echo "install-deps: --print native|cross-arm64" >&2; exit 2 ;;
    esac
    exit 0
    ;;
  *) echo "install-deps: unknown option '$1' (use --cross-arm64 or --print native|cross-arm64)" >&2; exit 2 ;;
esac

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
updated=0
apt_update() { ((updated)) || { $SUDO apt-get update -qq && updated=1; }; }

if ((cross)); then
  [ "$(dpkg --print-architecture)" = amd64 ] || { echo "install-deps: --cross-arm64 is for an x86-64 (amd64) host" >&2; exit 1; }
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
    apt_update
  fi
fi

read -r -a pkgs <<<"$(native_pkgs "$(clang_rt)")"
((cross)) && read -r -a more <<<"$(cross_arm64_pkgs)" && pkgs+=("${more[@]}")
# Node.js + npm for the OpenAI Node SDK tests (tests/server); a Node that is already there (e.g.
# from NodeSource, which bundles npm) is used as it is.
command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt_update
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "install-deps: all ${#pkgs[@]} packages present"
# The OpenAI and Anthropic Node SDKs, exactly as tests/server/package-lock.json pins them.
(cd "$(dirname "$0")/../tests/server" && npm ci --no-audit --no-fund --loglevel=error)
echo "install-deps: tests/server node_modules installed"
