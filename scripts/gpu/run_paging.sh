#!/usr/bin/env bash
# The paging checks of the oversubscription issue, in one device call:
#   OUT=/some/dir bash scripts/gpu/run_paging.sh BUILD_DIR
# BUILD_DIR from scripts/gpu/build.sh (gpu-probes/probe_paging, lib/libvgpumem.so).
#  1. probe_paging (3 GiB of buffers, 64 MiB each, 3 rounds of kernels) without
#     the shim, with it uncapped, and with VGPUMEM_LIMIT=1GiB: identical RESULT
#     digests; time and bytes moved from the trace.
#  2. compute-sanitizer --tool memcheck on a smaller probe_paging (768 MiB,
#     cap 256 MiB) under the shim, and without it.
#  3. torch_paging.py (about 6 GiB of parameters, gradients and AdamW state):
#     without the shim, and under a 4 GiB cap with the default allocator and
#     with backend:cudaMallocAsync, each also without the shim: identical
#     loss and parameters, step times.
#     Then with expandable_segments:True under the same cap: PyTorch maps its
#     handles back to back, which the pager pins, so the 6 GiB run is expected
#     to end in torch.OutOfMemoryError, cleanly (the log says why).
#  4. probe_vmm pointer_queries (no shim): what the driver says of a VMM
#     mapping's address range and attributes, mapped and unmapped (an
#     offloaded range), and of legacy IPC on it -> vmm_queries.json.
#     probe_vmm double_mapping: one handle at two addresses and at an offset
#     sees the same bytes; a POSIX-FD handle exports -> vmm_double_mapping.json.
#  5. VGPUMEM_CHECK: probe_paging under strict and torture (identical digest,
#     no fault), and compute-sanitizer on the torture run.
#  6. probe_context (no shim): the driver's answer for an event recorded on
#     another context's stream -> context.json.
# Writes paging.txt (every RESULT line and a summary) and log.txt to $OUT.
set -u
here=$(cd "$(dirname "$0")" && pwd)
B=${1:-build-gpu}; [[ -d "$B" ]] && B=$(cd "$B" && pwd)
OUT=${OUT:-/tmp/vgpumem-paging-out}; mkdir -p "$OUT"
P=$B/gpu-probes/probe_paging; S=$B/lib/libvgpumem.so
LOG=$OUT/log.txt; R=$OUT/paging.txt; : > "$LOG"; : > "$R"
export CUBLAS_WORKSPACE_CONFIG=:4096:8
run() {  # run LABEL TIMEOUT CMD... : tags every RESULT line with LABEL
  local label=$1 t=$2; shift 2
  echo "== $label: $*" >> "$LOG"
  local s=$(date +%s.%N)
  timeout -k 5 "$t" "$@" 2>> "$LOG" | sed "s/^RESULT /RESULT $label /" >> "$R"
  echo "== $label: rc=${PIPESTATUS[0]} $(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')s" >> "$LOG"
}
run probe_noshim 120 "$P" 3072 64 3
run probe_shim_nocap 120 env LD_PRELOAD=$S "$P" 3072 64 3
run probe_shim_cap1g 300 env LD_PRELOAD=$S VGPUMEM_LIMIT=1GiB VGPUMEM_TRACE=$OUT/trace-probe-paging.json "$P" 3072 64 3
run sanitizer_noshim 300 compute-sanitizer --tool memcheck "$P" 768 32 2
# The shim is preloaded into compute-sanitizer, which passes it on to the program (as in run_training.sh).
run sanitizer_shim_cap256m 400 env LD_PRELOAD=$S VGPUMEM_LIMIT=256MiB compute-sanitizer --tool memcheck "$P" 768 32 2
run probe_shim_cap1g_strict 300 env LD_PRELOAD=$S VGPUMEM_LIMIT=1GiB VGPUMEM_CHECK=strict "$P" 3072 64 3
run probe_shim_cap1g_torture 400 env LD_PRELOAD=$S VGPUMEM_LIMIT=1GiB VGPUMEM_CHECK=torture VGPUMEM_TRACE=$OUT/trace-probe-torture.json "$P" 3072 64 3
run sanitizer_shim_cap256m_torture 400 env LD_PRELOAD=$S VGPUMEM_LIMIT=256MiB VGPUMEM_CHECK=torture compute-sanitizer --tool memcheck "$P" 768 32 2
timeout -k 5 60 "$B/gpu-probes/probe_context" > "$OUT/context.json" 2>> "$LOG"
echo "CONTEXT $(head -c 2000 "$OUT/context.json")" >> "$R"
run torch_noshim 300 python3 "$here/torch_paging.py" noshim
run torch_shim_cap4g 400 env LD_PRELOAD=$S VGPUMEM_LIMIT=4GiB VGPUMEM_TRACE=$OUT/trace-torch-paging.json python3 "$here/torch_paging.py" cap4g
run torch_async_noshim 300 env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync python3 "$here/torch_paging.py" async_noshim
run torch_async_shim_cap4g 400 env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync LD_PRELOAD=$S VGPUMEM_LIMIT=4GiB VGPUMEM_TRACE=$OUT/trace-torch-async-paging.json python3 "$here/torch_paging.py" async_cap4g
run torch_es_shim_cap4g 400 env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True LD_PRELOAD=$S VGPUMEM_LIMIT=4GiB VGPUMEM_TRACE=$OUT/trace-torch-es-paging.json python3 "$here/torch_paging.py" es_cap4g
timeout -k 5 60 "$B/gpu-probes/probe_vmm" pointer_queries > "$OUT/vmm_queries.json" 2>> "$LOG"
echo "VMM_QUERIES $(head -c 3000 "$OUT/vmm_queries.json")" >> "$R"
timeout -k 5 60 "$B/gpu-probes/probe_vmm" double_mapping > "$OUT/vmm_double_mapping.json" 2>> "$LOG"
echo "VMM_DOUBLE_MAPPING $(head -c 3000 "$OUT/vmm_double_mapping.json")" >> "$R"
grep -E "ERROR SUMMARY|errors" "$LOG" | tail -4 >> "$R"
python3 - "$OUT" >> "$R" 2>> "$LOG" <<'PY'
import json, os, sys
out = sys.argv[1]
results = {}
for line in open(os.path.join(out, "paging.txt")):
    if line.startswith("RESULT "):
        _, label, body = line.split(" ", 2)
        results[label] = json.loads(body)
