#include "mlp_kernels.h"

#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "kernel_params.h"
#include "vgpusim.h"

namespace mlp {
namespace {

Kernels g_kernels;

using workload::arg;
using workload::ptr;

// Simulated durations: FLOPs at 50 TFLOP/s, at least 5 µs per launch.
double at_rate(double flops) { return std::max(5000.0, flops / 50.0e3); }

void linear_forward(void** p, const vgpusimLaunch*, void*) {
  const float* x = ptr<float>(p, 0);
  const float* w = ptr<float>(p, 1);
  const float* b = ptr<float>(p, 2);
  float* z = ptr<float>(p, 3);
  const int batch = arg<int>(p, 4), in = arg<int>(p, 5), out = arg<int>(p, 6);
  // Each output sums b, then its terms in k order, as one float would; the
  // row is summed in place, k outermost, so w is read along its rows.
  for (int r = 0; r < batch; ++r) {
    float* row = z + r * out;
    for (int c = 0; c < out; ++c) row[c] = b[c];
    for (int k = 0; k < in; ++k) {
      const float xk = x[r * in + k];
      const float* w_row = w + k * out;
      for (int c = 0; c < out; ++c) row[c] += xk * w_row[c];
    }
  }
}
double linear_forward_time(void** p, const vgpusimLaunch*, void*) {
  return at_rate(2.0 * arg<int>(p, 4) * arg<int>(p, 5) * arg<int>(p, 6));
}

void relu_forward(void** p, const vgpusimLaunch*, void*) {
  const float* z = ptr<float>(p, 0);
  float* a = ptr<float>(p, 1);
  const int n = arg<int>(p, 2);
  for (int i = 0; i < n; ++i) a[i] = z[i] > 0.0f ? z[i] : 0.0f;
}
double elementwise_time(void** p, const vgpusimLaunch*, void*) { return at_rate(arg<int>(p, 2) * 4.0); }

void softmax_xent(void** p, const vgpusimLaunch*, void*) {
  const float* logits = ptr<float>(p, 0);
  const int* labels = ptr<int>(p, 1);
  float* dlogits = ptr<float>(p, 2);
  float* loss = ptr<float>(p, 3);
  const int batch = arg<int>(p, 4), classes = arg<int>(p, 5);
  double total = 0.0;
  for (int r = 0; r < batch; ++r) {
    const float* row = logits + r * classes;
    float m = row[0];
    for (int c = 1; c < classes; ++c) m = std::max(m, row[c]);
    double sum = 0.0;
    for (int c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(row[c] - m));
    for (int c = 0; c < classes; ++c) {
      const double prob = std::exp(static_cast<double>(row[c] - m)) / sum;
      dlogits[r * classes + c] = static_cast<float>((prob - (c == labels[r] ? 1.0 : 0.0)) / batch);
    }
    total += -(static_cast<double>(row[labels[r]] - m) - std::log(sum));
  }
  *loss = static_cast<float>(total / batch);
}
double softmax_time(void** p, const vgpusimLaunch*, void*) { return at_rate(10.0 * arg<int>(p, 4) * arg<int>(p, 5)); }

void relu_backward(void** p, const vgpusimLaunch*, void*) {
  const float* da = ptr<float>(p, 0);
  const float* z = ptr<float>(p, 1);
  float* dz = ptr<float>(p, 2);
  const int n = arg<int>(p, 3);
  for (int i = 0; i < n; ++i) dz[i] = z[i] > 0.0f ? da[i] : 0.0f;
}
double relu_backward_time(void** p, const vgpusimLaunch*, void*) { return at_rate(arg<int>(p, 3) * 4.0); }

void linear_backward(void** p, const vgpusimLaunch*, void*) {
  const float* x = ptr<float>(p, 0);
  const float* w = ptr<float>(p, 1);
  const float* dz = ptr<float>(p, 2);
  float* dx = ptr<float>(p, 3);
  float* dw = ptr<float>(p, 4);
  float* db = ptr<float>(p, 5);
  const int batch = arg<int>(p, 6), in = arg<int>(p, 7), out = arg<int>(p, 8);
  // dw and db sum their terms in r order, in place, r outermost (as in
  // linear_forward: the same sums, read along rows).
  for (int k = 0; k < in; ++k) {
    float* dw_row = dw + k * out;
    for (int c = 0; c < out; ++c) dw_row[c] = 0.0f;
    for (int r = 0; r < batch; ++r) {
      const float xk = x[r * in + k];
      const float* dz_row = dz + r * out;
      for (int c = 0; c < out; ++c) dw_row[c] += xk * dz_row[c];
    }
  }
  for (int c = 0; c < out; ++c) db[c] = 0.0f;
  for (int r = 0; r < batch; ++r) {
    for (int c = 0; c < out; ++c) db[c] += dz[r * out + c];
  }
  if (dx == nullptr) return;
  for (int r = 0; r < batch; ++r) {
    for (int k = 0; k < in; ++k) {
      float s = 0.0f;
      for (int c = 0; c < out; ++c) s += dz[r * out + c] * w[k * out + c];
      dx[r * in + k] = s;
    }
  }
}
double linear_backward_time(void** p, const vgpusimLaunch*, void*) {
  return at_rate(4.0 * arg<int>(p, 6) * arg<int>(p, 7) * arg<int>(p, 8));
}

void sgd(void** p, const vgpusimLaunch*, void*) {
  float* w = ptr<float>(p, 0);
  const float* dw = ptr<float>(p, 1);
  const float lr = arg<float>(p, 2);
  const int n = arg<int>(p, 3);
  for (int i = 0; i < n; ++i) w[i] -= lr * dw[i];
}
double sgd_time(void** p, const vgpusimLaunch*, void*) { return at_rate(arg<int>(p, 3) * 2.0); }

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
  constexpr size_t P = sizeof(CUdeviceptr), I = sizeof(int), F = sizeof(float);
  Kernels& k = g_kernels;
  return add(reg, "mlp_linear_forward", linear_forward, linear_forward_time, {P, P, P, P, I, I, I}, &k.linear_forward) &&
         add(reg, "mlp_relu_forward", relu_forward, elementwise_time, {P, P, I}, &k.relu_forward) &&
         add(reg, "mlp_softmax_xent", softmax_xent, softmax_time, {P, P, P, P, I, I}, &k.softmax_xent) &&
         add(reg, "mlp_relu_backward", relu_backward, relu_backward_time, {P, P, P, I}, &k.relu_backward) &&
         add(reg, "mlp_linear_backward", linear_backward, linear_backward_time, {P, P, P, P, P, P, I, I, I},
             &k.linear_backward) &&
         add(reg, "mlp_sgd", sgd, sgd_time, {P, P, F, I}, &k.sgd);
}

const Kernels& kernels() { return g_kernels; }

}  // namespace mlp
