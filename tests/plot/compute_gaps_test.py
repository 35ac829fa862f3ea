#!/usr/bin/env python3
"""scripts/sim/compute_gaps.py on a timeline made by hand: three kernels on
device 0's compute lane, the second issued late because its thread was in a
cuMemSetAccess (a host gap, put down to that call from the thread's host
lane), the third issued early and started after the engine was free plus a
wait on its stream (a stream gap); a --kernels window leaves the first out.

  compute_gaps_test.py PATH/TO/sim/compute_gaps.py
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from plot_test_support import expect  # noqa: E402

SCRIPT = sys.argv[1]


def kernel(name, ts, dur, issued, thread=0):
    return {"ph": "X", "name": name, "cat": "kernel", "pid": 0, "tid": 1, "ts": ts, "dur": dur,
            "args": {"kind": name, "issued": issued, "thread": thread}}


# Microseconds: k1 [0, 10 ms); k2 issued and started at 15 ms, its thread in a
# cuMemSetAccess from 8 to 15 ms (5 ms of it inside the gap); k3 issued at
# 20 ms, started at 30 ms, the engine free at 25 ms (5 ms on its stream).
TIMELINE = {"otherData": {"events_dropped": 0}, "traceEvents": [
    {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "device 0"}},
    {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "compute"}},
    {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "host"}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "thread 0 (trainer)"}},
    kernel("k1", 0, 10000, 0),
    {"ph": "X", "name": "cuMemSetAccess", "cat": "host", "pid": 1, "tid": 1, "ts": 8000, "dur": 7000},
    # A host-lane event with tid 1 must not be read as a kernel of device 0.
    kernel("k2", 15000, 10000, 15000),
    kernel("k3", 30000, 5000, 20000),
]}


def run(path, *args):
    return subprocess.run([sys.executable, SCRIPT, path, *args], capture_output=True, text=True, timeout=60)


def main():
    with tempfile.TemporaryDirectory(prefix="compute-gaps-test.") as work:
        path = os.path.join(work, "timeline.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(TIMELINE, f)
        result = run(path)
        out = result.stdout
        expect(result.returncode == 0, "compute_gaps.py reads the timeline", result)
        expect("window: 3 kernels, 3 compute-lane operations, 35.00 ms" in out, "the window: all three kernels", result)
        expect("compute busy      25.00 ms" in out, "busy 25 ms", result)
        expect("idle, host       5.00 ms" in out, "5 ms waiting for the host", result)
        expect("idle, stream     5.00 ms" in out, "5 ms waiting on a stream", result)
        expect("host gaps whose operation thread 0 (trainer) issued:" in out and
               "cuMemSetAccess          5.00 ms" in out, "the host gap put down to the thread's cuMemSetAccess", result)
        expect("before k2" in out and "before k3" in out, "the gaps named by the kernels after them", result)
        windowed = run(path, "--kernels", "2")
        expect("window: 2 kernels, 2 compute-lane operations, 20.00 ms" in windowed.stdout and
               "idle, host       0.00 ms" in windowed.stdout, "--kernels 2: from k2 on, no host gap", windowed)
    print("compute_gaps: all checks passed")


if __name__ == "__main__":
    main()
