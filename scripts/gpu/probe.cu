// §8 probes on the real driver. Each sub-probe prints one JSON line "PROBE {...}".
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>
#include <sys/wait.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <algorithm>
#include <thread>
#include <atomic>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* n_; cuGetErrorName(r_, &n_); printf("PROBE {\"error\":\"%s\",\"at\":\"%s\",\"line\":%d}\n", n_, #x, __LINE__); fflush(stdout); _exit(1);} } while (0)
static double now_us() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
static const char* ename(CUresult r) { const char* n = "?"; cuGetErrorName(r, &n); return n; }

__global__ void spin(volatile int* p, long long cycles) { long long t0 = clock64(); while (clock64() - t0 < cycles) { if (p) p[threadIdx.x] += 1; } }
__global__ void touch(int* p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += 1; }
__global__ void params_kernel(float* a, int b, double c, char d) { if (a) a[0] = b + c + d; }

static CUcontext ctx; static CUdevice dev;
static void init() { CK(cuInit(0)); CK(cuDeviceGet(&dev, 0)); CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx)); }
static CUmemAllocationProp prop_dev() { CUmemAllocationProp p{}; p.type = CU_MEM_ALLOCATION_TYPE_PINNED; p.location.type = CU_MEM_LOCATION_TYPE_DEVICE; p.location.id = 0; return p; }
static long long cycles_for_ms(double ms) { int khz = 0; cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev); return (long long)(ms * khz); }

static void granularity() {
  auto g = [](CUmemAllocationProp p, CUmemAllocationGranularity_flags f) { size_t v = 0; CUresult r = cuMemGetAllocationGranularity(&v, &p, f); return std::string(r == CUDA_SUCCESS ? std::to_string(v) : std::string("\"") + ename(r) + "\""); };
  CUmemAllocationProp p = prop_dev(), rdma = prop_dev(), fd = prop_dev(), host = prop_dev(), numa = prop_dev();
  rdma.allocFlags.gpuDirectRDMACapable = 1; fd.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  host.location.type = CU_MEM_LOCATION_TYPE_HOST; host.location.id = 0; numa.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA; numa.location.id = 0;
  int a[6]; CUdevice_attribute at[6] = {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED};
  for (int i = 0; i < 6; ++i) { a[i] = -1; cuDeviceGetAttribute(&a[i], at[i], dev); }
  int drv = 0; cuDriverGetVersion(&drv);
  printf("PROBE {\"probe\":\"granularity\",\"driver_version\":%d,\"min\":%s,\"recommended\":%s,\"rdma_min\":%s,\"posix_fd_min\":%s,\"host_min\":%s,\"host_numa_min\":%s,"
         "\"attr_vmm\":%d,\"attr_rdma_vmm\":%d,\"attr_host_numa_vmm\":%d,\"attr_host_vmm\":%d,\"async_engines\":%d,\"posix_fd\":%d}\n",
         drv, g(p, CU_MEM_ALLOC_GRANULARITY_MINIMUM).c_str(), g(p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED).c_str(), g(rdma, CU_MEM_ALLOC_GRANULARITY_MINIMUM).c_str(),
         g(fd, CU_MEM_ALLOC_GRANULARITY_MINIMUM).c_str(), g(host, CU_MEM_ALLOC_GRANULARITY_MINIMUM).c_str(), g(numa, CU_MEM_ALLOC_GRANULARITY_MINIMUM).c_str(), a[0], a[1], a[2], a[3], a[4], a[5]);
}

struct Stat { std::vector<double> v; std::string json() { std::sort(v.begin(), v.end()); char b[96]; snprintf(b, sizeof b, "{\"median\":%.2f,\"max\":%.2f}", v[v.size()/2], v.back()); return b; } };
static void vmm_latency(bool busy) {
  CUstream s; CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  int* other; cudaMalloc(&other, 1 << 20);
  for (size_t mib : {2, 20, 64}) {
    size_t size = mib << 20; Stat c, m, a, u, r; CUmemAllocationProp p = prop_dev();
    CUmemAccessDesc acc{}; acc.location = p.location; acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUdeviceptr va; CK(cuMemAddressReserve(&va, size, 0, 0, 0));
    for (int rep = 0; rep < 15; ++rep) {
      if (busy) spin<<<1, 32, 0, (cudaStream_t)s>>>(other, cycles_for_ms(20));
      CUmemGenericAllocationHandle h; double t = now_us();
      CK(cuMemCreate(&h, size, &p, 0)); c.v.push_back(now_us() - t); t = now_us();
      CK(cuMemMap(va, size, 0, h, 0)); m.v.push_back(now_us() - t); t = now_us();
      CK(cuMemSetAccess(va, size, &acc, 1)); a.v.push_back(now_us() - t); t = now_us();
      CK(cuMemUnmap(va, size)); u.v.push_back(now_us() - t); t = now_us();
      CK(cuMemRelease(h)); r.v.push_back(now_us() - t);
      if (busy) CK(cuStreamSynchronize(s));
    }
    CK(cuMemAddressFree(va, size));
    printf("PROBE {\"probe\":\"vmm_latency_us\",\"busy\":%s,\"mib\":%zu,\"create\":%s,\"map\":%s,\"set_access\":%s,\"unmap\":%s,\"release\":%s}\n", busy ? "true" : "false", mib,
           c.json().c_str(), m.json().c_str(), a.json().c_str(), u.json().c_str(), r.json().c_str());
  }
}

