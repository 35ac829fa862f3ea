#!/bin/bash
# One device call: the shim under PyTorch, with and without a cap.
set -u
G=$(cd "$(dirname "$0")" && pwd); S=$G/libvgpumem.so; P=$G/torch_cap.py; O=${OUT:-/tmp/out}
run() { local name=$1; shift; echo "=== $name" >> $O/log.txt; env "$@" timeout 120 python3 $P $name > $O/$name.txt 2>> $O/log.txt; echo "rc=$?" >> $O/$name.txt; }
run noshim CUBLAS_WORKSPACE_CONFIG=:4096:8
run shim_nocap CUBLAS_WORKSPACE_CONFIG=:4096:8 LD_PRELOAD=$S VGPUMEM_TRACE=$O/trace_nocap.json
run shim_cap CUBLAS_WORKSPACE_CONFIG=:4096:8 LD_PRELOAD=$S VGPUMEM_LIMIT=4GiB VGPUMEM_TRACE=$O/trace_cap.json VGPUMEM_LOG_LEVEL=info
run shim_cap_expandable CUBLAS_WORKSPACE_CONFIG=:4096:8 LD_PRELOAD=$S VGPUMEM_LIMIT=4GiB PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
run shim_cap_async CUBLAS_WORKSPACE_CONFIG=:4096:8 LD_PRELOAD=$S VGPUMEM_LIMIT=4GiB PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
cd $O && for f in noshim shim_nocap shim_cap shim_cap_expandable shim_cap_async; do echo "== $f"; cat $f.txt | cut -c1-1500; done
python3 - <<'PY'
import json, os
O = os.environ.get("OUT", "/tmp/out")
for t in ["trace_nocap.json", "trace_cap.json"]:
    p = os.path.join(O, t)
    if not os.path.exists(p): print(t, "missing"); continue
    d = json.load(open(p)); s = d["vgpumem"]
    lk = s.get("lookups", [])
    print(t, "launches", s.get("launches"), "by_entry", s.get("launches_by_entry_point"), "ooms", s.get("ooms_returned"), "devices", s.get("devices"))
    print(" lookups", len(lk), "hooked", sum(1 for l in lk if l["hooked"]), "paths", sorted(set(l["path"] for l in lk)))
    print(" calls", s.get("calls_by_api"))
    # shrink the trace file for transfer: keep summary only
    json.dump({"vgpumem": s}, open(p + ".summary.json", "w"), indent=1); os.remove(p)
PY
