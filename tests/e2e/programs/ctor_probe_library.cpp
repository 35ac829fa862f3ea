// libctor_probe_library.so: its constructor -- run by dlopen, under the
// loader's lock -- tells the program it started, gives the program's other
// thread time to make its first CUDA call (which loads the driver), then
// calls a hooked driver function itself.
#include <cuda.h>

extern "C" void ctor_probe_entered();  // the program's (ctor_probe.cpp)

__attribute__((constructor)) static void call_the_driver_from_a_constructor() {
  ctor_probe_entered();
  std::size_t free_bytes = 0, total_bytes = 0;
  static_cast<void>(cuMemGetInfo(&free_bytes, &total_bytes));
}
