"""The real-GPU suite: unmodified PyTorch training under vgpumem, against the
same runs without it, in one device call that fits its time limit.

    python3 scripts/gpu/suite.py OUT BUILD [--budget S] [--parts a,b,...]
                                           [--workloads w,...] [--resume OLD/results.json]

BUILD is the folder scripts/gpu/build.sh made (lib/libvgpumem.so,
gpu-probes/). OUT receives:

    results.json   every step: label, command, environment, rc, seconds, the
                   program's RESULT line and the shim's trace summary, condensed
    summary.md     the tables (step times, bytes moved, stalls, peaks, bitwise
                   comparisons against the run without the shim)
    traces.tar.xz  the shim's traces (schedule.profile is the access log of a
                   real training step: `vgpumem simulate` replays it)
    log.txt        stderr of every step
    *.png          the plots (plot_suite.py), where this Python has matplotlib;
                   else run plot_suite.py on results.json elsewhere

Parts run in the order given (default: learned, checks, async, more); a part
whose steps would pass the budget is cut short and says so, so a later call
can run the rest with --parts, given the first call's results.json with
--resume (its finished steps are kept, not run again; only results of the
same device and driver). Caps are fractions of the uncapped run's peak
(torch.cuda.max_memory_reserved of the run without the shim), so the part
that measures a workload without the shim runs first.
"""
import argparse
import inspect
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import traceback

import capacity
import suite_jax
import torch_tests
import plot_suite
from suite_steps import HERE, PY, cap_env, compared_with, ensure_uncapped, limit_at, peak_of_step, percent, train_argv


class Suite:
    def __init__(self, out, build, budget, resumed=None):
        self.out, self.build, self.deadline = out, build, time.time() + budget
        self.shim = os.path.join(build, "lib", "libvgpumem.so")
        self.probes = os.path.join(build, "gpu-probes")
        self.work = tempfile.mkdtemp(prefix="vgpumem-suite.")
        # Steps of an earlier call (--resume): kept, and not run again where they ran to the end.
        self.results = dict(resumed or {})
        self.resumed = {label for label, e in self.results.items() if e.get("rc") == 0}
        self.log = open(os.path.join(out, "log.txt"), "a")
        self.base_env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8", PYTHONUNBUFFERED="1")

    def left(self):
        return self.deadline - time.time()

    def trace_path(self, label):
        return os.path.join(self.work, f"trace-{label}.json")

    def start(self, label, argv, env_extra, timeout, shim=False, trace=False, digest=None, cwd=None):
        """Starts a step; returns a handle for finish(), or None if out of budget. digest(stdout, stderr), if
        given, returns what to add to the step's entry (for programs whose output is more than a RESULT line)."""
        if label in self.resumed:
            print(f"  {label:<40} from the resumed results", flush=True)
            return label
        timeout = min(timeout, self.left() - 5)
        if timeout < 20:
            self.results[label] = {"label": label, "skipped": "time budget"}
            print(f"  {label:<40} skipped (time budget)", flush=True)
            return None
        env = dict(self.base_env)
        env.update(env_extra)
        if shim:
            env["LD_PRELOAD"] = self.shim
            if trace:
                env["VGPUMEM_TRACE"] = self.trace_path(label)
                env.setdefault("VGPUMEM_TRACE_MAX_EVENTS", "20000")
        shown = {k: v for k, v in env.items() if k.startswith(("VGPUMEM_", "PYTORCH_", "LD_PRELOAD"))}
        self.log.write(f"== {label} ({time.strftime('%H:%M:%S')}, limit {timeout:.0f}s): {shown} {' '.join(argv)}\n")
        self.log.flush()
        proc = subprocess.Popen(["timeout", "-k", "5", str(int(timeout))] + argv, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=cwd)
        return (label, argv, shown, proc, time.time(), digest)

    def finish(self, handle):
        if handle is None:
            return None
        if isinstance(handle, str):  # resumed
            return self.results[handle]
        label, argv, shown, proc, t0, digest = handle
        stdout, stderr = proc.communicate()
        seconds = round(time.time() - t0, 1)
        self.log.write(f"-- {label}: rc={proc.returncode} {seconds}s\n{stderr[-6000:]}\n")
        self.log.flush()
        entry = {"label": label, "argv": argv, "env": shown, "rc": proc.returncode, "seconds": seconds}
        for line in stdout.splitlines():
            if line.startswith("RESULT "):
                try:
                    entry["result"] = json.loads(line[7:])
                except ValueError:
                    entry["result_unparsed"] = line[:2000]
            elif line.startswith("ERROR"):
                entry["error_line"] = line[:500]
        if "result" not in entry:
            entry["stdout_tail"] = stdout[-1500:]
            entry["stderr_tail"] = stderr[-1500:]
        entry["vgpumem_stderr"] = [l for l in stderr.splitlines() if "vgpumem" in l][:40]
        verdicts = [l.strip() for l in (stdout + stderr).splitlines() if "ERROR SUMMARY" in l]
        if verdicts:
            entry["sanitizer"] = verdicts
            # Every report, not only the count: what each error was is the point.
            entry["sanitizer_reports"] = [l.rstrip() for l in (stdout + stderr).splitlines()
                                          if l.startswith("=========")][:300]
        lines = [l for l in stdout.splitlines() if l.startswith("{")]
        if lines and "result" not in entry:
            entry["json_lines"] = [json.loads(l) for l in lines if l.rstrip().endswith("}")]
        if digest:
            entry.update(digest(stdout, stderr))
        trace = self.trace_path(label)
        if os.path.exists(trace):
            try:
                with open(trace) as f:
                    entry["trace"] = condense(json.load(f).get("vgpumem", {}))
            except (OSError, ValueError) as e:
                entry["trace_error"] = str(e)[:300]
        self.results[label] = entry
        res = entry.get("result", {})
        brief = res.get("median_step_ms_second_half", res.get("digest", ""))
        print(f"  {label:<40} rc={proc.returncode:<4} {seconds:6.1f}s  {brief}  {res.get('error', '')[:120]}", flush=True)
        self.save()
        return entry

    def run(self, *args, **kwargs):
        return self.finish(self.start(*args, **kwargs))

    def run_parallel(self, specs):
        handles = [self.start(*a, **k) for a, k in specs]
        return [self.finish(h) for h in handles]

    def save(self):
        with open(os.path.join(self.out, "results.json"), "w") as f:
            json.dump({"meta": self.meta, "steps": self.results}, f, indent=1)


