// What the hooks add with paging on. The launch: cuLaunchKernel through
// libvgpumem.so (VGPUMEM_LIMIT set, so arguments are scanned and the units
// they point into checked resident) versus the same call straight to the
// simulated driver, with 10, 1,000 and 100,000 live paged allocations. The
// kernel takes four pointers into resident allocations and four integers, and
// does nothing; both sides pay the simulator's own launch cost, so the
// difference is the hook. The upload: cuMemcpyHtoD of 4 KiB to 4 MiB of
// plain data (no pointers) into a paged allocation, through the hook (which
// scans the first MiB of every upload for pointer tables) and straight to the
// simulator; and 64 KiB and 1 MiB tables of pointers into live paged
// allocations (each upload then records a table, replacing the last). And
// a launch whose pointers are into mappings of the program's own handles,
// in four reservations of its own.
//
//   paging_hook_bench [--benchmark_...]
#include <benchmark/benchmark.h>
#include <cuda.h>
#include <dlfcn.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "vgpusim.h"

namespace {

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void**, void**);
using AllocFn = CUresult (*)(CUdeviceptr*, size_t);
using UploadFn = CUresult (*)(CUdeviceptr, const void*, size_t);

struct World {
  LaunchFn direct = nullptr, hooked = nullptr;
  UploadFn upload_direct = nullptr, upload_hooked = nullptr;
  AllocFn allocate = nullptr;
  CUfunction kernel = nullptr;
  std::vector<CUdeviceptr> live;
};

template <typename Fn>
Fn symbol(void* library, const char* name) {
  auto fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (fn == nullptr) {
    std::fprintf(stderr, "paging_hook_bench: %s missing\n", name);
    std::exit(1);
  }
  return fn;
}

World& world() {
  static World w = [] {
    setenv("VGPUMEM_DRIVER", VGPUMEM_BENCH_SIM, 1);
    setenv("VGPUMEM_LIMIT", "2GiB", 1);
    setenv("VGPUMEM_POLICY", "lru", 0);  // run with VGPUMEM_POLICY=auto to measure the access feed
    setenv("VGPUSIM_DEVICE_MEMORY", "4GiB", 1);
    World result;
    void* sim = dlopen(VGPUMEM_BENCH_SIM, RTLD_NOW | RTLD_GLOBAL);
    void* shim = dlopen(VGPUMEM_BENCH_SHIM, RTLD_NOW | RTLD_LOCAL);
    if (sim == nullptr || shim == nullptr) {
      std::fprintf(stderr, "paging_hook_bench: cannot load the simulator or the shim: %s\n", dlerror());
      std::exit(1);
    }
    CUcontext context = nullptr;
    if (symbol<CUresult (*)(unsigned)>(sim, "cuInit")(0) != CUDA_SUCCESS ||
        symbol<CUresult (*)(CUcontext*, CUdevice)>(sim, "cuDevicePrimaryCtxRetain")(&context, 0) != CUDA_SUCCESS ||
        symbol<CUresult (*)(CUcontext)>(sim, "cuCtxSetCurrent")(context) != CUDA_SUCCESS) {
      std::fprintf(stderr, "paging_hook_bench: no simulated device\n");
      std::exit(1);
    }
    static const size_t sizes[] = {8, 8, 8, 8, 4, 4, 4, 4};
    vgpusimKernelDesc desc{};
    desc.name = "bench_nothing";
    desc.body = [](void**, const vgpusimLaunch*, void*) {};
    desc.paramCount = 8;
    desc.paramSizes = sizes;
    symbol<CUresult (*)(const vgpusimKernelDesc*, CUfunction*)>(sim, "vgpusimRegisterKernel")(&desc, &result.kernel);
    result.direct = symbol<LaunchFn>(sim, "cuLaunchKernel");
    result.hooked = symbol<LaunchFn>(shim, "cuLaunchKernel");
    result.allocate = symbol<AllocFn>(shim, "cuMemAlloc_v2");
    result.upload_direct = symbol<UploadFn>(sim, "cuMemcpyHtoD_v2");
    result.upload_hooked = symbol<UploadFn>(shim, "cuMemcpyHtoD_v2");
    return result;
  }();
  return w;
}

