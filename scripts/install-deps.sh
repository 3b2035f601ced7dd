#!/usr/bin/env bash
# Installs every build and test dependency of rocky from Debian 12 packages (idempotent).
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config git
  glslc spirv-tools libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers vulkan-tools
  libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libopenblas-dev libcpp-httplib-dev
  clang libclang-rt-14-dev clang-format
  python3 python3-jsonschema
)
# Node.js + npm for the OpenAI and Anthropic Node SDK tests (tests/server); a Node that is already
# there (e.g. from NodeSource, which bundles npm) is used as it is.
command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "install-deps: all ${#pkgs[@]} packages present"
# The OpenAI and Anthropic Node SDKs, exactly as tests/server/package-lock.json pins them.
(cd "$(dirname "$0")/../tests/server" && npm ci --no-audit --no-fund --loglevel=error)
echo "install-deps: tests/server node_modules installed"
