#!/usr/bin/env bash
# The cuDNN trainer (tests/workloads/cnn_trainer.cpp) on the simulated
# driver under vgpumem, with the library hooks on and off
# (VGPUMEM_LIBRARY_HOOKS), at caps of 50, 40 and 30 % of its peak (its
# largest convolution needs 28 % resident at once; below, CUDA's
# out-of-memory error is the answer, shown as such): the last
# step's simulated time, bytes moved, and whether the result is the
# uncapped run's. Prints a Markdown table (docs/journal/2026-11-25-benchmarks.md,
# "Library hints"). Never run in CI: about two minutes.
#
#   scripts/bench-library-hints.sh [BUILD_DIR] [STEPS] [LINK_GBPS...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${2:-16}
shift $(( $# > 2 ? 2 : $# )) || true
links=("$@")
[[ ${#links[@]} -gt 0 ]] || links=(55 5.5)
trainer="$build/bin/cnn_trainer"
[[ -x $trainer && -f $build/lib/libvgpumem.so ]] || { echo "build $build first (cnn_trainer, vgpumem)" >&2; exit 2; }
export LD_LIBRARY_PATH="$build/lib/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

echo "| link | cap | policy | hooks | step | step / uncapped | copied in / step | not copied in / step | bit-identical |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for link in "${links[@]}"; do
  uncapped_out=$(VGPUSIM_LINK_GBPS=$link VGPUSIM_DEVICE_MEMORY=1GiB "$trainer" --steps "$steps")
  uncapped_result=$(grep '^RESULT' <<<"$uncapped_out")
  uncapped_step=$(field "$(grep '^TIMING' <<<"$uncapped_out")" step_ns)
  peak=$(field "$uncapped_result" peak_device_bytes_wanted)
  for percent in 50 40 30; do
    cap=$((peak * percent / 100))
    for policy in lru auto; do
      for hooks in on off; do
        trace="$scratch/trace.json"
        if ! out=$(VGPUSIM_LINK_GBPS=$link VGPUSIM_DEVICE_MEMORY=1GiB LD_PRELOAD="$build/lib/libvgpumem.so" \
                   VGPUMEM_LIMIT=$cap VGPUMEM_POLICY=$policy VGPUMEM_LIBRARY_HOOKS=$hooks VGPUMEM_TRACE="$trace" \
                   "$trainer" --steps "$steps" 2>/dev/null); then
          printf '| %s GB/s | %s %% | %s | %s | %s | | | | |\n' "$link" "$percent" "$policy" "$hooks" \
            "$(grep -m1 '^CUDA_ERROR' <<<"$out" || echo failed)"
          continue
        fi
        step=$(field "$(grep '^TIMING' <<<"$out")" step_ns)
        same=$([[ $(grep '^RESULT' <<<"$out") == "$uncapped_result" ]] && echo yes || echo NO)
        read -r fetched skipped < <(python3 - "$trace" "$steps" <<'PY'
import json, sys
paging = json.load(open(sys.argv[1]))["vgpumem"]["paging"]
steps = int(sys.argv[2])
print(f'{paging["bytes_prefetched"] / steps / 2**20:.2f}', f'{paging.get("bytes_not_fetched", 0) / steps / 2**20:.2f}')
PY
)
        ratio=$(python3 -c "print(f'{$step / $uncapped_step:.2f}')")
        printf '| %s GB/s | %s %% | %s | %s | %.2f ms | %s | %s MiB | %s MiB | %s |\n' "$link" "$percent" "$policy" \
          "$hooks" "$(python3 -c "print($step / 1e6)")" "$ratio" "$fetched" "$skipped" "$same"
      done
    done
  done
done