// Grows the set of live paged allocations (512 bytes each, packed) to `count`.
void hold_live(std::size_t count) {
  World& w = world();
  while (w.live.size() < count) {
    CUdeviceptr p = 0;
    if (w.allocate(&p, 512) != CUDA_SUCCESS) {
      std::fprintf(stderr, "paging_hook_bench: allocation %zu failed\n", w.live.size());
      std::exit(1);
    }
    w.live.push_back(p);
  }
}

void launch(benchmark::State& state, bool through_hook) {
  const auto live = static_cast<std::size_t>(state.range(0));
  hold_live(live);
  World& w = world();
  CUdeviceptr a = w.live[0], b = w.live[live / 3], c = w.live[live / 2], d = w.live[live - 1];
  int n = 1, m = 2, k = 3, l = 4;
  void* params[] = {&a, &b, &c, &d, &n, &m, &k, &l};
  const LaunchFn fn = through_hook ? w.hooked : w.direct;
  for (auto _ : state) {
    benchmark::DoNotOptimize(fn(w.kernel, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  }
  state.counters["live_allocations"] = static_cast<double>(w.live.size());
}

// A training step's worth of launches: 256 launches over 1,000 live
// allocations, each naming four of them, the step repeated. Under
// VGPUMEM_POLICY=auto the access feed sees a period it locks on, records
// every step and publishes it; under lru it is off. The difference between
// the two runs is what the feed costs a launch.
void BM_PagedStepThroughHook(benchmark::State& state) {
  constexpr std::size_t kStep = 256;
  hold_live(1000);
  World& w = world();
  std::vector<std::array<CUdeviceptr, 4>> args(kStep);
  for (std::size_t i = 0; i < kStep; ++i) {
    for (std::size_t j = 0; j < 4; ++j) args[i][j] = w.live[(i * 37 + j * 251) % 1000];
  }
  int n = 1, m = 2, k = 3, l = 4;
  std::size_t at = 0;
  for (auto _ : state) {
    std::array<CUdeviceptr, 4>& a = args[at];
    void* params[] = {&a[0], &a[1], &a[2], &a[3], &n, &m, &k, &l};
    benchmark::DoNotOptimize(w.hooked(w.kernel, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    at = at + 1 == kStep ? 0 : at + 1;
  }
}
BENCHMARK(BM_PagedStepThroughHook);

void BM_PagedLaunchDirect(benchmark::State& state) { launch(state, false); }
void BM_PagedLaunchThroughHook(benchmark::State& state) { launch(state, true); }

// The live set only grows: each size is measured both ways before the next.
BENCHMARK(BM_PagedLaunchDirect)->Arg(10);
BENCHMARK(BM_PagedLaunchThroughHook)->Arg(10);
BENCHMARK(BM_PagedLaunchDirect)->Arg(1000);
BENCHMARK(BM_PagedLaunchThroughHook)->Arg(1000);
BENCHMARK(BM_PagedLaunchDirect)->Arg(100000);
BENCHMARK(BM_PagedLaunchThroughHook)->Arg(100000);

// The same launch with its four pointers into mappings of the program's own
// handles, one in each of four reservations (an allocator on cuMemCreate,
// as PyTorch's expandable segments are: one reservation per stream and
// pool): every word is looked up in the arena and then in the program's
// reservations, the integers missing all of them.
void program_mapping_launch(benchmark::State& state, bool through_hook) {
  World& w = world();
  static std::vector<CUdeviceptr> mapped = [] {
    void* shim = dlopen(VGPUMEM_BENCH_SHIM, RTLD_NOW | RTLD_NOLOAD);
    auto reserve = symbol<CUresult (*)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long)>(
        shim, "cuMemAddressReserve");
    auto create = symbol<CUresult (*)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                                      unsigned long long)>(shim, "cuMemCreate");
    auto map = symbol<CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long)>(
        shim, "cuMemMap");
    auto set_access = symbol<CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t)>(shim, "cuMemSetAccess");
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    std::vector<CUdeviceptr> addresses;
    for (int i = 0; i < 4; ++i) {
      CUdeviceptr base = 0;
      CUmemGenericAllocationHandle handle = 0;
      const size_t bytes = 2u << 20;
      if (reserve(&base, 64 * bytes, 0, 0, 0) != CUDA_SUCCESS || create(&handle, bytes, &prop, 0) != CUDA_SUCCESS ||
          map(base + bytes, bytes, 0, handle, 0) != CUDA_SUCCESS || set_access(base + bytes, bytes, &access, 1) != CUDA_SUCCESS) {
        std::fprintf(stderr, "paging_hook_bench: cannot map a handle of the program's\n");
        std::exit(1);
      }
      addresses.push_back(base + bytes);
    }
    return addresses;
  }();
  CUdeviceptr a = mapped[0], b = mapped[1], c = mapped[2], d = mapped[3];
  int n = 1, m = 2, k = 3, l = 4;
  void* params[] = {&a, &b, &c, &d, &n, &m, &k, &l};
  const LaunchFn fn = through_hook ? w.hooked : w.direct;
  for (auto _ : state) {
    benchmark::DoNotOptimize(fn(w.kernel, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  }
}

void BM_ProgramMappingLaunchDirect(benchmark::State& state) { program_mapping_launch(state, false); }
void BM_ProgramMappingLaunchThroughHook(benchmark::State& state) { program_mapping_launch(state, true); }

BENCHMARK(BM_ProgramMappingLaunchDirect);
BENCHMARK(BM_ProgramMappingLaunchThroughHook);

// TMA tensor maps (vmm/tensor_maps.h). A kernel of one large parameter of
// plain numbers (PyTorch's foreach kernels pass 4 KiB to 32 KiB by value):
// with no map encoded yet its launch pays one load for the maps; once the
// program has encoded some, every 64-byte-aligned offset of a parameter of
// 128 bytes or more is looked up. Then a kernel of two maps over paged
// allocations (1,000 other maps encoded): the maps found and their ranges
// made resident, against the same launch straight to the simulator.
using EncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

CUfunction register_kernel(const char* name, std::vector<size_t> sizes, std::vector<size_t> alignments) {
  void* sim = dlopen(VGPUMEM_BENCH_SIM, RTLD_NOW | RTLD_NOLOAD);
  vgpusimKernelDesc desc{};
  desc.name = name;
  desc.body = [](void**, const vgpusimLaunch*, void*) {};
  desc.paramCount = static_cast<unsigned>(sizes.size());
  desc.paramSizes = sizes.data();
  desc.paramAlignments = alignments.data();
  CUfunction kernel = nullptr;
  if (symbol<CUresult (*)(const vgpusimKernelDesc*, CUfunction*)>(sim, "vgpusimRegisterKernel")(&desc, &kernel) !=
      CUDA_SUCCESS) {
    std::exit(1);
  }
  return kernel;
}

void wide_parameter_launch(benchmark::State& state) {
  World& w = world();
  const auto bytes = static_cast<std::size_t>(state.range(0));
  static CUfunction kernels[2] = {register_kernel("bench_wide_4k", {4096}, {8}),
                                  register_kernel("bench_wide_32k", {32768}, {8})};
  std::vector<std::uint64_t> parameter(bytes / 8);
  for (std::size_t i = 0; i < parameter.size(); ++i) parameter[i] = i * 2654435761u;  // no pointers
  void* params[] = {parameter.data()};
  CUfunction kernel = kernels[bytes == 4096 ? 0 : 1];
  for (auto _ : state) benchmark::DoNotOptimize(w.hooked(kernel, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
}

void BM_WideParameterLaunchNoMapsEncoded(benchmark::State& state) { wide_parameter_launch(state); }

struct MapWorld {
  CUfunction kernel = nullptr;
  CUtensorMap in{}, out{};
};

MapWorld& map_world() {
  static MapWorld m = [] {
    World& w = world();
    MapWorld result;
    result.kernel = register_kernel("bench_two_maps", {sizeof(CUtensorMap), sizeof(CUtensorMap)}, {64, 64});
    void* shim = dlopen(VGPUMEM_BENCH_SHIM, RTLD_NOW | RTLD_NOLOAD);
    const auto encode = symbol<EncodeFn>(shim, "cuTensorMapEncodeTiled");
    CUdeviceptr in = 0, out = 0;
    if (w.allocate(&in, 1 << 20) != CUDA_SUCCESS || w.allocate(&out, 1 << 20) != CUDA_SUCCESS) std::exit(1);
    const cuuint64_t dims[] = {256, 1024}, strides[] = {1024};
    const cuuint32_t box[] = {32, 8}, ones[] = {1, 1};
    auto encode_over = [&](CUtensorMap* map, CUdeviceptr address, cuuint64_t rows) {
      const cuuint64_t shape[] = {dims[0], rows};
      if (encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, reinterpret_cast<void*>(address), shape, strides, box, ones,
                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
        std::exit(1);
      }
    };
    for (cuuint64_t rows = 1; rows <= 1000; ++rows) {  // other maps the program holds
      CUtensorMap other{};
      encode_over(&other, in, rows);
    }
    encode_over(&result.in, in, dims[1]);
    encode_over(&result.out, out, dims[1]);
    return result;
  }();
  return m;
}

void tensor_map_launch(benchmark::State& state, bool through_hook) {
  World& w = world();
  MapWorld& m = map_world();
  void* params[] = {&m.in, &m.out};
  const LaunchFn fn = through_hook ? w.hooked : w.direct;
  for (auto _ : state) benchmark::DoNotOptimize(fn(m.kernel, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
}

void BM_WideParameterLaunchMapsEncoded(benchmark::State& state) {
  map_world();  // 1,002 maps encoded
  wide_parameter_launch(state);
}
void BM_TensorMapLaunchDirect(benchmark::State& state) { tensor_map_launch(state, false); }
void BM_TensorMapLaunchThroughHook(benchmark::State& state) { tensor_map_launch(state, true); }

// In this order: the wide launches before any map exists, then the maps.
BENCHMARK(BM_WideParameterLaunchNoMapsEncoded)->Arg(4096)->Arg(32768);
BENCHMARK(BM_TensorMapLaunchDirect);
BENCHMARK(BM_TensorMapLaunchThroughHook);
BENCHMARK(BM_WideParameterLaunchMapsEncoded)->Arg(4096)->Arg(32768);

void upload(benchmark::State& state, bool through_hook, bool pointers = false) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  World& w = world();
  static CUdeviceptr target = 0;
  if (target == 0 && w.allocate(&target, 4 << 20) != CUDA_SUCCESS) std::exit(1);
  static std::vector<CUdeviceptr> pointed;  // 64 allocations a table's words point into, in turn
  for (CUdeviceptr p = 0; pointers && pointed.size() < 64; pointed.push_back(p)) {
    if (w.allocate(&p, 2 << 20) != CUDA_SUCCESS) std::exit(1);
  }
  std::vector<std::uint64_t> data(bytes / 8);
  for (std::size_t i = 0; i < data.size(); ++i) {
    data[i] = pointers ? pointed[i % pointed.size()] + 8 * (i / pointed.size()) % (2 << 20)
                       : i * 2654435761u;  // plain numbers, no pointers
  }
  const UploadFn fn = through_hook ? w.upload_hooked : w.upload_direct;
  for (auto _ : state) benchmark::DoNotOptimize(fn(target, data.data(), bytes));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

void BM_UploadDirect(benchmark::State& state) { upload(state, false); }
void BM_UploadThroughHook(benchmark::State& state) { upload(state, true); }
void BM_UploadTableDirect(benchmark::State& state) { upload(state, false, true); }
void BM_UploadTableThroughHook(benchmark::State& state) { upload(state, true, true); }

BENCHMARK(BM_UploadDirect)->Arg(4096)->Arg(65536)->Arg(1 << 20)->Arg(4 << 20);
BENCHMARK(BM_UploadThroughHook)->Arg(4096)->Arg(65536)->Arg(1 << 20)->Arg(4 << 20);
BENCHMARK(BM_UploadTableDirect)->Arg(65536)->Arg(1 << 20);
BENCHMARK(BM_UploadTableThroughHook)->Arg(65536)->Arg(1 << 20);

}  // namespace

BENCHMARK_MAIN();