def condense(s):
    """The parts of a trace summary that the report reads."""
    p = s.get("paging", {}) or {}
    sched = s.get("schedule", {}) or {}
    plan = sched.get("plan", {}) or {}
    keep = {
        "launches": s.get("launches"),
        "peak_counted_bytes": s.get("peak_counted_bytes"),
        "ooms_returned": s.get("ooms_returned"),
        "devices": s.get("devices"),
        "host_bytes_peak": s.get("host_bytes_peak"),
        "events_dropped": s.get("events_dropped"),
        "cupti": {k: (s.get("cupti") or {}).get(k) for k in ("state", "absent_reason", "kernel_records")},
        "paging": {k: p.get(k) for k in (
            "policy", "check", "offloads", "prefetches", "bytes_offloaded", "bytes_prefetched", "revived", "bytes_revived",
            "stalled_operations", "stall_ns", "slow_path_ns", "context_synchronizations", "ooms", "grace",
            "capture_pinned_bytes", "graph_node_pinned_bytes", "pointer_tables", "pieces", "program_handles",
            "host_pinned_bytes_peak", "host_time_ns", "mappings", "reclaimer", "devices")},
        "launch_audit_unscannable": {k: v for k, v in (p.get("launch_audit") or {}).items()
                                     if isinstance(v, dict) and v.get("unscannable_launches")},
    }
    if sched:
        keep["schedule"] = {k: sched.get(k) for k in (
            "streams", "handoffs", "period", "iterations", "locked", "iterations_followed", "locks", "breaks", "plans",
            "operations_followed", "operations_strayed", "recent_iterations", "scheduled_offloads",
            "scheduled_prefetches", "scheduled_refused", "timing_source", "trial")}
        keep["schedule"]["plan"] = {k: plan.get(k) for k in (
            "period", "compute_ns", "recorded_stall_ns", "step_bytes", "budget", "target", "swaps", "peak_after", "fits",
            "grace_operations", "predicted_step_ns", "predicted_stall_ns", "floor_ns", "link_to_host_gbps",
            "link_to_device_gbps", "profile_ms", "published_ms")}
    return keep


