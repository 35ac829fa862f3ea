// Tries every API that takes device memory beyond the cap (VGPUMEM_LIMIT set
// by the test) and prints what each returned; tests/e2e/cap_test.cpp asserts.
//
//   cap_probe bypass CAP    one row per API: a first allocation of 3/4 of the
//                           cap (must fit), then 1/2 of the cap (must be refused)
//   cap_probe meminfo CAP   cuMemGetInfo under the cap, with NULL outputs too
//   cap_probe threads CAP   many threads allocating and freeing at once
//   cap_probe room CAP API  with paging on: 25/32 and 1/4 of the cap in paged
//                           memory (cuMemAlloc_v2, cuMemAllocPitch_v2), then
//                           1/4 of the cap through API, which is never paged:
//                           room must be made for it; then the paged bytes
//                           are checked. Prints "room API ok" or "room API
//                           <error>" / "room API lost ..." (exit 4)
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

const char* name_of(CUresult result) {
  const char* name = nullptr;
  return cuGetErrorName(result, &name) == CUDA_SUCCESS && name ? name : "UNKNOWN";
}

#define CHECK(call)                                                                   \
  do {                                                                                \
    const CUresult check_result = (call);                                             \
    if (check_result != CUDA_SUCCESS) {                                               \
      std::printf("error %s at %s:%d\n", name_of(check_result), __FILE__, __LINE__); \
      std::exit(3);                                                                   \
    }                                                                                 \
  } while (0)

struct Allocator {
  const char* api;
  // Allocates `bytes`; returns the result and a way to free what it made.
  std::function<CUresult(std::size_t bytes, std::function<void()>* release)> allocate;
};

CUstream g_stream = nullptr;

