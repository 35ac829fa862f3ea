#!/usr/bin/env python3
"""A third cut for the floor, checked on a recorded step: does it raise it?

The floor (scheduler/step_floor.cpp, docs/workloads.md "The floor") cuts
the step at an operation p and a later q and charges each stretch the larger
of its compute and what must cross the link in it. This tries one more
constraint, sound for any schedule that knows no more than the shim does
(every use may write its unit, so no copy out starts before the last use):
a unit away at operation j (none of its bytes on the device as j starts)
went out whole between the end of its last use and j's start, and comes in
whole between j's start and its next use's start. For every j and cuts w < j
< r within one step, the step lasts at least

    compute(r .. w, one step on)
    + max(compute(w+1 .. j-1), out / link to host)
    + max(compute(j .. r-1),   in  / link to device)

where out are the bytes of the units away at j last used at or after w, in
those next used at or before r (a next use that overwrites the unit whole
needs neither copy), minimised over which units (fractions allowed) make up
the bytes that must be away at j. With r = w + one step it is the two-cut
bound; w and r apart, a short stretch before j can be charged the copies out
of what its last operations used, which the two-cut bound cannot.

Measured 2026-11-28 on VGG-16's recorded steps (bench at --scale 8): 91.8 ms
at half its peak, under the floor's 93.2 ms (the least bytes' bound); at a
third 119.6 ms on a profile that also counts what the grace keeps (which
can only raise it), under the floor's 133.9: the third cut raises nothing
there. Not part of the runtime; O(n^3) in the step's operations (minutes
for VGG-16's 107).

usage: three_cut_bound.py TRACE [--budget MiB]
needs: numpy (Debian: python3-numpy)
"""

import numpy as np

from least_bytes import links_of, recorded_step, step_parser  # beside this script


def cheapest(rest_bytes, out_only, in_only, both, c1, c2, to_host, to_device):
    """Least max(c1, out/to_host) + max(c2, in/to_device) taking rest_bytes
    from units that count out only, in only, or both (fractions allowed)."""

    def cost(x_both):
        need = rest_bytes - x_both
        x_out = min(out_only, max(0.0, c1 * to_host - x_both))  # free while the stretch's compute hides it
        x_in = min(in_only, max(0.0, c2 * to_device - x_both))
        need -= x_out + x_in
        if need > 0:
            for kind, room, _ in sorted((("out", out_only - x_out, 1 / to_host), ("in", in_only - x_in, 1 / to_device)),
                                        key=lambda t: t[2]):
                take = min(room, need)
                need -= take
                if kind == "out":
                    x_out += take
                else:
                    x_in += take
            if need > 1e-6:
                return float("inf")
        return max(c1, (x_out + x_both) / to_host) + max(c2, (x_in + x_both) / to_device)

    # Feasible from where the one-way units no longer suffice; convex there
    # (a convex cost minimised over the rest), so a ternary search finds it.
    lo = max(0.0, rest_bytes - out_only - in_only)
    hi = min(both, rest_bytes)
    if lo > hi + 1e-6:
        return float("inf")
    first, last = lo, hi
    for _ in range(100):
        a, b = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        if cost(a) <= cost(b):
            hi = b
        else:
            lo = a
    return min(cost(first), cost(last), cost((lo + hi) / 2))


def three_cut_bound(profile, budget, to_host, to_device):
    units = np.array(profile["units"], dtype=np.float64)
    ops = profile["ops"]
    n = len(ops)
    durations = np.array([op[0] for op in ops], dtype=np.float64)
    compute = durations.sum()
    prefix = np.concatenate([[0.0], np.cumsum(np.concatenate([durations] * 3))])
    overwrites = {(op, unit) for op, unit in profile.get("overwrites", [])}
    uses = [[] for _ in units]
    for i, op in enumerate(ops):
        for u in op[3]:
            uses[u].append(i)
    must_be_away = units.sum() - budget
    best, where = compute, None
    if must_be_away <= 0:
        return best, where
    for j in range(n):
        here = set(ops[j][3])
        grid = np.zeros((n + 1, n + 1))  # bytes by (operations back to the last use, forward to the next)
        free = 0.0
        for u, at in enumerate(uses):
            if u in here or not at:
                continue
            last = max((a for a in at if a < j), default=max(at) - n)
            following = min((a for a in at if a > j), default=min(at) + n)
            if (following % n, u) in overwrites:
                free += units[u]  # dead until overwritten: dropped, no copy either way
            else:
                grid[j - last, following - j] += units[u]
        if grid.sum() + free < must_be_away - 1e-9:
            return float("inf"), ("one operation's units exceed the budget", j)
        both_cum = grid.cumsum(0).cumsum(1)
        back_cum, forward_cum, total = grid.sum(1).cumsum(), grid.sum(0).cumsum(), grid.sum()
        for back in range(1, n):  # w = j - back
            c1 = prefix[j + n] - prefix[j + n - back + 1]
            for forward in range(1, n - back + 1):  # r = j + forward <= w + n
                c2 = prefix[j + n + forward] - prefix[j + n]
                both = both_cum[back, forward]
                out_only, in_only = back_cum[back] - both, forward_cum[forward] - both
                rest = must_be_away - (total - both - out_only - in_only + free)
                stretches = c1 + c2 if rest <= 0 else cheapest(rest, out_only, in_only, both, c1, c2, to_host, to_device)
                value = compute - c1 - c2 + stretches
                if value > best:
                    best, where = value, {"j": j, "w": j - back, "r": j + forward}
    return best, where


def main():
    args = step_parser(__doc__.splitlines()[0]).parse_args()
    profile, plan, budget = recorded_step(args, "three_cut_bound")
    to_host, to_device = links_of(plan)
    bound, where = three_cut_bound(profile, budget, to_host, to_device)
    print(f"compute {sum(op[0] for op in profile['ops']) / 1e6:.2f} ms, three cuts {bound / 1e6:.2f} ms, "
          f"the plan's floor {plan.get('floor_ns', 0) / 1e6:.2f} ms; at {where}")


if __name__ == "__main__":
    main()
