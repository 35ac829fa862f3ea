// libnext_first.so: loaded before libnext_second.so. Its dlsym(RTLD_NEXT, ...)
// must find libnext_second.so's definition, not its own, with the shim's
// dlsym in the way.
#include <dlfcn.h>

extern "C" int vgpumem_probe_value() { return 1; }

extern "C" int first_next_value() {
  auto next = reinterpret_cast<int (*)()>(dlsym(RTLD_NEXT, "vgpumem_probe_value"));
  return next ? next() : -1;
}

// After the driver: the next cuMemAlloc_v2 is libnext_after_driver.so's.
// (Not a tail call: glibc must see this library as the caller.)
extern "C" void* first_next_driver_name() {
  void* volatile found = dlsym(RTLD_NEXT, "cuMemAlloc_v2");
  return found;
}
