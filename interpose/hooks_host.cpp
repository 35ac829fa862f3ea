// Hooks for pinned host memory: tracked for the summary (and, with the host
// limit, bounded); never charged to a device cap.
#include "interpose/hook_support.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

// Pinned host memory a kernel may read directly, as NCCL's work FIFO is
// read: with paging on, the pointer tables know it (a launch pointing into
// it has it scanned).
void track_host(HookId api, CUresult result, void* pointer, std::size_t bytes) {
  if (result == CUDA_SUCCESS && pointer != nullptr) {
    Runtime::get().accounting().commit_host(reinterpret_cast<std::uint64_t>(pointer), bytes, api_name(api));
    if (vmm::Pager* pager = Runtime::get().pager()) {
      pager->pointer_tables().host_pinned(reinterpret_cast<std::uint64_t>(pointer), bytes);
    }
  }
}

// Forgotten by the tables before the real call: no launch scans it once it may be gone.
void forget_host_table(void* pointer) {
  if (vmm::Pager* pager = Runtime::get().pager()) {
    pager->pointer_tables().host_released(reinterpret_cast<std::uint64_t>(pointer));
  }
}

CUresult untrack_host(HookId api, CUresult result, void* pointer) {
  if (result == CUDA_SUCCESS) {
    Runtime::get().accounting().forget(AllocationKind::host, reinterpret_cast<std::uint64_t>(pointer), api_name(api));
  }
  return result;
}

}  // namespace

VGPUMEM_HOOK_DEFINE(cuMemHostAlloc, (void** pp, size_t bytesize, unsigned int flags), (pp, bytesize, flags)) {
  const CUresult result = REAL(cuMemHostAlloc)(pp, bytesize, flags);
  track_host(HookId::cuMemHostAlloc, result, pp ? *pp : nullptr, bytesize);
  return result;
}

VGPUMEM_HOOK_DEFINE(cuMemAllocHost_v2, (void** pp, size_t bytesize), (pp, bytesize)) {
  const CUresult result = REAL(cuMemAllocHost_v2)(pp, bytesize);
  track_host(HookId::cuMemAllocHost_v2, result, pp ? *pp : nullptr, bytesize);
  return result;
}

VGPUMEM_HOOK_DEFINE(cuMemFreeHost, (void* p), (p)) {
  forget_host_table(p);
  return untrack_host(HookId::cuMemFreeHost, REAL(cuMemFreeHost)(p), p);
}

VGPUMEM_HOOK_DEFINE(cuMemHostRegister_v2, (void* p, size_t bytesize, unsigned int flags), (p, bytesize, flags)) {
  const CUresult result = REAL(cuMemHostRegister_v2)(p, bytesize, flags);
  track_host(HookId::cuMemHostRegister_v2, result, p, bytesize);
  return result;
}

VGPUMEM_HOOK_DEFINE(cuMemHostUnregister, (void* p), (p)) {
  forget_host_table(p);
  return untrack_host(HookId::cuMemHostUnregister, REAL(cuMemHostUnregister)(p), p);
}
