// What the simulator's test programs share: a fixture that makes the primary
// context current, child processes for scenarios that end a context (an
// illegal access is fatal to the process, as on hardware), and kernels.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda.h>

#include "vgpusim.h"

namespace simtest {

constexpr std::size_t kMiB = 1u << 20;

// argv[0], set by main, for run_child.
inline const char* g_self = nullptr;

class Simulator : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    CUdevice device = 0;
    ASSERT_EQ(cuDeviceGet(&device, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&context_, device), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(context_), CUDA_SUCCESS);
  }
  CUcontext context_ = nullptr;
};

// Runs this test binary again as a child with `env` set, in scenario `name`;
// its exit status (128 + signal if it died).
inline int run_child(const std::string& name, const std::vector<std::string>& env = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (const std::string& e : env) putenv(strdup(e.c_str()));
    execl(g_self, g_self, "--child", name.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Registers a kernel with parameters of `sizes` bytes (the simulator copies them).
inline CUfunction register_kernel(const char* name, vgpusimKernelFn body, const std::vector<std::size_t>& sizes,
                                  double duration_ns) {
  vgpusimKernelDesc desc{};
  desc.name = name;
  desc.body = body;
  desc.paramCount = static_cast<unsigned>(sizes.size());
  desc.paramSizes = sizes.data();
  desc.durationNs = duration_ns;
  CUfunction f = nullptr;
  EXPECT_EQ(vgpusimRegisterKernel(&desc, &f), CUDA_SUCCESS) << name;
  return f;
}

// Pinned device memory on device 0, and read-write access to it.
inline CUmemAllocationProp device_memory() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  return prop;
}
inline CUmemAccessDesc read_write() { return CUmemAccessDesc{device_memory().location, CU_MEM_ACCESS_FLAGS_PROT_READWRITE}; }

template <class T>
T param(void** params, int i) {
  T value;
  std::memcpy(&value, params[i], sizeof value);
  return value;
}

inline CUresult launch(CUfunction f, CUstream stream, std::vector<void*> params) {
  return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, params.data(), nullptr);
}

}  // namespace simtest
