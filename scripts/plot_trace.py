#!/usr/bin/env python3
"""Draws a vgpumem trace (VGPUMEM_TRACE) as a PNG: what the run did over its wall time.

  plot_trace.py TRACE.json [--device N] [--out PNG] [--title TEXT]
  plot_trace.py ACCESS-LOG.json [--out PNG] [--title TEXT]

Panels on one time axis (seconds since the trace's first event):
  device memory  a paged run's resident bytes on the device (the trace's
                 "device N resident" counter); with nothing paged (a strict
                 cap, VGPUMEM_POLICY=off, or no cap) the bytes counted (the
                 "device N memory" counter), each allocation refused with
                 CUDA's out-of-memory error marked; the cap as a line;
  on the host    (paged runs) the bytes of paged buffers away on the host
                 (the trace's "on host" spans, in and out);
  launches       kernel launches per bin of time: where the program ran and
                 where it waited.
The heading names the file, the policy and the cap.
Works on a trace from a GPU run as from the simulated driver: it reads only
the trace (docs/trace-format.md). `vgpumem report TRACE --png FILE` runs it.

An access log (the summary alone, as the GPU suite keeps them in
docs/gpu-runs/) has no events over the run: it draws what the log holds,
the one training step the scheduler recorded (its "schedule"'s "profile"),
on that step's own time axis, each operation its wait for its data and then
its run, one after the other as on the stream that issued them:
  in the step    the bytes of the units between their first and last use in
                 the step (what must be on the device at once if nothing
                 moves within it), against all the step's units and the
                 plan's budget;
  touched        the bytes of the units each operation names;
  operations     kernels and copies as they ran, and before each, in red,
                 how long it waited for its data.

Needs matplotlib (Debian: python3-matplotlib); everything else is the
standard library.
"""
import argparse
import json
import os
import sys


def fail(message):
    print(f"plot_trace.py: {message}", file=sys.stderr)
    sys.exit(1)


def import_pyplot():
    try:
        import matplotlib
    except ImportError:
        fail("needs matplotlib, which this Python does not have: install the Debian package "
             "python3-matplotlib (apt-get install python3-matplotlib) or pip install matplotlib")
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as pyplot
    return pyplot


UNCAPPED = (1 << 64) - 1


def bytes_unit(peak):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if peak >= 2 * size:
            return unit, size
    return "bytes", 1


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        fail(f"cannot read trace {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        fail(f"trace {path} is not JSON: {e}")


def is_access_log(data):
    """The summary alone, no events (as `vgpumem report` tells one)."""
    return isinstance(data, dict) and isinstance(data.get("vgpumem"), dict) and "traceEvents" not in data


class Trace:
    """What the picture needs of one device's trace: memory, bytes away, launches."""

    def __init__(self, path, device, data=None):
        data = read_json(path) if data is None else data  # `data`: the file read already
        if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list) or \
                not isinstance(data.get("vgpumem"), dict):
            fail(f"{path} is not a vgpumem trace (traceEvents and a vgpumem summary, from VGPUMEM_TRACE=FILE)")
        events = [e for e in data["traceEvents"] if isinstance(e, dict) and isinstance(e.get("ts"), (int, float))]
        if not events:
            fail(f"{path} has no timed events")
        self.start_us = min(e["ts"] for e in events)
        self.cap = None
        for d in data["vgpumem"].get("devices", []):
            if isinstance(d, dict) and d.get("device") == device:
                self.cap = d.get("cap")
        paging = data["vgpumem"].get("paging")
        counter = f"device {device} resident"
        counted = f"device {device} memory"
        self.resident = []  # [(s, bytes)]
        self.counted = []   # [(s, bytes)] charged to the cap, where nothing is paged
        self.ooms = []      # [s] allocations refused with out-of-memory
        changes = []        # [(s, +/- bytes)] of buffers going to and coming from the host
        self.launches = []  # [s]
        for e in events:
            t = (e["ts"] - self.start_us) / 1e6
            args = e.get("args", {}) if isinstance(e.get("args"), dict) else {}
            if e.get("ph") == "C" and e.get("name") == counter:
                self.resident.append((t, args.get("resident", 0)))
                if self.cap is None:
                    self.cap = args.get("cap")
            elif e.get("ph") == "C" and e.get("name") == counted:
                self.counted.append((t, args.get("counted", 0)))
                if self.cap is None:
                    self.cap = args.get("cap")
            elif e.get("cat") == "oom" and args.get("device", device) == device:
                self.ooms.append(t)
            elif e.get("name") == "on host" and e.get("ph") in ("b", "e") and args.get("device", device) == device:
                size = args.get("bytes", 0)
                changes.append((t, size if e["ph"] == "b" else -size))
            elif e.get("cat") == "launch":
                self.launches.append(t)
        if self.cap is not None and self.cap >= UNCAPPED:
            self.cap = None  # the counters' cap without one
        self.paged = isinstance(paging, dict) or bool(self.resident or changes)
        if isinstance(paging, dict):
            self.policy = paging.get("policy", "?")
        else:
            self.policy = "?" if self.paged else ("off" if self.cap else None)
        self.path = path
        self.resident.sort()
        self.counted.sort()
        changes.sort()
        self.away = []
        level = 0
        for t, delta in changes:
            level = max(0, level + delta)
            self.away.append((t, level))
        self.end_s = max([t for t, _ in self.resident] + [t for t, _ in self.away] + [t for t, _ in self.counted] +
                         self.launches + self.ooms + [0.0])
        self.dropped = data["vgpumem"].get("events_dropped", 0)
        if not self.resident and not self.away and not self.counted:
            fail(f"{path} has nothing for device {device}: no memory was counted on it")

    def memory(self):
        """The device memory line: the paged bytes resident where paging ran, else the bytes counted."""
        return self.resident if self.paged or not self.counted else self.counted


