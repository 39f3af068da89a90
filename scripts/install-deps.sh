#!/usr/bin/env bash
# Installs every build, test and runtime dependency of hftrain from Debian 12's apt archive.
# Idempotent: packages already present are left alone. Needs root (or sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libgloo-dev           # LibTorch 1.13 (CPU) and the gloo headers c10d includes
  libopenblas0-pthread               # optimised BLAS; see README "Threads and BLAS" for why pthread
  libyaml-cpp-dev libcli11-dev libfmt-dev libspdlog-dev nlohmann-json3-dev libxxhash-dev
  catch2                             # Catch2 v2 (tests)
  python3 python3-torch python3-numpy  # independent reference implementation used by tests
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