// Does cuMemUnmap wait for a kernel (other stream) still reading the range? Run in a child.
static void unmap_while_running() {
  init(); CUstream s; CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  size_t size = 2 << 20; CUmemAllocationProp p = prop_dev(); CUmemAccessDesc acc{}; acc.location = p.location; acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUdeviceptr va; CK(cuMemAddressReserve(&va, size, 0, 0, 0)); CUmemGenericAllocationHandle h; CK(cuMemCreate(&h, size, &p, 0)); CK(cuMemMap(va, size, 0, h, 0)); CK(cuMemSetAccess(va, size, &acc, 1));
  spin<<<1, 32, 0, (cudaStream_t)s>>>((int*)va, cycles_for_ms(300));
  usleep(20000); double t = now_us(); CUresult ru = cuMemUnmap(va, size); double unmap_us = now_us() - t;
  t = now_us(); CUresult rs = cuStreamSynchronize(s); double sync_us = now_us() - t;
  CUresult after = cuCtxSynchronize();
  printf("PROBE {\"probe\":\"unmap_while_kernel_reads\",\"kernel_ms\":300,\"unmap\":\"%s\",\"unmap_us\":%.0f,\"stream_sync\":\"%s\",\"sync_us\":%.0f,\"ctx_after\":\"%s\"}\n", ename(ru), unmap_us, ename(rs), sync_us, ename(after));
}

// A kernel touching reserved-but-unmapped VA: which error, and is it sticky? Child process.
static void fault(bool was_mapped) {
  init(); size_t size = 2 << 20; CUdeviceptr va; CK(cuMemAddressReserve(&va, size, 0, 0, 0));
  if (was_mapped) { CUmemAllocationProp p = prop_dev(); CUmemAccessDesc acc{}; acc.location = p.location; acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE; CUmemGenericAllocationHandle h; CK(cuMemCreate(&h, size, &p, 0)); CK(cuMemMap(va, size, 0, h, 0)); CK(cuMemSetAccess(va, size, &acc, 1)); CK(cuMemUnmap(va, size)); CK(cuMemRelease(h)); }
  touch<<<4, 256>>>((int*)va, 1024);
  CUresult launch = (CUresult)cudaGetLastError(); CUresult sync = cuCtxSynchronize();
  CUdeviceptr p2; CUresult alloc = cuMemAlloc(&p2, 1 << 20); int x = 0; CUresult copy = cuMemcpyHtoD(va, &x, 4);
  touch<<<1, 1>>>(nullptr, 0); CUresult sync2 = cuCtxSynchronize();
  CUresult reset = cuDevicePrimaryCtxReset(dev); CUcontext c2; cuDevicePrimaryCtxRetain(&c2, dev); cuCtxSetCurrent(c2); CUdeviceptr p3; CUresult alloc_after_reset = cuMemAlloc(&p3, 1 << 20);
  printf("PROBE {\"probe\":\"unmapped_access\",\"range\":\"%s\",\"launch\":\"%s\",\"sync\":\"%s\",\"alloc_after\":\"%s\",\"copy_after\":\"%s\",\"sync_again\":\"%s\",\"primary_reset\":\"%s\",\"alloc_after_reset\":\"%s\"}\n",
         was_mapped ? "mapped_then_unmapped" : "reserved_never_mapped", ename(launch), ename(sync), ename(alloc), ename(copy), ename(sync2), ename(reset), ename(alloc_after_reset));
}

