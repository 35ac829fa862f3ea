#!/usr/bin/env python3
"""scripts/plot_trace.py on tiny synthetic vgpumem traces: the picture of a
paged run, of a strict cap (VGPUMEM_POLICY=off) with its out-of-memory answer
and of an uncapped run (nothing paged: device memory from the "device N
memory" counter), an access log's recorded step (no events: its operations
over the step's time and the bytes they hold), the headings naming the file,
policy and cap, its refusals (no file, not a trace, nothing for the device,
an access log with no recorded step), and the error naming the
Debian package when matplotlib is missing. Exits 77 (skipped, for ctest)
when no Python here has matplotlib.

  plot_trace_test.py PATH/TO/plot_trace.py
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


def trace():
    """Device 0 under a 40 MiB cap: memory up to the cap, 16 MiB away and back, launches throughout."""
    events = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "vgpumem"}}]
    for ms, resident in ((0, 0), (1, 24 * MIB), (2, 40 * MIB), (3, 24 * MIB), (5, 40 * MIB), (6, 8 * MIB)):
        events.append({"ph": "C", "name": "device 0 resident", "cat": "residency", "pid": 1, "tid": 1,
                       "ts": 1000.0 + ms * 1000, "args": {"cap": 40 * MIB, "resident": resident}})
    for ph, ms in (("b", 2.5), ("e", 4.5)):
        events.append({"ph": ph, "name": "on host", "cat": "residency", "id": "0x1000", "pid": 1, "tid": 1,
                       "ts": 1000.0 + ms * 1000, "args": {"bytes": 16 * MIB, "device": 0}})
    for i in range(60):
        events.append({"ph": "i", "name": "cuLaunchKernel", "cat": "launch", "pid": 1, "tid": 1, "s": "t",
                       "ts": 1000.0 + i * 100, "args": {"function": "0x1", "stream": "0x0"}})
    return {"displayTimeUnit": "ns", "traceEvents": events,
            "vgpumem": {"devices": [{"device": 0, "cap": 40 * MIB, "peak": 40 * MIB}], "events_dropped": 0,
                        "paging": {"policy": "auto"}}}


UNCAPPED = (1 << 64) - 1  # the counter's cap without one


def unpaged_trace(cap):
    """Device 0 with nothing paged: memory counted up to 30 MiB, under a strict
    cap of `cap` bytes (one allocation refused at 5 ms) or, cap None, uncapped."""
    events = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "vgpumem"}}]
    for ms, counted in ((0, 0), (1, 8 * MIB), (2, 20 * MIB), (4, 30 * MIB), (6, 10 * MIB)):
        events.append({"ph": "C", "name": "device 0 memory", "cat": "memory", "pid": 1, "tid": 1,
                       "ts": 1000.0 + ms * 1000, "args": {"cap": cap or UNCAPPED, "counted": counted}})
    if cap:
        events.append({"ph": "i", "s": "p", "name": "out of memory", "cat": "oom", "pid": 1, "tid": 1, "ts": 6000.0,
                       "args": {"requested": 8 * MIB, "in_use": 30 * MIB, "cap": cap, "api": "cuMemAlloc_v2",
                                "device": 0}})
    for i in range(40):
        events.append({"ph": "i", "name": "cuLaunchKernel", "cat": "launch", "pid": 1, "tid": 1, "s": "t",
                       "ts": 1000.0 + i * 150, "args": {"function": "0x1", "stream": "0x0"}})
    return {"displayTimeUnit": "ns", "traceEvents": events,
            "vgpumem": {"devices": [{"device": 0, "cap": cap, "peak": 30 * MIB}], "ooms_returned": 1 if cap else 0,
                        "events_dropped": 0}}


def access_log(profiled=True):
    """An access log (docs/gpu-runs/*access-log*.json): the summary alone, no
    events; its recorded step of four operations over three units, a plan's
    budget of 8 MiB, and the step a GPU measured beside it."""
    profile = {"format": 2, "period": 4, "step_ns": 5300.0, "offload_delay": 1, "backward_begins": 2,
               "units": [4 * MIB, 4 * MIB, 2 * MIB],
               "names": ["gemm", "cuMemcpyDtoHAsync_v2", "relu"],
               # [duration ns, stall ns, flags (1 kernel, 256 a copy to the host), units touched, name]
               "ops": [[1000, 0, 1, [0], 0], [2000, 500, 1, [0, 1], 0], [1500, 0, 256, [1], 1], [800, 0, 1, [2, 0], 2]]}
    schedule = {"planner": "auto", "period": 4, "operations": 40, "plan": {"budget": 8 * MIB, "swaps": 1}}
    if profiled:
        schedule["profile"] = profile
    return {"measured": {"device": "NVIDIA H200", "step_ms": 0.01, "uncapped_step_ms": 0.005},
            "vgpumem": {"schedule": schedule, "paging": {"policy": "auto"}, "launches": 40}}


def headings(work):
    """The picture's heading names the file, the policy and the cap."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(SCRIPT)))
    import plot_trace  # noqa: E402
    for name, data, said in (("paged.json", trace(), "paged.json: policy auto, cap 40.0 MiB"),
                             ("strict.json", unpaged_trace(32 * MIB), "strict.json: policy off (a strict cap), cap 32.0 MiB"),
                             ("uncapped.json", unpaged_trace(None), "uncapped.json: no cap")):
        path = os.path.join(work, name)
        with open(path, "w") as f:
            json.dump(data, f)
        heading = plot_trace.heading(plot_trace.Trace(path, 0), path)
        expect(heading.startswith(said), f"the heading of {name}: {heading!r}")
    path = os.path.join(work, "gpu.access-log.json")
    with open(path, "w") as f:
        json.dump(access_log(), f)
    heading = plot_trace.access_log_heading(plot_trace.AccessLog(path), path)
    expect(heading.startswith("gpu.access-log.json: an access log's recorded step, 4 operations"),
           f"the heading of an access log: {heading!r}")


def draws(python, work, name, data):
    path = os.path.join(work, name + ".trace.json")
    with open(path, "w") as f:
        json.dump(data, f)
    out = os.path.join(work, name + ".png")
    result = run(python, path, "--out", out)
    size = png_size(out) if os.path.exists(out) else None
    expect(result.returncode == 0 and size and size[0] > 400 and size[1] > 300, f"{name} drawn: {size}", result)


def checks(work):
    path = os.path.join(work, "run.trace.json")
    with open(path, "w") as f:
        json.dump(trace(), f)

    env = environment_without_matplotlib(work)
    result = run(sys.executable, path, "--out", os.path.join(work, "never.png"), env=env)
    expect(result.returncode == 1 and "python3-matplotlib" in result.stderr,
           "without matplotlib: exit 1 naming python3-matplotlib", result)

    result = run(sys.executable, os.path.join(work, "missing.json"))
    expect(result.returncode == 1 and "cannot read trace" in result.stderr, "a missing trace is named", result)
    timeline = os.path.join(work, "timeline.json")
    with open(timeline, "w") as f:
        json.dump({"traceEvents": [], "otherData": {}}, f)
    result = run(sys.executable, timeline)
    expect(result.returncode == 1 and "is not a vgpumem trace" in result.stderr,
           "a simulator timeline is not a vgpumem trace", result)
    result = run(sys.executable, path, "--device", "3")
    expect(result.returncode == 1 and "nothing for device 3" in result.stderr,
           "a device the trace has nothing for is refused", result)
    unprofiled = os.path.join(work, "unprofiled.access-log.json")
    with open(unprofiled, "w") as f:
        json.dump(access_log(profiled=False), f)
    result = run(sys.executable, unprofiled)
    expect(result.returncode == 1 and "recorded no step" in result.stderr,
           "an access log without a recorded step is refused, saying so", result)

    python = python_with("matplotlib")
    if python is None:
        print("SKIP: no Python here has matplotlib (Debian: apt-get install python3-matplotlib)")
        sys.exit(77)
    out = os.path.join(work, "run.png")
    result = run(python, path, "--out", out, "--title", "a run")
    size = png_size(out) if os.path.exists(out) else None
    expect(result.returncode == 0 and size and size[0] > 400 and size[1] > 300, f"the run drawn: {size}", result)
    expect(result.stdout.strip() == out, "prints the picture's path", result)
    # Nothing paged: the strict cap with its refusal, and no cap at all.
    draws(python, work, "strict", unpaged_trace(32 * MIB))
    draws(python, work, "uncapped", unpaged_trace(None))
    draws(python, work, "access-log", access_log())
    headings(work)
    print("plot_trace: all checks passed")


def main():
    with tempfile.TemporaryDirectory(prefix="plot-trace-test-") as work:
        checks(work)


if __name__ == "__main__":
    main()
