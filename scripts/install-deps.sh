#!/usr/bin/env bash
# Installs what vgpumem needs to build and test on a fresh Debian 12 machine.
# The CUDA toolkit is expected at /usr/local/cuda (only its headers are used).
set -euo pipefail

# clang: CI builds with Clang 14 beside GCC 12. python3-venv: the wheel is
# checked in a fresh virtual environment of Debian's python3 (/usr/bin/python3).
packages=(build-essential cmake libspdlog-dev libfmt-dev nlohmann-json3-dev
          libgtest-dev libgmock-dev libbenchmark-dev binutils clang python3 python3-venv)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -f "$cuda_home/include/cuda.h" ]]; then
  echo "install-deps: no CUDA headers at $cuda_home/include/cuda.h; install the CUDA toolkit or set CUDA_HOME" >&2
  exit 1
fi
