// Which way of naming a launch reaches its CUPTI kernel record on real
// hardware. vgpumem times kernels by pushing an external correlation id
// (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2) around the driver launch its hook
// forwards; under PyTorch on an H200 every one of 26 854 kernel records came
// back with no such id. PyTorch launches through the runtime
// (cudaLaunchKernel), so the hook's driver call is nested inside a runtime
// call that CUPTI already numbered. This probe launches kernels three ways
// under several CUPTI set-ups and counts, per way, the kernel records whose
// correlation id
//   - has an external-correlation record with the id pushed,
//   - equals the correlation id a driver-API callback saw on entry to the
//     launch (CUpti_CallbackData::correlationId).
// Ways: "runtime_push_outside" (push, cudaLaunchKernel, pop: how profilers
// do it), "runtime_push_in_driver" (push and pop inside the driver
// callback, nested as vgpumem's hook is), "driver_push" (push, cuLaunchKernel,
// pop: a driver-API program under vgpumem).
//   probe_cupti   -> one JSON object per set-up and way on stdout
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <vector>

namespace {

__global__ void tick(int* p, int v) {
  if (threadIdx.x == 0 && blockIdx.x == 0) p[0] += v;
}

constexpr int kLaunches = 64;
constexpr CUpti_ExternalCorrelationKind kOuter = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1;
constexpr CUpti_ExternalCorrelationKind kInner = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;

std::map<uint32_t, uint64_t> g_external;  // correlation id -> our external id (either kind)
std::vector<uint32_t> g_kernels;          // kernel records' correlation ids
int g_api_records = 0;
bool g_push_in_driver = false;
uint64_t g_next_id = 0;
std::vector<uint32_t> g_entry_ids;  // per launch seen by the driver callback

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 8 << 20;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
      auto* e = reinterpret_cast<CUpti_ActivityExternalCorrelation*>(record);
      if (e->externalKind == kOuter || e->externalKind == kInner) g_external[e->correlationId] = e->externalId;
    } else if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      g_kernels.push_back(reinterpret_cast<CUpti_ActivityKernel10*>(record)->correlationId);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_DRIVER || record->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      ++g_api_records;
    }
  }
  free(buffer);
}

void CUPTIAPI on_api(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->functionName == nullptr || std::strncmp(cb->functionName, "cuLaunchKernel", 14) != 0) return;
  if (cb->callbackSite == CUPTI_API_ENTER) {
    g_entry_ids.push_back(cb->correlationId);
    if (g_push_in_driver) cuptiActivityPushExternalCorrelationId(kInner, ++g_next_id);
  } else if (g_push_in_driver) {
    cuptiActivityPopExternalCorrelationId(kInner, nullptr);
  }
}

#define CHECK(x)                                                   \
  do {                                                             \
    auto r_ = (x);                                                 \
    if (static_cast<int>(r_) != 0) {                               \
      std::printf("{\"error\": \"%s = %d\"}\n", #x, static_cast<int>(r_)); \
      std::exit(3);                                                \
    }                                                              \
  } while (0)

}  // namespace

int main() {
  int* counter = nullptr;
  CHECK(cudaMalloc(&counter, sizeof(int)));
  CUfunction function = nullptr;
  CHECK(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&function), reinterpret_cast<const void*>(&tick)));
  CUpti_SubscriberHandle subscriber = nullptr;
  CHECK(cuptiSubscribe(&subscriber, &on_api, nullptr));
  CHECK(cuptiActivityRegisterCallbacks(&buffer_requested, &buffer_completed));
  cudaStream_t stream = nullptr;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  struct Setup {
    const char* name;
    bool driver_records, runtime_records, driver_callbacks;
  };
  const Setup setups[] = {
      {"kernel+external (vgpumem today)", false, false, false},
      {"+driver callbacks", false, false, true},
      {"+DRIVER records", true, false, false},
      {"+RUNTIME records", false, true, false},
      {"+DRIVER records +driver callbacks", true, false, true},
  };
  const char* ways[] = {"runtime_push_outside", "runtime_push_in_driver", "driver_push"};
  for (const Setup& setup : setups) {
    for (int way = 0; way < 3; ++way) {
      if (way == 1 && !setup.driver_callbacks) continue;  // needs the callback to push from
      CHECK(cuptiEnableDomain(setup.driver_callbacks ? 1 : 0, subscriber, CUPTI_CB_DOMAIN_DRIVER_API));
      CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
      CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
      if (setup.driver_records) CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
      if (setup.runtime_records) CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
      g_external.clear();
      g_kernels.clear();
      g_entry_ids.clear();
      g_api_records = 0;
      g_push_in_driver = way == 1;
      for (int i = 0; i < kLaunches; ++i) {
        if (way == 0) {
          CHECK(cuptiActivityPushExternalCorrelationId(kOuter, ++g_next_id));
          tick<<<1, 32, 0, stream>>>(counter, 1);
          CHECK(cuptiActivityPopExternalCorrelationId(kOuter, nullptr));
        } else if (way == 1) {
          tick<<<1, 32, 0, stream>>>(counter, 1);
        } else {
          int one = 1;
          void* params[] = {&counter, &one};
          CHECK(cuptiActivityPushExternalCorrelationId(kInner, ++g_next_id));
          CHECK(cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, stream, params, nullptr));
          CHECK(cuptiActivityPopExternalCorrelationId(kInner, nullptr));
        }
      }
      CHECK(cudaStreamSynchronize(stream));
      CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
      const std::set<uint32_t> entry(g_entry_ids.begin(), g_entry_ids.end());
      int with_external = 0, with_entry = 0;
      for (uint32_t id : g_kernels) {
        with_external += g_external.count(id) != 0;
        with_entry += entry.count(id) != 0;
      }
      std::printf(
          "{\"setup\": \"%s\", \"way\": \"%s\", \"launches\": %d, \"kernel_records\": %zu, \"external_records\": %zu, "
          "\"api_records\": %d, \"driver_callbacks_seen\": %zu, \"kernels_with_our_external_id\": %d, "
          "\"kernels_matching_driver_entry_correlation\": %d, \"first_kernel_correlation\": %u, "
          "\"first_entry_correlation\": %u}\n",
          setup.name, ways[way], kLaunches, g_kernels.size(), g_external.size(), g_api_records, g_entry_ids.size(),
          with_external, with_entry, g_kernels.empty() ? 0 : g_kernels[0], g_entry_ids.empty() ? 0 : g_entry_ids[0]);
      std::fflush(stdout);
      CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
      CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
      if (setup.driver_records) CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER));
      if (setup.runtime_records) CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME));
    }
  }
  CHECK(cuptiEnableDomain(0, subscriber, CUPTI_CB_DOMAIN_DRIVER_API));
  CHECK(cuptiUnsubscribe(subscriber));
  return 0;
}
