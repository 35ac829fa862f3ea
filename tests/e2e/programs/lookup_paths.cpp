// Exercises every way a process finds a driver entry point, and prints what
// each way resolved to (tests/e2e/lookup_test.cpp asserts on it):
//   exported  -- symbols bound by the dynamic linker (this program links libcuda)
//   dlsym     -- dlsym on the libcuda handle, RTLD_DEFAULT and RTLD_NEXT
//   gpa       -- cuGetProcAddress_v2 / cuGetProcAddress for versions and flags
//   cudart    -- the runtime's bootstrap sequence, step by step
//   rtld_next -- a library's own dlsym(RTLD_NEXT, ...) stays relative to it,
//                for driver names too (search order: the program, the shim,
//                libnext_before_driver, libcuda, libnext_first,
//                libnext_second, libnext_after_driver)
//   cudnn     -- a cudnn* name passes through dlsym untouched
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "resolve_report.h"

#undef cuGetProcAddress

extern "C" int first_next_value();  // from libnext_first.so
extern "C" int second_marker();     // from libnext_second.so
extern "C" void* first_next_driver_name();  // from libnext_first.so
extern "C" void* before_driver_next();      // from libnext_before_driver.so
extern "C" void* after_driver_next();       // from libnext_after_driver.so
extern "C" void* after_driver_default();
extern "C" int after_driver_marker();

namespace {

using GetProcAddressV2 = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, cuuint64_t);

void exported() {
  // Taking the address goes through the same binding as a call.
  report_resolution("exported.cuMemAlloc_v2", reinterpret_cast<void*>(&cuMemAlloc_v2));
  report_resolution("exported.cuLaunchKernel", reinterpret_cast<void*>(&cuLaunchKernel));
  report_resolution("exported.cuMemGetInfo_v2", reinterpret_cast<void*>(&cuMemGetInfo_v2));
  report_resolution("exported.cuInit", reinterpret_cast<void*>(&cuInit));
}

void by_dlsym() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    std::printf("error dlopen %s\n", dlerror());
    return;
  }
  for (const char* name : {"cuMemAlloc_v2", "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx_ptsz",
                           "cuMemcpyHtoD_v2_ptds", "cuGetProcAddress", "cuGetProcAddress_v2", "cuInit",
                           "cuStreamIsCapturing", "cuMemCreate"}) {
    report_resolution(("dlsym.handle." + std::string(name)).c_str(), dlsym(driver, name));
    report_resolution(("dlsym.default." + std::string(name)).c_str(), dlsym(RTLD_DEFAULT, name));
  }
  report_resolution("dlsym.next.cuMemAlloc_v2", dlsym(RTLD_NEXT, "cuMemAlloc_v2"));
  report_resolution("dlsym.handle.cuNoSuchFunction", dlsym(driver, "cuNoSuchFunction"));
}

void by_get_proc_address() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  auto v2 = reinterpret_cast<GetProcAddressV2>(dlsym(driver, "cuGetProcAddress_v2"));
  auto v1 = reinterpret_cast<GetProcAddressV1>(dlsym(driver, "cuGetProcAddress"));
  if (v2 == nullptr || v1 == nullptr || v2("cuInit", nullptr, 0, 0, nullptr) == CUDA_SUCCESS) {
    std::printf("error resolvers missing\n");
    return;
  }
  struct Request {
    const char* name;
    int version;
    cuuint64_t flags;
  };
  const Request requests[] = {
      {"cuMemAlloc", 3020, 0},          {"cuMemAlloc", 2000, 0},          {"cuMemFree", 3020, 0},
      {"cuLaunchKernel", 4000, 0},      {"cuLaunchKernel", 7000, 2},      {"cuLaunchKernel", 12000, 1},
      {"cuLaunchKernelEx", 11060, 0},   {"cuLaunchKernelEx", 11060, 2},   {"cuMemAllocAsync", 11020, 2},
      {"cuMemcpyHtoD", 3020, 0},        {"cuMemcpyHtoD", 7000, 2},        {"cuMemcpyAsync", 7000, 2},
      {"cuMemGetInfo", 3020, 0},        {"cuMemCreate", 10020, 0},        {"cuGraphLaunch", 10000, 2},
      {"cuStreamIsCapturing", 10000, 2}, {"cuInit", 2000, 0},             {"cuGetProcAddress", 12000, 0},
      {"cuGetProcAddress", 11030, 0},
  };
  for (const Request& r : requests) {
    char label[128];
    void* fn = nullptr;
    CUdriverProcAddressQueryResult status{};
    const CUresult result = v2(r.name, &fn, r.version, r.flags, &status);
    std::snprintf(label, sizeof label, "gpa2.%s@%d/%llu", r.name, r.version, static_cast<unsigned long long>(r.flags));
    report_resolution(label, result == CUDA_SUCCESS ? fn : nullptr);
    fn = nullptr;
    const CUresult result1 = v1(r.name, &fn, r.version, r.flags);
    std::snprintf(label, sizeof label, "gpa1.%s@%d/%llu", r.name, r.version, static_cast<unsigned long long>(r.flags));
    report_resolution(label, result1 == CUDA_SUCCESS ? fn : nullptr);
  }
  // A NULL name (the H100's driver crashes on it): an error, *pfn untouched.
  void* sentinel = reinterpret_cast<void*>(&v2);
  void* fn = sentinel;
  std::printf("gpa2.null.result %d %s\n", static_cast<int>(v2(nullptr, &fn, 13000, 0, nullptr)),
              fn == sentinel ? "untouched" : "written");
  fn = sentinel;
  std::printf("gpa1.null.result %d %s\n", static_cast<int>(v1(nullptr, &fn, 13000, 0)),
              fn == sentinel ? "untouched" : "written");
}

