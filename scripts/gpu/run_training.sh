#!/bin/bash
# One device call: training bit-identity and step time with/without the shim
# (interleaved rounds), a one-step trace summary, torch.compile launch
# accounting with cold caches, and compute-sanitizer over a CUDA C++ program
# under the shim. Results to $OUT.
set -u
G=$(cd "$(dirname "$0")" && pwd); S=$G/libvgpumem.so; O=${OUT:-/tmp/out}
export CUBLAS_WORKSPACE_CONFIG=:4096:8
for r in 1 2 3; do
  timeout 150 python3 $G/train_compare.py noshim_r$r >> $O/train.txt 2>>$O/log.txt
  LD_PRELOAD=$S timeout 150 python3 $G/train_compare.py shim_r$r >> $O/train.txt 2>>$O/log.txt
done
LD_PRELOAD=$S VGPUMEM_LIMIT=2GiB timeout 150 python3 $G/train_compare.py shim_cap2g >> $O/train.txt 2>>$O/log.txt
# one step, traced
LD_PRELOAD=$S VGPUMEM_LIMIT=2GiB VGPUMEM_TRACE=$O/step.json timeout 150 python3 $G/train_compare.py one_step 1 >> $O/train.txt 2>>$O/log.txt
python3 - "$O/step.json" >> $O/train.txt 2>>$O/log.txt <<'PY'
import json, sys, collections
d = json.load(open(sys.argv[1])); s = d["vgpumem"]; ev = d["traceEvents"]
cats = collections.Counter(e.get("cat", e.get("ph")) for e in ev)
print("STEP_TRACE " + json.dumps({"events": len(ev), "by_category": cats, "launches": s["launches"], "by_entry": s["launches_by_entry_point"],
      "devices": s["devices"], "ooms": s["ooms_returned"], "calls": s["calls_by_api"], "bytes": __import__("os").path.getsize(sys.argv[1])}))
PY
rm -f $O/step.json
# torch.compile with a cold Inductor cache in both runs
TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) timeout 200 python3 $G/phases.py compile profile >> $O/train.txt 2>>$O/log.txt
TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) LD_PRELOAD=$S VGPUMEM_TRACE=$O/c.json timeout 200 python3 $G/phases.py compile >> $O/train.txt 2>>$O/log.txt
python3 -c "import json; s=json.load(open('$O/c.json'))['vgpumem']; print('COMPILE_SHIM', s['launches'], s['launches_by_entry_point'])" >> $O/train.txt 2>>$O/log.txt; rm -f $O/c.json
# compute-sanitizer memcheck, with and without the shim
timeout 120 compute-sanitizer --tool memcheck $G/vecadd_checks > $O/sanitizer.txt 2>&1
echo "--- under the shim (VGPUMEM_LIMIT=1GiB)" >> $O/sanitizer.txt
LD_PRELOAD=$S VGPUMEM_LIMIT=1GiB timeout 120 compute-sanitizer --tool memcheck $G/vecadd_checks >> $O/sanitizer.txt 2>&1
LD_PRELOAD=$S VGPUMEM_LIMIT=1GiB VGPUMEM_TRACE=$O/v.json $G/vecadd_checks >> $O/sanitizer.txt 2>&1
python3 -c "import json; s=json.load(open('$O/v.json'))['vgpumem']; print('VECADD_SHIM', s['launches'], s['devices'])" >> $O/sanitizer.txt; rm -f $O/v.json
cat $O/train.txt $O/sanitizer.txt | cut -c1-2500
