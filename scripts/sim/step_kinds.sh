#!/usr/bin/env bash
# The step-kinds workloads (tests/e2e/step_kinds_test.cpp, longer): the
# layered trainer's BERT shape (8 layers at a 64th) with evaluation every 2,
# 3 and 50 steps, alternating steps, three shape buckets, a warm-up with a
# logging kernel every 4 steps, and plain training, each uncapped and under
# auto at half and a quarter of its peak. One line a run: bit-identical to
# uncapped, the simulator's physical peak against the cap, the share of
# operations followed (the whole run, and the steady state: the trace's last
# whole iterations covering about three steps), step kinds and returns to
# one, and the last step against uncapped and against the plan's floor
# (the floor of the kind last planned: for a kind of two steps, two steps').
#
# Usage: scripts/sim/step_kinds.sh BUILD_DIR OUT_DIR [STEPS (24)]
set -euo pipefail
if (($# < 2)); then sed -n '2,13p' "$0"; exit 2; fi
build=$(cd "$1" && pwd); mkdir -p "$2"; out=$(cd "$2" && pwd); steps=${3:-24}
export LD_LIBRARY_PATH=$build/lib/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} VGPUSIM_DEVICE_MEMORY=1GiB
bert="--model bert-large --layers 8 --scale 64"
while IFS='|' read -r name args; do
  read -ra argv <<<"$bert $args"
  [[ "$args" == *--steps* ]] || argv+=(--steps "$steps")
  base=$(timeout 600 "$build/bin/layered_trainer" "${argv[@]}" | grep '^RESULT')
  peak=$(sed -nE 's/.*peak_device_bytes_wanted=([0-9]+).*/\1/p' <<<"$base")
  for percent in 50 25; do
    cap=$((peak * percent / 100))
    result=$(LD_PRELOAD="$build/lib/libvgpumem.so" VGPUMEM_DRIVER="$build/lib/sim/libcuda.so.1" VGPUMEM_LIMIT=$cap \
      VGPUMEM_POLICY=auto VGPUMEM_TRACE="$out/$name-$percent.trace.json" VGPUSIM_REPORT="$out/$name-$percent.sim.json" \
      timeout 600 "$build/bin/layered_trainer" "${argv[@]}" | grep -E '^RESULT|CUDA_ERROR' || true)
    python3 - "$name" "$percent" "$cap" "$base" "$result" "$out/$name-$percent.trace.json" "$out/$name-$percent.sim.json" <<'PY'
import json, re, sys
name, percent, cap, base, result, trace, sim = sys.argv[1:]
checksum = lambda line: (re.search(r'loss=\S+ weights_fnv1a=\S+', line) or [None])[0]
step = lambda line: int(re.search(r'step_ns=(\d+)', line).group(1))
schedule = json.load(open(trace))['vgpumem'].get('schedule', {})
physical = json.load(open(sim))['devices'][0]['physical_bytes_peak']
operations, followed = schedule.get('operations', 0), schedule.get('operations_followed', 0)
steady_ops = steady_followed = 0
for it in reversed(schedule.get('recent_iterations', [])):
    if steady_ops >= 700: break
    steady_ops += it['operations']; steady_followed += it['followed']
floor = schedule.get('plan', {}).get('floor_ns')
ok = result.startswith('RESULT')
print(f"{name:12} {percent}%  bit-identical {'yes' if ok and checksum(result) == checksum(base) else 'NO'}  "
      f"peak {physical / 2**20:.1f} of {int(cap) / 2**20:.1f} MiB  "
      f"followed {followed / max(operations, 1):.2f} (steady {steady_followed / max(steady_ops, 1):.2f} of {steady_ops})  "
      f"kinds {schedule.get('kinds', '-')} returns {schedule.get('kind_returns', '-')}  "
      + (f"step {step(result) / 1e6:.2f} ms = {step(result) / step(base):.2f}x uncapped"
         + (f", {step(result) / floor:.2f}x the plan's floor" if floor else ", no plan") if ok else "FAILED"))
PY
  done
done <<'LIST'
eval-2|--eval-every 2
eval-3|--eval-every 3
eval-50|--eval-every 50 --steps 60
alternate|--alternate
buckets|--buckets 3 --allocator caching
warmup-log|--warmup 24 --log-every 4
plain|
LIST