def meta_info(build):
    def sh(cmd):
        try:
            return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
        except Exception as e:
            return f"error: {e}"
    return {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "nvidia_smi": sh("nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader"),
            "torch": sh(f"{PY} -c 'import torch; from importlib.metadata import version as v; print(torch.__version__, "
                        "torch.version.cuda, torch.backends.cudnn.version(), v(\"torchvision\"), v(\"transformers\"))'"),
            "git": sh(f"git -C {HERE} log -1 --format=%h 2>/dev/null") + sh(f"git -C {HERE} diff --quiet || echo +dirty"),
            "shim_bytes": os.path.getsize(os.path.join(build, "lib", "libvgpumem.so"))
            if os.path.exists(os.path.join(build, "lib", "libvgpumem.so")) else None}


# ---- parts -------------------------------------------------------------------

def part_learned(suite, workloads=("resnet50", "gpt2"), suffix="", alloc_env=None, steps=None):
    """Issue 14's GPU check: lru and auto at half the peak against uncapped, timed, one at a time."""
    alloc_env = alloc_env or {}
    for w in workloads:
        suite.run(f"{w}{suffix}-noshim", train_argv(w, "noshim", steps=steps), dict(alloc_env), 90)
        for policy in ("auto", "lru"):
            env = cap_env(suite, w, 0.5, suffix)
            if env is None:
                suite.results[f"{w}{suffix}-{policy}50"] = {"skipped": "no uncapped peak"}
                continue
            env.update(alloc_env, VGPUMEM_POLICY=policy)
            suite.run(f"{w}{suffix}-{policy}50", train_argv(w, f"{policy}50", steps=steps), env, 120, shim=True, trace=True)


def memcheck_specs(suite, timeout, shim_timeout):
    """compute-sanitizer memcheck on a 768 MiB paging probe, without the shim and under it (256 MiB cap, torture)."""
    memcheck = ["compute-sanitizer", "--tool", "memcheck", "--error-exitcode", "99",
                os.path.join(suite.probes, "probe_paging"), "768", "32", "2"]
    return [
        (("probe-sanitizer-noshim", memcheck, {}, timeout), {}),
        (("probe-sanitizer-cap256m-torture", memcheck, {"VGPUMEM_LIMIT": "256MiB", "VGPUMEM_CHECK": "torture"},
          shim_timeout), {"shim": True}),
    ]


def probe_specs(suite):
    """The driver-API paging probe: bit-identical digests under a cap, strict and torture; memcheck."""
    probe = os.path.join(suite.probes, "probe_paging")
    return [
        (("probe-noshim", [probe, "3072", "64", "3"], {}, 60), {}),
        (("probe-cap1g", [probe, "3072", "64", "3"], {"VGPUMEM_LIMIT": "1GiB"}, 90), {"shim": True, "trace": True}),
        (("probe-cap1g-torture", [probe, "3072", "64", "3"], {"VGPUMEM_LIMIT": "1GiB", "VGPUMEM_CHECK": "torture"}, 150),
         {"shim": True, "trace": True}),
    ] + frees_specs(suite) + memcheck_specs(suite, 150, 200)


def frees_specs(suite):
    """What cuMemFree waits for: the driver's own answer, and vgpumem's with the allocations paged."""
    probe = os.path.join(suite.probes, "probe_frees")
    return [
        (("frees-noshim", [probe], {}, 60), {}),
        (("frees-cap1g", [probe], {"VGPUMEM_LIMIT": "1GiB"}, 60), {"shim": True, "trace": True}),
    ]


def part_probe(suite):
    suite.run_parallel(probe_specs(suite))


def part_checks(suite):
    """Correctness, not timing (all side by side): the probe, torture on real training, a second uncapped
    sample (does the shim change a bit?), a third of the peak."""
    specs = probe_specs(suite)
    for w in ("resnet50", "gpt2"):
        specs.append(((f"{w}-shim-nocap", train_argv(w, "shim_nocap"), {}, 150), {"shim": True, "trace": True}))
        env33 = cap_env(suite, w, 1 / 3)
        if env33:
            specs.append(((f"{w}-auto33", train_argv(w, "auto33"), dict(env33, VGPUMEM_POLICY="auto"), 240),
                          {"shim": True, "trace": True}))
        env50 = cap_env(suite, w, 0.5)
        if env50:
            specs.append(((f"{w}-torture50", train_argv(w, "torture50", steps=3),
                           dict(env50, VGPUMEM_POLICY="lru", VGPUMEM_CHECK="torture"), 240), {"shim": True, "trace": True}))
    suite.run_parallel(specs)


