// The pager's driver calls, bound to the real driver: the hooked ones through
// their REAL entries (so the pager's own VMM calls and copies are never
// counted, capped or paged again), the rest looked up by name.
#include "interpose/paging_driver.h"

#include "interpose/real_driver.h"

namespace vgpumem::interpose {
namespace {

template <typename Fn>
void bind(Fn*& slot, HookId id) {
  RealDriver* driver = RealDriver::get();
  slot = driver ? reinterpret_cast<Fn*>(driver->real(id)) : nullptr;
}

template <typename Fn>
void bind(Fn*& slot, const char* name) {
  RealDriver* driver = RealDriver::get();
  slot = driver ? reinterpret_cast<Fn*>(real_dlsym(driver->handle(), name)) : nullptr;
}

}  // namespace

const vmm::DriverOps* paging_driver_ops() {
  static const vmm::DriverOps ops = [] {
    vmm::DriverOps o;
    bind(o.address_reserve, HookId::cuMemAddressReserve);
    bind(o.address_free, HookId::cuMemAddressFree);
    bind(o.create, HookId::cuMemCreate);
    bind(o.release, HookId::cuMemRelease);
    bind(o.map, HookId::cuMemMap);
    bind(o.unmap, HookId::cuMemUnmap);
    bind(o.set_access, HookId::cuMemSetAccess);
    bind(o.host_alloc, HookId::cuMemHostAlloc);
    bind(o.host_free, HookId::cuMemFreeHost);
    bind(o.copy_to_host_async, HookId::cuMemcpyDtoHAsync_v2);
    bind(o.copy_to_device_async, HookId::cuMemcpyHtoDAsync_v2);
    bind(o.stream_create, "cuStreamCreate");
    bind(o.stream_wait_event, "cuStreamWaitEvent");
    bind(o.stream_is_capturing, "cuStreamIsCapturing");
    bind(o.event_create, "cuEventCreate");
    bind(o.event_record, "cuEventRecord");
    bind(o.event_query, "cuEventQuery");
    bind(o.event_synchronize, "cuEventSynchronize");
    bind(o.event_destroy, "cuEventDestroy_v2");
    bind(o.event_elapsed, "cuEventElapsedTime_v2");
    if (o.event_elapsed == nullptr) bind(o.event_elapsed, "cuEventElapsedTime");  // drivers before 12.8
    bind(o.context_synchronize, "cuCtxSynchronize");
    bind(o.context_get_current, "cuCtxGetCurrent");
    bind(o.context_set_current, "cuCtxSetCurrent");
    bind(o.context_push, "cuCtxPushCurrent_v2");
    bind(o.context_pop, "cuCtxPopCurrent_v2");
    bind(o.context_get_device, "cuCtxGetDevice");
    bind(o.primary_context_retain, "cuDevicePrimaryCtxRetain");
    bind(o.stream_get_context, "cuStreamGetCtx");
    bind(o.stream_synchronize, "cuStreamSynchronize");
    bind(o.launch_host_function, "cuLaunchHostFunc");
    bind(o.exchange_capture_mode, "cuThreadExchangeStreamCaptureMode");
    bind(o.func_param_info, "cuFuncGetParamInfo");
    bind(o.kernel_param_info, "cuKernelGetParamInfo");
    bind(o.func_get_name, "cuFuncGetName");
    bind(o.kernel_get_name, "cuKernelGetName");
    bind(o.host_time_ns, "vgpusimHostTimeNs");  // the simulated driver's only
    bind(o.host_handoff, "vgpusimHostHandoffFor");
    return o;
  }();
  // Every call the pager makes must exist; otherwise paging stays off.
  const void* const required[] = {
      reinterpret_cast<const void*>(ops.address_reserve),   reinterpret_cast<const void*>(ops.create),
      reinterpret_cast<const void*>(ops.map),               reinterpret_cast<const void*>(ops.unmap),
      reinterpret_cast<const void*>(ops.set_access),        reinterpret_cast<const void*>(ops.host_alloc),
      reinterpret_cast<const void*>(ops.copy_to_host_async), reinterpret_cast<const void*>(ops.copy_to_device_async),
      reinterpret_cast<const void*>(ops.stream_create),     reinterpret_cast<const void*>(ops.stream_wait_event),
      reinterpret_cast<const void*>(ops.event_create),      reinterpret_cast<const void*>(ops.event_record),
      reinterpret_cast<const void*>(ops.event_query),       reinterpret_cast<const void*>(ops.event_synchronize),
      reinterpret_cast<const void*>(ops.event_destroy),     reinterpret_cast<const void*>(ops.context_synchronize),
      reinterpret_cast<const void*>(ops.func_param_info),   reinterpret_cast<const void*>(ops.stream_is_capturing),
      reinterpret_cast<const void*>(ops.exchange_capture_mode), reinterpret_cast<const void*>(ops.context_get_current),
      reinterpret_cast<const void*>(ops.context_set_current),   reinterpret_cast<const void*>(ops.context_push),
      reinterpret_cast<const void*>(ops.context_pop),           reinterpret_cast<const void*>(ops.context_get_device),
      reinterpret_cast<const void*>(ops.primary_context_retain), reinterpret_cast<const void*>(ops.stream_get_context),
      reinterpret_cast<const void*>(ops.stream_synchronize),    reinterpret_cast<const void*>(ops.launch_host_function)};
  for (const void* fn : required) {
    if (fn == nullptr) return nullptr;
  }
  return &ops;
}

}  // namespace vgpumem::interpose
