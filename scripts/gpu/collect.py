"""Merges run_all.sh's work directory into $OUT/probe.json and $OUT/torch.json,
copies two small shim traces, and prints a short human summary.

    collect.py WORK_DIR OUT_DIR
"""
import glob
import json
import os
import re
import sys

W, OUT = sys.argv[1], sys.argv[2]


def read(name, default=""):
    try:
        with open(os.path.join(W, name), errors="replace") as f:
            return f.read()
    except OSError:
        return default


def parse_json_out(name):
    """A probe's stdout: one JSON object (or RESULT {json} lines: the last one)."""
    txt = read(name, None)
    if txt is None:
        return {"missing": True}
    res = [ln[7:] for ln in txt.splitlines() if ln.startswith("RESULT ")]
    for cand in ([res[-1]] if res else []) + [txt.strip()]:
        try:
            return json.loads(cand)
        except Exception:
            pass
    return {"unparsed_stdout": txt[-3000:]}


def load_trace(path):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception as e:
        return {"error": "%s: %s" % (type(e).__name__, e)}


def summary_of(trace):
    s = trace.get("vgpumem") if isinstance(trace, dict) else None
    if not isinstance(s, dict):
        return {"error": trace.get("error", "no vgpumem summary") if isinstance(trace, dict) else "bad trace"}
    out = {k: v for k, v in s.items() if k != "lookups"}
    lk = s.get("lookups", [])
    out["lookups_distinct"] = len(lk)
    out["lookups_hooked"] = sum(1 for x in lk if x.get("hooked"))
    out["lookup_paths"] = sorted({x.get("path") for x in lk})
    out["trace_events"] = len(trace.get("traceEvents", []))
    return out


WATCH = re.compile(r"^cu(Launch|Mem(Alloc|Free|Create|Map|Unmap|Release|SetAccess|GetInfo|AddressReserve|HostAlloc)|GraphLaunch|GetProcAddress|GetExportTable)")

meta = {}
for ln in read("meta.txt").splitlines():
    if "=" in ln:
        k, v = ln.split("=", 1)
        meta[k] = v
meta["nvidia_smi_q_head"] = read("nvidia_smi_q.txt")[:3000]
meta["shim_status"] = read("shim_status.txt").strip()
meta["versions"] = parse_json_out("versions.out")
steps = []
for ln in read("steps.tsv").splitlines()[1:]:
    f = ln.split("\t")
    if len(f) >= 3:
        steps.append({"step": f[0], "rc": int(f[1]) if f[1].lstrip("-").isdigit() else f[1], "seconds": f[2], "note": f[3] if len(f) > 3 else ""})

# ---------------------------------------------------------------- probe.json
probe = {"meta": meta, "steps": steps}
for p in ("probe_lookup", "probe_vmm", "probe_bandwidth", "probe_capture", "probe_fault"):
    probe[p] = parse_json_out(p + ".out")
shim_trace = load_trace(os.path.join(W, "trace-probe-shim.json"))
probe["probe_shim"] = {"noshim": parse_json_out("probe_shim_noshim.out"), "shim_limit_1GiB": parse_json_out("probe_shim_shim.out"),
                       "shim_trace_summary": summary_of(shim_trace)}
with open(os.path.join(OUT, "probe.json"), "w") as f:
    json.dump(probe, f, indent=1)
if os.path.exists(os.path.join(W, "trace-probe-shim.json")):
    with open(os.path.join(OUT, "trace-probe-shim.json"), "w") as f:
        json.dump(shim_trace, f)

# ---------------------------------------------------------------- torch.json
torch_out = {"meta": {"versions": meta["versions"], "shim_status": meta["shim_status"], "date_utc": meta.get("date_utc"),
                      "nvidia_smi": meta.get("nvidia_smi")}}
