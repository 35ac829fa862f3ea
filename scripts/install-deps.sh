#!/usr/bin/env bash
# Installs what vgpumem needs to build and test on a fresh Debian 12 machine.
# The CUDA toolkit is expected at /usr/local/cuda (only its headers are used).
#   scripts/install-deps.sh [--plots]
# --plots also installs python3-matplotlib, which draws the demo's picture
# (scripts/plot_timeline.py), on a best-effort basis: without it the demo
# prints the command that would draw it, and the plot test reports itself
# skipped. scripts/demo.sh asks for it; scripts/test.sh does not, so CI
# fetches nothing it does not need.
set -euo pipefail

plots=0
for arg in "$@"; do
  case $arg in
    --plots) plots=1 ;;
    *) echo "install-deps: unknown option \"$arg\"; usage: install-deps.sh [--plots]" >&2; exit 2 ;;
  esac
done

# clang: CI builds with Clang 14 beside GCC 12. python3-venv: the wheel is
# checked in a fresh virtual environment of Debian's python3 (/usr/bin/python3).
packages=(build-essential cmake libspdlog-dev libfmt-dev nlohmann-json3-dev
          libgtest-dev libgmock-dev libbenchmark-dev binutils clang python3 python3-venv)

sudo_cmd=""
[[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
updated=0
# apt_install PACKAGE...: those not installed yet; fails as apt-get does.
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  echo "install-deps: installing ${missing[*]}"
  if ((updated == 0)); then
    $sudo_cmd apt-get update -qq && updated=1 || return 1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
}

apt_install "${packages[@]}"
if ((plots)); then
  apt_install python3-matplotlib ||
    echo "install-deps: could not install python3-matplotlib; the demo will print the command that draws its picture" >&2
fi

cuda_home=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -f "$cuda_home/include/cuda.h" ]]; then
  echo "install-deps: no CUDA headers at $cuda_home/include/cuda.h; install the CUDA toolkit or set CUDA_HOME" >&2
  exit 1
fi
