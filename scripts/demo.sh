#!/usr/bin/env bash
# Sets up, builds and runs the demo on the simulated CUDA driver (no GPU needed),
# and draws its picture (timeline.png in its folder) where matplotlib is.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --plots  # python3-matplotlib, best effort: the picture
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVGPUMEM_WERROR=ON >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)" --target vgpumem vgpumem_cli vgpusim mlp_trainer >/dev/null
exec build/bin/vgpumem demo "$@"
