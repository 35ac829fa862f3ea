// What cuMemFree waits for, on the real driver: a 2 ms kernel on a stream of
// each kind (legacy, per-thread, blocking, non-blocking, non-blocking with a
// priority), then cuMemFree of an unrelated 1 MiB allocation, then
// cuStreamQuery on that stream. Run without the shim it says what the driver
// does (the simulated driver's cuMemFree waits for the whole context);
// under the shim with VGPUMEM_LIMIT set (the allocation paged) it says
// whether vgpumem's free still waits for the program's work on every kind
// (vmm/program_streams.h). Also: how long each free took, and one free
// while a 256 MiB device-to-host copy runs on a non-blocking stream of the
// program's (a copy the free must wait for). Prints one JSON object.
#include "common.h"

namespace {

constexpr unsigned long long kSpinNs = 2'000'000;

void one_kind(Cuda& cuda, const char* name, CUstream stream) {
  CUdeviceptr freed = 0;
  if (!TRY(fmt("%s_alloc", name), cuMemAlloc(&freed, 1u << 20))) return;
  const CUdeviceptr none = 0;
  int n = 0;
  unsigned long long ns = kSpinNs;
  CUdeviceptr sink = 0;
  void* params[] = {(void*)&none, &n, &ns, &sink};
  if (!TRY(fmt("%s_launch", name), cuLaunchKernel(cuda.spin_read, 1, 1, 1, 32, 1, 1, 0, stream, params, nullptr))) return;
  const CUresult before = cuStreamQuery(stream);
  const double t0 = now_us();
  const CUresult freed_result = cuMemFree(freed);
  const double t1 = now_us();
  const CUresult after = cuStreamQuery(stream);
  emit(name, fmt("{\"query_before_free\":%s,\"free\":%s,\"free_us\":%.1f,\"query_after_free\":%s,\"done_when_free_returned\":%s}",
                 rj(before).c_str(), rj(freed_result).c_str(), t1 - t0, rj(after).c_str(),
                 after == CUDA_SUCCESS ? "true" : "false"));
  cuCtxSynchronize();
}

void kinds() {
  Cuda cuda;
  if (!cuda.init()) return;
  CUstream blocking = nullptr, non_blocking = nullptr, prioritized = nullptr;
  if (!TRY("create_blocking", cuStreamCreate(&blocking, CU_STREAM_DEFAULT))) return;
  if (!TRY("create_non_blocking", cuStreamCreate(&non_blocking, CU_STREAM_NON_BLOCKING))) return;
  if (!TRY("create_prioritized", cuStreamCreateWithPriority(&prioritized, CU_STREAM_NON_BLOCKING, -1))) return;
  one_kind(cuda, "legacy", CU_STREAM_LEGACY);
  one_kind(cuda, "per_thread", CU_STREAM_PER_THREAD);
  one_kind(cuda, "blocking", blocking);
  one_kind(cuda, "non_blocking", non_blocking);
  one_kind(cuda, "non_blocking_priority", prioritized);

  // A long copy of the program's on a non-blocking stream: the free waits for it too.
  const size_t bytes = 256u << 20;
  CUdeviceptr source = 0, freed = 0;
  void* host = nullptr;
  if (!TRY("copy_alloc", cuMemAlloc(&source, bytes)) || !TRY("copy_host", cuMemAllocHost(&host, bytes)) ||
      !TRY("copy_freed", cuMemAlloc(&freed, 1u << 20))) {
    return;
  }
  cuMemsetD8(source, 7, bytes);
  cuCtxSynchronize();
  const double t0 = now_us();
  if (!TRY("copy_issue", cuMemcpyDtoHAsync(host, source, bytes, non_blocking))) return;
  const CUresult freed_result = cuMemFree(freed);
  const double t1 = now_us();
  const CUresult after = cuStreamQuery(non_blocking);
  cuStreamSynchronize(non_blocking);
  const double t2 = now_us();
  emit("copy", fmt("{\"free\":%s,\"free_returned_us\":%.1f,\"copy_done_us\":%.1f,\"done_when_free_returned\":%s}",
                   rj(freed_result).c_str(), t1 - t0, t2 - t0, after == CUDA_SUCCESS ? "true" : "false"));
  cuMemFreeHost(host);
  cuMemFree(source);
  for (CUstream s : {blocking, non_blocking, prioritized}) cuStreamDestroy(s);
}

}  // namespace

int main() {
  Parts parts("frees");
  parts.run("kinds", 60, kinds);
  parts.print();
  return 0;
}
