"""What the plotting scripts' tests share: running a script, checking, PNGs,
and hiding matplotlib (a stand-in package that fails to import)."""
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


def has_matplotlib(python):
    return subprocess.run([python, "-c", "import matplotlib"], capture_output=True).returncode == 0


def python_with_matplotlib():
    """This Python or Debian's, whichever has matplotlib; None if neither."""
    return next((p for p in (sys.executable, "/usr/bin/python3") if os.path.exists(p) and has_matplotlib(p)), None)


def environment_without_matplotlib(work):
    """An environment in which `import matplotlib` fails."""
    fake = os.path.join(work, "no-matplotlib", "matplotlib")
    os.makedirs(fake)
    with open(os.path.join(fake, "__init__.py"), "w") as f:
        f.write("raise ImportError('hidden by the test')\n")
    return dict(os.environ, PYTHONPATH=os.path.dirname(fake))