def part_async(suite):
    """part_learned under PyTorch's other allocator (cudaMallocAsync: stream-ordered pools, not cudaMalloc
    segments), ResNet-50 and then GPT-2 at 8 steps (its capped runs are the slow ones)."""
    alloc = {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}
    part_learned(suite, ("resnet50",), "-async", alloc)
    part_learned(suite, ("gpt2",), "-async", alloc, steps=8)


def part_more(suite):
    for w in ("bert", "vgg16"):
        suite.run(f"{w}-noshim", train_argv(w, "noshim"), {}, 150)
        env = cap_env(suite, w, 1 / 3)
        if env:
            suite.run(f"{w}-auto33", train_argv(w, "auto33"), dict(env, VGPUMEM_POLICY="auto"), 240, shim=True, trace=True)


def part_diag(suite):
    """Why the slow path is slow and whether CUPTI names our launches: what mapping a unit back costs and
    why (probe_vmm map_like_the_pager, alone), the CUPTI probe, what cuMemFree waits for (probe_frees, with
    and without the shim) and memcheck side by side, then ResNet-50
    and GPT-2 at half their peak under lru and auto with the pager's host time by part."""
    suite.run("probe-vmm-map", [os.path.join(suite.probes, "probe_vmm"), "map_like_the_pager"], {}, 90)
    suite.run_parallel([(("probe-cupti", [os.path.join(suite.probes, "probe_cupti")], {}, 60), {})] +
                       frees_specs(suite) + memcheck_specs(suite, 90, 120))
    part_learned(suite, ("resnet50",))
    part_blocks(suite)
    part_learned(suite, ("gpt2",), steps=8)


def part_blocks(suite):
    """What blocks buy: ResNet-50 lru at half its peak with every chunk its own 2 MiB allocation (as before
    blocks), against part_learned's run on the automatic blocks; compare their paging.mappings and map time."""
    env = cap_env(suite, "resnet50", 0.5)
    if env is None:
        suite.results["resnet50-lru50-blocks2m"] = {"skipped": "no uncapped peak"}
        return
    env.update(VGPUMEM_POLICY="lru", VGPUMEM_BLOCK_BYTES="2MiB")
    suite.run("resnet50-lru50-blocks2m", train_argv("resnet50", "lru50_blocks2m"), env, 120, shim=True, trace=True)


def part_alternatives(suite, workloads=("resnet50", "gpt2")):
    """Issue 16's alternatives at equal peak memory, same batch: PyTorch's activation checkpointing and
    torch.autograd.graph.save_on_cpu without the shim, then vgpumem's auto capped at the peak each one
    reached (torch.cuda.max_memory_reserved): who trains faster in the same memory. Losses compare with the
    plain run's (checkpointing's parameters do not: batch norm sees the recomputed forward too)."""
    for w in workloads:
        for mode in ("checkpoint", "save_on_cpu"):
            label = f"{w}-{mode}-noshim"
            suite.run(label, train_argv(w, label, memory=mode), {}, 150)
            peak = peak_of_step(suite, label)
            if not peak:
                suite.results[f"{w}-auto-at-{mode}"] = {"skipped": f"no peak from {label}"}
                continue
            env = {"VGPUMEM_LIMIT": limit_at(peak), "VGPUMEM_POLICY": "auto"}
            suite.run(f"{w}-auto-at-{mode}", train_argv(w, f"auto_at_{mode}"), env, 240, shim=True, trace=True)


POLICIES = ("auto", "lru", "vdnn-all", "vdnn-conv")
FRACTIONS = (0.5, 1 / 3, 0.25)
# The transformers' capped steps take seconds each on a GPU (GPT-2 at a third of its peak: 9 s on the
# H200): 8 steps keep each run inside its time limit, the median of the last 4 its step time.
CAPS_STEPS = {"gpt2": 8, "bert": 8}


def part_caps(suite, workloads=("resnet50", "gpt2", "bert", "vgg16")):
    """Issue 16's matrix: every policy at a half, a third and a quarter of the uncapped peak, timed, one at a
    time; steps an earlier call ran (--resume, or another part of this call) are not run again."""
    for w in workloads:
        if not ensure_uncapped(suite, w):
            suite.results[f"{w}-caps"] = {"skipped": "no uncapped peak"}
            continue
        for fraction in FRACTIONS:
            for policy in POLICIES:
                label = f"{w}-{policy}{percent(fraction)}"
                env = dict(cap_env(suite, w, fraction), VGPUMEM_POLICY=policy)
                suite.run(label, train_argv(w, label, steps=CAPS_STEPS.get(w)), env, 300, shim=True, trace=True)


