#!/usr/bin/env python3
"""scripts/demo.sh as a first-time user meets it, with stand-ins for the
slow parts: a `cmake` on PATH that records how it was called and, when asked
to build, prints build progress lines a second apart (as a long first build
does) and leaves a stand-in build/bin/vgpumem; a scripts/install-deps.sh that
installs nothing. Checked:

- the build's progress reaches the user's terminal while it builds: each
  progress line arrives before the build ends, not at the end or never;
- the build is configured without -Werror (a newer compiler's new warning
  must not stop a demo, docs/install.md) and builds only what the demo ships
  (target vgpumem_shipped), then runs `vgpumem demo` with the user's arguments;
- the README's and docs/install.md's install commands build without the tests.

  demo_script_test.py PATH/TO/scripts/demo.sh
"""
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from plot_test_support import expect  # noqa: E402

DEMO = os.path.abspath(sys.argv[1])
ROOT = os.path.dirname(os.path.dirname(DEMO))
PROGRESS_LINES = 3
SECONDS_BETWEEN_LINES = 1.0

FAKE_CMAKE = f"""#!/bin/sh
# Stand-in cmake: records its arguments; a build prints progress slowly.
echo "$*" >> "$CMAKE_CALLS"
case " $* " in
  *" --build "*)
    for i in $(seq 1 {PROGRESS_LINES}); do
      echo "[$i/{PROGRESS_LINES}] Building CXX object vmm/part$i.cpp.o"
      sleep {SECONDS_BETWEEN_LINES}
    done
    mkdir -p build/bin
    printf '#!/bin/sh\\necho "stand-in vgpumem: $*"\\n' > build/bin/vgpumem
    chmod +x build/bin/vgpumem ;;
esac
"""


def write_executable(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def run_demo_script(work):
    """Runs the copied demo.sh; returns (lines with their arrival times, the
    time the build's last line was printed, exit code, cmake's calls)."""
    tree, fake_bin = os.path.join(work, "tree"), os.path.join(work, "bin")
    os.makedirs(os.path.join(tree, "scripts"))
    os.makedirs(fake_bin)
    shutil.copy(DEMO, os.path.join(tree, "scripts", "demo.sh"))
    write_executable(os.path.join(tree, "scripts", "install-deps.sh"), "#!/bin/sh\nexit 0\n")
    write_executable(os.path.join(fake_bin, "cmake"), FAKE_CMAKE)
    calls = os.path.join(work, "cmake-calls")
    env = dict(os.environ, PATH=fake_bin + os.pathsep + os.environ["PATH"], CMAKE_CALLS=calls)
    process = subprocess.Popen(["bash", os.path.join(tree, "scripts", "demo.sh"), "--out", "somewhere"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    arrivals = []
    deadline = time.monotonic() + 60
    for line in process.stdout:
        arrivals.append((time.monotonic(), line.rstrip("\n")))
        if time.monotonic() > deadline:
            process.kill()
            break
    code = process.wait(timeout=60)
    with open(calls, encoding="utf-8") as f:
        cmake_calls = f.read().splitlines()
    return arrivals, code, cmake_calls


def check_demo_script():
    work = tempfile.mkdtemp(prefix="demo-script-test.")
    try:
        arrivals, code, cmake_calls = run_demo_script(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    transcript = "\n".join(line for _, line in arrivals)
    expect(code == 0, f"demo.sh exits 0 with a build that succeeds (exit {code}):\n{transcript}")

    progress = [(t, line) for t, line in arrivals if re.match(r"\[\d+/\d+\] Building", line)]
    expect(len(progress) == PROGRESS_LINES,
           f"all {PROGRESS_LINES} of the build's progress lines reach the user (got {len(progress)}):\n{transcript}")
    # Each line arrives as the build prints it: a second apart, not all at once
    # when the build ends (buffered, or collected and shown after).
    gaps = [later[0] - earlier[0] for earlier, later in zip(progress, progress[1:])]
    expect(all(gap > SECONDS_BETWEEN_LINES / 2 for gap in gaps),
           f"progress lines arrive while the build runs, {SECONDS_BETWEEN_LINES} s apart (gaps {gaps})")
    demo_lines = [line for _, line in arrivals if line.startswith("stand-in vgpumem:")]
    expect(demo_lines == ["stand-in vgpumem: demo --out somewhere"],
           f"the build's vgpumem runs the demo with the user's arguments: {demo_lines}")

    configures = [call for call in cmake_calls if "--build" not in call.split()]
    builds = [call for call in cmake_calls if "--build" in call.split()]
    expect(len(configures) == 1 and len(builds) == 1, f"one configure and one build: {cmake_calls}")
    expect(not re.search(r"VGPUMEM_WERROR=(ON|1|TRUE|YES)|-Werror", configures[0], re.IGNORECASE),
           f"the demo's build does not make warnings errors: cmake {configures[0]}")
    expect(re.search(r"--target vgpumem_shipped(\s|$)", builds[0]) is not None,
           f"the demo builds what it ships (vgpumem_shipped), not every test: cmake {builds[0]}")


def check_install_commands():
    """The install commands users copy configure without the tests."""
    for page in ("README.md", os.path.join("docs", "install.md")):
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            text = f.read()
        configures = [line for line in text.splitlines()
                      if re.match(r"\s*cmake -S \. -B build-release\b", line)]
        expect(configures, f"{page} shows the install's configure command (cmake -S . -B build-release)")
        for line in configures:
            expect("-DVGPUMEM_BUILD_TESTS=OFF" in line,
                   f"{page}: the install configures without the tests: {line.strip()}")


def main():
    check_demo_script()
    check_install_commands()
    print("demo_script: all checks passed")


if __name__ == "__main__":
    main()
