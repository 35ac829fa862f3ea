#!/usr/bin/env python3
"""The least bytes any schedule must move each way per step, from a trace.

The program scheduler/least_bytes.cpp bounds the floor with (delay 0, no
margin), solved another way, and with --delay and --margin the same under
the pager's rules: a cross-check of the planner (docs/journal/2026-11-26-benchmarks.md,
"What the least bytes say"), not part of the runtime. From the step a run recorded (its trace's
schedule.profile, scheduler/profile_json.cpp), the fewest bytes that must
leave the device (and so come back) each step so that at every operation at
most the budget is resident, fractions of units allowed. Each gap between
two uses of a unit may be away from the operation `delay` + 1 after its
last use to the operation before its next: delay 1 is the scheduler's
model with no launch grace (the feed hears of an operation while it holds
its units), 1 + K with a grace of K operations, and 0 what only synchronous
eviction does (a unit gone before the next operation starts).

The problem is a covering linear program whose rows are consecutive ones,
so it is a minimum-cost flow: unrolled over --steps steps (the step wraps)
and solved with networkx's network simplex. A step's optimum repeated
covers the line with at most steps + 2 copies of each gap, so the line's
cost over steps + 2 is a lower bound on the step's least bytes; over steps,
what the line's average tends to as it grows. Both are printed.

usage: least_bytes.py TRACE [--budget MiB] [--delay N] [--margin] [--steps N]
needs: networkx (Debian: python3-networkx)
"""
import argparse
import json
import sys

MIB = 1 << 20


def profile_of(path):
    with open(path) as f:
        trace = json.load(f)
    schedule = trace.get("vgpumem", {}).get("schedule", trace)
    return schedule.get("profile", schedule), schedule.get("plan", {})


def step_parser(description):
    """The arguments every cross-check of a recorded step takes: TRACE, --budget MiB."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("trace")
    parser.add_argument("--budget", type=float, help="MiB (default: the recorded plan's budget)")
    return parser


def recorded_step(args, tool):
    """(profile, plan, budget in bytes) from step_parser's arguments; exits
    naming `tool` where the trace records no budget and none was given."""
    profile, plan = profile_of(args.trace)
    budget = int(args.budget * MIB) if args.budget is not None else plan.get("budget", 0)
    if budget <= 0:
        sys.exit(f"{tool}: no budget recorded in the trace; give --budget MiB")
    return profile, plan, budget


def links_of(plan):
    """Bytes per nanosecond to the host and to the device (GB/s): what the
    run measured, else the bench's scaled 55 GB/s."""
    return plan.get("link_to_host_gbps", 6.875), plan.get("link_to_device_gbps", 6.875)


def least_bytes(profile, budget, delay, steps):
    import networkx as nx

    units, ops = profile["units"], profile["ops"]
    period = len(ops)
    uses = {u: [] for u in range(len(units))}
    for i, op in enumerate(ops):
        for u in op[3]:
            uses[u].append(i)
    excess = max(0, sum(units) - budget)
    length = steps * period
    # Rows: at each operation t of the line, the bytes away >= excess. In
    # differences of consecutive rows each gap is an arc from its first
    # operation to the one after its last, and each row's surplus an arc
    # back one operation; costs in KiB (integers for the network simplex).
    graph = nx.DiGraph()
    for t in range(length + 1):
        here = excess if t < length else 0
        before = excess if t > 0 else 0
        graph.add_node(t, demand=-int(round((here - before) / 1024)))
    for t in range(length):
        graph.add_edge(t + 1, t, weight=0)
    arc = 0
    for u, at in uses.items():
        for i, last in enumerate(at):
            following = at[(i + 1) % len(at)] + (period if i + 1 == len(at) else 0)
            first, end = last + delay + 1, following - 1
            if end < first:
                continue
            for step in range(-1, steps + 1):
                lo, hi = max(first + step * period, 0), min(end + step * period, length - 1)
                if hi < lo:
                    continue
                middle = ("gap", arc)
                arc += 1
                graph.add_edge(lo, middle, weight=1, capacity=units[u] // 1024)
                graph.add_edge(middle, hi + 1, weight=0)
    try:
        cost, _ = nx.network_simplex(graph)
    except nx.NetworkXUnfeasible:
        return None
    return cost * 1024 / (steps + 2), cost * 1024 / steps


def main():
    parser = step_parser(__doc__.split("\n")[0])
    parser.add_argument("--delay", type=int, default=0, help="operations after a last use before a unit may be away (0)")
    parser.add_argument("--margin", action="store_true", help="keep the planner's margin below the budget")
    parser.add_argument("--steps", type=int, default=16, help="steps unrolled (16)")
    args = parser.parse_args()
    profile, _, budget = recorded_step(args, "least_bytes")
    if args.margin:
        budget -= max(budget // 33, 2 * MIB)
    result = least_bytes(profile, budget, args.delay, args.steps)
    head = (f"{len(profile['ops'])} operations, {sum(profile['units']) / MIB:.0f} MiB of units, "
            f"budget {budget / MIB:.1f} MiB, delay {args.delay}")
    if result is None:
        print(f"{head}: no schedule fits")
        return 1
    low, high = result
    print(f"{head}: least bytes each way a step between {low / MIB:.0f} and {high / MIB:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