def steps(points, end):
    """A counter as a step line: each value holds until the next."""
    xs, ys = [], []
    for t, v in points:
        if xs:
            xs.append(t)
            ys.append(ys[-1])
        xs.append(t)
        ys.append(v)
    if xs:
        xs.append(end)
        ys.append(ys[-1])
    return xs, ys


def heading(trace, path):
    """The file, the policy and the cap, as the picture's heading says them."""
    name = os.path.basename(path)
    if trace.cap:
        unit, size = bytes_unit(trace.cap)
        cap = f"cap {trace.cap / size:.1f} {unit}"
        policy = "off (a strict cap)" if trace.policy == "off" else trace.policy
        return f"{name}: policy {policy}, {cap}"
    return f"{name}: no cap" + (f", policy {trace.policy}" if trace.policy else "")


def draw_memory(axes, trace, unit, size, peak):
    points = trace.memory()
    xs, ys = steps(points, trace.end_s)
    label = "on the device (paged, resident)" if points is trace.resident else "on the device (counted)"
    axes.fill_between(xs, [y / size for y in ys], step=None, color="#4c72b0", alpha=0.35, linewidth=0)
    axes.plot(xs, [y / size for y in ys], color="#4c72b0", linewidth=1, label=label)
    if trace.cap:
        axes.axhline(trace.cap / size, color="#c44e52", linestyle="--", linewidth=1.2,
                     label=f"cap {trace.cap / size:.1f} {unit}")
    for i, t in enumerate(trace.ooms):
        axes.axvline(t, color="#c44e52", linewidth=1.5, alpha=0.8,
                     label="refused: out of memory" if i == 0 else None)
    axes.set_ylabel(f"device memory ({unit})")
    axes.set_ylim(0, peak / size * 1.12)
    axes.legend(loc="upper right", fontsize=8)


