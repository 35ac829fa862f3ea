// A CUDA C++ program for compute-sanitizer under the shim: several kernels
// over buffers allocated with cudaMalloc, checksummed on the host.
#include <cstdio>
#include <vector>
__global__ void fill(float* x, int n, float v) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = v + i % 7; }
__global__ void axpy(float* y, const float* x, int n, float a) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i]; }
int main() {
  const int n = 1 << 22, buffers = 6;
  std::vector<float*> d(buffers);
  for (auto& p : d) if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) { std::printf("alloc failed\n"); return 1; }
  for (int b = 0; b < buffers; ++b) fill<<<(n + 255) / 256, 256>>>(d[b], n, float(b));
  for (int r = 0; r < 4; ++r) for (int b = 1; b < buffers; ++b) axpy<<<(n + 255) / 256, 256>>>(d[b], d[b - 1], n, 0.5f);
  std::vector<float> h(n); double sum = 0;
  for (int b = 0; b < buffers; ++b) { cudaMemcpy(h.data(), d[b], n * sizeof(float), cudaMemcpyDeviceToHost); for (float v : h) sum += v; }
  for (auto p : d) cudaFree(p);
  std::printf("CHECKSUM %.6f status %s\n", sum, cudaGetErrorString(cudaGetLastError()));
  return 0;
}
