#!/usr/bin/env python3
"""The GPU suite's plots, from its results.json (or the condensed copy under
docs/gpu-runs/):

    plot_suite.py RESULTS.json OUTDIR

step-times.png  every capped or shimmed training run's step time over the
                same workload's run without the shim (log scale), with the
                planner's floor for the step where it made a plan
moved.png       bytes moved (to the host and back) and stall time, per step
capacity.png    samples per second against the batch under one cap, for
                each way of fitting it (the capacity part), where it ran

Needs matplotlib (Debian: python3-matplotlib); suite.py calls it at the end
of a run and, where the GPU machine's Python has no matplotlib, says to run
it on the results elsewhere.
"""
import json
import os
import sys

from suite_steps import compared_with


def training_runs(steps):
    """(workload key, label, result, trace, uncapped result) of every run with an uncapped run to compare."""
    runs = []
    for label, e in steps.items():
        r = e.get("result") or {}
        if not r.get("ok") or "workload" not in r or e.get("part") == "capacity" or label.endswith("-noshim"):
            continue
        w, base = compared_with(steps, label, r)
        if base.get("ok") and base.get("median_step_ms_second_half") and r.get("median_step_ms_second_half"):
            runs.append((w, label, r, e.get("trace") or {}, base))
    return runs


def by_workload(runs):
    groups = {}
    for run in runs:
        groups.setdefault(run[0], []).append(run)
    return groups


def plot_step_times(plt, runs, path):
    groups = by_workload(runs)
    fig, axes = plt.subplots(len(groups), 1, figsize=(9, 1.2 + 0.45 * len(runs) + 0.4 * len(groups)), squeeze=False)
    for ax, (w, group) in zip(axes[:, 0], groups.items()):
        base_ms = group[0][4]["median_step_ms_second_half"]
        labels = [label.removeprefix(w + "-") for _, label, *_ in group]
        ratios = [r["median_step_ms_second_half"] / base_ms for _, _, r, _, _ in group]
        ax.barh(range(len(group)), ratios, color="tab:blue", label="step time / uncapped")
        floor_labelled = False
        for i, (_, _, _, t, _) in enumerate(group):
            floor = ((t.get("schedule") or {}).get("plan") or {}).get("floor_ns")
            if floor:
                ax.plot(floor / 1e6 / base_ms, i, "k|", markersize=14, markeredgewidth=2,
                        label=None if floor_labelled else "planner's floor")
                floor_labelled = True
        ax.set_yticks(range(len(group)), labels)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.axvline(1, color="grey", linewidth=0.8)
        ax.set_title(f"{w}: uncapped step {base_ms:.1f} ms")
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("step time over the run without vgpumem (log)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_moved(plt, runs, path):
    paged = [run for run in runs if ((run[3].get("paging") or {}).get("bytes_offloaded") or 0) > 0]
    if not paged:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.9 + 0.32 * len(paged)), sharey=True)
    labels = [label for _, label, *_ in paged]
    per_step = [max(1, r.get("steps") or 1) for _, _, r, _, _ in paged]
    p = [run[3]["paging"] for run in paged]
    out = [(x.get("bytes_offloaded") or 0) / n / 2**30 for x, n in zip(p, per_step)]
    back = [(x.get("bytes_prefetched") or 0) / n / 2**30 for x, n in zip(p, per_step)]
    left.barh(range(len(paged)), out, color="tab:orange", label="to the host")
    left.barh(range(len(paged)), back, left=out, color="tab:green", label="back to the device")
    left.set_xlabel("GiB moved per step")
    left.legend(fontsize=8)
    right.barh(range(len(paged)), [(x.get("stall_ns") or 0) / n / 1e6 for x, n in zip(p, per_step)], color="tab:red")
    right.set_xlabel("stall ms per step (launches waiting for their memory)")
    left.set_yticks(range(len(paged)), labels)
    left.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_capacity(plt, steps, path):
    found = [e["capacity"] for e in steps.values() if e.get("capacity")]
    if not found:
        return False
    fig, axes = plt.subplots(1, len(found), figsize=(5.5 * len(found), 4), squeeze=False)
    for ax, c in zip(axes[0], found):
        for way, v in c["ways"].items():
            trained = [s for s in v["steps"] if s.get("ok")]
            if trained:
                ax.plot([s["batch"] for s in trained], [s["samples_per_s"] for s in trained], "o-", label=way)
            failed = [s for s in v["steps"] if s.get("ok") is False]
            for s in failed:
                ax.axvline(s["batch"], linestyle=":", linewidth=0.8,
                           color=ax.lines[-1].get_color() if trained else "grey")
        ax.axvline(c["usual_batch"], color="grey", linewidth=0.8)
        ax.set_title(f"{c['workload']} under {c['cap'] / 2**20:.0f} MiB (dotted: the first batch that failed)",
                     fontsize=9)
        ax.set_xlabel("batch")
        ax.set_ylabel("samples per second")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot(results_path, outdir):
    """Writes the plots; returns the paths written. Raises ImportError without matplotlib."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(results_path) as f:
        steps = json.load(f).get("steps", {})
    os.makedirs(outdir, exist_ok=True)
    written = []
    runs = training_runs(steps)
    if runs:
        plot_step_times(plt, runs, os.path.join(outdir, "step-times.png"))
        written.append("step-times.png")
        if plot_moved(plt, runs, os.path.join(outdir, "moved.png")):
            written.append("moved.png")
    if plot_capacity(plt, steps, os.path.join(outdir, "capacity.png")):
        written.append("capacity.png")
    return [os.path.join(outdir, w) for w in written]


def plot_or_say_why(results_path, outdir):
    try:
        written = plot(results_path, outdir)
    except ImportError:
        return (f"plots: this Python has no matplotlib; run `python3 scripts/gpu/plot_suite.py {results_path} DIR` "
                "where it has (Debian: python3-matplotlib)")
    return "plots: " + (", ".join(written) if written else "nothing to plot")


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: plot_suite.py RESULTS.json OUTDIR")
    if not os.path.exists(sys.argv[1]):
        raise SystemExit(f"plot_suite.py: no file {sys.argv[1]!r}: expected the suite's results.json")
    try:
        written = plot(sys.argv[1], sys.argv[2])
    except ImportError:
        raise SystemExit("plot_suite.py needs matplotlib (Debian: apt-get install python3-matplotlib)")
    except ValueError as e:
        raise SystemExit(f"plot_suite.py: {sys.argv[1]!r} is not the suite's results.json: {e}")
    print("\n".join(written) if written else "nothing to plot: no training run with an uncapped run to compare")


if __name__ == "__main__":
    main()
