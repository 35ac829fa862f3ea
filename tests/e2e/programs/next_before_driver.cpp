// libnext_before_driver.so: before the driver in the program's search order.
// Its dlsym(RTLD_NEXT, "cuMemAlloc_v2") finds the driver's function, so with
// the shim preloaded it must get the shim's hook: interposition at work.
#include <dlfcn.h>

// Not a tail call: glibc must see this library as the caller.
extern "C" void* before_driver_next() {
  void* volatile found = dlsym(RTLD_NEXT, "cuMemAlloc_v2");
  return found;
}
