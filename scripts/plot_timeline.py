#!/usr/bin/env python3
"""Draws a simulated driver's timeline (VGPUSIM_TIMELINE) as a PNG.

  plot_timeline.py TIMELINE.json [--trace TRACE.json | --cap BYTES] [--out PNG]
  plot_timeline.py --compare A.json B.json [--labels lru auto] [--trace A.trace.json B.trace.json]

For each timeline: on top, the device memory charged and mapped (resident)
over simulated time, with the cap as a horizontal line (from the shim's trace summary,
vgpumem.devices[].cap, or --cap); below it three lanes, compute, copy-out
(device to host) and copy-in (host to device), one bar per operation. With
--compare, two runs of one workload are stacked on one time axis and one
memory scale, so the schedules can be told apart at a glance. The timeline
format is in docs/simulated-driver.md ("Timeline file").

Needs matplotlib (Debian: python3-matplotlib); everything else is the
standard library.
"""
import argparse
import json
import os
import re
import sys

LANES = [  # (label, lane name in the file, colour)
    ("compute", "compute", "#4c72b0"),
    ("copy-out", "copy to host", "#dd8452"),
    ("copy-in", "copy to device", "#55a868"),
]
SIZE_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20,
              "G": 1 << 30, "GiB": 1 << 30, "T": 1 << 40, "TiB": 1 << 40}


def fail(message):
    print(f"plot_timeline.py: {message}", file=sys.stderr)
    sys.exit(1)


def import_pyplot():
    try:
        import matplotlib
    except ImportError:
        hint = ""
        if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and \
                os.path.exists("/usr/bin/python3"):
            hint = (f" (this is {sys.executable}; Debian's package serves /usr/bin/python3, "
                    f"so run the script with /usr/bin/python3)")
        fail("needs matplotlib, which this Python does not have: install the Debian package "
             f"python3-matplotlib (apt-get install python3-matplotlib) or pip install matplotlib{hint}")
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as pyplot
    return pyplot


def parse_size(text):
    match = re.fullmatch(r"(\d+)\s*([A-Za-z]*)", text.strip())
    if not match or match.group(2) not in SIZE_UNITS:
        raise argparse.ArgumentTypeError(f"\"{text}\" is not a size (bytes, or e.g. 512MiB, 2GiB)")
    return int(match.group(1)) * SIZE_UNITS[match.group(2)]


