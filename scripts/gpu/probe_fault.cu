// probe_fault: research/cuda-facts.md §8.7. A kernel writes to a VA with no
// physical backing: (a) reserved but never mapped, (b) mapped, then unmapped and
// released. Which CUresult, from which call? Is the error sticky for every later
// call? Does cuDevicePrimaryCtxReset (primary context) or cuCtxDestroy (own
// context) recover? Every case runs in a fresh child process.
#include "common.h"

static void after_fault(Cuda& c, CUstream s, CUdeviceptr good, const std::string& pre) {
  int x = 5;
  CUdeviceptr p2 = 0; emit_r(pre + "mem_alloc", cuMemAlloc(&p2, 1 << 20));
  emit_r(pre + "memcpy_htod_to_valid", cuMemcpyHtoD(good, &x, sizeof x));
  emit_r(pre + "launch_valid_kernel", launch_touch(c, s, good, 1024));
  emit_r(pre + "stream_sync", cuStreamSynchronize(s));
  emit_r(pre + "ctx_sync", cuCtxSynchronize());
  CUstream s2; emit_r(pre + "stream_create", cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  size_t fr = 0, tot = 0; emit_r(pre + "mem_get_info", cuMemGetInfo(&fr, &tot));
  CUmemGenericAllocationHandle h; CUmemAllocationProp p = prop_dev(); emit_r(pre + "mem_create", cuMemCreate(&h, 2u << 20, &p, 0));
  emit_r(pre + "mem_free_valid", cuMemFree(good));
}

// Runs a good kernel in the current (fresh) context to show it works.
static void check_fresh(Cuda& c, const std::string& pre) {
  if (!TRY(pre + "module", cuModuleLoadData(&c.mod, cubin_image())) || !TRY(pre + "getfn", cuModuleGetFunction(&c.touch, c.mod, "touch"))) return;
  CUdeviceptr p = 0; emit_r(pre + "mem_alloc", cuMemAlloc(&p, 1 << 20));
  emit_r(pre + "launch", launch_touch(c, 0, p, 1024));
  emit_r(pre + "ctx_sync", cuCtxSynchronize());
  int v = -1; emit_r(pre + "memcpy_dtoh", cuMemcpyDtoH(&v, p, sizeof v)); emit(pre + "value", fmt("%d", v));
}

static void fault(bool was_mapped, bool own_ctx) {
  Cuda c;
  if (own_ctx) {
    if (!TRY("cuInit", cuInit(0)) || !TRY("dev", cuDeviceGet(&c.dev, 0))) return;
    if (!TRY("cuCtxCreate", cuCtxCreate(&c.ctx, nullptr, 0, c.dev))) return;
    if (!c.load()) return;
  } else if (!c.init()) return;
  emit("context", q(own_ctx ? "cuCtxCreate" : "primary"));
  CUstream s; if (!TRY("stream", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))) return;
  CUdeviceptr good; if (!TRY("good", cuMemAlloc(&good, 1 << 20))) return;
  size_t size = 2u << 20; CUdeviceptr va = 0;
  if (was_mapped) { Range r; if (!make_range("range", r, size)) return;
    if (!TRY("unmap", cuMemUnmap(r.va, size)) || !TRY("release", cuMemRelease(r.h))) return; va = r.va; }
  else if (!TRY("reserve", cuMemAddressReserve(&va, size, 0, 0, 0))) return;
  emit("range", q(was_mapped ? "mapped_then_unmapped_and_released" : "reserved_never_mapped"));
  CUresult l = launch_touch(c, s, va, 1 << 16);
  emit_r("launch", l);
  emit_r("stream_query_soon", cuStreamQuery(s));
  double t = now_us(); CUresult r = cuStreamSynchronize(s); emit("stream_sync_us", fmt("%.0f", now_us() - t));
  emit_r("stream_sync", r); emit("stream_sync_code", fmt("%d", (int)r));
  const char* str = nullptr; cuGetErrorString(r, &str); emit("error_string", q(str ? str : ""));
  emit_r("ctx_sync", cuCtxSynchronize());
  after_fault(c, s, good, "after_");
  bool sticky = cuCtxSynchronize() != CUDA_SUCCESS;
  emit("sticky", sticky ? "true" : "false");
  if (own_ctx) {
    emit_r("recover_ctx_destroy", cuCtxDestroy(c.ctx));
    CUcontext n2; CUresult cr = cuCtxCreate(&n2, nullptr, 0, c.dev); emit_r("recover_ctx_create", cr);
    if (cr == CUDA_SUCCESS) check_fresh(c, "recovered_");
    else { CUcontext p2; CUresult rr = cuDevicePrimaryCtxRetain(&p2, c.dev); emit_r("recover_then_primary_retain", rr); }
  } else {
    emit_r("recover_primary_reset", cuDevicePrimaryCtxReset(c.dev));
    CUcontext n2 = nullptr; CUresult rr = cuDevicePrimaryCtxRetain(&n2, c.dev); emit_r("recover_primary_retain", rr);
    if (rr == CUDA_SUCCESS) {
      emit_r("recover_set_current", cuCtxSetCurrent(n2));
      emit("recover_same_handle", n2 == c.ctx ? "true" : "false");
      check_fresh(c, "recovered_");
    } else {  // try a fresh non-primary context too
      CUcontext n3; CUresult cr = cuCtxCreate(&n3, nullptr, 0, c.dev); emit_r("recover_then_ctx_create", cr);
      if (cr == CUDA_SUCCESS) check_fresh(c, "recovered_");
    }
    emit("recovered_in_process", cuCtxSynchronize() == CUDA_SUCCESS ? "true" : "false");
  }
}

int main() {
  Parts P("probe_fault");
  P.run("reserved_never_mapped_primary", 30, [] { fault(false, false); });
  P.run("mapped_then_unmapped_primary", 30, [] { fault(true, false); });
  P.run("reserved_never_mapped_own_ctx", 30, [] { fault(false, true); });
  P.print();
  return 0;
}
