#!/usr/bin/env bash
# Checks that install-deps.sh's package sets resolve on Debian 12 (bookworm) and Debian 13 (trixie),
# for an arm64 host (the RK3588 board: the native set, arm64 as the only architecture) and for the
# arm64 cross build on an x86-64 host (the native set plus --cross-arm64's set, amd64 + arm64).
#
# Each release gets its own apt state under a temporary directory (its own sources, lists and an
# EMPTY dpkg status), so the check does not depend on what this machine has installed:
# `apt-get install -s` must find every package and a consistent set of dependencies for a fresh
# system of that release. Nothing is installed. The release this machine runs reuses its apt lists
# when they hold arm64 (after `install-deps.sh --cross-arm64`); another release downloads its
# amd64 + arm64 package lists (≈ 40 MB; minutes). Needs deb.debian.org and debian-archive-keyring
# (Debian 12's keyring already holds Debian 13's release keys).
#   bash scripts/check-deps.sh [bookworm] [trixie]     (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
dists=("$@")
((${#dists[@]})) || dists=(bookworm trixie)
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -r "$keyring" ] || { echo "check-deps: $keyring missing (apt-get install debian-archive-keyring)" >&2; exit 1; }
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
fails=0
for dist in "${dists[@]}"; do
  d="$root/$dist"
  mkdir -p "$d/lists/partial" "$d/cache/archives/partial" "$d/sources.list.d" "$d/prefs.d"
  : >"$d/status"
  cat >"$d/sources.list" <<SRC
deb [signed-by=$keyring] $mirror $dist main
deb [signed-by=$keyring] $mirror $dist-updates main
deb [signed-by=$keyring] $security $dist-security main
SRC
  # apt_opts <native architecture> <all architectures>
  lists="$d/lists"
  here="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
  if [ "$here" = "$dist" ] && dpkg --print-foreign-architectures | grep -qx arm64 &&
    ls /var/lib/apt/lists/*"_${dist}_main_binary-arm64_Packages"* >/dev/null 2>&1; then
    lists=/var/lib/apt/lists
  fi
  apt_opts() {
    echo -o "Dir::Etc::sourcelist=$d/sources.list" -o "Dir::Etc::sourceparts=$d/sources.list.d" \
      -o "Dir::Etc::preferencesparts=$d/prefs.d" -o "Dir::State::Lists=$lists" \
      -o "Dir::State::status=$d/status" -o "Dir::Cache=$d/cache" -o "APT::Architecture=$1" \
      -o "APT::Architectures=$2" -o "Debug::NoLocking=1" -o "APT::Install-Recommends=0" \
      -o "Acquire::Languages=none" -o "APT::Sandbox::User=root"
  }
  read -r -a both <<<"$(apt_opts amd64 amd64,arm64)"
  if [ "$lists" = "$d/lists" ]; then
    echo "check-deps: $dist: apt-get update (amd64 + arm64 lists)"
    apt-get "${both[@]}" update -qq >/dev/null || { echo "check-deps: $dist: apt-get update failed" >&2; fails=$((fails + 1)); continue; }
  else
    echo "check-deps: $dist: this machine's apt lists"
  fi
  # The clang runtime package is named after the release's default clang (clang-14, clang-19, …).
  clang_v="$(apt-cache "${both[@]}" depends clang | sed -n 's/.*Depends: clang-\([0-9][0-9]*\)$/\1/p' | head -n1)"
  read -r -a native <<<"$(bash scripts/install-deps.sh --print native "libclang-rt-${clang_v}-dev") nodejs npm"
  read -r -a cross <<<"$(bash scripts/install-deps.sh --print cross-arm64)"
  read -r -a arm <<<"$(apt_opts arm64 arm64)"
  for leg in "arm64-host" "amd64-host-cross"; do
    if [ "$leg" = arm64-host ]; then
      opts=("${arm[@]}") set=("${native[@]}")
    else
      opts=("${both[@]}") set=("${native[@]}" "${cross[@]}")
    fi
    if out="$(apt-get "${opts[@]}" install -s "${set[@]}" 2>&1)"; then
      mesa="$(sed -n 's/^Inst mesa-vulkan-drivers\(:arm64\)\? (\([^ ]*\) .*/\2/p' <<<"$out" | head -n1)"
      echo "check-deps: $dist $leg: ${#set[@]} packages resolve ($(grep -c '^Inst ' <<<"$out") to install; Mesa $mesa)"
    else
      echo "check-deps: $dist $leg: does NOT resolve:" >&2
      grep -v '^\(Inst\|Conf\) ' <<<"$out" | tail -n 25 >&2
      fails=$((fails + 1))
    fi
  done
done
((fails == 0)) || { echo "check-deps: $fails check(s) failed" >&2; exit 1; }