phases = {}
union = {}
for ph in ("elementwise", "matmul_fp32", "matmul_bf16", "conv", "sdpa", "triton", "compile", "profiler_with_shim"):
    if ph == "profiler_with_shim":
        shim_res, prof_res = parse_json_out("profiler_with_shim.out"), None
    else:
        shim_res, prof_res = parse_json_out("phase_%s_shim.out" % ph), parse_json_out("phase_%s_profiler.out" % ph)
    files = sorted(glob.glob(os.path.join(W, "tr_" + ph, "t-*.json")))
    launches, by_entry, per_pid, lookups_n, unhooked = 0, {}, {}, 0, set()
    for fp in files:
        t = load_trace(fp)
        s = t.get("vgpumem", {}) if isinstance(t, dict) else {}
        pid = s.get("pid", os.path.basename(fp))
        per_pid[str(pid)] = s.get("launches")
        launches += s.get("launches") or 0
        for k, v in (s.get("launches_by_entry_point") or {}).items():
            by_entry[k] = by_entry.get(k, 0) + v
        for x in s.get("lookups", []):
            lookups_n += 1
            key = (x.get("path"), x.get("name"), x.get("version"), x.get("flags"))
            u = union.setdefault(key, {"path": key[0], "name": key[1], "version": key[2], "flags": key[3], "hooked": set(), "count": 0, "phases": set()})
            u["hooked"].add(bool(x.get("hooked")))
            u["count"] += x.get("count") or 0
            u["phases"].add(ph)
            if not x.get("hooked") and WATCH.match(x.get("name") or ""):
                unhooked.add("%s:%s@%s/%s" % key)
    e = {"shim_launches": launches if files else None, "shim_by_entry": by_entry, "shim_launches_per_process": per_pid,
         "trace_files": len(files), "shim_lookup_rows": lookups_n, "unhooked_watched_lookups": sorted(unhooked), "shim_run": shim_res}
    if ph == "profiler_with_shim":
        e["profiler_kernels"] = shim_res.get("profiler_kernels")
    else:
        e["profiler_kernels"] = prof_res.get("profiler_kernels") if prof_res else None
        e["profiler_run"] = prof_res
    if e["shim_launches"] is not None and e["profiler_kernels"] is not None:
        e["match"] = e["shim_launches"] == e["profiler_kernels"]
    if shim_res.get("value") is not None and prof_res and prof_res.get("value") is not None:
        e["same_value"] = shim_res.get("value") == prof_res.get("value")
    phases[ph] = e
torch_out["phases"] = phases
torch_out["lookups_union"] = sorted(({**v, "hooked": sorted(v["hooked"]), "phases": sorted(v["phases"])} for v in union.values()),
                                    key=lambda v: (v["name"] or "", v["path"] or "", v["version"] or 0, v["flags"] or 0))

caps = {}
for fp in sorted(glob.glob(os.path.join(W, "cap_*.out"))):
    caps[os.path.basename(fp)[4:-4]] = parse_json_out(os.path.basename(fp))
torch_out["cap_runs"] = caps
ref = caps.get("noshim_r1", {})
keys = ["cnn_loss", "cnn_params_sha", "transformer_loss", "transformer_params_sha", "mm32", "mm16", "sdpa", "triton"]
cmp_ = {}
for name, r in caps.items():
    cmp_[name] = {
        "bit_identical_to_noshim_r1": all(r.get(k) == ref.get(k) for k in keys) if ref.get("cnn_loss") and r.get("cnn_loss") else None,
        "differs": [k for k in keys if r.get(k) != ref.get(k)],
        "mem_get_info": r.get("mem_get_info"), "props_total": r.get("props_total"),
        "cnn_step_ms_median": r.get("cnn_step_ms_median"), "transformer_step_ms_median": r.get("transformer_step_ms_median"),
        "alloc_3g": r.get("alloc_3g"), "big_alloc_6g": r.get("big_alloc"), "after_oom_matmul": r.get("after_oom_matmul"),
        "errors": {k: v for k, v in r.items() if k.endswith("_error")},
    }
torch_out["cap_comparison"] = cmp_
traces = {}
for t in ("trace-nocap", "trace-torch-cap", "trace-expandable", "trace-async"):
    p = os.path.join(W, t + ".json")
    if os.path.exists(p):
        tr = load_trace(p)
        traces[t] = summary_of(tr)
        if t == "trace-torch-cap" and isinstance(tr, dict) and "vgpumem" in tr:
            small = dict(tr)
            ev = tr.get("traceEvents", [])
            small["traceEvents"] = ev[:400]
            small["collect_note"] = "traceEvents cut to the first 400 of %d by collect.py" % len(ev)
            with open(os.path.join(OUT, "trace-torch-cap.json"), "w") as f:
                json.dump(small, f)