std::vector<Allocator> allocators() {
  std::vector<Allocator> all;
  all.push_back({"cuMemAlloc_v2", [](std::size_t bytes, std::function<void()>* release) {
                   CUdeviceptr p = 0;
                   const CUresult r = cuMemAlloc_v2(&p, bytes);
                   *release = [p] { cuMemFree_v2(p); };
                   return r;
                 }});
  all.push_back({"cuMemAllocPitch_v2", [](std::size_t bytes, std::function<void()>* release) {
                   CUdeviceptr p = 0;
                   std::size_t pitch = 0;
                   const CUresult r = cuMemAllocPitch_v2(&p, &pitch, 4096, bytes / 4096, 4);
                   *release = [p] { cuMemFree_v2(p); };
                   return r;
                 }});
  all.push_back({"cuMemAllocManaged", [](std::size_t bytes, std::function<void()>* release) {
                   CUdeviceptr p = 0;
                   const CUresult r = cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL);
                   *release = [p] { cuMemFree_v2(p); };
                   return r;
                 }});
  all.push_back({"cuMemAllocAsync", [](std::size_t bytes, std::function<void()>* release) {
                   CUdeviceptr p = 0;
                   const CUresult r = cuMemAllocAsync(&p, bytes, g_stream);
                   *release = [p] {
                     cuMemFreeAsync(p, g_stream);
                     cuStreamSynchronize(g_stream);
                   };
                   return r;
                 }});
  all.push_back({"cuMemAllocFromPoolAsync", [](std::size_t bytes, std::function<void()>* release) {
                   CUmemoryPool pool = nullptr;
                   CHECK(cuDeviceGetDefaultMemPool(&pool, 0));
                   CUdeviceptr p = 0;
                   const CUresult r = cuMemAllocFromPoolAsync(&p, bytes, pool, g_stream);
                   *release = [p] {
                     cuMemFreeAsync(p, g_stream);
                     cuStreamSynchronize(g_stream);
                   };
                   return r;
                 }});
  all.push_back({"cuMemCreate", [](std::size_t bytes, std::function<void()>* release) {
                   CUmemAllocationProp prop{};
                   prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
                   prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
                   prop.location.id = 0;
                   CUmemGenericAllocationHandle handle = 0;
                   const CUresult r = cuMemCreate(&handle, bytes, &prop, 0);
                   *release = [handle] { cuMemRelease(handle); };
                   return r;
                 }});
  all.push_back({"cuArrayCreate_v2", [](std::size_t bytes, std::function<void()>* release) {
                   CUDA_ARRAY_DESCRIPTOR desc{};
                   desc.Width = 4096;
                   desc.Height = bytes / (4096 * 4);
                   desc.Format = CU_AD_FORMAT_FLOAT;
                   desc.NumChannels = 1;
                   CUarray array = nullptr;
                   const CUresult r = cuArrayCreate_v2(&array, &desc);
                   *release = [array] { cuArrayDestroy(array); };
                   return r;
                 }});
  all.push_back({"cuArray3DCreate_v2", [](std::size_t bytes, std::function<void()>* release) {
                   CUDA_ARRAY3D_DESCRIPTOR desc{};
                   desc.Width = 1024;
                   desc.Height = 1024;
                   desc.Depth = bytes / (1024 * 1024 * 4);
                   desc.Format = CU_AD_FORMAT_FLOAT;
                   desc.NumChannels = 1;
                   CUarray array = nullptr;
                   const CUresult r = cuArray3DCreate_v2(&array, &desc);
                   *release = [array] { cuArrayDestroy(array); };
                   return r;
                 }});
  all.push_back({"cuMipmappedArrayCreate", [](std::size_t bytes, std::function<void()>* release) {
                   CUDA_ARRAY3D_DESCRIPTOR desc{};
                   desc.Width = 4096;
                   desc.Height = bytes / (4096 * 4);
                   desc.Format = CU_AD_FORMAT_FLOAT;
                   desc.NumChannels = 1;
                   CUmipmappedArray array = nullptr;
                   const CUresult r = cuMipmappedArrayCreate(&array, &desc, 1);
                   *release = [array] { cuMipmappedArrayDestroy(array); };
                   return r;
                 }});
  // Device memory the program can hand to another device or process: never paged.
  all.push_back({"cuMemCreate(gpuDirectRDMACapable)", [](std::size_t bytes, std::function<void()>* release) {
                   CUmemAllocationProp prop{};
                   prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
                   prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
                   prop.location.id = 0;
                   prop.allocFlags.gpuDirectRDMACapable = 1;
                   CUmemGenericAllocationHandle handle = 0;
                   const CUresult r = cuMemCreate(&handle, bytes, &prop, 0);
                   *release = [handle] { cuMemRelease(handle); };
                   return r;
                 }});
  all.push_back({"cuMemAllocFromPoolAsync(exportable pool)", [](std::size_t bytes, std::function<void()>* release) {
                   CUmemPoolProps props{};
                   props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
                   props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
                   props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
                   props.location.id = 0;
                   CUmemoryPool pool = nullptr;
                   CHECK(cuMemPoolCreate(&pool, &props));
                   CUdeviceptr p = 0;
                   const CUresult r = cuMemAllocFromPoolAsync(&p, bytes, pool, g_stream);
                   *release = [p, pool] {
                     cuMemFreeAsync(p, g_stream);
                     cuStreamSynchronize(g_stream);
                     cuMemPoolDestroy(pool);
                   };
                   return r;
                 }});
  // The same allocator reached through cuGetProcAddress, as cudart reaches it.
  all.push_back({"cuGetProcAddress_v2(cuMemAlloc)", [](std::size_t bytes, std::function<void()>* release) {
                   void* fn = nullptr;
                   CHECK(cuGetProcAddress_v2("cuMemAlloc", &fn, 13000, 0, nullptr));
                   CUdeviceptr p = 0;
                   const CUresult r = reinterpret_cast<PFN_cuMemAlloc_v3020>(fn)(&p, bytes);
                   *release = [p] { cuMemFree_v2(p); };
                   return r;
                 }});
  // And through dlsym on a libcuda handle, as Triton reaches the driver.
  all.push_back({"dlsym(cuMemAllocAsync_ptsz)", [](std::size_t bytes, std::function<void()>* release) {
                   void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
                   auto fn = reinterpret_cast<PFN_cuMemAllocAsync_v11020_ptsz>(dlsym(driver, "cuMemAllocAsync_ptsz"));
                   CUdeviceptr p = 0;
                   const CUresult r = fn(&p, bytes, CU_STREAM_PER_THREAD);
                   *release = [p] {
                     cuMemFreeAsync(p, CU_STREAM_PER_THREAD);
                     cuStreamSynchronize(CU_STREAM_PER_THREAD);
                   };
                   return r;
                 }});
  return all;
}

