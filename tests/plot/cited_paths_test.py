#!/usr/bin/env python3
"""Every file of the repository that the docs or the code's comments name
exists: a path like `vmm/pager.h` or tests/unit/lock_calendar_test.cpp, from
the repository's root or from the naming file's own folder. A comment that
sends a reader to a test that was renamed, or a page to a script that went,
is caught here (interpose/hooked_functions.def named a hook-table test that
never existed; the checks are static_asserts in interpose/hook_table.cpp).

  cited_paths_test.py REPOSITORY_ROOT
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from plot_test_support import expect  # noqa: E402

ROOT = os.path.abspath(sys.argv[1])
TOP = ("tests", "vmm", "scheduler", "shim", "interpose", "cli", "common", "trace", "cupti", "scripts", "cmake",
       "python", "docs", "bench", "benchmarks")
EXTENSIONS = ("cpp", "h", "md", "py", "sh", "cmake", "cu", "def", "txt", "map", "S")
# A path under a top folder, with an extension; not inside a web address or a
# longer path (no letter, digit, '.', '/' or '-' just before it).
CITED = re.compile(r"(?<![A-Za-z0-9./\-])((?:%s)/[A-Za-z0-9_/\-]+\.(?:%s))\b" % ("|".join(TOP), "|".join(EXTENSIONS)))
READ = (".md", ".cpp", ".h", ".py", ".sh", ".cmake", ".txt", ".def", ".cu")
SKIPPED = {".git", "gpu-runs", "sim-runs", "images", "journal"}


def files():
    for directory, subdirectories, names in os.walk(ROOT):
        subdirectories[:] = [d for d in subdirectories
                             if d not in SKIPPED and not d.startswith("build") and not d.startswith(".")]
        for name in names:
            if name.endswith(READ):
                yield os.path.join(directory, name)


def main():
    missing = []
    cited = 0
    for path in files():
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for match in CITED.finditer(text):
            target = match.group(1)
            cited += 1
            if "*" in target or "%" in target:
                continue
            here = os.path.dirname(path)
            if not (os.path.exists(os.path.join(ROOT, target)) or os.path.exists(os.path.join(here, target))):
                line = text.count("\n", 0, match.start()) + 1
                missing.append(f"{os.path.relpath(path, ROOT)}:{line}: {target}")
    expect(cited > 100, f"the docs and comments name files ({cited} citations read)")
    expect(not missing, "every file named exists:\n  " + "\n  ".join(missing))
    print("cited_paths: all checks passed")


if __name__ == "__main__":
    main()
