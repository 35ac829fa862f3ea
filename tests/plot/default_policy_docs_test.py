#!/usr/bin/env python3
"""The default paging policy, as the docs and the code's comments tell it:
`auto` with a cap (docs/configuration.md's reference says so), and no page
or comment calls `lru` the default, as three did after `auto` became it
(issue 46, item 11).

  default_policy_docs_test.py REPOSITORY_ROOT
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from plot_test_support import expect  # noqa: E402

ROOT = os.path.abspath(sys.argv[1])

# "the default policy `lru`", "the default `lru`", "`lru` (the default ...)",
# "lru, the default", and the architecture anchor "...policylru-the-default...".
LRU_AS_DEFAULT = re.compile(
    r"default\s+(policy\s+)?`?lru\b|\blru`?\s*(\(|,|—|-)\s*the\s+default|policylru-the-default",
    re.IGNORECASE)
SOURCES = (".md", ".cpp", ".h", ".py", ".sh", ".cmake", ".txt")
SKIPPED = {".git", "journal", "gpu-runs", "sim-runs", "images"}


def files():
    for directory, subdirectories, names in os.walk(ROOT):
        subdirectories[:] = [d for d in subdirectories if d not in SKIPPED and not d.startswith("build")]
        for name in names:
            if name.endswith(SOURCES) and name != os.path.basename(__file__):
                yield os.path.join(directory, name)


def main():
    claims = []
    for path in files():
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        # Sentences wrap across lines in the docs: look at the text with its
        # line breaks (and comment markers) folded into spaces.
        folded = re.sub(r"\s*\n\s*(//|#)?\s*", " ", text)
        for match in LRU_AS_DEFAULT.finditer(folded):
            context = folded[max(0, match.start() - 60):match.end() + 30]
            claims.append(f"{os.path.relpath(path, ROOT)}: ...{context}...")
    expect(not claims, "no page or comment calls lru the default policy:\n  " + "\n  ".join(claims))

    with open(os.path.join(ROOT, "docs", "configuration.md"), encoding="utf-8") as f:
        reference = f.read()
    section = reference.split("### `VGPUMEM_POLICY`", 1)[-1].split("\n### ", 1)[0]
    expect("* **Default:** `auto` when any cap is set" in section,
           "docs/configuration.md: VGPUMEM_POLICY's default is auto with a cap")
    print("default_policy_docs: all checks passed")


if __name__ == "__main__":
    main()