void bypass(std::size_t cap) {
  for (const Allocator& allocator : allocators()) {
    std::function<void()> release_first = [] {};
    std::function<void()> release_second = [] {};
    const CUresult first = allocator.allocate(cap / 4 * 3, &release_first);
    const CUresult second = allocator.allocate(cap / 2, &release_second);
    std::printf("bypass %s first=%s second=%s\n", allocator.api, name_of(first), name_of(second));
    if (second == CUDA_SUCCESS) release_second();
    if (first == CUDA_SUCCESS) release_first();
  }
  // Mixed APIs share one cap: VMM memory plus a plain allocation.
  std::function<void()> release_vmm = [] {};
  std::function<void()> release_plain = [] {};
  const CUresult first = allocators()[5].allocate(cap / 4 * 3, &release_vmm);
  const CUresult second = allocators()[0].allocate(cap / 2, &release_plain);
  std::printf("bypass mixed(cuMemCreate+cuMemAlloc_v2) first=%s second=%s\n", name_of(first), name_of(second));
  if (second == CUDA_SUCCESS) release_plain();
  if (first == CUDA_SUCCESS) release_vmm();
  // Freed memory is usable again: the cap counts what is live.
  std::function<void()> release_again = [] {};
  std::printf("bypass after-free first=%s\n", name_of(allocators()[0].allocate(cap / 4 * 3, &release_again)));
  release_again();
}

// Whether every int of the `bytes` at `p` is `value`.
bool holds_ints(CUdeviceptr p, std::size_t bytes, unsigned value) {
  std::vector<unsigned> back(bytes / sizeof(unsigned));
  CHECK(cuMemcpyDtoH_v2(back.data(), p, bytes));
  for (unsigned v : back) {
    if (v != value) return false;
  }
  return true;
}

int room(std::size_t cap, const std::string& api) {
  const std::size_t first = cap / 32 * 25, second = cap / 4;
  CUdeviceptr a = 0, b = 0;
  std::size_t pitch = 0;
  CHECK(cuMemAlloc_v2(&a, first));
  CHECK(cuMemAllocPitch_v2(&b, &pitch, 4096, second / 4096, 4));
  CHECK(cuMemsetD32_v2(a, 1, first / 4));
  CHECK(cuMemsetD32_v2(b, 2, pitch * (second / 4096) / 4));
  for (const Allocator& allocator : allocators()) {
    if (allocator.api != api) continue;
    std::function<void()> release = [] {};
    const CUresult result = allocator.allocate(second, &release);
    if (result != CUDA_SUCCESS) {
      std::printf("room %s %s\n", api.c_str(), name_of(result));
      return 4;
    }
    // What fits beside it now: the pitched buffer; the large one after.
    const bool kept = holds_ints(b, pitch * (second / 4096), 2);
    release();
    if (!kept || !holds_ints(a, first, 1)) {
      std::printf("room %s lost paged bytes\n", api.c_str());
      return 4;
    }
    CHECK(cuMemFree_v2(a));
    CHECK(cuMemFree_v2(b));
    std::printf("room %s ok\n", api.c_str());
    return 0;
  }
  std::printf("room %s: no such allocator\n", api.c_str());
  return 2;
}

