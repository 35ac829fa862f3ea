#!/usr/bin/env python3
"""scripts/plot_timeline.py on a tiny synthetic timeline: one picture, a
comparison of two, a window, the cap from a trace; its usage errors; and the
error naming the Debian package when matplotlib is missing. Exits 77
(skipped, for ctest) when no Python here has matplotlib.

  plot_timeline_test.py PATH/TO/plot_timeline.py
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import (environment_without_matplotlib, expect, png_size,  # noqa: E402
                               python_with, run as run_script)

SCRIPT = sys.argv[1]


def run(python, *args, env=None):
    return run_script(python, SCRIPT, *args, env=env)
MIB = 1 << 20


def timeline(shift_ms):
    """Device 0: a kernel, a copy out and a copy in overlapping; memory up to 48 MiB and back."""
    us = lambda ms: (ms + shift_ms) * 1000.0
    events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "device 0"}}]
    for tid, name in ((1, "compute"), (2, "copy to device"), (3, "copy to host")):
        events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": tid, "args": {"name": name}})
    for ms, physical in ((0, 0), (0.1, 32 * MIB), (1.0, 48 * MIB), (3.0, 16 * MIB), (5.0, 16 * MIB)):
        args = {"physical": physical, "device_memory": 64 * MIB}
        if shift_ms:  # one file with the mapped series, one without (older files)
            args["mapped"] = physical * 3 // 4
        events.append({"ph": "C", "name": "device 0 physical bytes", "pid": 0, "ts": us(ms) if ms else 0.0,
                       "args": args})
    for tid, start, dur, kind in ((1, 0.2, 1.0, "layer_forward"), (1, 1.3, 0.01, "tiny"), (1, 1.31, 2.0, "layer_backward"),
                                  (3, 1.0, 0.5, "copy"), (2, 2.5, 0.5, "copy")):
        events.append({"ph": "X", "name": kind, "cat": "kernel" if tid == 1 else "copy", "pid": 0, "tid": tid,
                       "ts": us(start), "dur": dur * 1000.0, "args": {"kind": kind}})
    return {"displayTimeUnit": "ms", "otherData": {"events_dropped": 0, "simulated_time_ns": int(us(5.0) * 1000)},
            "traceEvents": events}


def main():
    with tempfile.TemporaryDirectory(prefix="plot-timeline-test-") as work:
        checks(work)


def checks(work):
    paths = {}
    for name, shift in (("lru", 0.0), ("auto", 0.5)):
        paths[name] = os.path.join(work, f"{name}.timeline.json")
        with open(paths[name], "w") as f:
            json.dump(timeline(shift), f)
    trace = os.path.join(work, "run.trace.json")
    with open(trace, "w") as f:
        json.dump({"traceEvents": [], "vgpumem": {"devices": [{"device": 0, "cap": 40 * MIB}]}}, f)

    # Without matplotlib: a clear error naming the Debian package (a stand-in
    # package that fails to import hides any real one).
    env = environment_without_matplotlib(work)
    result = run(sys.executable, paths["lru"], "--out", os.path.join(work, "never.png"), env=env)
    expect(result.returncode == 1 and "python3-matplotlib" in result.stderr,
           "without matplotlib: exit 1 naming python3-matplotlib", result)

    result = run(sys.executable, "--compare", paths["lru"], paths["auto"], "--labels", "lru")
    expect(result.returncode == 2 and "--labels" in result.stderr, "one label for two timelines is a usage error", result)
    result = run(sys.executable, paths["lru"], "--cap", "lots")
    expect(result.returncode == 2 and "is not a size" in result.stderr, "a malformed --cap is a usage error", result)

    python = python_with("matplotlib")
    if python is None:
        print("SKIP: no Python here has matplotlib (Debian: apt-get install python3-matplotlib)")
        sys.exit(77)

    one = os.path.join(work, "one.png")
    result = run(python, paths["lru"], "--cap", "40MiB", "--out", one, "--title", "one run")
    size = png_size(one) if os.path.exists(one) else None
    expect(result.returncode == 0 and size and size[0] > 400 and size[1] > 200, f"one timeline drawn: {size}", result)

    both = os.path.join(work, "both.png")
    result = run(python, "--compare", paths["lru"], paths["auto"], "--labels", "lru", "auto",
                 "--trace", trace, trace, "--from-ms", "0.5", "--to-ms", "4", "--out", both)
    size2 = png_size(both) if os.path.exists(both) else None
    expect(result.returncode == 0 and size2 and size2[1] > size[1],
           f"two timelines stacked, cap from the trace, a window: {size2}", result)
    expect(result.stdout.strip() == both, "prints the picture's path", result)

    result = run(python, paths["lru"], "--from-ms", "4", "--to-ms", "1", "--out", os.path.join(work, "x.png"))
    expect(result.returncode == 1 and "empty window" in result.stderr, "an empty window is an error", result)
    print("plot_timeline: all checks passed")


if __name__ == "__main__":
    main()
