// Hooks for pinned host memory: tracked for the summary (and, with the host
// limit, bounded); never charged to a device cap.
#include "interpose/hook_support.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

void track_host(HookId api, CUresult result, void* pointer, std::size_t bytes) {
  if (result == CUDA_SUCCESS && pointer != nullptr) {
    Runtime::get().accounting().commit_host(reinterpret_cast<std::uint64_t>(pointer), bytes, api_name(api));
  }
}

CUresult untrack_host(HookId api, CUresult result, void* pointer) {
  if (result == CUDA_SUCCESS) {
    Runtime::get().accounting().forget(AllocationKind::host, reinterpret_cast<std::uint64_t>(pointer), api_name(api));
  }
  return result;
}

}  // namespace

extern "C" CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int flags) {
  Runtime::get().count(HookId::cuMemHostAlloc);
  const CUresult result = REAL(cuMemHostAlloc)(pp, bytesize, flags);
  track_host(HookId::cuMemHostAlloc, result, pp ? *pp : nullptr, bytesize);
  return result;
}

extern "C" CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  Runtime::get().count(HookId::cuMemAllocHost_v2);
  const CUresult result = REAL(cuMemAllocHost_v2)(pp, bytesize);
  track_host(HookId::cuMemAllocHost_v2, result, pp ? *pp : nullptr, bytesize);
  return result;
}

extern "C" CUresult cuMemFreeHost(void* p) {
  Runtime::get().count(HookId::cuMemFreeHost);
  return untrack_host(HookId::cuMemFreeHost, REAL(cuMemFreeHost)(p), p);
}

extern "C" CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int flags) {
  Runtime::get().count(HookId::cuMemHostRegister_v2);
  const CUresult result = REAL(cuMemHostRegister_v2)(p, bytesize, flags);
  track_host(HookId::cuMemHostRegister_v2, result, p, bytesize);
  return result;
}

extern "C" CUresult cuMemHostUnregister(void* p) {
  Runtime::get().count(HookId::cuMemHostUnregister);
  return untrack_host(HookId::cuMemHostUnregister, REAL(cuMemHostUnregister)(p), p);
}
