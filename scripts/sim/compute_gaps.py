#!/usr/bin/env python3
"""Where the simulated device's compute engine sat idle, and why, over the
last steps of a run: reads a simulator timeline file (VGPUSIM_TIMELINE) and
splits each idle gap on the compute lane by what its next operation waited
for:

  host    the operation started the moment it was issued: the engine was
          free and the stream ready, but the issuing thread had not issued
          it yet (driver calls, the pager, the lock: host-side work);
  stream  it was issued earlier and started later: it waited for an event
          or the work before it on its stream (a fetch still on the link,
          a save whose room it needs).

The host part is split further by what the issuing thread's own lane in the
file says it was doing then (the simulator's host lanes: driver calls, the
driver's lock, waits for the device, polls, handoffs such as the shim's own
lock, issuing other work).

  compute_gaps.py TIMELINE [--kernels N] [--top K]
    --kernels N   the window: the last N kernels (default: every kernel)
    --top K       list the K longest gaps of each kind (default 8)
"""
import argparse
import json
import sys

DEVICE = 0
COMPUTE_LANE = 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("timeline")
    parser.add_argument("--kernels", type=int, default=0)
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args()
    with open(args.timeline, encoding="utf-8") as f:
        timeline = json.load(f)
    dropped = timeline.get("otherData", {}).get("events_dropped", 0)
    if dropped:
        print(f"warning: the timeline dropped {dropped} events (VGPUSIM_TIMELINE_MAX_EVENTS): "
              "its last steps are missing", file=sys.stderr)
    events = timeline["traceEvents"]
    compute = [e for e in events if e.get("ph") == "X" and e.get("pid") == DEVICE and e.get("tid") == COMPUTE_LANE]
    host_pid = next((e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
                     and e.get("args", {}).get("name") == "host"), None)
    lane_names = {e["tid"]: e["args"]["name"] for e in events
                  if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") == host_pid}
    spans = {}  # host lane (tid) -> [(start, end, why)]
    for e in events:
        if e.get("ph") == "X" and e.get("pid") == host_pid and host_pid is not None:
            spans.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    compute.sort(key=lambda e: e["ts"])
    kernel_indices = [i for i, e in enumerate(compute) if e.get("cat") == "kernel"]
    if not kernel_indices:
        sys.exit(f"{args.timeline}: no kernel on the compute lane")
    windowed = 0 < args.kernels <= len(kernel_indices)
    first = kernel_indices[-args.kernels] if windowed else 0
    kernels = args.kernels if windowed else len(kernel_indices)
    window = compute[first:]
    start, end = window[0]["ts"], max(e["ts"] + e["dur"] for e in window)
    busy = sum(e["dur"] for e in window)
    gaps = {"host": [], "stream": []}
    why_host = {}  # issuing thread's lane -> what its lane shows during the host gaps -> µs
    engine_free = window[0]["ts"] + window[0]["dur"]
    for before, op in zip(window, window[1:]):
        idle = op["ts"] - engine_free
        if idle > 0:
            issued = op.get("args", {}).get("issued", op["ts"])
            # Idle from the engine's end to the issue is the host's; from the
            # issue to the start, the stream's.
            host_part = max(0.0, min(issued, op["ts"]) - engine_free)
            stream_part = idle - host_part
            for kind, part in (("host", host_part), ("stream", stream_part)):
                if part > 0:
                    gaps[kind].append((part, op["ts"], before["name"], op["name"]))
            if host_part > 0:
                lane = op.get("args", {}).get("thread")
                tid = lane + 1 if lane is not None else None
                why_host[tid] = why_host.get(tid, {})
                covered = 0.0
                for span_start, span_stop, why in spans.get(tid, []):
                    overlap = min(span_stop, engine_free + host_part) - max(span_start, engine_free)
                    if overlap > 0:
                        why_host[tid][why] = why_host[tid].get(why, 0.0) + overlap
                        covered += overlap
                why_host[tid]["(not on the lane)"] = why_host[tid].get("(not on the lane)", 0.0) + host_part - covered
        engine_free = max(engine_free, op["ts"] + op["dur"])
    span = end - start
    print(f"window: {kernels} kernels, {len(window)} compute-lane operations, {span / 1000:.2f} ms "
          f"(from {start / 1000:.2f} ms)")
    print(f"  compute busy   {busy / 1000:8.2f} ms  {busy / span:6.1%}")
    for kind, what in (("host", "waiting for the host to issue"), ("stream", "waiting on its stream")):
        total = sum(g[0] for g in gaps[kind])
        print(f"  idle, {kind:<7}{total / 1000:8.2f} ms  {total / span:6.1%}  {len(gaps[kind])} gaps ({what})")
    for tid, reasons in sorted(why_host.items(), key=lambda item: -sum(item[1].values())):
        name = lane_names.get(tid, "an unknown thread (no host lanes in this file)")
        print(f"  host gaps whose operation {name} issued:")
        for why, micros in sorted(reasons.items(), key=lambda item: -item[1]):
            if micros > 0.5:
                print(f"    {why:<20}{micros / 1000:8.2f} ms")
    for kind in ("host", "stream"):
        longest = sorted(gaps[kind], reverse=True)[:args.top]
        if longest:
            print(f"longest {kind} gaps:")
            for part, at, before, after in longest:
                print(f"  {part / 1000:7.3f} ms at {at / 1000:9.3f} ms  after {before}  before {after}")


if __name__ == "__main__":
    main()
