#!/usr/bin/env bash
# One paged run of the layered trainer on the simulated driver, at half its
# peak unless CAP is given, and what the last step cost: the trainer's RESULT
# line and a summary of the trace (the mover, mappings, blocks, planned moves).
#
# Usage: scripts/sim/paged_step.sh BUILD_DIR OUT_DIR NAME POLICY [VAR=VALUE ...]
#   VAR=VALUE     more environment for the paged run (VGPUMEM_MOVER=off, ...)
# Environment:
#   MODEL_ARGS    trainer arguments (default: ResNet-50, batch 64, full size,
#                 issued as PyTorch issues it)
#   STEPS         steps (default 14: the plan is followed from about the 8th)
#   UNCAPPED_MS   scale the kernels so the uncapped step is this long (default
#                 36.06, the H200's ResNet-50 step; empty: unscaled)
#   CAP           the cap in bytes (default: half the uncapped run's peak)
#   LINK_GBPS     the simulated link (default 49, the H200 run's)
# Writes OUT_DIR/NAME.trace.json and OUT_DIR/NAME.sim.json.
set -euo pipefail
if (($# < 4)); then sed -n '2,20p' "$0"; exit 2; fi
build=$(cd "$1" && pwd); out=$2; name=$3; policy=$4; shift 4
mkdir -p "$out"; out=$(cd "$out" && pwd)
trainer=$build/bin/layered_trainer
read -ra args <<<"${MODEL_ARGS:---model resnet50 --batch 64 --backward-thread --allocator caching --scale 1}"
args+=(--steps "${STEPS:-14}")
export LD_LIBRARY_PATH=$build/lib/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export VGPUSIM_DEVICE_MEMORY=64GiB VGPUSIM_LINK_GBPS=${LINK_GBPS:-49} VGPUSIM_COST_MODEL=${VGPUSIM_COST_MODEL:-calibrated}
uncapped_ms=${UNCAPPED_MS-36.06}
if [[ -n "$uncapped_ms" ]]; then
  compute_ms=$("$trainer" "${args[@]}" --describe | sed -nE 's/.*compute per step ([0-9.]+) ms.*/\1/p')
  export VGPUSIM_KERNEL_TIME_SCALE=$(python3 -c "print($uncapped_ms / $compute_ms)")
fi
cap=${CAP:-}
if [[ -z "$cap" ]]; then
  peak=$(timeout 1800 "$trainer" "${args[@]}" | sed -nE 's/.*peak_device_bytes_wanted=([0-9]+).*/\1/p')
  cap=$((peak / 2))
fi
env "$@" LD_PRELOAD="$build/lib/libvgpumem.so" VGPUMEM_DRIVER="$build/lib/sim/libcuda.so.1" VGPUMEM_LIMIT="$cap" \
  VGPUMEM_POLICY="$policy" VGPUMEM_TRACE="$out/$name.trace.json" VGPUSIM_REPORT="$out/$name.sim.json" \
  timeout 1800 "$trainer" "${args[@]}" | grep '^RESULT'
python3 - "$out/$name.trace.json" "$out/$name.sim.json" "$cap" <<'PY'
import json, sys
trace = json.load(open(sys.argv[1]))["vgpumem"]
sim = json.load(open(sys.argv[2]))
paging, schedule = trace["paging"], trace.get("schedule", {})
print(f"cap {sys.argv[3]}; mover {paging.get('mover')}")
print(f"mappings {paging['mappings']}; devices {paging['devices']}")
if schedule:
    plan = schedule.get("plan", {})
    print(f"planned offloads {schedule['scheduled_offloads']} prefetches {schedule['scheduled_prefetches']} "
          f"refused {schedule['scheduled_refused']}; plan floor {plan.get('floor_ns')} ns for a period of "
          f"{plan.get('period')} operations; trial {json.dumps(schedule.get('trial'))}")
calls = sim.get("calls", {})
print("driver calls " + json.dumps({k: v for k, v in calls.items() if k.startswith("cuMem")}))
PY
