"""What the scripts' tests share: running a script, checking, PNGs, hiding
matplotlib (a stand-in package that fails to import), and tiny recorded
steps for the floor's cross-checks."""
import os
import struct
import subprocess
import sys


def run(python, script, *args, env=None):
    return subprocess.run([python, script, *args], capture_output=True, text=True, env=env, timeout=100)


def expect(condition, what, result=None):
    if not condition:
        detail = f"\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}" if result else ""
        print(f"FAIL: {what}{detail}")
        sys.exit(1)
    print(f"ok: {what}")


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", head[16:24])


MIB = 1 << 20


def step_trace(units, uses, budget, duration_ns=1000, overwrites=()):
    """A trace recording one step: len(uses) operations of `duration_ns` each,
    operation i touching the units uses[i]; unit sizes and the budget in MiB;
    overwrites, (operation, unit) pairs whose use overwrites the unit whole."""
    ops = [[duration_ns, 0, 0, list(touched), 0] for touched in uses]
    profile = {"format": 1, "period": len(ops), "step_ns": duration_ns * len(ops), "offload_delay": 1,
               "units": [b * MIB for b in units], "ops": ops, "names": ["op"],
               "overwrites": [list(pair) for pair in overwrites]}
    return {"vgpumem": {"schedule": {"profile": profile, "plan": {"budget": budget * MIB}}}}


def has_modules(python, modules):
    """Whether `python` imports `modules` (a string such as "numpy, scipy")."""
    return os.path.exists(python) and subprocess.run(
        [python, "-c", f"import {modules}"], capture_output=True).returncode == 0


def python_with(modules):
    """This Python or Debian's, whichever imports `modules`; None if neither does."""
    return next((p for p in (sys.executable, "/usr/bin/python3") if has_modules(p, modules)), None)


def environment_without_matplotlib(work):
    """An environment in which `import matplotlib` fails."""
    fake = os.path.join(work, "no-matplotlib", "matplotlib")
    os.makedirs(fake)
    with open(os.path.join(fake, "__init__.py"), "w") as f:
        f.write("raise ImportError('hidden by the test')\n")
    return dict(os.environ, PYTHONPATH=os.path.dirname(fake))
