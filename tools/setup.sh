#!/usr/bin/env bash
# Installs every dependency of tilesearch from Debian 12 packages. Idempotent: when everything is
# already installed it only checks (a second or two) and changes nothing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config lld
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools libzstd-dev
  libxgboost-dev libabsl-dev libeigen3-dev libgtest-dev libgmock-dev
  nlohmann-json3-dev libcli11-dev
  clang-format
  xz-utils
  mpich libmpich-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "setup: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
