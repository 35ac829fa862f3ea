#!/usr/bin/env bash
# Builds the GPU probes on the CPU machine (CUDA toolkit, no GPU needed):
#   scripts/gpu/build.sh BUILD_DIR [SHIM_SO]
# -> BUILD_DIR/gpu-probes/probe_{vmm,fault,bandwidth,capture,lookup,shim,paging,context}
#    BUILD_DIR/lib/libvgpumem.so  (a stripped copy of SHIM_SO, default
#    build/lib/libvgpumem.so, unless BUILD_DIR/lib/libvgpumem.so already exists
#    and no SHIM_SO is given; a missing shim is reported, not fatal)
# libcuda is linked from the toolkit's stubs at link time only; no RPATH, so the
# real driver's libcuda.so.1 is found at run time. Then on the GPU machine:
#   bash scripts/gpu/run_all.sh BUILD_DIR      (see scripts/gpu/README.md)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
B=${1:?usage: build.sh BUILD_DIR [SHIM_SO]}
mkdir -p "$B"; B=$(cd "$B" && pwd)
CUDA=${CUDA_HOME:-/usr/local/cuda}
NVCC=$CUDA/bin/nvcc
out=$B/gpu-probes; gen=$B/gpu-probes/gen
mkdir -p "$out" "$gen" "$B/lib"

"$NVCC" -cubin -arch=sm_90 -O3 "$here/kernels.cu" -o "$gen/kernels.cubin"
"$CUDA/bin/bin2c" --name kernels_cubin --const "$gen/kernels.cubin" > "$gen/kernels_cubin.h"

for p in vmm fault bandwidth capture lookup shim paging context frees; do
  "$NVCC" -x c++ -O2 -std=c++17 -cudart none -Xcompiler=-static-libstdc++,-static-libgcc -I"$gen" -I"$here" "$here/probe_$p.cu" -o "$out/probe_$p" \
    -L"$CUDA/lib64/stubs" -lcuda -ldl -lpthread &
done
# probe_cupti uses the runtime (its launches go through cudaLaunchKernel, as PyTorch's do) and CUPTI.
cupti_lib=$(dirname "$(ls "$CUDA"/lib/libcupti.so "$CUDA"/lib64/libcupti.so "$CUDA"/extras/CUPTI/lib64/libcupti.so 2>/dev/null | head -1)")
"$NVCC" -arch=sm_90 -O2 -std=c++17 -Xcompiler=-static-libstdc++,-static-libgcc "$here/probe_cupti.cu" -o "$out/probe_cupti" \
  -L"$cupti_lib" -L"$CUDA/lib64/stubs" -lcupti -lcuda &
wait_all() { local rc=0; for j in $(jobs -p); do wait "$j" || rc=1; done; return $rc; }
wait_all || { echo "build.sh: a probe failed to compile" >&2; exit 1; }
strip "$out"/probe_*
for f in "$out"/probe_*; do
  if readelf -d "$f" | grep -qE 'R(UN)?PATH'; then echo "build.sh: $f has an RPATH" >&2; exit 1; fi
done

shim=${2:-}
if [[ -n "$shim" || ! -e "$B/lib/libvgpumem.so" ]]; then
  shim=${shim:-$repo/build/lib/libvgpumem.so}
  if [[ -f "$shim" ]]; then strip -o "$B/lib/libvgpumem.so" "$shim"
  else echo "build.sh: no shim at $shim (run_all.sh will run the probes without it)" >&2; fi
fi
cp "$here/kernels.cu" "$gen/" 2>/dev/null || true
echo "build.sh: ready in $B ($(du -sh "$B/gpu-probes" | cut -f1) probes; shim: $(ls -la "$B/lib/libvgpumem.so" 2>/dev/null | awk '{print $5}' || echo missing) bytes)"
