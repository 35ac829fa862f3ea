// The driver calls the memory manager makes, as plain function pointers.
//
// The shim fills them from the real driver (interpose/paging_driver.cpp), so
// the pager's own calls never pass through the hooks; tests fill them from the
// simulated driver directly. vmm/ therefore never names a symbol.
#pragma once

#include <cuda.h>

namespace vgpumem::vmm {

struct DriverOps {
  CUresult (*address_reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*address_free)(CUdeviceptr, size_t) = nullptr;
  CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long) = nullptr;
  CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
  CUresult (*unmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  CUresult (*host_alloc)(void**, size_t, unsigned) = nullptr;
  CUresult (*host_free)(void*) = nullptr;
  CUresult (*copy_to_host_async)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*copy_to_device_async)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*stream_create)(CUstream*, unsigned) = nullptr;
  CUresult (*stream_wait_event)(CUstream, CUevent, unsigned) = nullptr;
  CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus*) = nullptr;
  CUresult (*event_create)(CUevent*, unsigned) = nullptr;
  CUresult (*event_record)(CUevent, CUstream) = nullptr;
  CUresult (*event_query)(CUevent) = nullptr;
  CUresult (*event_synchronize)(CUevent) = nullptr;
  CUresult (*event_destroy)(CUevent) = nullptr;
  CUresult (*event_elapsed)(float*, CUevent, CUevent) = nullptr;  // optional: stall time is not measured without it
  CUresult (*context_synchronize)() = nullptr;
  CUresult (*context_get_current)(CUcontext*) = nullptr;
  CUresult (*context_set_current)(CUcontext) = nullptr;
  CUresult (*context_push)(CUcontext) = nullptr;
  CUresult (*context_pop)(CUcontext*) = nullptr;
  CUresult (*context_get_device)(CUdevice*) = nullptr;     // of the current context
  CUresult (*primary_context_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*stream_get_context)(CUstream, CUcontext*) = nullptr;
  CUresult (*stream_synchronize)(CUstream) = nullptr;
  CUresult (*launch_host_function)(CUstream, CUhostFn, void*) = nullptr;
  CUresult (*exchange_capture_mode)(CUstreamCaptureMode*) = nullptr;
  CUresult (*func_param_info)(CUfunction, size_t, size_t*, size_t*) = nullptr;
  CUresult (*kernel_param_info)(CUkernel, size_t, size_t*, size_t*) = nullptr;
  CUresult (*func_get_name)(const char**, CUfunction) = nullptr;  // optional: kernels are named in logs
  CUresult (*kernel_get_name)(const char**, CUkernel) = nullptr;  // optional
  // A simulated driver's host clock (tests/sim: vgpusimHostTimeNs and
  // vgpusimHostHandoff); null on hardware, where time needs no help. The
  // simulator gives every thread a clock of its own and cannot see one
  // thread hand work to another, so the pager's threads carry the time
  // across where they do (work posted to the mover, a reclaimer woken):
  // without it, work handed over would be done in the simulated past, and
  // cost nothing.
  unsigned long long (*host_time_ns)() = nullptr;
  // host_handoff(t, why): `why` names the wait on the simulator's timeline
  // (a string literal).
  void (*host_handoff)(unsigned long long, const char*) = nullptr;
};

}  // namespace vgpumem::vmm