torch_out["trace_summaries"] = traces
elf = parse_json_out("elf_survey.out")
torch_out["elf_survey"] = elf
with open(os.path.join(OUT, "torch.json"), "w") as f:
    json.dump(torch_out, f, indent=1)

# ---------------------------------------------------------------- summary
L = []
v = meta["versions"]
L.append("== vgpumem GPU run %s  %s  torch %s  total %ss" % (meta.get("date_utc"), meta.get("nvidia_smi", ""), v.get("torch"), meta.get("total_seconds")))
L.append("shim: " + meta["shim_status"])
bad = [s for s in steps if s["rc"] not in (0, -1)]
L.append("steps: %d run, %d failed %s, %d skipped" % (len(steps), len(bad), [s["step"] + ":" + str(s["rc"]) for s in bad],
                                                     sum(1 for s in steps if s["rc"] == -1)))


def g(d, *ks):
    for k in ks:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


if isinstance(elf, dict) and "needs_cudart" in elf:
    L.append("§8.1 NEED libcudart: %s | NEED libcuda: %s | static-cudart bootstrap: %d libs" % (
        [os.path.basename(x) for x in elf["needs_cudart"]], [os.path.basename(x) for x in elf["needs_libcuda"]], len(elf["static_cudart_bootstrap"])))
r = g(probe, "probe_lookup", "resolver")
if isinstance(r, dict) and "matrix" in r:
    sel = [row for row in r["matrix"] if (row[0], row[1], row[2]) in {("cuMemAlloc", 3020, 0), ("cuLaunchKernel", 7000, 2), ("cuLaunchKernelEx", 11060, 2),
                                                                   ("cuGetProcAddress", 12000, 0), ("cuCtxSynchronize", 13000, 0), ("cuMemcpyHtoD", 7000, 2)}]
    L.append("§8.2 resolver: " + "; ".join("%s@%d/%d->%s" % (a[0], a[1], a[2], a[5]) for a in sel) +
             " | special: " + "; ".join("%s@%s->%s/%s" % (a[0] or '""', a[1], a[3], a[5]) for a in (r.get("special") or [])[:3]))
    unknown = [a for a in r["matrix"] if a[5] not in ("null", "untouched") and ("unknown" in a[5] or a[5].startswith("dladdr"))]
    L.append("     cuGetProcAddress_v2(NULL): %s" % (g(probe, "probe_lookup", "null_symbol") or {}))
    L.append("     resolver rows whose address is not an exported symbol: %d %s" % (len(unknown), [a[:3] + [a[5]] for a in unknown[:6]]))
pl = [(k, e.get("profiler_kernels"), e.get("shim_launches"), e.get("match")) for k, e in phases.items()]
L.append("§8.3 kernels profiler/shim: " + ", ".join("%s %s/%s%s" % (k, a, b, "" if m else " MISMATCH" if m is False else "") for k, a, b, m in pl))
uh = sorted({x for e in phases.values() for x in e["unhooked_watched_lookups"]})
L.append("     unhooked look-ups of watched names: %d %s" % (len(uh), uh[:8]))
for mode in ("params_eager", "params_lazy"):
    pr = g(probe, "probe_lookup", mode) or {}
    L.append("§8.4 %s: CUfunction %s | CUkernel cast %s | cuKernelGetParamInfo %s | loaded before/after launch %s/%s | cast launch %s" % (
        mode, pr.get("cufunction"), pr.get("cukernel_cast_to_cufunction"), pr.get("cukernel_via_cuKernelGetParamInfo"),
        pr.get("cufunction_loaded_before"), pr.get("cufunction_loaded_after_launch"), pr.get("cukernel_cast_launch")))