def load_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        fail(f"cannot read {what} {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        fail(f"{what} {path} is not JSON: {e}")


class Timeline:
    """One device of a timeline file: its operations per lane and its memory counter."""

    def __init__(self, path, device):
        data = load_json(path, "timeline")
        events = data.get("traceEvents") if isinstance(data, dict) else None
        if not isinstance(events, list):
            fail(f"{path} has no traceEvents: is it a VGPUSIM_TIMELINE file?")
        other = data.get("otherData", {})
        self.path = path
        self.dropped = other.get("events_dropped", 0)
        lane_of_tid = {}
        for e in events:
            if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") == device:
                lane_of_tid[e.get("tid")] = e.get("args", {}).get("name")
        counter = f"device {device} physical bytes"
        self.bars = {name: [] for _, name, _ in LANES}  # lane -> [(start_ms, duration_ms)]
        self.memory = []  # [(ms, physical bytes, mapped bytes or None)]
        self.device_memory = None
        for e in events:
            if e.get("pid") != device:
                continue
            if e.get("ph") == "X":
                lane = lane_of_tid.get(e.get("tid"))
                if lane in self.bars:
                    self.bars[lane].append((e["ts"] / 1000.0, e.get("dur", 0) / 1000.0))
            elif e.get("ph") == "C" and e.get("name") == counter:
                args = e.get("args", {})
                self.memory.append((e["ts"] / 1000.0, args.get("physical", 0), args.get("mapped")))
                self.device_memory = args.get("device_memory", self.device_memory)
        if not self.memory and not any(self.bars.values()):
            fail(f"{path} has nothing for device {device}")
        self.memory.sort(key=lambda point: point[0])
        for bars in self.bars.values():
            bars.sort()
        ends = [m for m, _, _ in self.memory] + [s + d for bars in self.bars.values() for s, d in bars]
        self.end_ms = max(ends + [other.get("simulated_time_ns", 0) / 1e6])


def cap_from_trace(path, device):
    data = load_json(path, "trace")
    summary = data.get("vgpumem", {}) if isinstance(data, dict) else {}
    for d in summary.get("devices", []):
        if d.get("device") == device:
            return d.get("cap")
    return None


def bytes_unit(peak):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if peak >= 2 * size:
            return unit, size
    return "bytes", 1


def merged(bars, start, end, gap):
    """Bars within [start, end], neighbours closer than `gap` joined: a bar thinner
    than a pixel still shows, and a run of short kernels draws as one."""
    out = []
    for s, d in bars:
        e = s + d
        if e < start or s > end:
            continue
        s, e = max(s, start), min(e, end)
        if out and s - (out[-1][0] + out[-1][1]) <= gap:
            out[-1] = (out[-1][0], max(out[-1][0] + out[-1][1], e) - out[-1][0])
        else:
            out.append((s, e - s))
    return out


def busy_fraction(bars, start, end):
    busy, reach = 0.0, start
    for s, d in bars:  # sorted by start; overlaps counted once
        s, e = max(s, reach), min(s + d, end)
        if e > s:
            busy += e - s
            reach = e
    return busy / (end - start) if end > start else 0.0


def draw(pyplot, timelines, labels, caps, args):
    start = args.from_ms if args.from_ms is not None else 0.0
    end = args.to_ms if args.to_ms is not None else max(t.end_ms for t in timelines)
    if end <= start:
        fail(f"empty window: --from-ms {start} is not before --to-ms {end}")
    peak = max([b for t in timelines for _, b, _ in t.memory] + [c or 0 for c in caps] + [1])
    unit, scale = bytes_unit(peak)
    # Per timeline, memory over its lanes, close together; timelines apart,
    # room for each heading. One time axis for all.
    figure = pyplot.figure(figsize=(12, 0.8 + 3.0 * len(timelines)))
    outer = figure.add_gridspec(len(timelines), 1, hspace=0.25)
    axes = []
    for i in range(len(timelines)):
        inner = outer[i].subgridspec(2, 1, height_ratios=[2.2, 1.3], hspace=0.08)
        for j in range(2):
            axes.append(figure.add_subplot(inner[j], sharex=axes[0] if axes else None))
    for axis in axes[:-1]:
        axis.tick_params(labelbottom=False)
    gap = (end - start) / 3000.0
    for i, (timeline, label, cap) in enumerate(zip(timelines, labels, caps)):
        memory, lanes = axes[2 * i], axes[2 * i + 1]
        times = [m for m, _, _ in timeline.memory]
        physical = [b / scale for _, b, _ in timeline.memory]
        mapped = [(m if m is not None else b) / scale for _, b, m in timeline.memory]
        if times and times[-1] < end:
            times.append(end)
            physical.append(physical[-1])
            mapped.append(mapped[-1])
        # Charged: what counts against the cap, a pager's free chunks included;
        # mapped: what is resident under the program's allocations.
        memory.fill_between(times, physical, step="post", color="#8172b3", alpha=0.18, linewidth=0)
        memory.step(times, physical, where="post", color="#8172b3", linewidth=0.8, alpha=0.7,
                    label="device memory charged")
        if any(m is not None for _, _, m in timeline.memory):
            memory.fill_between(times, mapped, step="post", color="#8172b3", alpha=0.45, linewidth=0)
            memory.step(times, mapped, where="post", color="#4b3f8c", linewidth=1.0, label="mapped (resident)")
        if cap:
            memory.axhline(cap / scale, color="#c44e52", linestyle="--", linewidth=1.2,
                           label=f"cap {cap / scale:.0f} {unit}")
        elif timeline.device_memory and timeline.device_memory <= 4 * peak:
            memory.axhline(timeline.device_memory / scale, color="#937860", linestyle=":", linewidth=1.2,
                           label="device memory")
        memory.set_ylim(0, peak / scale * 1.12)
        memory.set_ylabel(unit)
        memory.grid(axis="y", alpha=0.3)
        in_window = [b for m, b, _ in timeline.memory if start <= m <= end] or [0]
        heading = f"{label}: simulated time {timeline.end_ms:.1f} ms, peak {max(in_window) / scale:.0f} {unit}"
        if timeline.dropped:
            heading += f" ({timeline.dropped} events dropped: the file is incomplete)"
        memory.set_title(heading, loc="left", fontsize=10)
        # Above the panel, beside the heading: inside it would hide the curve near the cap.
        memory.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=3, fontsize=8, frameon=False,
                      borderaxespad=0.2)
        ticks, names = [], []
        for row, (name, lane, colour) in enumerate(LANES):
            y = len(LANES) - 1 - row
            bars = timeline.bars[lane]
            lanes.broken_barh(merged(bars, start, end, gap), (y + 0.15, 0.7), facecolors=colour,
                              edgecolors=colour, linewidth=0.4)
            ticks.append(y + 0.5)
            names.append(f"{name} {100 * busy_fraction(bars, start, end):.0f}%")
        lanes.set_yticks(ticks)
        lanes.set_yticklabels(names, fontsize=8)
        lanes.set_ylim(0, len(LANES))
        lanes.grid(axis="x", alpha=0.3)
    axes[-1].set_xlim(start, end)
    axes[-1].set_xlabel("simulated time (ms); lanes: share of the window each engine was busy")
    figure.suptitle(args.title or " vs ".join(labels), fontsize=12)
    figure.savefig(args.out, dpi=args.dpi, bbox_inches="tight")
    pyplot.close(figure)


