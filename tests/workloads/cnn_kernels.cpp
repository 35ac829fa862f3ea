#include "cnn_kernels.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "kernel_params.h"
#include "vgpusim.h"

namespace cnn {
namespace {

Kernels g_kernels;

using workload::arg;
using workload::ptr;

// Elementwise kernels are bandwidth-bound: bytes at ~2.7 TB/s (80 % of an
// H100 SXM's 3.35 TB/s), at least 3 µs a launch.
double at_bandwidth(double bytes) { return std::max(3000.0, bytes / 2.7); }

void relu_forward(void** p, const vgpusimLaunch*, void*) {
  const float* z = ptr<float>(p, 0);
  float* a = ptr<float>(p, 1);
  const long long n = arg<long long>(p, 2);
  for (long long i = 0; i < n; ++i) a[i] = z[i] > 0.0f ? z[i] : 0.0f;
}
double relu_forward_time(void** p, const vgpusimLaunch*, void*) { return at_bandwidth(8.0 * arg<long long>(p, 2)); }

void relu_backward(void** p, const vgpusimLaunch*, void*) {
  const float* da = ptr<float>(p, 0);
  const float* z = ptr<float>(p, 1);
  float* dz = ptr<float>(p, 2);
  const long long n = arg<long long>(p, 3);
  for (long long i = 0; i < n; ++i) dz[i] = z[i] > 0.0f ? da[i] : 0.0f;
}
double relu_backward_time(void** p, const vgpusimLaunch*, void*) { return at_bandwidth(12.0 * arg<long long>(p, 3)); }

void avgpool_forward(void** p, const vgpusimLaunch*, void*) {
  const float* x = ptr<float>(p, 0);
  float* pooled = ptr<float>(p, 1);
  const int batch = arg<int>(p, 2), channels = arg<int>(p, 3), pixels = arg<int>(p, 4);
  for (int i = 0; i < batch * channels; ++i) {
    float sum = 0.0f;
    for (int j = 0; j < pixels; ++j) sum += x[static_cast<long long>(i) * pixels + j];
    pooled[i] = sum / static_cast<float>(pixels);
  }
}
void avgpool_backward(void** p, const vgpusimLaunch*, void*) {
  const float* dpooled = ptr<float>(p, 0);
  float* dx = ptr<float>(p, 1);
  const int batch = arg<int>(p, 2), channels = arg<int>(p, 3), pixels = arg<int>(p, 4);
  for (int i = 0; i < batch * channels; ++i) {
    const float share = dpooled[i] / static_cast<float>(pixels);
    for (int j = 0; j < pixels; ++j) dx[static_cast<long long>(i) * pixels + j] = share;
  }
}
double avgpool_time(void** p, const vgpusimLaunch*, void*) {
  return at_bandwidth(4.0 * arg<int>(p, 2) * arg<int>(p, 3) * (arg<int>(p, 4) + 1.0));
}

// Logits = P W + b; loss = mean cross-entropy; then dlogits = (softmax -
// onehot) / batch and its gradients into dW, db and dP.
void head(void** p, const vgpusimLaunch*, void*) {
  const float* pooled = ptr<float>(p, 0);
  const float* w = ptr<float>(p, 1);
  const float* b = ptr<float>(p, 2);
  const int* labels = ptr<int>(p, 3);
  float* loss = ptr<float>(p, 4);
  float* dpooled = ptr<float>(p, 5);
  float* dw = ptr<float>(p, 6);
  float* db = ptr<float>(p, 7);
  const int batch = arg<int>(p, 8), features = arg<int>(p, 9), classes = arg<int>(p, 10);
  std::vector<float> dlogits(static_cast<std::size_t>(batch) * classes);
  float total = 0.0f;
  for (int r = 0; r < batch; ++r) {
    float* d = &dlogits[static_cast<std::size_t>(r) * classes];
    float most = -INFINITY;
    for (int c = 0; c < classes; ++c) {
      float s = b[c];
      for (int f = 0; f < features; ++f) s += pooled[r * features + f] * w[f * classes + c];
      d[c] = s;
      most = std::max(most, s);
    }
    float sum = 0.0f;
    for (int c = 0; c < classes; ++c) sum += d[c] = std::exp(d[c] - most);
    for (int c = 0; c < classes; ++c) d[c] /= sum;
    total -= std::log(std::max(d[labels[r]], 1e-30f));
    d[labels[r]] -= 1.0f;
    for (int c = 0; c < classes; ++c) d[c] /= static_cast<float>(batch);
  }
  *loss = total / static_cast<float>(batch);
  for (int f = 0; f < features; ++f)
    for (int c = 0; c < classes; ++c) {
      float s = 0.0f;
      for (int r = 0; r < batch; ++r) s += pooled[r * features + f] * dlogits[static_cast<std::size_t>(r) * classes + c];
      dw[f * classes + c] = s;
    }
  for (int c = 0; c < classes; ++c) {
    float s = 0.0f;
    for (int r = 0; r < batch; ++r) s += dlogits[static_cast<std::size_t>(r) * classes + c];
    db[c] = s;
  }
  for (int r = 0; r < batch; ++r)
    for (int f = 0; f < features; ++f) {
      float s = 0.0f;
      for (int c = 0; c < classes; ++c) s += dlogits[static_cast<std::size_t>(r) * classes + c] * w[f * classes + c];
      dpooled[r * features + f] = s;
    }
}
double head_time(void**, const vgpusimLaunch*, void*) { return 8000.0; }  // a few tiny kernels in a framework

void sgd(void** p, const vgpusimLaunch*, void*) {
  float* w = ptr<float>(p, 0);
  const float* dw = ptr<float>(p, 1);
  const float lr = arg<float>(p, 2);
  const long long n = arg<long long>(p, 3);
  for (long long i = 0; i < n; ++i) w[i] -= lr * dw[i];
}
double sgd_time(void** p, const vgpusimLaunch*, void*) { return at_bandwidth(12.0 * arg<long long>(p, 3)); }

using Register = CUresult (*)(const vgpusimKernelDesc*, CUfunction*);

bool add(Register reg, const char* name, vgpusimKernelFn body, vgpusimDurationFn duration,
         std::initializer_list<size_t> sizes, CUfunction* out) {
  const std::vector<size_t> param_sizes(sizes);
  vgpusimKernelDesc desc{};
  desc.name = name;
  desc.body = body;
  desc.paramCount = static_cast<unsigned>(param_sizes.size());
  desc.paramSizes = param_sizes.data();
  desc.durationFn = duration;
  return reg(&desc, out) == CUDA_SUCCESS;
}

}  // namespace

bool register_kernels() {
  // Found at run time so the same binary fails cleanly on a real driver.
  auto reg = reinterpret_cast<Register>(dlsym(RTLD_DEFAULT, "vgpusimRegisterKernel"));
  if (reg == nullptr) return false;
  constexpr size_t P = sizeof(CUdeviceptr), I = sizeof(int), L = sizeof(long long), F = sizeof(float);
  Kernels& k = g_kernels;
  return add(reg, "cnn_relu_forward", relu_forward, relu_forward_time, {P, P, L}, &k.relu_forward) &&
         add(reg, "cnn_relu_backward", relu_backward, relu_backward_time, {P, P, P, L}, &k.relu_backward) &&
         add(reg, "cnn_avgpool_forward", avgpool_forward, avgpool_time, {P, P, I, I, I}, &k.avgpool_forward) &&
         add(reg, "cnn_avgpool_backward", avgpool_backward, avgpool_time, {P, P, I, I, I}, &k.avgpool_backward) &&
         add(reg, "cnn_head", head, head_time, {P, P, P, P, P, P, P, P, I, I, I}, &k.head) &&
         add(reg, "cnn_sgd", sgd, sgd_time, {P, P, F, L}, &k.sgd);
}

const Kernels& kernels() { return g_kernels; }

}  // namespace cnn