ag = g(probe, "probe_vmm", "attributes_granularity") or {}
L.append("§8.5 granularity: %s | attributes: %s" % (json.dumps(ag.get("granularity")), json.dumps(ag.get("attributes"))))
for mode in ("latency_idle", "latency_busy"):
    lt = g(probe, "probe_vmm", mode) or {}
    L.append("§8.6 %s (median us create/map/setaccess/unmap/release): " % mode + "; ".join(
        "%s %s" % (sz, "/".join(str(g(lt, sz, op, "median")) for op in ("create", "map", "set_access", "unmap", "release"))) for sz in ("2MiB", "20MiB", "64MiB")) +
        (" | kernel still running at end: %s" % [g(lt, sz, "kernel_running_at_end") for sz in ("2MiB", "20MiB", "64MiB")] if mode == "latency_busy" else ""))
it = g(probe, "probe_vmm", "interference") or {}
L.append("§8.6 interference (S2 gpu ms median, finished while S1 ran): " + "; ".join(
    "%s %s %s/%s" % (m, g(it, m, "s2_gpu_ms", "median"), g(it, m, "s2_finished_while_s1_running"), g(it, m, "reps")) for m in
    ("idle", "s1_kernel", "s1_kernel_plus_vmm_thread", "s1_kernel_plus_inline_vmm")))
um = g(probe, "probe_vmm", "unmap_while_kernel_reads") or {}
L.append("§8.6 unmap while kernel reads A: unmap %s in %s us, waited=%s, kernel faulted=%s (%s)" % (
    um.get("unmap"), um.get("unmap_us"), um.get("unmap_waited_for_kernel"), um.get("kernel_faulted"), um.get("stream_sync")))
for k in ("reserved_never_mapped_primary", "mapped_then_unmapped_primary", "reserved_never_mapped_own_ctx"):
    fl = g(probe, "probe_fault", k) or {}
    L.append("§8.7 %s: launch %s, sync %s, sticky %s, after: alloc %s launch %s; recover: %s; child signal %s" % (
        k, fl.get("launch"), fl.get("stream_sync"), fl.get("sticky"), fl.get("after_mem_alloc"), fl.get("after_launch_valid_kernel"),
        {kk: vv for kk, vv in fl.items() if kk.startswith("recover")}, fl.get("child_signal")))
for k in ("64MiB", "512MiB"):
    L.append("§8.8 %s GB/s: %s" % (k, json.dumps(g(probe, "probe_bandwidth", k, "gbps"))))
for k in ("thread_b_global", "thread_b_relaxed"):
    cp = g(probe, "probe_capture", k) or {}
    inv = [n for n, x in cp.items() if isinstance(x, dict) and x.get("invalidated")]
    failed = ["%s=%s" % (n, x.get("call")) for n, x in cp.items() if isinstance(x, dict) and x.get("call") not in (None, "CUDA_SUCCESS")]
    L.append("§8.9 %s: invalidating calls %s; failing calls %s" % (k, inv, failed))
pws = phases.get("profiler_with_shim", {})
L.append("§8.10 profiler with shim (conv): profiler %s kernels, shim %s launches, ok=%s" % (pws.get("profiler_kernels"), pws.get("shim_launches"), g(pws, "shim_run", "ok")))
ps = probe["probe_shim"]
L.append("shim driver-API check: noshim %s | shim %s | trace launches %s ooms %s" % (
    {k: ps["noshim"].get(k) for k in ("mem_get_info_free_total", "alloc_2GiB", "launches_made")},
    {k: ps["shim_limit_1GiB"].get(k) for k in ("mem_get_info_free_total", "alloc_2GiB", "mem_create_2GiB", "alloc_async_2GiB", "launches_made")},
    g(ps, "shim_trace_summary", "launches"), g(ps, "shim_trace_summary", "ooms_returned")))
for name, c in cmp_.items():
    L.append("cap %-20s identical=%s mem_get_info=%s cnn %sms tr %sms 3G=%s 6G=%s%s" % (
        name, c["bit_identical_to_noshim_r1"], c["mem_get_info"], c["cnn_step_ms_median"], c["transformer_step_ms_median"],
        (c["alloc_3g"] or "")[:30], (c["big_alloc_6g"] or "")[:60], (" errors=" + json.dumps(c["errors"])[:200]) if c["errors"] else ""))
print("\n".join(L))
