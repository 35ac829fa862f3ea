// What the shim adds to a kernel launch: cuLaunchKernel through
// libvgpumem.so's hook versus the same call straight to the driver, with a
// driver that returns at once (null_driver.cpp) so the difference is the hook.
//
//   launch_hook_bench [--benchmark_...]       pass-through (no cap, no trace)
//   VGPUMEM_TRACE=/tmp/t.json launch_hook_bench  with launch tracing on
//
// The shim is loaded with dlopen(RTLD_LOCAL) so its dlsym does not interpose
// this process; VGPUMEM_DRIVER points it at the null driver.
#include <benchmark/benchmark.h>
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace {

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void**, void**);

struct Targets {
  LaunchFn direct = nullptr;  // the null driver's cuLaunchKernel
  LaunchFn hooked = nullptr;  // libvgpumem.so's hook, forwarding to it
};

const Targets& targets() {
  static const Targets t = [] {
    setenv("VGPUMEM_DRIVER", VGPUMEM_BENCH_NULL_DRIVER, 1);
    Targets result;
    void* driver = dlopen(VGPUMEM_BENCH_NULL_DRIVER, RTLD_NOW | RTLD_LOCAL);
    void* shim = dlopen(VGPUMEM_BENCH_SHIM, RTLD_NOW | RTLD_LOCAL);
    if (driver == nullptr || shim == nullptr) {
      std::fprintf(stderr, "launch_hook_bench: cannot load %s or %s: %s\n", VGPUMEM_BENCH_NULL_DRIVER, VGPUMEM_BENCH_SHIM,
                   dlerror());
      std::exit(1);
    }
    result.direct = reinterpret_cast<LaunchFn>(dlsym(driver, "cuLaunchKernel"));
    result.hooked = reinterpret_cast<LaunchFn>(dlsym(shim, "cuLaunchKernel"));
    if (result.direct == nullptr || result.hooked == nullptr || result.direct == result.hooked) {
      std::fprintf(stderr, "launch_hook_bench: could not tell the hook from the driver\n");
      std::exit(1);
    }
    return result;
  }();
  return t;
}

void launch(benchmark::State& state, LaunchFn fn) {
  auto function = reinterpret_cast<CUfunction>(0x1000);
  void* params[] = {nullptr};
  for (auto _ : state) {
    benchmark::DoNotOptimize(fn(function, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  }
}

void BM_LaunchDirect(benchmark::State& state) { launch(state, targets().direct); }
void BM_LaunchThroughHook(benchmark::State& state) { launch(state, targets().hooked); }

BENCHMARK(BM_LaunchDirect);
BENCHMARK(BM_LaunchThroughHook);
BENCHMARK(BM_LaunchDirect)->Threads(4);
BENCHMARK(BM_LaunchThroughHook)->Threads(4);

}  // namespace

BENCHMARK_MAIN();
