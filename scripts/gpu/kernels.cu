// Device code shared by the probes. Compiled once to a cubin (sm_90) by
// build.sh, embedded with bin2c and loaded with cuModuleLoadData /
// cuLibraryLoadData, so the probes are pure driver-API programs (no cudart).
#include <stdint.h>

__device__ __forceinline__ unsigned long long gtime_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins for `ns` nanoseconds of wall time; if p != 0 it keeps reading p[0..n)
// (so a range that disappears while it runs makes it fault).
extern "C" __global__ void spin_read(const volatile int* p, int n, unsigned long long ns, int* sink) {
  unsigned long long t0 = gtime_ns();
  int acc = 0;
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  while (gtime_ns() - t0 < ns) {
    if (p && n > 0) { acc += p[i % (unsigned)n]; i += 4099; }
  }
  if (sink && acc == 0x7fffffff) sink[0] = acc;
}

// Writes p[0..n) (+1 each).
extern "C" __global__ void touch(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

// Reports the device's global timer (ns) at start and end of a short spin.
extern "C" __global__ void stamp(unsigned long long* out, unsigned long long ns) {
  unsigned long long t0 = gtime_ns();
  while (gtime_ns() - t0 < ns) {}
  if (threadIdx.x == 0 && blockIdx.x == 0) { out[0] = t0; out[1] = gtime_ns(); }
}

// Parameter layout probe: offsets should be 0, 8, 16, 24.
extern "C" __global__ void params_kernel(float* a, int b, double c, char d) {
  if (a) a[0] = (float)(b + c + d);
}
