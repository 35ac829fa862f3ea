#!/usr/bin/env bash
# One command on the GPU machine answers every check of
# research/cuda-facts.md §8 (see scripts/gpu/README.md):
#   OUT=/some/dir bash scripts/gpu/run_all.sh BUILD_DIR
# BUILD_DIR was made on the CPU machine by scripts/gpu/build.sh and holds
# gpu-probes/probe_* and lib/libvgpumem.so. Builds nothing. Writes to $OUT:
#   probe.json   C++ driver-API probes (vmm, fault, bandwidth, capture, lookup, shim) + metadata
#   torch.json   PyTorch: per-phase launches (shim vs profiler), cap runs, ELF survey
#   log.txt      stderr of everything, step by step
#   trace-probe-shim.json, trace-torch-cap.json   two small shim traces
#   summary.txt  the human summary printed at the end
# Never aborts on a single failure; a missing or broken shim is recorded and the
# non-shim steps still run. Target: <= 6 minutes (RUN_ALL_BUDGET_S, default 480,
# after which the remaining steps are skipped and recorded as such).
set -u
here=$(cd "$(dirname "$0")" && pwd)
B=${1:-build}
[[ -d "$B" ]] && B=$(cd "$B" && pwd)
OUT=${OUT:-/tmp/vgpumem-gpu-out}
mkdir -p "$OUT"
P=$B/gpu-probes
S=$B/lib/libvgpumem.so
W=$(mktemp -d /tmp/vgpumem-run.XXXXXX)
LOG=$OUT/log.txt
: > "$LOG"
T0=$(date +%s)
BUDGET=${RUN_ALL_BUDGET_S:-480}
PY=${PYTHON:-python3}
printf 'name\trc\tseconds\tnote\n' > "$W/steps.tsv"
echo "run_all.sh: build=$B out=$OUT work=$W" | tee -a "$LOG"

