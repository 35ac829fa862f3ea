#!/usr/bin/env bash
# Builds, on the CPU machine, everything the GPU checks need, into one folder
# to take to the GPU machine (x86-64 both sides):
#   scripts/gpu/prepare.sh OUT_DIR [BUILD_DIR]
# then, on the GPU machine:  bash OUT_DIR/run_torch.sh; bash OUT_DIR/run_probes.sh
# (results go to $OUT, default /tmp/out). See docs/gpu-facts.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: prepare.sh OUT_DIR [BUILD_DIR]}
build=${2:-$here/../../build}
mkdir -p "$out"
cmake --build "$build" --target vgpumem >/dev/null
strip -o "$out/libvgpumem.so" "$build/lib/libvgpumem.so"
/usr/local/cuda/bin/nvcc -O2 -arch=sm_90 -std=c++17 "$here/probe.cu" -o "$out/probe" \
  -L/usr/local/cuda/lib64/stubs -lcuda
/usr/local/cuda/bin/nvcc -O2 -arch=sm_90 "$here/vecadd_checks.cu" -o "$out/vecadd_checks"
cp "$here"/run_*.sh "$here"/*.py "$out/"
echo "ready: $out ($(du -sh "$out" | cut -f1))"
