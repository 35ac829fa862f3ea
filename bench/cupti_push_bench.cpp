// What a kernel timed by CUPTI pays on the launch path: KernelTimes::begin()
// and end() (a push and a pop of its launch id on CUPTI's external-correlation
// stack) around nothing, with CUPTI active, and with it not started (the
// state check alone: what every launch paid before ids went only with the
// kernels of timed steps). Against the simulated libcupti.so.13, whose
// stack is a thread-local vector: the real CUPTI's cost is still owed on a
// GPU (docs/benchmarks.md).
//
//   cupti_push_bench [--benchmark_...]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "cupti/kernel_times.h"
#include "tests/sim/cupti/simulated_cupti_options.h"

namespace {

using vgpumem::cupti::KernelTimes;
using vgpumem::cupti::TimerState;

void push_pop(benchmark::State& state, KernelTimes& times) {
  std::uint64_t id = 1;
  for (auto _ : state) {
    times.begin(++id);
    benchmark::ClobberMemory();
    times.end();
  }
}

void BM_CuptiPushPopActive(benchmark::State& state) {
  static KernelTimes times(simulated_cupti_options(VGPUMEM_BENCH_SIM_CUPTI));
  if (times.start() != TimerState::active) {
    state.SkipWithError("the simulated CUPTI did not start");
    return;
  }
  push_pop(state, times);
}
BENCHMARK(BM_CuptiPushPopActive);

void BM_CuptiPushPopNotStarted(benchmark::State& state) {
  // Never started: begin() checks the state and returns.
  static KernelTimes times(simulated_cupti_options(VGPUMEM_BENCH_SIM_CUPTI));
  push_pop(state, times);
}
BENCHMARK(BM_CuptiPushPopNotStarted);

}  // namespace

BENCHMARK_MAIN();