DDP = os.path.join(HERE, "ddp_workload.py")


def ddp_argv(workload, label, steps=8):
    return [PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", DDP, workload, label, str(steps)]


def part_twoproc(suite, workload="resnet50"):
    """Issue 16's two processes: torchrun, gloo, both ranks on the one GPU; without the shim, then each rank
    under its own cap (VGPUMEM_LIMIT applies per process) of half the larger rank's uncapped peak, auto, each
    rank's trace kept (trace-<label>-<pid>.json). Compare each rank's losses and the ranks' parameters."""
    base = f"{workload}-ddp2-noshim"
    suite.run(base, ddp_argv(workload, base), {}, 180)
    peak = peak_of_step(suite, base)
    label = f"{workload}-ddp2-auto50"
    if not peak:
        suite.results[label] = {"skipped": f"no peak from {base}"}
        return
    env = {"VGPUMEM_LIMIT": limit_at(peak, 0.5), "VGPUMEM_POLICY": "auto",
           "VGPUMEM_TRACE": os.path.join(suite.work, f"trace-{label}-%p.json"), "VGPUMEM_TRACE_MAX_EVENTS": "20000"}
    entry = suite.run(label, ddp_argv(workload, label), env, 300, shim=True)
    if entry is None:
        return
    ranks = []
    for name in sorted(os.listdir(suite.work)):
        if name.startswith(f"trace-{label}-"):
            try:
                with open(os.path.join(suite.work, name)) as f:
                    ranks.append(condense(json.load(f).get("vgpumem", {})))
            except (OSError, ValueError) as e:
                ranks.append({"trace_error": str(e)[:300]})
    entry["rank_traces"] = ranks  # torchrun's agent writes one too, with no paging in it
    base_ranks = suite.results[base]["result"].get("ranks") or []  # it ran to the end: it has a peak
    mine = (entry.get("result") or {}).get("ranks") or []
    entry["ranks_identical_to_uncapped"] = [
        bool(a and b and a.get("losses") == b.get("losses") and a.get("params") == b.get("params"))
        for a, b in zip(mine, base_ranks)]
    suite.save()


PARTS = {"diag": part_diag, "blocks": part_blocks, "alternatives": part_alternatives, "twoproc": part_twoproc,
         "learned": part_learned, "checks": part_checks, "probe": part_probe, "async": part_async, "more": part_more,
         "caps": part_caps, "capacity": capacity.part_capacity, "jax": suite_jax.part_jax,
         "torchtests": torch_tests.part_torchtests}


# ---- report --------------------------------------------------------------------

def report(suite):
    rows = ["| step | rc | ok | step ms (median, 2nd half) | vs uncapped | losses = uncapped | params = uncapped | "
            "offloaded GiB | prefetched GiB | stalls | stall ms | plan: predicted / floor ms | period / locked | "
            "peak resident MiB (shim) | peak charged MiB (shim) | NVML peak MiB | max reserved MiB |",
            "|" + "---|" * 17]
    for label, e in suite.results.items():
        r = e.get("result", {})
        if not r or "workload" not in r or e.get("part") == "capacity":
            continue
        _, base = compared_with(suite.results, label, r)
        t = e.get("trace", {})
        p = t.get("paging", {}) or {}
        sch = t.get("schedule", {}) or {}
        plan = sch.get("plan", {}) or {}
        n = min(len(r.get("losses", [])), len(base.get("losses", [])))
        same_losses = (r.get("losses", [])[:n] == base.get("losses", [])[:n]) if n else None
        same_params = (r.get("params") == base.get("params")) if r.get("steps") == base.get("steps") else "n/a"
        ms, bms = r.get("median_step_ms_second_half"), base.get("median_step_ms_second_half")
        devs = (p.get("devices") or {})
        res_peak = None
        if isinstance(devs, dict) and devs:
            d0 = next(iter(devs.values()))
            res_peak = d0.get("resident_bytes_peak") if isinstance(d0, dict) else None
        elif isinstance(devs, list) and devs:
            res_peak = devs[0].get("resident_bytes_peak")
        charged = t.get("devices") or []
        charged_peak = charged[0].get("peak") if isinstance(charged, list) and charged and isinstance(charged[0], dict) else None
        gib = lambda b: f"{b / 2**30:.2f}" if isinstance(b, (int, float)) else "-"
        mib = lambda b: f"{b / 2**20:.0f}" if isinstance(b, (int, float)) else "-"
        f_ms = lambda ns: f"{ns / 1e6:.1f}" if isinstance(ns, (int, float)) else "-"
        rows.append("| " + " | ".join(str(x) for x in [
            label, e.get("rc"), r.get("ok"), ms, f"{ms / bms:.2f}" if ms and bms else "-",
            f"{same_losses} ({n})", same_params, gib(p.get("bytes_offloaded")), gib(p.get("bytes_prefetched")),
            p.get("stalled_operations", "-"), f_ms(p.get("stall_ns")),
            f"{f_ms(plan.get('predicted_step_ns'))} / {f_ms(plan.get('floor_ns'))}",
            f"{sch.get('period', '-')} / {sch.get('locked', '-')}", mib(res_peak), mib(charged_peak), mib(r.get("nvml_process_peak")),
            mib(r.get("max_memory_reserved"))]) + " |")
    others = []
    for label, e in suite.results.items():
        r = e.get("result", {})
        if (r and "workload" in r) or e.get("capacity") or e.get("tests"):
            continue
        others.append(f"- {label}: rc={e.get('rc')} {json.dumps(r)[:300] if r else e.get('skipped') or e.get('error_line') or ''}")
    with open(os.path.join(suite.out, "summary.md"), "w") as f:
        f.write(f"# vgpumem GPU suite {suite.meta['date_utc']}\n\n{json.dumps(suite.meta)}\n\n" + "\n".join(rows) +
                "\n\n" + "\n".join(capacity.report_lines(suite.results)) +
                "\n\n" + "\n".join(torch_tests.report_lines(suite.results)) +
                "\n\n" + "\n".join(others) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("build")
    ap.add_argument("--budget", type=float, default=480)
    ap.add_argument("--parts", default="learned,checks,async,more")
    ap.add_argument("--workloads", help="comma-separated: the workloads of the parts that take a list")
    ap.add_argument("--resume", help="results.json of an earlier call: its steps are kept and those that ran to "
                                     "the end are not run again (the uncapped peaks that caps derive from, too)")
    a = ap.parse_args()
    unknown = [name for name in a.parts.split(",") if name not in PARTS]
    if unknown:
        raise SystemExit(f"unknown part {unknown[0]!r}: expected some of {', '.join(PARTS)}")
    os.makedirs(a.out, exist_ok=True)
    meta = meta_info(os.path.abspath(a.build))
    resumed = None
    if a.resume:
        with open(a.resume) as f:
            earlier = json.load(f)
        theirs, ours = earlier.get("meta", {}).get("nvidia_smi"), meta["nvidia_smi"]
        if theirs != ours:  # the peaks, and so every cap derived from them, belong to that device
            raise SystemExit(f"--resume {a.resume}: its runs were on {theirs!r}, this machine is {ours!r}; "
                             "resume only results of this device and driver")
        resumed = earlier.get("steps", {})
        meta["resumed_from"] = earlier.get("meta", {}).get("date_utc")
    suite = Suite(os.path.abspath(a.out), os.path.abspath(a.build), a.budget, resumed)
    suite.meta = meta
    print(json.dumps(suite.meta), flush=True)
    for name in a.parts.split(","):
        print(f"part {name} ({suite.left():.0f}s left)", flush=True)
        try:
            part = PARTS[name]
            if a.workloads and "workloads" in inspect.signature(part).parameters:
                part(suite, workloads=tuple(a.workloads.split(",")))
            else:
                part(suite)
        except Exception as e:  # a broken part must not lose the others
            traceback.print_exc()
            suite.results[f"part-{name}-error"] = {"error_line": f"{type(e).__name__}: {e}"[:500]}
    suite.save()
    report(suite)
    traces = [os.path.join(suite.work, f) for f in os.listdir(suite.work) if f.startswith("trace-")]
    if traces:
        with tarfile.open(os.path.join(suite.out, "traces.tar.xz"), "w:xz") as tar:
            for t in sorted(traces):
                tar.add(t, arcname=os.path.basename(t))
    shutil.rmtree(suite.work, ignore_errors=True)
    print(plot_suite.plot_or_say_why(os.path.join(suite.out, "results.json"), suite.out), flush=True)
    print(open(os.path.join(suite.out, "summary.md")).read()[:9000])


if __name__ == "__main__":
    main()
