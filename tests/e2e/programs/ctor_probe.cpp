// A hook's first run inside a library constructor must not deadlock against
// another thread's first CUDA call: the main thread dlopens a library (taking
// the loader's lock) whose constructor calls a hooked driver function, while
// a second thread's first hooked call is loading the driver (dlopen, which
// waits for the loader's lock). Had the shim held a mutex of its own across
// its dlopen of the driver, the constructor would wait for that mutex and
// the second thread for the loader's lock, forever.
//
// Usage: ctor_probe <path of libctor_probe_library.so>. Prints "ctor ok";
// killed by its alarm after 20 s if stuck.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

namespace {
std::atomic<bool> g_entered{false};
}

// Called by the library's constructor, under the loader's lock.
extern "C" __attribute__((visibility("default"))) void ctor_probe_entered() {
  g_entered = true;
  // Long enough for the other thread to be inside its first hooked call,
  // loading the driver.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  alarm(20);
  std::thread first_call([] {
    while (!g_entered) std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::size_t free_bytes = 0, total_bytes = 0;
    static_cast<void>(cuMemGetInfo(&free_bytes, &total_bytes));
  });
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  first_call.join();
  if (library == nullptr) {
    std::printf("ctor dlopen failed: %s\n", dlerror());
    return 5;
  }
  std::printf("ctor ok\n");
  return 0;
}