// What libcudart.so.13 does at start-up (research/cuda-facts.md §1.1).
void cudart_bootstrap() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  auto resolve = reinterpret_cast<GetProcAddressV2>(dlsym(driver, "cuGetProcAddress_v2"));
  report_resolution("cudart.dlsym.cuGetProcAddress_v2", reinterpret_cast<void*>(resolve));
  if (resolve == nullptr) return;
  void* probe = nullptr;
  std::printf("cudart.probe.result %d\n", static_cast<int>(resolve("", &probe, 0, 0, nullptr)));
  void* init = nullptr;
  resolve("cuInit", &init, 2000, 0, nullptr);
  report_resolution("cudart.cuInit", init);
  void* self_old = nullptr;
  resolve("cuGetProcAddress", &self_old, 11030, 0, nullptr);
  report_resolution("cudart.self@11030", self_old);
  void* self_new = nullptr;
  resolve("cuGetProcAddress", &self_new, 12000, 0, nullptr);
  report_resolution("cudart.self@12000", self_new);
  // From here on cudart uses the pointer it got for ("cuGetProcAddress", 12000).
  resolve = reinterpret_cast<GetProcAddressV2>(self_new);
  if (resolve == nullptr) return;
  if (reinterpret_cast<CUresult (*)(unsigned)>(init)(0) != CUDA_SUCCESS) std::printf("error cuInit\n");
  for (cuuint64_t flags : {0ull, 2ull}) {
    for (const char* name : {"cuMemAlloc", "cuLaunchKernel", "cuLaunchKernelEx", "cuMemcpyHtoDAsync", "cuMemFreeAsync",
                             "cuGraphLaunch", "cuCtxSynchronize"}) {
      void* fn = nullptr;
      resolve(name, &fn, 13000, flags, nullptr);
      char label[96];
      std::snprintf(label, sizeof label, "cudart.%s/%llu", name, static_cast<unsigned long long>(flags));
      report_resolution(label, fn);
    }
  }
}

void rtld_next() {
  std::printf("rtld_next.value %d marker %d\n", first_next_value(), second_marker());
  report_resolution("rtld_next.driver.before", before_driver_next());
  report_resolution("rtld_next.driver.between", first_next_driver_name());
  report_resolution("rtld_next.driver.after", after_driver_next());
  report_resolution("rtld_default.driver.after", after_driver_default());
  std::printf("rtld_next.after_marker %d\n", after_driver_marker());
}

void cudnn_names() {
  report_resolution("cudnn.dlsym.default.cudnnCreate", dlsym(RTLD_DEFAULT, "cudnnCreate"));
  report_resolution("cudnn.dlsym.default.cublasCreate_v2", dlsym(RTLD_DEFAULT, "cublasCreate_v2"));
  report_resolution("plain.dlsym.default.printf", dlsym(RTLD_DEFAULT, "printf"));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "all";
  if (what == "exported" || what == "all") exported();
  if (what == "dlsym" || what == "all") by_dlsym();
  if (what == "gpa" || what == "all") by_get_proc_address();
  if (what == "cudart" || what == "all") cudart_bootstrap();
  if (what == "rtld_next" || what == "all") rtld_next();
  if (what == "cudnn" || what == "all") cudnn_names();
  std::printf("done\n");
  return 0;
}