static void bandwidth() {
  CUstream h2d, d2h, comp; CK(cuStreamCreate(&h2d, CU_STREAM_NON_BLOCKING)); CK(cuStreamCreate(&d2h, CU_STREAM_NON_BLOCKING)); CK(cuStreamCreate(&comp, CU_STREAM_NON_BLOCKING));
  for (size_t mib : {64, 512}) {
    size_t n = mib << 20; void *ha, *hb; CK(cuMemHostAlloc(&ha, n, 0)); CK(cuMemHostAlloc(&hb, n, 0)); memset(ha, 1, n); memset(hb, 2, n);
    CUdeviceptr da, db; CK(cuMemAlloc(&da, n)); CK(cuMemAlloc(&db, n)); std::vector<char> pageable(n, 3);
    auto best = [&](auto fn) { double b = 1e30; for (int i = 0; i < 5; ++i) { CK(cuCtxSynchronize()); double t = now_us(); fn(); CK(cuCtxSynchronize()); b = std::min(b, now_us() - t); } return b; };
    double t_h2d = best([&] { CK(cuMemcpyHtoDAsync(da, ha, n, h2d)); });
    double t_d2h = best([&] { CK(cuMemcpyDtoHAsync(hb, db, n, d2h)); });
    double t_both = best([&] { CK(cuMemcpyHtoDAsync(da, ha, n, h2d)); CK(cuMemcpyDtoHAsync(hb, db, n, d2h)); });
    int* other; cudaMalloc(&other, 1 << 20);
    double t_both_busy = best([&] { spin<<<132, 128, 0, (cudaStream_t)comp>>>(other, cycles_for_ms(5)); CK(cuMemcpyHtoDAsync(da, ha, n, h2d)); CK(cuMemcpyDtoHAsync(hb, db, n, d2h)); });
    double t_pageable = best([&] { CK(cuMemcpyHtoD(da, pageable.data(), n)); });
    auto gbs = [&](double us, double k) { return k * n / (us * 1e3); };
    printf("PROBE {\"probe\":\"bandwidth_gbps\",\"mib\":%zu,\"h2d\":%.2f,\"d2h\":%.2f,\"both_total\":%.2f,\"both_total_with_kernel\":%.2f,\"pageable_h2d\":%.2f}\n", mib, gbs(t_h2d, 1), gbs(t_d2h, 1), gbs(t_both, 2), gbs(t_both_busy, 2), gbs(t_pageable, 1));
    cuMemFree(da); cuMemFree(db); cuMemFreeHost(ha); cuMemFreeHost(hb);
  }
}

static void param_info() {
  cudaFunction_t f; cudaKernel_t k; cudaGetFuncBySymbol(&f, (const void*)params_kernel); cudaGetKernel(&k, (const void*)params_kernel);
  std::string out = "PROBE {\"probe\":\"func_param_info\"";
  for (int which = 0; which < 3; ++which) {
    out += which == 0 ? ",\"cufunction\":[" : which == 1 ? ",\"cukernel_via_kernelgetparaminfo\":[" : ",\"cukernel_cast_to_cufunction\":[";
    for (size_t i = 0; i < 6; ++i) { size_t off = 0, sz = 0; CUresult r = which == 0 ? cuFuncGetParamInfo((CUfunction)f, i, &off, &sz) : which == 1 ? cuKernelGetParamInfo((CUkernel)k, i, &off, &sz) : cuFuncGetParamInfo((CUfunction)k, i, &off, &sz);
      char b[96]; snprintf(b, sizeof b, "%s[%zu,%zu,\"%s\"]", i ? "," : "", off, sz, ename(r)); out += b; if (r != CUDA_SUCCESS) break; }
    out += "]";
  }
  int loaded = -1; cuFuncIsLoaded((CUfunctionLoadingState*)&loaded, (CUfunction)f);
  printf("%s,\"is_loaded\":%d,\"lazy\":\"%s\"}\n", out.c_str(), loaded, getenv("CUDA_MODULE_LOADING") ? getenv("CUDA_MODULE_LOADING") : "");
}

