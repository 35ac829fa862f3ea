#!/usr/bin/env python3
"""scripts/three_cut_bound.py on a step solved by hand, and on random small
steps against scripts/timed_floor.py: the three cuts bound every schedule
from below, and the timed floor is the least wait of one, so the bound never
exceeds it. Runs the scripts with this Python, or Debian's (/usr/bin/python3)
where this one lacks numpy or scipy; exits 77 (skipped, for ctest) when
neither has them.

  three_cut_bound_test.py PATH/TO/three_cut_bound.py PATH/TO/timed_floor.py
"""
import json
import os
import random
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import MIB, expect, python_with, run, step_trace  # noqa: E402

THREE_CUTS, TIMED = sys.argv[1], sys.argv[2]
PYTHON = python_with("numpy, scipy.optimize, scipy.sparse")
LINK = 6.875  # bytes per ns both ways: what both scripts take where a trace records no link


def write(folder, name, step):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        json.dump(step, f)
    return path


def three_cuts(path):
    result = run(PYTHON, THREE_CUTS, path)
    found = re.search(r"three cuts ([\d.]+) ms", result.stdout)
    return (float(found.group(1)) if found else None), result


def timed(path):
    result = run(PYTHON, TIMED, path)
    found = re.search(r"timed floor ([\d.]+) ms", result.stdout)
    return (float(found.group(1)) if found else None), result


def main():
    if PYTHON is None:
        print("skipped: no numpy or scipy for", sys.executable, "or /usr/bin/python3")
        return 77
    copy_ms = 10 * MIB / LINK / 1e6
    with tempfile.TemporaryDirectory() as folder:
        # Two 10 MiB units, a used at operation 0 and b at 2 of four 1 ms
        # operations, 10 MiB of room: as 2 starts a is away. Cut at a's use
        # (0), at 2 and at a's next use (4): the step lasts at least
        # operation 0, then the longer of operation 1 and a's copy out, then
        # the longer of operations 2-3 and a's copy in: 1 + 1.525 + 2 ms.
        path = write(folder, "two.json", step_trace([10, 10], [[0], [], [1], []], 10, 1_000_000))
        bound, result = three_cuts(path)
        want = 1 + copy_ms + 2
        expect(bound is not None and abs(bound - want) < 0.006,
               f"the stretch before a's absence is charged its copy out: {want:.2f} ms ({bound})", result)
        # Random steps: never above the timed floor.
        rng = random.Random(20261128)
        for k in range(12):
            n, unit_count = rng.randint(4, 7), rng.randint(2, 4)
            units = [rng.choice([4, 8, 10, 16]) for _ in range(unit_count)]
            uses = [[] for _ in range(n)]
            for u in range(unit_count):
                for op in rng.sample(range(n), rng.randint(1, 2)):
                    uses[op].append(u)
            widest = max(sum(units[u] for u in touched) for touched in uses)
            budget = max(widest, sum(units) // 2)
            if budget >= sum(units):
                continue
            step = step_trace(units, uses, budget, rng.choice([300_000, 1_000_000, 3_000_000]))
            path = write(folder, f"random{k}.json", step)
            bound, result = three_cuts(path)
            floor, timed_result = timed(path)
            expect(bound is not None and floor is not None and bound <= floor + 0.011,
                   f"random step {k} ({n} operations, units {units} MiB, {budget} MiB of room): "
                   f"three cuts {bound} ms <= timed floor {floor} ms", result if bound is None else timed_result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
