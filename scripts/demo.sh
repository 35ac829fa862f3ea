#!/usr/bin/env bash
# Sets up, builds and runs the demo on the simulated CUDA driver (no GPU needed),
# and draws its picture (timeline.png in its folder) where matplotlib is.
# The build is what ships (target vgpumem_shipped: the command, the library,
# the simulated driver and the trainers `vgpumem demo` and `vgpumem bench`
# run), with the compiler's own progress lines, and without -Werror: a newer
# compiler's new warning must not stop a demo (docs/install.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --plots  # python3-matplotlib, best effort: the picture
echo "demo.sh: configuring build/"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
echo "demo.sh: building vgpumem and the simulated driver in build/ (the first time takes minutes: its progress below)"
cmake --build build -j"$(nproc 2>/dev/null || echo 2)" --target vgpumem_shipped
exec build/bin/vgpumem demo "$@"