def main():
    parser = argparse.ArgumentParser(
        description="Draw a simulated driver's timeline (VGPUSIM_TIMELINE) as a PNG: device memory "
                    "against the cap, and the compute, copy-out and copy-in lanes.")
    parser.add_argument("timeline", nargs="?", help="a VGPUSIM_TIMELINE file")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="two timelines, stacked on one time axis")
    parser.add_argument("--labels", nargs="+", help="a label per timeline (default: the file names)")
    parser.add_argument("--trace", nargs="+", metavar="TRACE",
                        help="the shim's trace (VGPUMEM_TRACE) of each run: its summary gives the cap")
    parser.add_argument("--cap", type=parse_size, help="the cap to draw, in bytes (or 512MiB, 2GiB)")
    parser.add_argument("--device", type=int, default=0, help="which device (default 0)")
    parser.add_argument("--out", default="timeline.png", help="the PNG to write (default timeline.png)")
    parser.add_argument("--title", help="the picture's title")
    parser.add_argument("--from-ms", type=float, help="start of the window, simulated ms")
    parser.add_argument("--to-ms", type=float, help="end of the window, simulated ms")
    parser.add_argument("--dpi", type=int, default=100, help="resolution (default 100)")
    args = parser.parse_args()

    if bool(args.timeline) == bool(args.compare):
        parser.error("give one timeline, or --compare A B")
    paths = args.compare or [args.timeline]
    labels = args.labels or [os.path.basename(p).split(".")[0] for p in paths]
    if len(labels) != len(paths):
        parser.error(f"--labels wants {len(paths)} label(s), got {len(labels)}")
    if args.trace and len(args.trace) != len(paths):
        parser.error(f"--trace wants {len(paths)} file(s), one per timeline, got {len(args.trace)}")
    if args.trace and args.cap:
        parser.error("--trace and --cap both give the cap: choose one")

    pyplot = import_pyplot()
    timelines = [Timeline(p, args.device) for p in paths]
    caps = [cap_from_trace(t, args.device) for t in args.trace] if args.trace else [args.cap] * len(paths)
    draw(pyplot, timelines, labels, caps, args)
    print(args.out)


if __name__ == "__main__":
    main()
