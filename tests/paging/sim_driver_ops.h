// DriverOps that call the simulated driver directly (no shim in between),
// for testing vmm/ in process.
#pragma once

#include <cuda.h>

#include "vgpusim.h"
#include "vmm/driver_ops.h"

namespace vgpumem::test {

inline const vmm::DriverOps& simulated_driver_ops() {
  static const vmm::DriverOps ops = [] {
    vmm::DriverOps o;
    o.address_reserve = &cuMemAddressReserve;
    o.address_free = &cuMemAddressFree;
    o.create = &cuMemCreate;
    o.release = &cuMemRelease;
    o.map = &cuMemMap;
    o.unmap = &cuMemUnmap;
    o.set_access = &cuMemSetAccess;
    o.host_alloc = &cuMemHostAlloc;
    o.host_free = &cuMemFreeHost;
    o.copy_to_host_async = &cuMemcpyDtoHAsync_v2;
    o.copy_to_device_async = &cuMemcpyHtoDAsync_v2;
    o.stream_create = &cuStreamCreate;
    o.stream_wait_event = &cuStreamWaitEvent;
    o.stream_is_capturing = &cuStreamIsCapturing;
    o.event_create = &cuEventCreate;
    o.event_record = &cuEventRecord;
    o.event_query = &cuEventQuery;
    o.event_synchronize = &cuEventSynchronize;
    o.event_destroy = &cuEventDestroy_v2;
    o.event_elapsed = &cuEventElapsedTime_v2;
    o.context_synchronize = [] { return cuCtxSynchronize(); };
    o.context_get_current = &cuCtxGetCurrent;
    o.context_set_current = &cuCtxSetCurrent;
    o.context_push = &cuCtxPushCurrent_v2;
    o.context_pop = &cuCtxPopCurrent_v2;
    o.context_get_device = &cuCtxGetDevice;
    o.primary_context_retain = &cuDevicePrimaryCtxRetain;
    o.stream_get_context = &cuStreamGetCtx;
    o.stream_synchronize = &cuStreamSynchronize;
    o.launch_host_function = &cuLaunchHostFunc;
    o.exchange_capture_mode = &cuThreadExchangeStreamCaptureMode;
    o.func_param_info = &cuFuncGetParamInfo;
    o.kernel_param_info = &cuKernelGetParamInfo;
    o.func_get_name = &cuFuncGetName;
    o.kernel_get_name = &cuKernelGetName;
    o.host_time_ns = &vgpusimHostTimeNs;
    o.host_handoff = &vgpusimHostHandoffFor;
    return o;
  }();
  return ops;
}

}  // namespace vgpumem::test
