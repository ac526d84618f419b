#!/usr/bin/env bash
# Installs the Debian 12 packages gearbox builds with (only those missing; sudo when not
# root), then configures and builds gearbox in build/.
# usage: setup.sh [--fuzz]   --fuzz: also clang and its libFuzzer runtime (scripts/fuzz.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(gcc g++ libc6-dev meson ninja-build pkg-config libinih-dev libdnnl-dev libpcre2-dev
          libjansson-dev libopenmpi-dev openmpi-bin libboost-context-dev)
[ "${1:-}" = --fuzz ] && packages+=(clang libclang-rt-dev)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed" ||
        missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi

[ -f build/build.ninja ] || meson setup build
ninja -C build