void meminfo(std::size_t cap) {
  std::size_t free_bytes = 0, total_bytes = 0;
  CHECK(cuMemGetInfo_v2(&free_bytes, &total_bytes));
  std::printf("meminfo empty free=%zu total=%zu\n", free_bytes, total_bytes);
  CUdeviceptr p = 0;
  CHECK(cuMemAlloc_v2(&p, cap / 2));
  CHECK(cuMemGetInfo_v2(&free_bytes, &total_bytes));
  std::printf("meminfo half free=%zu total=%zu\n", free_bytes, total_bytes);
  std::printf("meminfo null-free %s\n", name_of(cuMemGetInfo_v2(nullptr, &total_bytes)));
  std::printf("meminfo null-total %s\n", name_of(cuMemGetInfo_v2(&free_bytes, nullptr)));
  std::printf("meminfo null-both %s\n", name_of(cuMemGetInfo_v2(nullptr, nullptr)));
  std::size_t device_total = 0;
  CHECK(cuDeviceTotalMem_v2(&device_total, 0));
  std::printf("meminfo device-total %zu\n", device_total);
  CHECK(cuMemFree_v2(p));
  CHECK(cuMemGetInfo_v2(&free_bytes, &total_bytes));
  std::printf("meminfo after-free free=%zu total=%zu\n", free_bytes, total_bytes);
}

void threads(std::size_t cap) {
  constexpr int kThreads = 16;
  constexpr std::size_t kChunk = 2u << 20;
  CUcontext context = nullptr;
  CHECK(cuCtxGetCurrent(&context));
  std::atomic<std::int64_t> live{0};
  std::atomic<std::int64_t> max_live{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      CHECK(cuCtxSetCurrent(context));
      std::vector<CUdeviceptr> held;
      unsigned seed = 1234u + static_cast<unsigned>(t);
      for (int step = 0; step < 400; ++step) {
        seed = seed * 1103515245u + 12345u;
        if ((seed >> 16) % 3 != 0 || held.empty()) {
          CUdeviceptr p = 0;
          const CUresult r = cuMemAlloc_v2(&p, kChunk);
          if (r == CUDA_SUCCESS) {
            const std::int64_t now = live.fetch_add(kChunk) + static_cast<std::int64_t>(kChunk);
            std::int64_t seen = max_live.load();
            while (now > seen && !max_live.compare_exchange_weak(seen, now)) {
            }
            held.push_back(p);
          } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            refused.fetch_add(1);
          } else {
            std::printf("error %s in thread\n", name_of(r));
            std::exit(3);
          }
        } else {
          // Uncount before freeing and count after allocating, so `live`
          // never exceeds what really exists at any instant.
          const CUdeviceptr p = held.back();
          held.pop_back();
          live.fetch_sub(kChunk);
          CHECK(cuMemFree_v2(p));
        }
      }
      for (CUdeviceptr p : held) {
        live.fetch_sub(kChunk);
        CHECK(cuMemFree_v2(p));
      }
    });
  }
  for (auto& w : workers) w.join();
  std::printf("threads max_live=%lld cap=%zu refused=%d\n", static_cast<long long>(max_live.load()), cap,
              refused.load());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: cap_probe bypass|meminfo|threads CAP_BYTES | cap_probe room CAP_BYTES API\n");
    return 2;
  }
  const std::string what = argv[1];
  const std::size_t cap = std::strtoull(argv[2], nullptr, 10);
  CHECK(cuInit(0));
  CUdevice device = 0;
  CHECK(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&context, device));
  CHECK(cuCtxSetCurrent(context));
  CHECK(cuStreamCreate(&g_stream, CU_STREAM_NON_BLOCKING));
  if (what == "bypass") bypass(cap);
  if (what == "meminfo") meminfo(cap);
  if (what == "threads") threads(cap);
  if (what == "room") {
    if (argc < 4) return 2;
    const int status = room(cap, argv[3]);
    if (status != 0) return status;
  }
  CHECK(cuStreamDestroy_v2(g_stream));
  std::printf("done\n");
  return 0;
}
