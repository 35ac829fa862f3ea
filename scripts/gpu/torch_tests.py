"""PyTorch's own CUDA tests as a real client (issue 16, item 6):
test/test_cuda.py from the PyTorch source that matches the installed wheel,
run without the shim, under it with no cap, and under it with a cap and
paging; every test's outcome compared with the run without the shim.

The test file is PyTorch's, not this project's, and is not in this
repository: put it in BUILD/pytorch-tests/ (with any test/*.py it imports)
before carrying BUILD to the GPU machine. `torch.testing._internal`, which
it imports, ships with the wheel. VGPUMEM_SUITE_TORCH_TESTS picks test
classes or names (comma-separated, as unittest takes them, e.g.
"TestCuda,TestCudaMallocAsync") where a whole file does not fit the time.

The runs are one at a time: several of these tests read the device's free
memory, which another process on the GPU would change.
"""
import os
import re

from suite_steps import PY

CAP = "32GiB"
OUTCOMES = ("ok", "FAIL", "ERROR", "skipped", "expected failure", "unexpected success")
# unittest -v: "test_name (module.Class.test_name) ... " then the outcome, on the same line unless the test
# printed something in between.
HEADER = re.compile(r"^(test\w*) \(([\w.]+)\)(?:\n[^\n]*)?? \.\.\. ", re.M)
OUTCOME = re.compile(r"\b(ok|FAIL|ERROR|skipped|expected failure|unexpected success)\b")
RAN = re.compile(r"^Ran (\d+) tests? in ([\d.]+)s", re.M)


def outcomes(text):
    """{test id: outcome} from unittest's verbose output."""
    found = {}
    headers = list(HEADER.finditer(text))
    for i, h in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        m = OUTCOME.search(text, h.end(), end)
        cls = h.group(2)
        test_id = cls if cls.endswith("." + h.group(1)) else f"{cls}.{h.group(1)}"
        found[test_id] = m.group(1) if m else "no outcome (the process ended in it)"
    return found


def digest(stdout, stderr):
    text = stderr + "\n" + stdout
    tests = outcomes(text)
    counts = {}
    for outcome in tests.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    ran = RAN.search(text)
    return {"tests": tests, "counts": counts, "ran": int(ran.group(1)) if ran else None,
            "ran_seconds": float(ran.group(2)) if ran else None}


def runs():
    """(label, env, shim) of the three runs, the one without the shim first."""
    return (("torchtests-noshim", {}, False),
            ("torchtests-shim-nocap", {}, True),
            (f"torchtests-cap{CAP.lower()}-auto", {"VGPUMEM_LIMIT": CAP, "VGPUMEM_POLICY": "auto"}, True))


def part_torchtests(suite):
    folder = os.path.join(suite.build, "pytorch-tests")
    test_file = os.path.join(folder, "test_cuda.py")
    if not os.path.exists(test_file):
        suite.results["torchtests"] = {"skipped": f"{test_file} is absent: bring PyTorch's test/test_cuda.py of the "
                                                  "installed version over with the build"}
        return
    select = [t for t in os.environ.get("VGPUMEM_SUITE_TORCH_TESTS", "").split(",") if t]
    baseline = None
    for label, env, shim in runs():
        entry = suite.run(label, [PY, test_file, "-v"] + select, env, 400, shim=shim, trace=shim, digest=digest,
                          cwd=folder)
        if entry is None:
            break
        if baseline is None:
            baseline = entry
            continue
        mine, theirs = entry.get("tests", {}), baseline.get("tests", {})
        entry["differences"] = {t: {"without_shim": theirs.get(t), "here": mine.get(t)}
                                for t in sorted(set(mine) | set(theirs)) if mine.get(t) != theirs.get(t)}
    suite.save()


def report_lines(results):
    rows = []
    for label, e in results.items():
        if "tests" not in e:
            continue
        if not rows:
            rows += ["| run | rc | tests | outcomes | differences from the run without the shim |", "|---|---|---|---|---|"]
        diff = e.get("differences")
        shown = "-" if diff is None else (", ".join(f"{t}: {d['without_shim']} → {d['here']}"
                                                     for t, d in list(diff.items())[:12]) or "none")
        if diff and len(diff) > 12:
            shown += f" (and {len(diff) - 12} more)"
        rows.append(f"| {label} | {e.get('rc')} | {e.get('ran')} | {e.get('counts')} | {shown} |")
    return rows
