// libnext_after_driver.so: after the driver in the program's search order,
// linked to it like another interposer, and defining cuMemAlloc_v2 itself.
//  - Its own dlsym(RTLD_NEXT, "cuMemAlloc_v2") finds nothing after it: NULL,
//    with or without the shim.
//  - libnext_first.so (before it, after the driver) finds this definition
//    through RTLD_NEXT: not the driver's, so it is not replaced by the hook.
#include <cuda.h>
#include <dlfcn.h>

extern "C" CUresult cuMemAlloc_v2(CUdeviceptr*, size_t) { return CUDA_ERROR_NOT_SUPPORTED; }

// Not tail calls: glibc must see this library as the caller.
extern "C" void* after_driver_next() {
  void* volatile found = dlsym(RTLD_NEXT, "cuMemAlloc_v2");
  return found;
}
extern "C" void* after_driver_default() {
  void* volatile found = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
  return found;
}

// Links the driver for real, as an interposer does.
extern "C" int after_driver_marker() {
  int version = 0;
  return cuDriverGetVersion(&version) == CUDA_SUCCESS ? 33 : -33;
}
