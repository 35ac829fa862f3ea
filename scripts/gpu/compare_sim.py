"""Compares the H100's answers (probe.json from run_all.sh) with the simulated
driver's, for the probes that run on the simulator (the resolver and the
granularity/attribute part; the others need the embedded sm_90 cubin).

On the CPU machine:
    LD_LIBRARY_PATH=build/lib/sim BUILD/gpu-probes/probe_lookup > /tmp/sim_lookup.json
    LD_LIBRARY_PATH=build/lib/sim BUILD/gpu-probes/probe_vmm    > /tmp/sim_vmm.json
    python3 scripts/gpu/compare_sim.py OUT/probe.json /tmp/sim_lookup.json [/tmp/sim_vmm.json]
Prints one JSON object: every row where the two differ.
"""
import json
import sys

h = json.load(open(sys.argv[1]))
s_lookup = json.load(open(sys.argv[2]))
out = {}
hr, sr = h["probe_lookup"]["resolver"], s_lookup["resolver"]


def rows(r, key):
    return {json.dumps(x[:3]): x[3:] for x in r.get(key) or []}


for key in ("matrix", "special", "before_cuInit", "legacy_cuGetProcAddress_4arg"):
    a, b = rows(hr, key), rows(sr, key)
    d = {k: {"h100": a.get(k), "sim": b.get(k)} for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
    out[key] = {"rows": len(a), "differ": d}
hn, sn = h["probe_lookup"].get("null_symbol", {}), s_lookup.get("null_symbol", {})
out["null_symbol"] = {"h100": hn.get("null_symbol", "crashed, signal %s" % hn.get("child_signal")),
                      "sim": sn.get("null_symbol", "crashed, signal %s" % sn.get("child_signal"))}
ev_h, ev_s = hr.get("exported_variants", {}), sr.get("exported_variants", {})
out["exported_variants_differ"] = {k: {"h100": ev_h.get(k), "sim": ev_s.get(k)} for k in ev_h if ev_h.get(k) != ev_s.get(k)}
if len(sys.argv) > 3:
    s_vmm = json.load(open(sys.argv[3]))
    ha, sa = h["probe_vmm"]["attributes_granularity"], s_vmm["attributes_granularity"]
    for key in ("attributes", "granularity"):
        a, b = ha.get(key, {}), sa.get(key, {})
        out[key + "_differ"] = {k: {"h100": a.get(k), "sim": b.get(k)} for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
print(json.dumps(out, indent=1))
