// Simulated kernels for the e2e probe programs: registered with the
// simulated driver (found with dlsym, so a probe runs the same under the
// shim), each taking 10 us of simulated time unless told otherwise.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "probe_support.h"
#include "vgpusim.h"

inline CUfunction register_probe_kernel(const char* name, vgpusimKernelFn body, std::vector<size_t> sizes,
                                        void* user = nullptr, double duration_ns = 10000) {
  using Register = CUresult (*)(const vgpusimKernelDesc*, CUfunction*);
  auto reg = reinterpret_cast<Register>(dlsym(RTLD_DEFAULT, "vgpusimRegisterKernel"));
  if (reg == nullptr) std::exit(3);
  vgpusimKernelDesc desc{};
  desc.name = name;
  desc.body = body;
  desc.paramCount = static_cast<unsigned>(sizes.size());
  desc.paramSizes = sizes.data();
  desc.durationNs = duration_ns;
  desc.user = user;
  CUfunction kernel = nullptr;
  CHECK(reg(&desc, &kernel));
  return kernel;
}

// p[i] += 1 for each of `ints` ints of the buffer p, its one parameter.
inline CUfunction register_add_one(const char* name, std::size_t ints) {
  static const auto body = [](void** params, const vgpusimLaunch*, void* user) {
    int* p = nullptr;
    std::memcpy(&p, params[0], sizeof p);
    const std::size_t count = *static_cast<const std::size_t*>(user);
    for (std::size_t i = 0; i < count; ++i) p[i] += 1;
  };
  return register_probe_kernel(name, body, {sizeof(CUdeviceptr)}, new std::size_t(ints));  // lives as the kernel does
}
