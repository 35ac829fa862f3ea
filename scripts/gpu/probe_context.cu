// What the real driver answers for an event recorded on a stream of another
// context (the simulated driver says CUDA_ERROR_INVALID_HANDLE, as cuda.h
// documents), and whether a stream may wait on an event of another context.
// Prints one JSON object. Built by build.sh; no shim needed.
#include <cuda.h>

#include <cstdio>

namespace {

const char* name_of(CUresult result) {
  const char* name = nullptr;
  return cuGetErrorName(result, &name) == CUDA_SUCCESS && name != nullptr ? name : "?";
}

}  // namespace

int main() {
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) {
    std::printf("{\"error\":\"cuInit %s\"}\n", name_of(r));
    return 3;
  }
  CUcontext a = nullptr, b = nullptr;
  cuCtxCreate(&a, nullptr, 0, 0);
  CUevent event_a = nullptr;
  cuEventCreate(&event_a, CU_EVENT_DISABLE_TIMING);
  CUstream stream_a = nullptr;
  cuStreamCreate(&stream_a, CU_STREAM_NON_BLOCKING);
  cuCtxCreate(&b, nullptr, 0, 0);  // current from here
  CUstream stream_b = nullptr;
  cuStreamCreate(&stream_b, CU_STREAM_NON_BLOCKING);
  CUevent event_b = nullptr;
  cuEventCreate(&event_b, CU_EVENT_DISABLE_TIMING);
  const CUresult named = cuEventRecord(event_a, stream_b);            // event of A, stream of B
  const CUresult legacy = cuEventRecord(event_a, nullptr);            // event of A, B's legacy stream
  const CUresult own = cuEventRecord(event_b, stream_b);              // the control
  const CUresult other_current = cuEventRecord(event_a, stream_a);    // both of A, B current
  cuEventRecord(event_b, stream_b);
  const CUresult wait = cuStreamWaitEvent(stream_a, event_b, 0);      // A's stream waits on B's event
  const CUresult sync = cuCtxSynchronize();
  std::printf("{\"record_event_of_other_context_on_named_stream\":\"%s\","
              "\"record_event_of_other_context_on_legacy_stream\":\"%s\","
              "\"record_same_context\":\"%s\","
              "\"record_both_of_a_context_not_current\":\"%s\","
              "\"wait_on_event_of_other_context\":\"%s\",\"sync_after\":\"%s\"}\n",
              name_of(named), name_of(legacy), name_of(own), name_of(other_current), name_of(wait), name_of(sync));
  return 0;
}
