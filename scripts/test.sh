#!/usr/bin/env bash
# Sets up and runs the whole test suite. Every build treats warnings as errors.
#   build-asan/     Clang, AddressSanitizer + UndefinedBehaviorSanitizer, every
#                   test (line tables only, -g1)
#   build-tsan/     GCC, ThreadSanitizer, the tests labelled "concurrency"
#                   (it builds only their programs: target concurrency_tests)
#   build-release/  GCC (Debian's compiler, what users build with), Release:
#                   the product, the benchmarks, and the tests only a build
#                   without a sanitizer can run (label "plain": the shim's link
#                   and exports, allocation faults inside it); then from it one
#                   check each (scripts/check-install.sh): `cmake --install`
#                   into a scratch prefix and the demo from there; the wheel in
#                   a scratch virtual environment and one `vgpumem run` from it
# Clang compiles every line, GCC every line of the product and the concurrency
# tests, both with warnings as errors; every test runs under a sanitizer,
# optimized (-O2), and the product runs as users build it. Clang compiles the
# tests in half GCC's time.
# Usage: scripts/test.sh [--quick]
#   --quick: only build/ (GCC, RelWithDebInfo, every test), the developer's build
# The last line sums every test and check: "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

quick=0
[[ "${1:-}" == "--quick" ]] && quick=1

scripts/install-deps.sh || exit 1

jobs=$(nproc 2>/dev/null || echo 2)
total_passed=0
total_failed=0
status=0

# run_build DIR LABEL TARGETS [cmake options...]: LABEL picks the ctest tests
# to run (empty: all), TARGETS what to build (space-separated; empty: all).
run_build() {
  local dir=$1 label=$2 targets=()
  read -ra targets <<<"$3"
  shift 3
  echo "=== $dir: configure and build"
  # The tests and benchmarks on unless a build turns them off: a directory an
  # install configured without them (docs/install.md) gets them back.
  if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVGPUMEM_WERROR=ON -DVGPUMEM_BUILD_TESTS=ON \
       -DVGPUMEM_BUILD_BENCHMARKS=ON "$@" >"$dir.configure.log" 2>&1; then
    cat "$dir.configure.log"; echo "=== $dir: configure FAILED"; status=1; total_failed=$((total_failed + 1)); return 1
  fi
  local build_args=(--build "$dir" -j"$jobs")
  ((${#targets[@]})) && build_args+=(--target "${targets[@]}")
  if ! cmake "${build_args[@]}" >"$dir.build.log" 2>&1; then
    grep -E "error|Error" "$dir.build.log" | head -40; echo "=== $dir: build FAILED"; status=1
    total_failed=$((total_failed + 1)); return 1
  fi
  echo "=== $dir: test${label:+ (label $label)}"
  local args=(--test-dir "$dir" --output-on-failure -j"$jobs" --timeout 300)
  [[ -n "$label" ]] && args+=(-L "$label")
  ctest "${args[@]}" 2>&1 | tee "$dir.test.log" | grep -vE "^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed|^ +Start +[0-9]+: "
  local rc=${PIPESTATUS[0]}
  local line passed failed
  line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$dir.test.log" | tail -1)
  failed=$(sed -E 's/.*tests passed, ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$line")
  total=$(sed -E 's/.*tests passed, ([0-9]+) tests failed out of ([0-9]+).*/\2/' <<<"$line")
  if [[ -z "$line" ]]; then
    echo "=== $dir: ctest ran no tests"; status=1; total_failed=$((total_failed + 1)); return 0
  fi
  passed=$((total - failed))
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  [[ $rc -ne 0 || $failed -ne 0 ]] && status=1
  return 0  # built; a failed test is counted above
}

# One check that is not a ctest test: counted as one test passed or failed.
run_check() {
  local name=$1 log=$2
  shift 2
  echo "=== $name"
  if "$@" >"$log" 2>&1; then
    tail -1 "$log"; total_passed=$((total_passed + 1))
  else
    cat "$log"; echo "=== $name: FAILED"; status=1; total_failed=$((total_failed + 1))
  fi
}

if [[ $quick -eq 1 ]]; then
  run_build build "" ""
else
  clang=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
  # Line tables only (-g1): the sanitizers' reports keep file and line, and
  # the two builds compile a third faster than with full debug information.
  line_tables=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")
  run_build build-asan "" "" "${clang[@]}" -DVGPUMEM_SANITIZE=address -DVGPUMEM_BUILD_BENCHMARKS=OFF "${line_tables[@]}"
  # GCC's: Clang 14's ThreadSanitizer programs crash as they start on Linux 6.18.
  run_build build-tsan concurrency concurrency_tests -DVGPUMEM_SANITIZE=thread -DVGPUMEM_BUILD_BENCHMARKS=OFF \
    "${line_tables[@]}"
  # What check-install.sh installs and runs, the benchmarks, the plain tests.
  if run_build build-release plain "vgpumem_shipped benchmarks plain_tests" \
       -DCMAKE_BUILD_TYPE=Release; then
    run_check "install: cmake --install, then the demo from the install tree" build-release.install.log \
      scripts/check-install.sh build-release prefix
    run_check "wheel: pip install into a fresh virtual environment, then vgpumem run" build-release.wheel.log \
      scripts/check-install.sh build-release wheel
  else
    echo "=== install and wheel checks: not run, build-release did not build"; status=1
    total_failed=$((total_failed + 2))
  fi
fi

echo "${total_passed} passed, ${total_failed} failed"
exit $status
