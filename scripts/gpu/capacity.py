"""The largest batch that trains under one fixed cap: vgpumem against PyTorch
alone, activation checkpointing and torch.autograd.graph.save_on_cpu, all
under the same cap (issue 16, item 4).

The cap is a fraction (default a half) of the uncapped run's peak at the
workload's usual batch. Every way runs under the shim with that
VGPUMEM_LIMIT, so all four are charged the same bytes the same way: PyTorch
alone, checkpointing and save_on_cpu with VGPUMEM_POLICY=off (the strict cap:
an allocation past it is CUDA's out-of-memory error, which PyTorch raises as
torch.OutOfMemoryError), vgpumem with auto. Each walks up a ladder of batches
(multiples of the usual one) until the first batch that does not train; its
answer is the last one that did, with its step time and samples per second,
since under paging a bigger batch always trains, only slower.

vgpumem starts its walk at the largest batch PyTorch alone trained: it pages
nothing there, and what matters is how far above it goes. A batch whose
estimated footprint (the uncapped peak scaled by the batch) would need more
pinned host memory than HOST_ROOM is not tried, and the walk says so.
"""
from suite_steps import BATCH, ensure_uncapped, limit_at, percent, train_argv

LADDER = (0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4)
# (name, train_workload's MEMORY, VGPUMEM_POLICY)
WAYS = (("pytorch", "plain", "off"), ("checkpoint", "checkpoint", "off"), ("save_on_cpu", "save_on_cpu", "off"),
        ("vgpumem", "plain", "auto"))
HOST_ROOM = 48 << 30
STEPS = 4  # the median of the last two is the step time; enough for auto to learn and lock


def batches(base):
    """The ladder's batches for a usual batch of `base`: distinct, at least 1, ascending."""
    seen = []
    for factor in LADDER:
        b = max(1, round(base * factor))
        if b not in seen:
            seen.append(b)
    return seen


def walk(suite, workload, way, memory, policy, cap, peak, start_batch):
    """Runs `workload` up the ladder from `start_batch` until a batch fails; returns the steps."""
    steps = []
    for batch in (b for b in batches(BATCH[workload]) if b >= start_batch):
        footprint = peak * batch / BATCH[workload]
        if footprint > int(cap) + HOST_ROOM:
            steps.append({"batch": batch, "skipped": f"about {footprint / 2**30:.0f} GiB, past the cap and the host room"})
            break
        label = f"{workload}-fit{percent(int(cap) / peak)}-{way}-b{batch}"
        env = {"VGPUMEM_LIMIT": cap, "VGPUMEM_POLICY": policy}
        entry = suite.run(label, train_argv(workload, label, steps=STEPS, batch=batch, memory=memory), env, 150,
                          shim=True, trace=policy != "off")
        if entry is None:
            steps.append({"batch": batch, "skipped": "time budget"})
            break
        entry["part"] = "capacity"
        r = entry.get("result") or {}
        ms = r.get("median_step_ms_second_half")
        steps.append({"batch": batch, "ok": bool(r.get("ok")), "step_ms": ms,
                      "samples_per_s": round(batch * 1e3 / ms, 2) if r.get("ok") and ms else None,
                      "error": (r.get("error") or entry.get("error_line") or "")[:200] or None})
        if not r.get("ok"):
            break
    return steps


def largest(steps):
    trained = [s for s in steps if s.get("ok")]
    return trained[-1] if trained else None


def part_capacity(suite, workloads=("resnet50", "gpt2"), fraction=0.5):
    for w in workloads:
        peak = ensure_uncapped(suite, w)
        label = f"{w}-capacity"
        if not peak:
            suite.results[label] = {"label": label, "skipped": "no uncapped peak"}
            continue
        cap = limit_at(peak, fraction)
        ways = {}
        for way, memory, policy in WAYS:
            start = 1
            if way == "vgpumem":
                best = largest(ways["pytorch"]["steps"])
                start = best["batch"] if best else 1
            steps = walk(suite, w, way, memory, policy, cap, peak, start)
            best = largest(steps)
            # The ladder's top trained: the answer is "at least", not "at most".
            ladder_end = bool(best) and best["batch"] == batches(BATCH[w])[-1]
            ways[way] = {"steps": steps, "largest_batch": best and best["batch"],
                         "samples_per_s": best and best["samples_per_s"], "ladder_end": ladder_end}
        suite.results[label] = {"label": label, "capacity": {"workload": w, "cap": int(cap), "uncapped_peak": peak,
                                                              "usual_batch": BATCH[w], "ways": ways}}
        suite.save()


def report_lines(results):
    """The markdown table: per workload and way, the largest batch and its throughput."""
    rows = []
    for e in results.values():
        c = e.get("capacity")
        if not c:
            continue
        if not rows:
            rows += ["| workload | cap MiB | way | largest batch | samples/s there | batches tried (samples/s, or why not) |",
                     "|---|---|---|---|---|---|"]
        for way, v in c["ways"].items():
            tried = ", ".join(f"{s['batch']}: {s['samples_per_s'] if s.get('ok') else s.get('skipped') or 'failed'}"
                              for s in v["steps"])
            top = "-" if v["largest_batch"] is None else f"{'≥ ' if v['ladder_end'] else ''}{v['largest_batch']}"
            rows.append(f"| {c['workload']} | {c['cap'] / 2**20:.0f} | {way} | {top} | {v['samples_per_s'] or '-'} | {tried} |")
    return rows
