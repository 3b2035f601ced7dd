#!/usr/bin/env bash
# Installs every build and test dependency of rocky from Debian 12 packages (idempotent).
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config git
  glslc spirv-tools libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers vulkan-tools
  libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libopenblas-dev libcpp-httplib-dev
  clang libclang-rt-14-dev
  python3
)
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
