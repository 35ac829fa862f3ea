#!/usr/bin/env bash
# Builds the Python wheel, dist/vgpumem-<version>-py3-none-linux_x86_64.whl:
#   scripts/build-wheel.sh [BUILD_DIR [DIST_DIR]]
# BUILD_DIR (default build-release) is configured as a Release build without
# the tests if it is not configured yet; only what the wheel carries is built
# (target vgpumem_shipped): the library, the command, the simulated driver and
# libraries, the demo's and the benchmark's trainers. The wheel is assembled
# from `cmake --install` by python/make_wheel.py (standard library only).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-release}
dist=${2:-dist}
scripts/install-deps.sh
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DVGPUMEM_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" -j"$(nproc 2>/dev/null || echo 2)" --target vgpumem_shipped >/dev/null
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
cmake --install "$build" --prefix "$staging" --strip >/dev/null
# Debian's interpreter, explicitly: the one scripts/install-deps.sh provides.
/usr/bin/python3 python/make_wheel.py --prefix "$staging" --out "$dist"
