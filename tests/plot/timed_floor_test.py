#!/usr/bin/env python3
"""scripts/timed_floor.py on tiny synthetic steps whose least wait is known
by hand: no copy out before a gap's first use has ended, copies in each
interval bounded by the link, a gap overwritten at its end free, room to
spare waiting for nothing. Runs the script with this Python, or Debian's
(/usr/bin/python3, python3-scipy) where this one lacks numpy or scipy;
exits 77 (skipped, for ctest) when neither has them.

  timed_floor_test.py PATH/TO/timed_floor.py
"""
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import MIB, expect, python_with, run, step_trace as trace  # noqa: E402

SCRIPT = sys.argv[1]
LINK = 6.875  # bytes per ns both ways: what timed_floor.py takes where a trace records no link


def floor_of(folder, name, step):
    """(compute, least wait, timed floor) in ms, as printed, and the run."""
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        json.dump(step, f)
    result = run(PYTHON, SCRIPT, path)
    found = re.search(r"compute ([\d.]+) ms \+ least wait ([\d.]+) ms = timed floor ([\d.]+) ms", result.stdout)
    return (tuple(float(x) for x in found.groups()) if found else None), result


PYTHON = python_with("numpy, scipy.optimize, scipy.sparse")


def main():
    if PYTHON is None:
        print("skipped: no numpy or scipy for", sys.executable, "or /usr/bin/python3")
        return 77
    copy_ms = 10 * MIB / LINK / 1e6  # one 10 MiB unit across the link: 1.525 ms
    with tempfile.TemporaryDirectory() as folder:
        # Two 10 MiB units, a used at operation 0 and b at 2 of four 1 ms
        # operations, 10 MiB of room: b is away as 0 starts, a as 2 starts.
        # a goes out after 0 ends and before 2 starts: in the wait after 0,
        # operation 1 and the wait after 1, so those waits last 0.525 ms;
        # b's copy out likewise after 2. The copies in each have two
        # operations (a's: 2 and 3), more than they need.
        uses = [[0], [], [1], []]
        got, result = floor_of(folder, "two.json", trace([10, 10], uses, 10, 1_000_000))
        want = 2 * (copy_ms - 1)
        expect(result.returncode == 0 and got is not None, "a floor is printed", result)
        expect(abs(got[0] - 4.0) < 0.006 and abs(got[1] - want) < 0.006 and abs(got[2] - 4 - want) < 0.006,
               f"each copy out waits for its unit's use to end: least wait {want:.2f} ms ({got})", result)
        # With 2 ms operations each copy fits inside the one operation between
        # a use and the next unit's: no wait at all.
        got, result = floor_of(folder, "long.json", trace([10, 10], uses, 10, 2_000_000))
        expect(got is not None and got[1] < 0.006 and abs(got[2] - 8.0) < 0.006,
               f"copies that fit under compute wait for nothing ({got})", result)
        # b's next use (operation 2) overwrites it whole: its gap costs no
        # copy, only a's waits remain.
        got, result = floor_of(folder, "overwritten.json", trace([10, 10], uses, 10, 1_000_000, [(2, 1)]))
        want = copy_ms - 1
        expect(got is not None and abs(got[1] - want) < 0.006,
               f"a gap overwritten at its end is away for free: least wait {want:.2f} ms ({got})", result)
        # Room for both: nothing moves.
        got, result = floor_of(folder, "room.json", trace([10, 10], uses, 20, 1_000_000))
        expect(got is not None and got[1] < 0.006 and abs(got[2] - 4.0) < 0.006,
               f"a step that fits its budget waits for nothing ({got})", result)
        # Three 10 MiB units used at 0, 2 and 4 of six 1 ms operations, room
        # for one: two are away at every start. At 1's start a has had only
        # the wait after 0 to leave (a use may write its unit), so b is
        # still away and comes back during 1 and the wait after it: that
        # wait lasts 0.525 ms, which also lets a's copy out (the wait after
        # 0, operation 1, the wait after 1) end before 2 starts. The same
        # at 3 and 5: 3 x 0.525 ms. Both engines work at once.
        uses = [[0], [], [1], [], [2], []]
        got, result = floor_of(folder, "three.json", trace([10, 10, 10], uses, 10, 1_000_000))
        want = 3 * (copy_ms - 1)
        expect(got is not None and abs(got[1] - want) < 0.006,
               f"a copy in and a copy out share a wait, one engine each: {want:.2f} ms ({got})", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
