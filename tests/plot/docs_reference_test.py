#!/usr/bin/env python3
"""The reference pages stay true to the code and to each other:

* docs/architecture.md's walkthroughs ("## Walkthrough: ..."): every step's
  `file:function` names a file that exists and a function defined there
  (`Class::method`: its qualified definition, or its declaration inside the
  class; a hook: its VGPUMEM_HOOK_DEFINE);
* every `Note [...]` the page names is a `// Note [...]` in some source file;
* docs/benchmarks.md has at most 300 lines, and every table there has a
  command (a backticked or fenced command line) in the text before or after
  it, within its section;
* every link to a page's anchor (`page.md#anchor`, in the pages and in the
  code's comments) leads to a heading of that page.

  docs_reference_test.py REPOSITORY_ROOT [ARCHITECTURE_PAGE [BENCHMARKS_PAGE]]

The optional pages stand in for the repository's own (to watch a check fail
on a copy with a renamed function or a table without its command).
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from plot_test_support import expect  # noqa: E402

ROOT = os.path.abspath(sys.argv[1])
ARCHITECTURE = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "docs", "architecture.md")
BENCHMARKS = sys.argv[3] if len(sys.argv) > 3 else os.path.join(ROOT, "docs", "benchmarks.md")
SOURCES = (".h", ".cpp", ".S", ".def", ".cu")
SKIPPED = {".git", "gpu-runs", "sim-runs", "images"}
MAX_BENCHMARK_LINES = 300


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def walk(extensions):
    for directory, subdirectories, names in os.walk(ROOT):
        subdirectories[:] = [d for d in subdirectories
                             if d not in SKIPPED and not d.startswith("build") and not d.startswith(".")]
        for name in names:
            if name.endswith(extensions):
                yield os.path.join(directory, name)


# ---- file:function ------------------------------------------------------------------------

REFERENCE = re.compile(r"`((?:[\w\-]+/)+[\w\-]+\.(?:cpp|h|S|cu)):([~\w]+(?:::[~\w]+)*)`")
NOT_A_TYPE = {"return", "if", "else", "while", "for", "case", "throw", "delete", "new", "co_return", "do",
              "switch", "goto", "sizeof"}


def class_bodies(text, name):
    """The text inside each `class name { ... }` / `struct name { ... }`."""
    for match in re.finditer(r"\b(?:class|struct)\s+%s\b[^;{]*\{" % re.escape(name), text):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        yield text[match.end():i]


def declares(line, name):
    """A declaration or definition of `name` on this line: a return type (or
    nothing, for a constructor or destructor) and then the name and '('."""
    match = re.match(r"^\s*((?:\[\[[^\]]*\]\]\s*)?(?:[\w:<>,\*&\[\]]+\s+)*)[\*&]?%s\s*\(" % re.escape(name), line)
    if not match:
        return False
    words = match.group(1).split()
    return not (words and words[0] in NOT_A_TYPE) and "=" not in match.group(1)


def defines(text, qualified):
    parts = qualified.split("::")
    name = parts[-1]
    hook = re.search(r"VGPUMEM_(?:HOOK_DEFINE|FORWARDING_HOOK)\(\s*%s\s*," % re.escape(name), text)
    if len(parts) == 1:
        if hook:
            return True
        # At the start of a line (namespace bodies are not indented): a type, then the name.
        return any(not line[:1].isspace() and declares(line, name) and "::" + name not in line
                   for line in text.split("\n"))
    owner = parts[-2]
    if re.search(r"^(?!\s)(?!return\b)[^\n;]*?\b%s::%s\s*\(" % (re.escape(owner), re.escape(name)), text, re.M):
        return True
    return any(declares(line, name) for body in class_bodies(text, owner) for line in body.split("\n"))


def walkthroughs(page):
    """The text of each '## Walkthrough' section."""
    sections = re.split(r"^## ", page, flags=re.M)
    return [s for s in sections if s.startswith("Walkthrough")]


def check_walkthroughs(page):
    sections = walkthroughs(page)
    expect(len(sections) >= 2, f"{ARCHITECTURE} has the two walkthroughs (found {len(sections)})")
    problems, checked = [], 0
    for section in sections:
        for path, function in REFERENCE.findall(section):
            checked += 1
            full = os.path.join(ROOT, path)
            if not os.path.isfile(full):
                problems.append(f"{path}:{function}: no such file")
            elif not defines(read(full), function):
                problems.append(f"{path}:{function}: no definition of {function} there")
    expect(checked >= 40, f"the walkthroughs name files and functions ({checked} read)")
    expect(not problems, "every step of the walkthroughs opens:\n  " + "\n  ".join(problems))
    return checked


# ---- Note [...] ---------------------------------------------------------------------------

def check_notes(page):
    """The notes the architecture page names, and those the other pages name."""
    docs = os.path.join(ROOT, "docs")
    others = [os.path.join(docs, name) for name in sorted(os.listdir(docs)) if name.endswith(".md")]
    others = [p for p in others if os.path.basename(p) != "architecture.md"] + [os.path.join(ROOT, "README.md")]
    folded = re.sub(r"\s+", " ", "\n".join([page] + [read(p) for p in others if os.path.isfile(p)]))
    named = {n for n in re.findall(r"Note \[([^\]]+)\]", folded) if re.search(r"[A-Za-z]", n)}
    defined = set()
    for path in walk(SOURCES):
        defined.update(m.strip() for m in re.findall(r"^\s*//\s*Note \[([^\]]+)\]\s*$", read(path), re.M))
    missing = sorted(named - defined)
    expect(len(named) >= 20, f"{ARCHITECTURE} names the notes ({len(named)})")
    expect(not missing, "every note the page names is a // Note [...] in the code:\n  " + "\n  ".join(missing))
    return len(named)


# ---- the benchmarks page ------------------------------------------------------------------

ASSIGNMENT = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_]*=(?:\"[^\"]*\"|'[^']*'|\S*)\s+")
PROGRAM = re.compile(r"^(?:build/|scripts/|\.ci/|python3\b|/usr/bin/python3\b|vgpumem\b|ctest\b|cmake\b|valgrind\b|"
                     r"bash\b|time\b|perf\b)")


def is_command(text):
    text = text.strip()
    while True:
        stripped = ASSIGNMENT.sub("", text, count=1)
        if stripped == text:
            break
        text = stripped
    return bool(PROGRAM.match(text))


def has_command(text):
    spans = re.findall(r"```[^\n]*\n(.*?)```", text, re.S) + re.findall(r"`([^`\n]+(?:\n[^`\n]+)*)`", text)
    return any(is_command(line) for span in spans for line in span.split("\n"))


def check_benchmarks(path):
    lines = read(path).split("\n")
    count = len(lines) - (1 if lines and lines[-1] == "" else 0)
    expect(count <= MAX_BENCHMARK_LINES, f"{path} has {count} lines, at most {MAX_BENCHMARK_LINES}")
    # Groups of tables (tables separated by blank lines only are one group),
    # and the text around each within its section.
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].startswith("|"):
            start = i
            while i < len(lines) and (lines[i].startswith("|") or
                                      (not lines[i].strip() and i + 1 < len(lines) and
                                       lines[i + 1].startswith("|"))):
                i += 1
            blocks.append((start, i))
        else:
            i += 1
    expect(blocks, f"{path} has tables")
    bare = []
    for n, (start, end) in enumerate(blocks):
        before_from = blocks[n - 1][1] if n > 0 else 0
        after_to = blocks[n + 1][0] if n + 1 < len(blocks) else len(lines)
        before = lines[before_from:start]
        for k in range(len(before) - 1, -1, -1):
            if before[k].startswith("#"):
                before = before[k:]
                break
        after = lines[end:after_to]
        for k, line in enumerate(after):
            if line.startswith("#"):
                after = after[:k]
                break
        if not (has_command("\n".join(before)) or has_command("\n".join(after))):
            bare.append(f"{os.path.basename(path)}:{start + 1}: {lines[start][:60]}")
    expect(not bare, "every table has its command before or after it:\n  " + "\n  ".join(bare))
    return len(blocks)


# ---- anchors ------------------------------------------------------------------------------

def slug(heading):
    heading = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return heading.replace(" ", "-")


def anchors(page_path, cache={}):
    if page_path not in cache:
        found, seen = set(), {}
        in_fence = False
        for line in read(page_path).split("\n"):
            if line.startswith("```"):
                in_fence = not in_fence
            if in_fence:
                continue
            match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if match:
                base = slug(match.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
        cache[page_path] = found
    return cache[page_path]


def check_anchors():
    broken, checked = [], 0
    pages = list(walk((".md",)))
    for page in pages:
        text = read(page)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            path, _, anchor = target.partition("#")
            if not anchor or re.match(r"[a-z]+:", path) or not (path == "" or path.endswith(".md")):
                continue
            destination = page if path == "" else os.path.normpath(os.path.join(os.path.dirname(page), path))
            checked += 1
            if not os.path.isfile(destination) or anchor not in anchors(destination):
                broken.append(f"{os.path.relpath(page, ROOT)}: {target}")
    # The code's comments: docs/<page>.md#<anchor>.
    for source in walk(SOURCES + (".py", ".sh", ".cmake", ".txt")):
        if os.path.abspath(source) == os.path.abspath(__file__):
            continue
        for path, anchor in re.findall(r"\b(docs/[\w/\-]+\.md)#([\w\-]+)", read(source)):
            checked += 1
            destination = os.path.join(ROOT, path)
            if not os.path.isfile(destination) or anchor not in anchors(destination):
                broken.append(f"{os.path.relpath(source, ROOT)}: {path}#{anchor}")
    expect(checked > 20, f"links to anchors read ({checked})")
    expect(not broken, "every link to an anchor leads to a heading:\n  " + "\n  ".join(broken))
    return checked


def main():
    page = read(ARCHITECTURE)
    steps = check_walkthroughs(page)
    notes = check_notes(page)
    tables = check_benchmarks(BENCHMARKS)
    links = check_anchors()
    print(f"docs_reference: {steps} walkthrough steps, {notes} notes, {tables} benchmark tables, {links} anchored "
          "links: all checks passed")


if __name__ == "__main__":
    main()
