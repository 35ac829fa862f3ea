// probe_shim: a small driver-API program that run_all.sh runs once without and
// once under libvgpumem (VGPUMEM_LIMIT=1GiB, VGPUMEM_TRACE): what cuMemGetInfo
// and cuDeviceTotalMem report, whether allocations beyond the cap fail with
// CUDA_ERROR_OUT_OF_MEMORY (cuMemAlloc, cuMemCreate, cuMemAllocAsync), and a
// known number of launches through each entry point (exported symbol,
// cuGetProcAddress_v2, dlsym) to compare with the trace's "launches".
// Runs in-process (no fork: the shim's trace is per process).
#include "common.h"

int main() {
  g_emit_fd = 1; printf("{\"probe\":\"probe_shim\","); fflush(stdout);
  Cuda c; bool ok = c.init();
  if (ok) {
    size_t fr = 0, tot = 0; emit_r("mem_get_info", cuMemGetInfo(&fr, &tot)); emit("mem_get_info_free_total", fmt("[%zu,%zu]", fr, tot));
    size_t dt = 0; cuDeviceTotalMem(&dt, c.dev); emit("device_total_mem", fmt("%zu", dt));
    CUdeviceptr a = 0, b = 0; emit_r("alloc_256MiB", cuMemAlloc(&a, 256u << 20));
    emit_r("alloc_2GiB", cuMemAlloc(&b, 2ull << 30)); if (b) cuMemFree(b);
    CUmemAllocationProp p = prop_dev(); CUmemGenericAllocationHandle h = 0;
    emit_r("mem_create_2GiB", cuMemCreate(&h, 2ull << 30, &p, 0)); if (h) cuMemRelease(h);
    CUstream s; cuStreamCreate(&s, CU_STREAM_NON_BLOCKING); CUdeviceptr aa = 0;
    emit_r("alloc_async_2GiB", cuMemAllocAsync(&aa, 2ull << 30, s)); if (aa) cuMemFreeAsync(aa, s); cuStreamSynchronize(s);
    int n = 1 << 20; int launches = 0;
    for (int i = 0; i < 5; ++i) if (launch_touch(c, s, a, n) == CUDA_SUCCESS) launches++;       // exported cuLaunchKernel (PLT)
    typedef CUresult (*GPA2)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
    typedef CUresult (*LK)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**, void**);
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    GPA2 gpa = lib ? (GPA2)dlsym(lib, "cuGetProcAddress_v2") : nullptr;
    LK lk = nullptr; CUdriverProcAddressQueryResult st;
    if (gpa && gpa("cuLaunchKernel", (void**)&lk, 12000, 0, &st) == CUDA_SUCCESS && lk) {
      std::vector<void*> args = {&a, &n};
      for (int i = 0; i < 3; ++i) if (lk(c.touch, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, s, args.data(), nullptr) == CUDA_SUCCESS) launches++;
    }
    LK lk2 = lib ? (LK)dlsym(lib, "cuLaunchKernel") : nullptr;
    if (lk2) { std::vector<void*> args = {&a, &n};
      for (int i = 0; i < 2; ++i) if (lk2(c.touch, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, s, args.data(), nullptr) == CUDA_SUCCESS) launches++; }
    emit_r("sync", cuStreamSynchronize(s));
    int v = -1; cuMemcpyDtoH(&v, a, sizeof v); emit("value_after_launches", fmt("%d", v));
    emit("launches_made", fmt("%d", launches));
    emit("launches_expected_by_entry", q("cuLaunchKernel: 5 exported + 3 via cuGetProcAddress_v2 + 2 via dlsym = 10"));
    emit_r("free", cuMemFree(a));
  }
  printf("\"ok\":%s}\n", ok ? "true" : "false");
  return 0;
}
