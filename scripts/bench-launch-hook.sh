#!/usr/bin/env bash
# What the access feed and the schedule add to a paged launch (issue 14's
# "<= 30 ns"): BM_PagedStepThroughHook under VGPUMEM_POLICY=lru (no feed)
# and then auto, in paired rounds, each number the median of 5 repetitions;
# "added" is auto less lru within a round, and the rounds' median is the
# figure (docs/benchmarks.md, "What does the launch hook cost?", row 4;
# its history in docs/journal/2026-11-25-benchmarks.md). With --against, a second build runs in the same rounds,
# first, so that two builds are compared on the same machine state.
#
#   scripts/bench-launch-hook.sh [--rounds N] [--build DIR] [--against DIR]
#
# Never run in CI: it takes about 25 s a round and a build, and reads the
# machine as much as the code (a round moves 5-10 ns with other load).
set -euo pipefail

rounds=8
builds=()
main_build=build
while (($#)); do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --build) main_build="$2"; shift 2 ;;
    --against) builds+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "bench-launch-hook.sh: unknown argument '$1' (expected --rounds N, --build DIR, --against DIR)" >&2; exit 2 ;;
  esac
done
builds+=("$main_build")
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench-launch-hook.sh: --rounds takes a positive count, not '$rounds'" >&2; exit 2; }
for b in "${builds[@]}"; do
  [[ -x "$b/bin/paging_hook_bench" ]] || {
    echo "bench-launch-hook.sh: no $b/bin/paging_hook_bench (build it: cmake --build $b --target paging_hook_bench vgpumem)" >&2
    exit 2
  }
done

# The median of 5 repetitions, in ns, of one policy on one build.
median_ns() {
  VGPUMEM_POLICY="$2" timeout 300 "$1/bin/paging_hook_bench" --benchmark_filter='^BM_PagedStepThroughHook$' \
    --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>/dev/null |
    awk '$1 == "BM_PagedStepThroughHook_median" { printf "%d\n", $2 + 0.5 }'
}

declare -A added
for ((r = 1; r <= rounds; r++)); do
  line="round $r:"
  for b in "${builds[@]}"; do
    lru=$(median_ns "$b" lru)
    auto=$(median_ns "$b" auto)
    [[ -n "$lru" && -n "$auto" ]] || { echo "bench-launch-hook.sh: $b/bin/paging_hook_bench printed no median" >&2; exit 1; }
    added[$b]+="$((auto - lru)) "
    line+="  $b lru $lru ns, auto $auto ns, added $((auto - lru))"
  done
  echo "$line  (load $(cut -d' ' -f1 /proc/loadavg))"
done
for b in "${builds[@]}"; do
  # shellcheck disable=SC2086
  median=$(printf '%s\n' ${added[$b]} | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  echo "$b: added ${added[$b]}-> median $median ns"
done
