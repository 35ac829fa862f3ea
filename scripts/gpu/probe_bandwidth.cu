// probe_bandwidth: research/cuda-facts.md §8.8. Pinned host (cuMemHostAlloc)
// <-> device with cuMemcpyAsync on non-blocking streams: H2D, D2H, both at once
// (two streams), both at once while a kernel spins on all SMs; pageable H2D
// (cuMemcpyHtoD) for reference. 64 and 512 MiB, best of 5, GB/s = 1e9 B/s.
#include "common.h"

static void run(size_t mib) {
  Cuda c; if (!c.init()) return;
  CUstream h2d, d2h, comp;
  if (!TRY("streams", cuStreamCreate(&h2d, CU_STREAM_NON_BLOCKING)) || !TRY("streams", cuStreamCreate(&d2h, CU_STREAM_NON_BLOCKING)) ||
      !TRY("streams", cuStreamCreate(&comp, CU_STREAM_NON_BLOCKING))) return;
  size_t n = mib << 20; void *ha = nullptr, *hb = nullptr; CUdeviceptr da = 0, db = 0, other = 0;
  if (!TRY("hostalloc", cuMemHostAlloc(&ha, n, 0)) || !TRY("hostalloc", cuMemHostAlloc(&hb, n, 0)) || !TRY("alloc", cuMemAlloc(&da, n)) ||
      !TRY("alloc", cuMemAlloc(&db, n)) || !TRY("alloc", cuMemAlloc(&other, 16u << 20))) return;
  memset(ha, 1, n); memset(hb, 2, n); cuMemsetD8(db, 3, n); cuMemsetD8(other, 0, 16u << 20);
  std::vector<char> pageable(n, 3);
  bool ok = true;
  auto best = [&](const char* key, const std::function<bool()>& fn) {
    double b = 1e300;
    for (int i = 0; i < 5 && ok; ++i) {
      ok = TRY(key, cuCtxSynchronize()); double t = now_us();
      ok = ok && fn() && TRY(key, cuCtxSynchronize()); b = std::min(b, now_us() - t);
    }
    return ok ? b : 0.0;
  };
  auto gbs = [&](double us, double copies) { return us > 0 ? copies * n / (us * 1e3) : 0.0; };
  double t_h2d = best("h2d", [&] { return TRY("h2d", cuMemcpyAsync(da, (CUdeviceptr)ha, n, h2d)); });
  double t_d2h = best("d2h", [&] { return TRY("d2h", cuMemcpyAsync((CUdeviceptr)hb, db, n, d2h)); });
  double t_both = best("both", [&] { return TRY("both", cuMemcpyAsync(da, (CUdeviceptr)ha, n, h2d)) && TRY("both", cuMemcpyAsync((CUdeviceptr)hb, db, n, d2h)); });
  // The kernel must outlast the copies: 1.5x the measured both-directions time, at least 5 ms.
  double spin_ms = std::max(5.0, 1.5 * t_both / 1e3); int still_running = 0;
  double t_busy = best("both_with_kernel", [&] {
    bool r = TRY("both_with_kernel", launch_spin(c, comp, other, 4 << 20, spin_ms, (unsigned)(c.sms * 4))) &&
             TRY("both_with_kernel", cuMemcpyAsync(da, (CUdeviceptr)ha, n, h2d)) && TRY("both_with_kernel", cuMemcpyAsync((CUdeviceptr)hb, db, n, d2h));
    // time only the copies: wait for them, not for the kernel
    r = r && TRY("both_with_kernel", cuStreamSynchronize(h2d)) && TRY("both_with_kernel", cuStreamSynchronize(d2h));
    if (cuStreamQuery(comp) == CUDA_ERROR_NOT_READY) still_running++;
    return r;
  });
  // best() synchronizes the context after fn, so the time above includes the kernel's tail: redo with stream timing.
  double t_busy_copies = 1e300;
  for (int i = 0; i < 5 && ok; ++i) {
    cuCtxSynchronize();
    ok = TRY("busy2", launch_spin(c, comp, other, 4 << 20, spin_ms, (unsigned)(c.sms * 4))); usleep(200);
    double t = now_us();
    ok = ok && TRY("busy2", cuMemcpyAsync(da, (CUdeviceptr)ha, n, h2d)) && TRY("busy2", cuMemcpyAsync((CUdeviceptr)hb, db, n, d2h)) &&
         TRY("busy2", cuStreamSynchronize(h2d)) && TRY("busy2", cuStreamSynchronize(d2h));
    t_busy_copies = std::min(t_busy_copies, now_us() - t);
  }
  cuCtxSynchronize();
  double t_page = best("pageable_h2d", [&] { return TRY("pageable_h2d", cuMemcpyHtoD(da, pageable.data(), n)); });
  emit("mib", fmt("%zu", mib));
  emit("gbps", fmt("{\"h2d\":%.2f,\"d2h\":%.2f,\"both_total\":%.2f,\"both_total_with_kernel\":%.2f,\"pageable_h2d\":%.2f}", gbs(t_h2d, 1), gbs(t_d2h, 1),
                   gbs(t_both, 2), gbs(t_busy_copies < 1e299 ? t_busy_copies : 0, 2), gbs(t_page, 1)));
  emit("kernel", fmt("{\"spin_ms\":%.2f,\"blocks\":%d,\"still_running_after_copies\":%d,\"including_kernel_tail_gbps\":%.2f}", spin_ms, c.sms * 4, still_running, gbs(t_busy, 2)));
}

int main() {
  Parts P("probe_bandwidth");
  P.run("64MiB", 60, [] { run(64); });
  P.run("512MiB", 90, [] { run(512); });
  P.print();
  return 0;
}
