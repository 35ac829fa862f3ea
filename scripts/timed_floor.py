#!/usr/bin/env python3
"""A floor with the copies' times in it: a linear program over the step's timeline.

The floor (scheduler/step_floor.cpp, docs/workloads.md "The floor") is the
larger of two bounds that each see part of the timing: the two-cut bound
(what must cross in a stretch against that stretch's compute) and the least
bytes (what must cross at all, against the whole step). This one sees all of
it at once. The step's operations run one after another, operation i for its
recorded duration d_i, then a wait w_i >= 0 before the next; the step lasts
the sum of both. For each gap of a unit between two uses, the bytes away at
the start of each operation inside it went out after the gap's first use
ended (the shim cannot tell a read from a write, so no copy out starts
before) and before that start, and come back after it and before the next
use starts; a gap whose next use overwrites the unit whole is away for free.
In each operation and each wait, each direction's engine carries at most its
link's bandwidth times the interval's length. At the start of every
operation at most the budget is on the device. Fractions of units allowed;
the least total wait is a linear program, and compute plus that wait is a
lower bound on any schedule's step under these rules.

Assumes, as the floor does, that the step's units live through the whole
step, and that its operations run one at a time (one stream, as the layered
trainer's). A cross-check for now (docs/workloads.md, "The floor": the copies'
times), not what `vgpumem bench` prints.

usage: timed_floor.py TRACE [--budget MiB]
needs: numpy, scipy >= 1.6 (HiGHS) (Debian: python3-scipy)
"""
import time

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from least_bytes import links_of, recorded_step, step_parser  # beside this script


class Program:
    """Rows of a sparse linear program, built a row at a time."""

    def __init__(self):
        self.columns = 0
        self.upper = {}
        self.inequalities, self.inequality_bounds = [], []  # row . x <= bound
        self.equalities = []  # row . x == 0

    def variables(self, count, upper=None):
        first = self.columns
        self.columns += count
        if upper is not None:
            for k in range(first, self.columns):
                self.upper[k] = upper
        return list(range(first, self.columns))

    def matrix(self, rows):
        r, c, v = [], [], []
        for index, row in enumerate(rows):
            for column, value in row.items():
                r.append(index)
                c.append(column)
                v.append(value)
        return coo_matrix((v, (r, c)), shape=(len(rows), self.columns)).tocsr()


def timed_floor(profile, budget, to_host, to_device):
    """Returns (the least total wait in ns, the waits after each operation)."""
    units = [float(b) for b in profile["units"]]
    ops = profile["ops"]
    n = len(ops)
    durations = [float(op[0]) for op in ops]
    overwrites = {(op, unit) for op, unit in profile.get("overwrites", [])}
    uses = {}
    for i, op in enumerate(ops):
        for u in op[3]:
            uses.setdefault(u, []).append(i)
    must_be_away = sum(units[u] for u in uses) - budget
    lp = Program()
    waits = lp.variables(n)
    # Intervals of the timeline: 2i is operation i running, 2i + 1 the wait after it.
    out_of = [dict() for _ in range(2 * n)]
    in_to = [dict() for _ in range(2 * n)]
    away_at = [dict() for _ in range(n)]
    for u, at in uses.items():
        size = units[u]
        for first, following in zip(at, at[1:] + [at[0] + n]):
            inside = following - first - 1  # operations strictly inside the gap
            if inside <= 0:
                continue
            away = lp.variables(inside, upper=size)  # bytes away as each starts
            for t in range(inside):
                away_at[(first + 1 + t) % n][away[t]] = 1.0
            if (following % n, u) in overwrites:
                continue
            # Copies in each interval of the gap: the wait after `first`, then
            # each operation inside and the wait after it.
            outs, ins = lp.variables(2 * inside + 1), lp.variables(2 * inside + 1)
            for m in range(2 * inside + 1):
                interval = (2 * first + 1 + m) % (2 * n)
                out_of[interval][outs[m]] = 1.0
                in_to[interval][ins[m]] = 1.0
            # gone[t]: out before operation t starts; back[t]: in from its start on.
            gone, back = lp.variables(inside), lp.variables(inside)
            for t in range(inside):
                row = {gone[t]: 1.0, outs[2 * t]: -1.0}
                if t > 0:
                    row[gone[t - 1]] = -1.0
                    row[outs[2 * t - 1]] = -1.0
                lp.equalities.append(row)
                row = {back[t]: 1.0, ins[2 * t + 1]: -1.0, ins[2 * t + 2]: -1.0}
                if t + 1 < inside:
                    row[back[t + 1]] = -1.0
                lp.equalities.append(row)
                lp.inequalities += [{away[t]: 1.0, gone[t]: -1.0}, {away[t]: 1.0, back[t]: -1.0}]
                lp.inequality_bounds += [0.0, 0.0]
    for interval in range(2 * n):
        op = interval // 2
        for copies, bandwidth in ((out_of[interval], to_host), (in_to[interval], to_device)):
            if not copies:
                continue
            row = dict(copies)
            if interval % 2 == 0:
                bound = bandwidth * durations[op]
            else:
                row[waits[op]] = -bandwidth
                bound = 0.0
            lp.inequalities.append(row)
            lp.inequality_bounds.append(bound)
    for op in range(n):
        lp.inequalities.append({column: -1.0 for column in away_at[op]})
        lp.inequality_bounds.append(-must_be_away)
    cost = np.zeros(lp.columns)
    cost[waits] = 1.0
    result = linprog(cost, A_ub=lp.matrix(lp.inequalities), b_ub=np.array(lp.inequality_bounds),
                     A_eq=lp.matrix(lp.equalities), b_eq=np.zeros(len(lp.equalities)),
                     bounds=[(0, lp.upper.get(k)) for k in range(lp.columns)], method="highs-ipm")
    if result.status != 0:
        raise SystemExit(f"timed_floor: no solution: {result.message}")
    return result.fun, [result.x[w] for w in waits], lp.columns


def main():
    args = step_parser(__doc__.splitlines()[0]).parse_args()
    profile, plan, budget = recorded_step(args, "timed_floor")
    to_host, to_device = links_of(plan)
    started = time.time()
    wait, waits, columns = timed_floor(profile, budget, to_host, to_device)
    compute = sum(op[0] for op in profile["ops"])
    longest = sorted(range(len(waits)), key=lambda k: -waits[k])[:5]
    print(f"compute {compute / 1e6:.2f} ms + least wait {wait / 1e6:.2f} ms = timed floor {(compute + wait) / 1e6:.2f} ms "
          f"(the trace's floor {plan.get('floor_ns', 0) / 1e6:.2f} ms); {columns} variables, "
          f"{time.time() - started:.0f} s; longest waits after operations "
          + ", ".join(f"{k} ({waits[k] / 1e6:.2f} ms)" for k in longest))


if __name__ == "__main__":
    main()