def same(a, b, keys):
    if a not in results or b not in results: return f"{a} vs {b}: missing"
    return f"{a} vs {b}: " + ("IDENTICAL" if all(results[a].get(k) == results[b].get(k) for k in keys) else "DIFFERENT") + \
        " " + json.dumps({k: [results[a].get(k), results[b].get(k)] for k in keys + ["ms", "median_step_ms"] if k in results[a]})
print("COMPARE", same("probe_noshim", "probe_shim_nocap", ["digest"]))
print("COMPARE", same("probe_noshim", "probe_shim_cap1g", ["digest"]))
print("COMPARE", same("sanitizer_noshim", "sanitizer_shim_cap256m", ["digest"]))
print("COMPARE", same("probe_noshim", "probe_shim_cap1g_strict", ["digest"]))
print("COMPARE", same("probe_noshim", "probe_shim_cap1g_torture", ["digest"]))
print("COMPARE", same("sanitizer_noshim", "sanitizer_shim_cap256m_torture", ["digest"]))
print("COMPARE", same("torch_noshim", "torch_shim_cap4g", ["ok", "loss", "params"]))
print("COMPARE", same("torch_async_noshim", "torch_async_shim_cap4g", ["ok", "loss", "params"]))
for name in ("trace-probe-paging.json", "trace-probe-torture.json", "trace-torch-paging.json", "trace-torch-async-paging.json",
             "trace-torch-es-paging.json"):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        print("SUMMARY", name, "missing"); continue
    s = json.load(open(path))["vgpumem"]
    p = s.get("paging", {})
    print("SUMMARY", name, json.dumps({k: p.get(k) for k in ("offloads", "prefetches", "bytes_offloaded", "bytes_prefetched",
          "stalled_operations", "slow_path_ns", "context_synchronizations", "ooms", "program_handles", "devices")}),
          "launches", s.get("launches"))
    os.replace(path, path + ".full")  # keep it, but out of the way of the size limit
PY
cat "$R" | cut -c1-1500