# step NAME TIMEOUT [VAR=value ...] CMD ARGS...  -> stdout in $W/NAME.out, stderr in log.txt
step() {
  local name=$1 t=$2; shift 2
  local now; now=$(date +%s)
  if (( now - T0 > BUDGET )); then
    printf '%s\t-1\t0\tskipped: time budget\n' "$name" >> "$W/steps.tsv"; echo "== $name: SKIPPED (budget)" >> "$LOG"; return 0
  fi
  echo "== $name ($(date -u +%T), limit ${t}s): $*" >> "$LOG"
  local s; s=$(date +%s.%N)
  timeout -k 5 "$t" env "$@" > "$W/$name.out" 2>> "$LOG"
  local rc=$?
  local e; e=$(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  printf '%s\t%d\t%s\t\n' "$name" "$rc" "$e" >> "$W/steps.tsv"
  echo "== $name: rc=$rc ${e}s" >> "$LOG"
  printf '  %-34s rc=%-4s %6ss\n' "$name" "$rc" "$e"
  return 0
}
skip() { printf '%s\t-1\t0\tskipped: %s\n' "$1" "$2" >> "$W/steps.tsv"; echo "== $1: SKIPPED ($2)" >> "$LOG"; printf '  %-34s skipped (%s)\n' "$1" "$2"; }

# ---- metadata ---------------------------------------------------------------
{
  echo "date_utc=$(date -u +%FT%TZ)"
  echo "hostname=$(hostname)"
  echo "uname=$(uname -srm)"
  echo "glibc=$(ldd --version 2>/dev/null | head -1)"
  echo "nvidia_smi=$(nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id,compute_cap,clocks.max.sm --format=csv,noheader 2>&1 | head -2 | tr '\n' ';')"
  echo "cuda_version_smi=$(nvidia-smi -q 2>/dev/null | grep -m1 -i 'CUDA Version' | sed 's/.*: *//')"
  echo "tools=compute-sanitizer:$(command -v compute-sanitizer >/dev/null && echo yes || echo no),ncu:$(command -v ncu >/dev/null && echo yes || echo no),readelf:$(command -v readelf >/dev/null && echo yes || echo no)"
  echo "git=$(git -C "$here" rev-parse --short HEAD 2>/dev/null)$(git -C "$here" diff --quiet 2>/dev/null || echo +dirty)"
} > "$W/meta.txt" 2>> "$LOG"
nvidia-smi -q 2>/dev/null | head -40 > "$W/nvidia_smi_q.txt"
step versions 60 "$PY" -c 'import sys,json,torch; print(json.dumps({"python":sys.version.split()[0],"torch":torch.__version__,"cuda":torch.version.cuda,"cudnn":torch.backends.cudnn.version(),"triton":__import__("importlib.metadata").metadata.version("triton") if __import__("importlib.util").util.find_spec("triton") else None,"gpu":torch.cuda.get_device_name(0),"capability":torch.cuda.get_device_capability(0)}))'

# ---- is the shim usable? ----------------------------------------------------
SHIM_OK=0
if [[ ! -f "$S" ]]; then echo "shim missing: $S" | tee "$W/shim_status.txt"
else
  LD_PRELOAD=$S /bin/true 2> "$W/shim_check.err"; rc=$?
  if [[ $rc -eq 0 ]] && ! grep -qiE 'cannot be preloaded|error' "$W/shim_check.err"; then SHIM_OK=1; echo "shim ok: $S" > "$W/shim_status.txt"
  else echo "shim broken (rc=$rc): $(head -c 400 "$W/shim_check.err")" | tee "$W/shim_status.txt"; cat "$W/shim_check.err" >> "$LOG"; fi
fi
echo "SHIM_OK=$SHIM_OK" >> "$W/meta.txt"

# ---- C++ driver-API probes (sequential: they time things) --------------------
echo "C++ probes:"
if [[ -d "$P" ]]; then
  step probe_lookup 60 "$P/probe_lookup"
  step probe_vmm 240 "$P/probe_vmm"
  step probe_bandwidth 160 "$P/probe_bandwidth"
  step probe_capture 130 "$P/probe_capture"
  step probe_fault 100 "$P/probe_fault"
  step probe_shim_noshim 30 "$P/probe_shim"
  if (( SHIM_OK )); then
    step probe_shim_shim 30 LD_PRELOAD="$S" VGPUMEM_LIMIT=1GiB VGPUMEM_TRACE="$W/trace-probe-shim.json" "$P/probe_shim"
  else skip probe_shim_shim "shim unusable"; fi
else
  echo "no probes at $P" | tee -a "$LOG"; skip probes "no $P"
fi

# ---- §8.1 ELF survey (CPU only; in the background during the PyTorch phases, not during the timed probes) ---
( timeout -k 5 150 "$PY" "$here/elf_survey.py" > "$W/elf_survey.out" 2>> "$W/elf_survey.err"; echo $? > "$W/elf_survey.rc" ) &
ELF_PID=$!

# ---- PyTorch: per-phase launches, shim vs profiler (§8.2, §8.3) --------------
echo "PyTorch phases (shim run and profiler run side by side):"
export CUBLAS_WORKSPACE_CONFIG=:4096:8
for ph in elementwise matmul_fp32 matmul_bf16 conv sdpa triton compile; do
  t=90; [[ $ph == compile ]] && t=180
  c1=$(mktemp -d); c2=$(mktemp -d); c3=$(mktemp -d); c4=$(mktemp -d)   # cold Inductor/Triton caches for both runs
  pids=()
  if (( SHIM_OK )); then
    mkdir -p "$W/tr_$ph"
    step "phase_${ph}_shim" "$t" TORCHINDUCTOR_CACHE_DIR="$c1" TRITON_CACHE_DIR="$c2" LD_PRELOAD="$S" VGPUMEM_TRACE="$W/tr_$ph/t-%p.json" \
      "$PY" "$here/torch_lookups.py" "$ph" &
    pids+=($!)
  else skip "phase_${ph}_shim" "shim unusable"; fi
  step "phase_${ph}_profiler" "$t" TORCHINDUCTOR_CACHE_DIR="$c3" TRITON_CACHE_DIR="$c4" "$PY" "$here/torch_lookups.py" "$ph" --profile &
  pids+=($!)
  wait "${pids[@]}"
  rm -rf "$c1" "$c2" "$c3" "$c4"
done
# §8.10: the profiler with the shim loaded (same process: profiler kernels vs shim launches)
if (( SHIM_OK )); then
  mkdir -p "$W/tr_profiler_with_shim"
  step profiler_with_shim 90 LD_PRELOAD="$S" VGPUMEM_TRACE="$W/tr_profiler_with_shim/t-%p.json" "$PY" "$here/torch_lookups.py" conv --profile
else skip profiler_with_shim "shim unusable"; fi

# ---- PyTorch under the cap: bit-identity, OOM, overhead ---------------------
wait "$ELF_PID" 2>/dev/null   # the ELF survey must not share the CPU with the timed steps
echo "PyTorch cap runs:"
cap() { local name=$1; shift; step "cap_$name" 150 "$@" "$PY" "$here/torch_cap.py" "$name"; }
cap noshim_r1
if (( SHIM_OK )); then cap shim_nocap_r1 LD_PRELOAD="$S"; fi
cap noshim_r2
if (( SHIM_OK )); then
  cap shim_nocap_r2 LD_PRELOAD="$S" VGPUMEM_TRACE="$W/trace-nocap.json"
  cap shim_cap LD_PRELOAD="$S" VGPUMEM_LIMIT=4GiB VGPUMEM_TRACE="$W/trace-torch-cap.json"
  cap shim_cap_expandable LD_PRELOAD="$S" VGPUMEM_LIMIT=4GiB PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True VGPUMEM_TRACE="$W/trace-expandable.json"
  cap shim_cap_async LD_PRELOAD="$S" VGPUMEM_LIMIT=4GiB PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync VGPUMEM_TRACE="$W/trace-async.json"
else for n in shim_nocap_r1 shim_nocap_r2 shim_cap shim_cap_expandable shim_cap_async; do skip "cap_$n" "shim unusable"; done; fi

# ---- collect ----------------------------------------------------------------
wait "$ELF_PID" 2>/dev/null
printf 'elf_survey\t%s\t-\t\n' "$(cat "$W/elf_survey.rc" 2>/dev/null || echo -1)" >> "$W/steps.tsv"
cat "$W/elf_survey.err" >> "$LOG" 2>/dev/null
echo "total_seconds=$(( $(date +%s) - T0 ))" >> "$W/meta.txt"
"$PY" "$here/collect.py" "$W" "$OUT" 2>> "$LOG" | tee "$OUT/summary.txt"
echo "(work dir $W kept; outputs in $OUT: $(cd "$OUT" && ls | tr '\n' ' '))"
exit 0