// Global-mode capture on thread A while thread B does VMM calls and copies.
static void capture(bool relaxed) {
  CUstream cs; CK(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING)); CUstream bs; CK(cuStreamCreate(&bs, CU_STREAM_NON_BLOCKING));
  int* buf; cudaMalloc(&buf, 4096); std::atomic<int> phase{0}; std::string results;
  std::thread b([&] {
    CK(cuCtxSetCurrent(ctx)); if (relaxed) { CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED; cuThreadExchangeStreamCaptureMode(&m); }
    while (phase.load() != 1) {}
    size_t size = 2 << 20; CUmemAllocationProp p = prop_dev(); CUmemAccessDesc acc{}; acc.location = p.location; acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUdeviceptr va; CUmemGenericAllocationHandle h; char tmp[256];
    CUresult r1 = cuMemAddressReserve(&va, size, 0, 0, 0); CUresult r2 = cuMemCreate(&h, size, &p, 0); CUresult r3 = cuMemMap(va, size, 0, h, 0); CUresult r4 = cuMemSetAccess(va, size, &acc, 1);
    int x = 1; CUresult r5 = cuMemcpyHtoDAsync(va, &x, 4, bs); CUresult r6 = cuStreamSynchronize(bs); CUresult r7 = cuMemUnmap(va, size); CUresult r8 = cuMemRelease(h);
    CUdeviceptr pa; CUresult r9 = cuMemAlloc(&pa, 1 << 20);
    snprintf(tmp, sizeof tmp, "\"reserve\":\"%s\",\"create\":\"%s\",\"map\":\"%s\",\"set_access\":\"%s\",\"memcpy_async\":\"%s\",\"stream_sync\":\"%s\",\"unmap\":\"%s\",\"release\":\"%s\",\"mem_alloc\":\"%s\"", ename(r1), ename(r2), ename(r3), ename(r4), ename(r5), ename(r6), ename(r7), ename(r8), ename(r9));
    results = tmp; phase = 2; });
  CK(cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_GLOBAL)); touch<<<1, 32, 0, (cudaStream_t)cs>>>(buf, 32); phase = 1; while (phase.load() != 2) {}
  touch<<<1, 32, 0, (cudaStream_t)cs>>>(buf, 32); CUstreamCaptureStatus st; cuStreamIsCapturing(cs, &st); CUgraph g = nullptr; CUresult end = cuStreamEndCapture(cs, &g); b.join();
  printf("PROBE {\"probe\":\"capture_vs_other_thread\",\"other_thread_mode\":\"%s\",%s,\"status_before_end\":%d,\"end_capture\":\"%s\"}\n", relaxed ? "relaxed" : "global(default)", results.c_str(), (int)st, ename(end));
  cudaGetLastError();
}

static void lookup_identity() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW); typedef CUresult (*GPA)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  GPA gpa = (GPA)dlsym(h, "cuGetProcAddress_v2"); std::string out = "PROBE {\"probe\":\"getprocaddress_vs_dlsym\",\"results\":[";
  struct Q { const char* name; int v; int f; const char* expect; } qs[] = {{"cuMemAlloc",3020,0,"cuMemAlloc_v2"},{"cuLaunchKernel",4000,0,"cuLaunchKernel"},{"cuLaunchKernel",7000,2,"cuLaunchKernel_ptsz"},{"cuLaunchKernelEx",11060,2,"cuLaunchKernelEx_ptsz"},{"cuMemcpyHtoD",7000,2,"cuMemcpyHtoD_v2_ptds"},{"cuMemCreate",12000,0,"cuMemCreate"},{"cuGetProcAddress",12000,0,"cuGetProcAddress_v2"},{"cuCtxSynchronize",13000,0,"cuCtxSynchronize_v2"},{"cuStreamIsCapturing",10000,2,"cuStreamIsCapturing_ptsz"}};
  bool first = true;
  for (auto& q : qs) { void* p = nullptr; CUdriverProcAddressQueryResult st; CUresult r = gpa(q.name, &p, q.v, q.f, &st); void* e = dlsym(h, q.expect); char b[256]; snprintf(b, sizeof b, "%s{\"name\":\"%s\",\"version\":%d,\"flags\":%d,\"result\":\"%s\",\"equals_dlsym_%s\":%s}", first ? "" : ",", q.name, q.v, q.f, ename(r), q.expect, p && p == e ? "true" : "false"); out += b; first = false; }
  void* p = nullptr; CUresult empty = gpa("", &p, 0, 0, nullptr); CUresult toonew = gpa("cuMemAlloc", &p, 99000, 0, nullptr);
  printf("%s],\"empty_name\":\"%s\",\"version_99000\":\"%s\"}\n", out.c_str(), ename(empty), ename(toonew));
}

int main(int argc, char** argv) {
  std::string what = argc > 1 ? argv[1] : "all";
  if (what == "unmap") { unmap_while_running(); return 0; }
  if (what == "fault0") { fault(false); return 0; }
  if (what == "fault1") { fault(true); return 0; }
  init(); cudaSetDevice(0); cudaFree(0);
  if (what == "params") { param_info(); return 0; }
  granularity(); lookup_identity(); vmm_latency(false); vmm_latency(true); bandwidth(); param_info(); capture(false); capture(true);
  return 0;
}
