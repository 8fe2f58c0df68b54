#!/usr/bin/env bash
# Installs the Debian packages pipetwin builds and tests with. Idempotent: when every package is
# already installed it returns at once without touching apt. Needs root (or sudo) only when
# something is missing.
set -euo pipefail

PACKAGES=(
  cmake g++ make pkg-config
  clang libclang-rt-14-dev
  libsimgrid-dev
  libtorch-dev libgloo-dev
  libboost-graph-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev
  jupyter-nbconvert python3-ipykernel python3-matplotlib python3-pandas
  python3-torch  # only for tests: a real PyTorch profiler trace to import (tests/kineto_trace.py)
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
