// A program that profiles itself with CUPTI, as Nsight Systems or
// torch.profiler would: some CUDA work first, then it subscribes, registers
// activity buffers, enables kernel activity, launches kernels and prints what
// its records say. Under the shim its output must be the same as without:
// vgpumem, if it held CUPTI, steps aside for it.
//   cupti_profiler          profile as above
//   cupti_profiler plain    no profiler: five kernels, nothing else
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "probe_kernels.h"

namespace {

std::vector<unsigned long long> g_durations;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, 1 << 16));
  *size = 1 << 16;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    g_durations.push_back(kernel->end - kernel->start);
  }
  free(buffer);
}

#define CUPTI_CHECK(call)                                                     \
  do {                                                                        \
    const CUptiResult cupti_result = (call);                                  \
    if (cupti_result != CUPTI_SUCCESS) {                                      \
      std::fprintf(stderr, "%s failed: %d\n", #call, static_cast<int>(cupti_result)); \
      return 2;                                                               \
    }                                                                         \
  } while (0)

void idle(void**, const vgpusimLaunch*, void*) {}

// A kernel of its own simulated duration (probe_kernels.h gives every kernel 10 us).
CUfunction kernel(const char* name, double duration_ns) {
  using Register = CUresult (*)(const vgpusimKernelDesc*, CUfunction*);
  auto reg = reinterpret_cast<Register>(dlsym(RTLD_DEFAULT, "vgpusimRegisterKernel"));
  if (reg == nullptr) std::exit(3);
  vgpusimKernelDesc desc{};
  desc.name = name;
  desc.body = idle;
  desc.durationNs = duration_ns;
  CUfunction out = nullptr;
  CHECK(reg(&desc, &out));
  return out;
}

void launch(CUfunction f) { CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr)); }

}  // namespace

int main(int argc, char** argv) {
  const bool plain = argc > 1 && std::strcmp(argv[1], "plain") == 0;
  CHECK(cuInit(0));
  CUdevice device = 0;
  CHECK(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&context, device));
  CHECK(cuCtxSetCurrent(context));
  CUdeviceptr buffer = 0;
  CHECK(cuMemAlloc(&buffer, 1 << 20));
  CUfunction short_kernel = kernel("short", 1000), long_kernel = kernel("long", 2500);

  // Work before any profiler: vgpumem, under paging, times it with CUPTI.
  for (int i = 0; i < 3; ++i) launch(short_kernel);
  if (plain) {
    launch(long_kernel);
    launch(long_kernel);
    CHECK(cuCtxSynchronize());
    std::printf("LAUNCHED 5\n");
    return 0;
  }
  CHECK(cuCtxSynchronize());

  CUpti_SubscriberHandle subscriber = nullptr;
  CUPTI_CHECK(cuptiSubscribe(&subscriber, nullptr, nullptr));
  CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  launch(short_kernel);
  launch(long_kernel);
  launch(long_kernel);
  launch(short_kernel);
  CHECK(cuCtxSynchronize());
  CUPTI_CHECK(cuptiActivityFlushAll(0));
  size_t dropped = 0;
  CUPTI_CHECK(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped));
  std::printf("RECORDS %zu DROPPED %zu\nDURATIONS", g_durations.size(), dropped);
  for (unsigned long long d : g_durations) std::printf(" %llu", d);
  std::printf("\n");
  CUPTI_CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CUPTI_CHECK(cuptiUnsubscribe(subscriber));
  CHECK(cuMemFree(buffer));
  return 0;
}
