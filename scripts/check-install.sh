#!/usr/bin/env bash
# Checks that vgpumem works where users put it, away from its build tree:
#   scripts/check-install.sh BUILD_DIR prefix   cmake --install into a scratch
#       prefix; the layout (nothing but libvgpumem.so* in P/lib), --version,
#       doctor on the simulated driver, and `P/bin/vgpumem demo` from there
#       (and its picture, drawn by the installed plot_timeline.py, where a
#       python3 here has matplotlib); every relative link of the installed
#       docs leads to an installed file; one short `vgpumem bench`
#   scripts/check-install.sh BUILD_DIR wheel    the wheel built from BUILD_DIR,
#       pip-installed offline into a fresh virtual environment (Debian's
#       python3); `vgpumem` from PATH runs the build's trainer under a cap on
#       the simulated driver, and the Python API reads the trace it wrote;
#       one short `vgpumem bench` with the workloads the wheel carries
# BUILD_DIR must have target vgpumem_shipped built (what installs: the demo
# and bench need the simulated driver and libraries and their trainers).
# Exits non-zero on the first failed step, saying which.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:?usage: check-install.sh BUILD_DIR prefix|wheel}" && pwd)
route=${2:?usage: check-install.sh BUILD_DIR prefix|wheel}
scratch=$(mktemp -d /tmp/vgpumem-check-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
version=$(sed -nE 's/^CMAKE_PROJECT_VERSION:STATIC=(.*)/\1/p' "$build/CMakeCache.txt")

fail() { echo "check-install ($route): $*" >&2; exit 1; }
expect_version() {  # COMMAND...: prints "vgpumem <version>"
  local got
  got=$("$@" --version) || fail "$* --version failed"
  [[ "$got" == "vgpumem $version" ]] || fail "$* --version printed \"$got\", expected \"vgpumem $version\""
}

# One ResNet-50-shaped cell at half its peak, every policy, at a 32nd of the
# sizes (seconds): the installed command finds its layered trainer and the
# simulated libraries beside it, and every run is bit-identical.
check_bench() {  # COMMAND...
  "$@" bench --models resnet50 --caps 50 --steps 4 --scale 32 --out "$scratch/bench" >"$scratch/bench.out" 2>&1 ||
    { cat "$scratch/bench.out"; fail "$* bench failed"; }
  local rows
  rows=$(grep -cE '^\| resnet50 \| 50 % .* \| yes \|$' "$scratch/bench.out" || true)
  [[ $rows -eq 4 ]] || { cat "$scratch/bench.out"; fail "$* bench: $rows of 4 policies ran bit-identically"; }
  echo "check-install: $* bench ran resnet50 at 50 % under 4 policies, bit-identically"
}

# Every relative link in the installed README.md and docs/*.md leads to a
# file or directory that was installed (an image, a recorded GPU run).
check_doc_links() {  # DOCDIR
  python3 - "$1" <<'PY' || fail "installed docs link to files that were not installed"
import pathlib, re, sys
root = pathlib.Path(sys.argv[1])
broken = []
for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
        path = target.split("#", 1)[0]
        if not path or re.match(r"[a-z]+:", path):
            continue  # an anchor on the same page, a web address
        if not (page.parent / path).exists():
            broken.append(f"{page.relative_to(root)}: {target}")
for link in broken:
    print(f"links to what was not installed: {link}", file=sys.stderr)
sys.exit(1 if broken else 0)
PY
}

check_prefix() {
  local p=$scratch/prefix
  cmake --install "$build" --prefix "$p" >"$scratch/install.log" || { cat "$scratch/install.log"; fail "cmake --install failed"; }
  for f in bin/vgpumem lib/libvgpumem.so "lib/libvgpumem.so.$version" lib/vgpumem/libcuda.so.1 \
           lib/vgpumem/mlp_trainer lib/vgpumem/layered_trainer share/vgpumem/plot_timeline.py share/vgpumem/plot_trace.py share/doc/vgpumem/README.md \
           share/doc/vgpumem/docs/install.md; do
    [[ -e "$p/$f" ]] || fail "$p/$f was not installed"
  done
  local stray
  stray=$(find "$p/lib" -maxdepth 1 \( -type f -o -type l \) ! -name 'libvgpumem.so*')
  [[ -z "$stray" ]] || fail "on the library path beside libvgpumem.so: $stray"
  # Nothing installed may lead back into the build tree.
  for f in "$p/bin/vgpumem" "$p/lib/libvgpumem.so" "$p"/lib/vgpumem/*; do
    if readelf -d "$f" | grep -E 'R(UN)?PATH' | grep -qF "$build"; then fail "$f has a run path into $build"; fi
  done
  expect_version "$p/bin/vgpumem"
  "$p/bin/vgpumem" doctor --simulated >"$scratch/doctor.out" || { cat "$scratch/doctor.out"; fail "doctor --simulated failed"; }
  grep -q "$p/lib/vgpumem/libcuda.so.1" "$scratch/doctor.out" || { cat "$scratch/doctor.out"; fail "doctor did not use the installed simulated driver"; }
  (cd "$scratch" && "$p/bin/vgpumem" demo --out "$scratch/demo") >"$scratch/demo.out" ||
    { cat "$scratch/demo.out"; fail "$p/bin/vgpumem demo failed"; }
  cat "$scratch/demo.out"
  if python3 -c 'import matplotlib' 2>/dev/null || /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    grep -qF "picture: $scratch/demo/timeline.png" "$scratch/demo.out" && [[ -s "$scratch/demo/timeline.png" ]] ||
      fail "matplotlib is here, but the demo drew no timeline.png with the installed plot_timeline.py"
  fi
  check_doc_links "$p/share/doc/vgpumem"
  check_bench "$p/bin/vgpumem"
  echo "check-install: $p/bin/vgpumem demo passed from the install tree"
}

check_wheel() {
  scripts/build-wheel.sh "$build" "$scratch/dist" >"$scratch/wheel.log" 2>&1 || { cat "$scratch/wheel.log"; fail "building the wheel failed"; }
  local wheel
  wheel=$(ls "$scratch"/dist/vgpumem-"$version"-*.whl) || fail "no wheel for version $version in $scratch/dist"
  /usr/bin/python3 -m venv "$scratch/venv" || fail "python3 -m venv failed (Debian package python3-venv)"
  "$scratch/venv/bin/pip" install --no-index --quiet "$wheel" || fail "pip install --no-index $wheel failed"
  # From the virtual environment only: PATH as activating it sets it, and a
  # directory with no vgpumem sources in it.
  cd "$scratch"
  export PATH="$scratch/venv/bin:$PATH"
  [[ $(command -v vgpumem) == "$scratch/venv/bin/vgpumem" ]] || fail "vgpumem is not on PATH from the virtual environment"
  expect_version vgpumem
  expect_version python -m vgpumem
  local trace=$scratch/run.json
  vgpumem run --simulated=1GiB --limit 32MiB --trace "$trace" -- \
    "$build/bin/mlp_trainer" --width 1024 --batch 8 --layers 12 --steps 2 >"$scratch/run.out" 2>&1 ||
    { cat "$scratch/run.out"; fail "vgpumem run from the wheel failed"; }
  grep -q "^RESULT" "$scratch/run.out" || { cat "$scratch/run.out"; fail "the trainer printed no RESULT"; }
  python - "$trace" "$version" <<'PY' || fail "the Python API did not read the trace as expected"
import sys
import vgpumem
summary = vgpumem.read_summary(sys.argv[1])
assert vgpumem.__version__ == sys.argv[2] == summary.vgpumem_version, (vgpumem.__version__, summary.vgpumem_version)
assert vgpumem.library_path().is_file(), vgpumem.library_path()
assert summary.devices and summary.devices[0].cap == 32 << 20, summary.devices
assert summary.bytes_offloaded > 0 and summary.peak_bytes <= 32 << 20, summary
print(f"check-install: vgpumem {summary.vgpumem_version} from the wheel ran the trainer under a 32 MiB cap: "
      f"peak {summary.peak_bytes >> 20} MiB, {summary.bytes_offloaded >> 20} MiB offloaded")
PY
  check_bench vgpumem
}

case $route in
  prefix) check_prefix ;;
  wheel) check_wheel ;;
  *) fail "unknown route \"$route\" (prefix or wheel)" ;;
esac
