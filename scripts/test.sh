#!/usr/bin/env bash
# Sets up and runs the whole test suite:
#   build/       RelWithDebInfo, every test
#   build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer, every test
#   build-tsan/  ThreadSanitizer, the tests labelled "concurrency"
# Usage: scripts/test.sh [--quick]   (--quick: the plain build only)
set -uo pipefail
cd "$(dirname "$0")/.."

quick=0
[[ "${1:-}" == "--quick" ]] && quick=1

scripts/install-deps.sh || exit 1

jobs=$(nproc 2>/dev/null || echo 2)
total_passed=0
total_failed=0
status=0

run_build() {
  local dir=$1 label=$2
  shift 2
  echo "=== $dir: configure and build"
  if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$dir.configure.log" 2>&1; then
    cat "$dir.configure.log"; echo "=== $dir: configure FAILED"; status=1; total_failed=$((total_failed + 1)); return
  fi
  if ! cmake --build "$dir" -j"$jobs" >"$dir.build.log" 2>&1; then
    grep -E "error|Error" "$dir.build.log" | head -40; echo "=== $dir: build FAILED"; status=1
    total_failed=$((total_failed + 1)); return
  fi
  echo "=== $dir: test${label:+ (label $label)}"
  local args=(--test-dir "$dir" --output-on-failure -j"$jobs" --timeout 300)
  [[ -n "$label" ]] && args+=(-L "$label")
  ctest "${args[@]}" 2>&1 | tee "$dir.test.log" | grep -vE "^ +[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed"
  local rc=${PIPESTATUS[0]}
  local line passed failed
  line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$dir.test.log" | tail -1)
  failed=$(sed -E 's/.*tests passed, ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$line")
  total=$(sed -E 's/.*tests passed, ([0-9]+) tests failed out of ([0-9]+).*/\2/' <<<"$line")
  if [[ -z "$line" ]]; then
    echo "=== $dir: ctest ran no tests"; status=1; total_failed=$((total_failed + 1)); return
  fi
  passed=$((total - failed))
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  [[ $rc -ne 0 || $failed -ne 0 ]] && status=1
}

run_build build ""
if [[ $quick -eq 0 ]]; then
  run_build build-asan "" -DVGPUMEM_SANITIZE=address -DVGPUMEM_BUILD_BENCHMARKS=OFF
  run_build build-tsan concurrency -DVGPUMEM_SANITIZE=thread -DVGPUMEM_BUILD_BENCHMARKS=OFF
fi

echo "${total_passed} passed, ${total_failed} failed"
exit $status
