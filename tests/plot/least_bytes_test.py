#!/usr/bin/env python3
"""scripts/least_bytes.py on tiny synthetic steps whose least bytes are
known by hand: the bound brackets the answer, a grace that leaves a use
uncovered fits nothing, and a budget below one operation's units fits
nothing. Exits 77 (skipped, for ctest) when this Python lacks networkx.

  least_bytes_test.py PATH/TO/least_bytes.py
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_test_support import expect, run, step_trace as trace  # noqa: E402

SCRIPT = sys.argv[1]


def bracket(result):
    found = re.search(r"between (\d+) and (\d+) MiB", result.stdout)
    return (int(found.group(1)), int(found.group(2))) if found else None


def main():
    if subprocess.run([sys.executable, "-c", "import networkx"], capture_output=True).returncode != 0:
        print("skipped: no networkx for", sys.executable)
        return 77
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")
        # Two 10 MiB units, a used at operation 0 and b at 2 of four, 10 MiB
        # of room: one of them is away at every operation. At 0 only b can
        # be (a is in use), at 2 only a: both leave once a step, 20 MiB.
        with open(path, "w") as f:
            json.dump(trace([10, 10], [[0], [], [1], []], 10), f)
        result = run(sys.executable, SCRIPT, path, "--delay", "0", "--steps", "16")
        expect(result.returncode == 0, "two units, one away at a time: a schedule fits", result)
        low_high = bracket(result)
        expect(low_high is not None and low_high[0] <= 20 <= low_high[1] and low_high[1] - low_high[0] <= 3,
               f"the least bytes a step, 20 MiB, within the bracket printed ({low_high})", result)
        # Three operations, a used at 0 and b at 1: at 0 only b can be away,
        # and only if it stays away through the operation before its next
        # use (op 0 of the next step, 2 after its last).
        tight = os.path.join(folder, "tight.json")
        with open(tight, "w") as f:
            json.dump(trace([10, 10], [[0], [1], []], 10), f)
        result = run(sys.executable, SCRIPT, tight, "--delay", "0", "--steps", "16")
        low_high = bracket(result)
        expect(result.returncode == 0 and low_high is not None and low_high[0] <= 20 <= low_high[1],
               f"away up to the operation before the next use, round the step: 20 MiB ({low_high})", result)
        # With a grace of two operations, a is away only at 3 and b only at
        # 1: nothing is away at 0 and 2.
        result = run(sys.executable, SCRIPT, path, "--delay", "2")
        expect(result.returncode == 1 and "no schedule fits" in result.stdout,
               "a delay that leaves an operation uncovered: no schedule fits", result)
        # The budget given on the command line, below a's own 10 MiB.
        result = run(sys.executable, SCRIPT, path, "--budget", "5")
        expect(result.returncode == 1 and "no schedule fits" in result.stdout,
               "a budget under one operation's units: no schedule fits", result)
        # The planner's margin (3 %, at least 2 MiB) taken off the budget.
        result = run(sys.executable, SCRIPT, path, "--delay", "0", "--margin")
        expect(result.returncode == 1 and "budget 8.0 MiB" in result.stdout,
               "the margin comes off the budget (10 MiB less 2: a's 10 no longer fits)", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