def draw(trace, out, title):
    pyplot = import_pyplot()
    # The host panel only where something was paged.
    ratios = [3, 2, 1.2] if trace.paged else [3, 1.2]
    figure, panels = pyplot.subplots(len(ratios), 1, figsize=(11, 6.5 if trace.paged else 5), sharex=True,
                                     gridspec_kw={"height_ratios": ratios})
    memory, launches = panels[0], panels[-1]
    peak = max([v for _, v in trace.memory()] + [v for _, v in trace.away] + [trace.cap or 0, 1])
    unit, size = bytes_unit(peak)
    draw_memory(memory, trace, unit, size, peak)

    if trace.paged:
        away = panels[1]
        xs, ys = steps(trace.away, trace.end_s)
        away.fill_between(xs, [y / size for y in ys], color="#dd8452", alpha=0.4, linewidth=0)
        away.plot(xs, [y / size for y in ys], color="#dd8452", linewidth=1)
        away.set_ylabel(f"on the host ({unit})")
        away.set_ylim(bottom=0)

    bins = max(1, min(150, len(trace.launches) // 20))
    if trace.launches:
        launches.hist(trace.launches, bins=bins, range=(0, max(trace.end_s, 1e-9)), color="#55a868")
    else:  # said, not left as an empty panel that reads like a drawing that failed
        launches.text(0.5, 0.5, "no kernel launches in the trace", transform=launches.transAxes, ha="center",
                      va="center", fontsize=9, color="#555555")
    launches.set_ylabel("launches")
    launches.set_xlabel("seconds since the trace began (wall time)")
    launches.set_xlim(0, max(trace.end_s * 1.02, 1e-9))  # room for a mark at the very end (an OOM that ended the run)

    text = title or heading(trace, trace.path)
    if trace.ooms:
        text += f"; {len(trace.ooms)} allocation{'s' if len(trace.ooms) != 1 else ''} refused"
    if trace.dropped:
        text += f"  ({trace.dropped} events dropped: the picture has gaps)"
    figure.suptitle(text, fontsize=11)
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    print(out)


KERNEL, TO_HOST = 1, 256  # an operation's flags in the profile (scheduler/profile_json.cpp)


class AccessLog:
    """What the picture needs of an access log: the recorded step's operations, in order."""

    def __init__(self, path, data=None):
        data = read_json(path) if data is None else data  # `data`: the file read already
        summary = data.get("vgpumem", {}) if isinstance(data, dict) else {}
        schedule = summary.get("schedule") if isinstance(summary.get("schedule"), dict) else {}
        profile = schedule.get("profile")
        if not is_access_log(data) or not isinstance(profile, dict) or not profile.get("ops"):
            fail(f"{path} is an access log that recorded no step (no schedule profile): nothing to draw")
        units = profile.get("units", [])
        self.path = path
        self.planner = schedule.get("planner")
        plan = schedule.get("plan") if isinstance(schedule.get("plan"), dict) else {}
        self.budget = plan.get("budget")
        self.measured = data.get("measured") if isinstance(data.get("measured"), dict) else None
        self.total_bytes = sum(units)
        # Each operation: [duration ns, stall ns, flags, units touched, name?].
        self.ops = []  # (start ms, wait ms, run ms, kind, bytes touched)
        first, last = {}, {}
        t = 0.0
        for i, (duration, stall, flags, touched, *_) in enumerate(profile["ops"]):
            kind = "kernel" if flags & KERNEL else ("copy to the host" if flags & TO_HOST else "copy to the device")
            self.ops.append((t, stall / 1e6, duration / 1e6, kind, sum(units[u] for u in touched)))
            for u in touched:
                first.setdefault(u, i)
                last[u] = i
            t += (stall + duration) / 1e6
        self.end_ms = t
        self.wait_ms = sum(op[1] for op in self.ops)
        self.run_ms = sum(op[2] for op in self.ops)
        # A unit is live from the start of its first operation to the end of its last.
        changes = []
        for u, i in first.items():
            changes.append((self.ops[i][0], units[u]))
            j = last[u]
            changes.append((self.ops[j][0] + self.ops[j][1] + self.ops[j][2], -units[u]))
        changes.sort(key=lambda c: (c[0], c[1] > 0))  # at one instant, what ends before what begins
        self.live = []
        level = 0
        for at, delta in changes:
            level += delta
            self.live.append((at, level))


def access_log_heading(log, path):
    """The file, what it holds, and the step a GPU measured where it carries one."""
    text = (f"{os.path.basename(path)}: an access log's recorded step, {len(log.ops)} operations,\n"
            f"{log.run_ms:.1f} ms running and {log.wait_ms:.1f} ms waiting for data")
    if log.planner:
        text += f"; planner {log.planner}"
    if log.budget:
        unit, size = next((u, s) for u, s in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("bytes", 1))
                          if log.budget >= s)
        text += f", budget {log.budget / size:.2f} {unit}"
    if log.measured and log.measured.get("step_ms"):
        text += f"\nmeasured step {log.measured['step_ms']:.1f} ms on {log.measured.get('device', 'the GPU')}"
        if log.measured.get("uncapped_step_ms"):
            text += f" (uncapped {log.measured['uncapped_step_ms']:.1f} ms)"
    return text


def draw_access_log(log, out, title):
    pyplot = import_pyplot()
    figure, (memory, touched, lanes) = pyplot.subplots(3, 1, figsize=(11, 6.5), sharex=True,
                                                       gridspec_kw={"height_ratios": [3, 1.5, 1.2]})
    peak = max([v for _, v in log.live] + [log.total_bytes, log.budget or 0, 1])
    unit, size = bytes_unit(peak)
    xs, ys = steps(log.live, log.end_ms)
    memory.fill_between(xs, [y / size for y in ys], color="#4c72b0", alpha=0.35, linewidth=0)
    memory.plot(xs, [y / size for y in ys], color="#4c72b0", linewidth=1,
                label="units between their first and last use in the step")
    memory.axhline(log.total_bytes / size, color="#8172b2", linestyle=":", linewidth=1.2,
                   label=f"all the step's units, {log.total_bytes / size:.2f} {unit}")
    if log.budget:
        memory.axhline(log.budget / size, color="#c44e52", linestyle="--", linewidth=1.2,
                       label=f"the plan's budget, {log.budget / size:.2f} {unit}")
    memory.set_ylabel(f"in the step ({unit})")
    memory.set_ylim(0, peak / size * 1.15)
    memory.legend(loc="upper right", fontsize=8)

    touched.vlines([op[0] + op[1] for op in log.ops], 0, [op[4] / size for op in log.ops], color="#55a868",
                   linewidth=0.8)
    touched.set_ylabel(f"touched ({unit})")
    touched.set_ylim(bottom=0)

    colors = {"kernel": "#4c72b0", "copy to the host": "#dd8452", "copy to the device": "#937860"}
    for kind, color in colors.items():
        spans = [(op[0] + op[1], op[2]) for op in log.ops if op[3] == kind]
        if spans:
            lanes.broken_barh(spans, (1.1, 0.8), color=color, linewidth=0, label=kind)
    waits = [(op[0], op[1]) for op in log.ops if op[1] > 0]
    if waits:
        lanes.broken_barh(waits, (0.1, 0.8), color="#c44e52", linewidth=0, label="waiting for its data")
    lanes.set_yticks([0.5, 1.5], ["waits", "runs"])
    lanes.set_ylim(0, 2)
    lanes.set_xlabel("the recorded step's time (ms): each operation's wait, then its run, in stream order")
    lanes.set_xlim(0, max(log.end_ms, 1e-9))

    figure.suptitle(title or access_log_heading(log, log.path), fontsize=10)
    # The lanes' legend under the figure, where it hides no operation.
    handles, labels = lanes.get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, 0.04, 1, 1))
    figure.savefig(out, dpi=110)
    print(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="a trace written with VGPUMEM_TRACE=FILE, or an access log")
    parser.add_argument("--device", type=int, default=0, help="the device to draw (default 0)")
    parser.add_argument("--out", help="the PNG to write (default: the trace's name with .png)")
    parser.add_argument("--title", help="a heading for the picture")
    args = parser.parse_args()
    out = args.out or os.path.splitext(args.trace)[0] + ".png"
    data = read_json(args.trace)  # once: a trace may be tens of MB
    if is_access_log(data):
        draw_access_log(AccessLog(args.trace, data), out, args.title)
    else:
        draw(Trace(args.trace, args.device, data), out, args.title)


if __name__ == "__main__":
    main()
