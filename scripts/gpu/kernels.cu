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

// ---- paging check (probe_paging.cu) ----------------------------------------
// p[i] = hash(i, seed), over n 32-bit words.
extern "C" __global__ void fill_u32(unsigned* p, unsigned long long n, unsigned seed) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    unsigned x = (unsigned)i * 2654435761u ^ seed;
    p[i] = x ^ (x >> 15);
  }
}

// dst[i] = dst[i] * 3 + src[i] + k: reads two buffers, writes one.
extern "C" __global__ void mix_u32(unsigned* dst, const unsigned* src, unsigned long long n, unsigned k) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    dst[i] = dst[i] * 3u + src[i] + k;
  }
}

// out[0] += sum of p[i] * (i % 251 + 1), exact in 64 bits (order-independent).
extern "C" __global__ void checksum_u32(const unsigned* p, unsigned long long n, unsigned long long* out) {
  unsigned long long local = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    local += (unsigned long long)p[i] * (i % 251 + 1);
  }
  atomicAdd(out, local);
}
