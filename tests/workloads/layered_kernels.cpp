#include "layered_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernel_params.h"

namespace layered {
namespace {

unsigned g_scale = 1;

using workload::arg;
std::uint32_t* words(void** params, int i) { return reinterpret_cast<std::uint32_t*>(arg<CUdeviceptr>(params, i)); }
float* floats(void** params, int i) { return reinterpret_cast<float*>(arg<CUdeviceptr>(params, i)); }
std::uint64_t count(void** params, int i) { return arg<std::uint64_t>(params, i); }

// FNV-1a over 32-bit words: each step is a bijection of the hash for a given
// word, so one changed word always changes the result.
std::uint64_t fold(std::uint64_t h, std::uint32_t word) { return (h ^ word) * 1099511628211ULL; }

std::uint64_t sample(std::uint64_t h, const std::uint32_t* p, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; i += kSampleStride) h = fold(h, p[i]);
  if (n > 0) h = fold(h, p[n - 1]);
  return fold(h, static_cast<std::uint32_t>(n));
}

// Word i of y's fill: a float in [-0.5, 0.5) from the hash and the index.
float filler(std::uint32_t base, std::uint64_t i) {
  std::uint32_t x = base + static_cast<std::uint32_t>(i) * 0x9E3779B9u;
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  const std::uint32_t bits = (x >> 9) | 0x3F800000u;  // [1, 2)
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v - 1.5f;
}

// Every word of y, set to its filler or added to it (a loop each, so that
// each vectorizes).
void fill(float* y, std::uint64_t n, std::uint64_t h, bool accumulate) {
  const auto base = static_cast<std::uint32_t>(h ^ (h >> 32));
  if (accumulate) {
    for (std::uint64_t i = 0; i < n; ++i) y[i] += filler(base, i);
  } else {
    for (std::uint64_t i = 0; i < n; ++i) y[i] = filler(base, i);
  }
}

// A workspace is scratch: written (a sample of it), never read.
void scribble(std::uint32_t* ws, std::uint64_t n, std::uint64_t h) {
  for (std::uint64_t i = 0; i < n; i += kSampleStride) ws[i] = static_cast<std::uint32_t>(h + i);
}

constexpr std::uint64_t kBasis = 1469598103934665603ULL;

void heavy(void** p, const vgpusimLaunch*, void*) {
  std::uint64_t h = sample(kBasis, words(p, 0), count(p, 4));
  h = sample(h, words(p, 1), count(p, 5));
  scribble(words(p, 2), count(p, 6), h);
  fill(floats(p, 3), count(p, 7), h, arg<int>(p, 8) != 0);
}

void unary(void** p, const vgpusimLaunch*, void*) {
  const std::uint64_t h = sample(kBasis, words(p, 0), count(p, 2));
  fill(floats(p, 1), count(p, 3), h, false);
}

void unary_pair(void** p, const vgpusimLaunch*, void*) {
  const std::uint64_t h = sample(kBasis, words(p, 0), count(p, 3));
  fill(floats(p, 1), count(p, 4), fold(h, 1), false);
  fill(floats(p, 2), count(p, 5), fold(h, 2), false);
}

void binary(void** p, const vgpusimLaunch*, void*) {
  std::uint64_t h = sample(kBasis, words(p, 0), count(p, 3));
  h = sample(h, words(p, 1), count(p, 4));
  fill(floats(p, 2), count(p, 5), h, arg<int>(p, 6) != 0);
}

void unary_bwd(void** p, const vgpusimLaunch*, void*) {
  std::uint64_t h = sample(kBasis, words(p, 0), count(p, 4));
  h = sample(h, words(p, 1), count(p, 5));
  h = sample(h, words(p, 2), count(p, 6));
  fill(floats(p, 3), count(p, 7), h, arg<int>(p, 8) != 0);
}

void binary_bwd(void** p, const vgpusimLaunch*, void*) {
  std::uint64_t h = sample(kBasis, words(p, 0), count(p, 5));
  h = sample(h, words(p, 1), count(p, 6));
  h = sample(h, words(p, 2), count(p, 7));
  fill(floats(p, 3), count(p, 8), fold(h, 1), arg<int>(p, 10) != 0);
  fill(floats(p, 4), count(p, 9), fold(h, 2), arg<int>(p, 11) != 0);
}

// Softplus of a sample of the logits, averaged in a fixed order: a real
// float that moves as the weights do. dlogits from the logits and labels.
void loss(void** p, const vgpusimLaunch*, void*) {
  const float* logits = floats(p, 0);
  const std::uint64_t n = count(p, 4);
  double total = 0.0;
  std::uint64_t taken = 0;
  for (std::uint64_t i = 0; i < n; i += kSampleStride / 4, ++taken) {
    total += std::log1p(std::exp(static_cast<double>(logits[i])));
  }
  std::uint64_t h = sample(kBasis, words(p, 0), n);
  h = sample(h, words(p, 1), count(p, 5));
  fill(floats(p, 2), count(p, 6), h, false);
  *floats(p, 3) = static_cast<float>(taken > 0 ? total / static_cast<double>(taken) : 0.0);
}

void sgd(void** p, const vgpusimLaunch*, void*) {
  float* w = floats(p, 0);
  const float* dw = floats(p, 1);
  float* m = floats(p, 2);
  const float lr = arg<float>(p, 3), momentum = arg<float>(p, 4), decay = arg<float>(p, 5);
  const std::uint64_t n = count(p, 6);
  for (std::uint64_t i = 0; i < n; ++i) {
    const float g = dw[i] + decay * w[i];
    m[i] = momentum * m[i] + g;
    w[i] -= lr * m[i];
  }
}

void adamw(void** p, const vgpusimLaunch*, void*) {
  float* w = floats(p, 0);
  const float* dw = floats(p, 1);
  float* m = floats(p, 2);
  float* v = floats(p, 3);
  const float lr = arg<float>(p, 4), b1 = arg<float>(p, 5), b2 = arg<float>(p, 6), eps = arg<float>(p, 7),
              decay = arg<float>(p, 8);
  const int step = arg<int>(p, 9);
  const std::uint64_t n = count(p, 10);
  const float c1 = 1.0f - std::pow(b1, static_cast<float>(step)), c2 = 1.0f - std::pow(b2, static_cast<float>(step));
  for (std::uint64_t i = 0; i < n; ++i) {
    const float g = dw[i];
    m[i] = b1 * m[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    const float update = (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
    w[i] -= lr * (update + decay * w[i]);
  }
}

constexpr std::size_t P = sizeof(CUdeviceptr), N = sizeof(std::uint64_t), A = sizeof(int), F = sizeof(float),
                      I = sizeof(int);

}  // namespace

const std::vector<std::size_t>& param_sizes(Sig sig) {
  static const std::vector<std::size_t> heavy_sizes{P, P, P, P, N, N, N, N, A};
  static const std::vector<std::size_t> unary_sizes{P, P, N, N};
  static const std::vector<std::size_t> unary_pair_sizes{P, P, P, N, N, N};
  static const std::vector<std::size_t> binary_sizes{P, P, P, N, N, N, A};
  static const std::vector<std::size_t> unary_bwd_sizes{P, P, P, P, N, N, N, N, A};
  static const std::vector<std::size_t> binary_bwd_sizes{P, P, P, P, P, N, N, N, N, N, A, A};
  static const std::vector<std::size_t> loss_sizes{P, P, P, P, N, N, N};
  static const std::vector<std::size_t> sgd_sizes{P, P, P, F, F, F, N};
  static const std::vector<std::size_t> adamw_sizes{P, P, P, P, F, F, F, F, F, I, N};
  switch (sig) {
    case Sig::Heavy: return heavy_sizes;
    case Sig::Unary: return unary_sizes;
    case Sig::UnaryPair: return unary_pair_sizes;
    case Sig::Binary: return binary_sizes;
    case Sig::UnaryBwd: return unary_bwd_sizes;
    case Sig::BinaryBwd: return binary_bwd_sizes;
    case Sig::Loss: return loss_sizes;
    case Sig::Sgd: return sgd_sizes;
    case Sig::AdamW: return adamw_sizes;
  }
  return unary_sizes;
}

vgpusimKernelFn body(Sig sig) {
  switch (sig) {
    case Sig::Heavy: return heavy;
    case Sig::Unary: return unary;
    case Sig::UnaryPair: return unary_pair;
    case Sig::Binary: return binary;
    case Sig::UnaryBwd: return unary_bwd;
    case Sig::BinaryBwd: return binary_bwd;
    case Sig::Loss: return loss;
    case Sig::Sgd: return sgd;
    case Sig::AdamW: return adamw;
  }
  return unary;
}

Counts counts(Sig sig) {
  switch (sig) {
    case Sig::Heavy: return {4, 4};
    case Sig::Unary: return {2, 2};
    case Sig::UnaryPair: return {3, 3};
    case Sig::Binary: return {3, 3};
    case Sig::UnaryBwd: return {4, 4};
    case Sig::BinaryBwd: return {5, 5};
    case Sig::Loss: return {4, 3};
    case Sig::Sgd: return {6, 1};
    case Sig::AdamW: return {10, 1};
  }
  return {};
}

void set_scale(unsigned scale) { g_scale = scale; }

double traffic_duration(void** params, const vgpusimLaunch*, void* user) {
  const auto* traffic = static_cast<const Traffic*>(user);
  const Counts where = counts(traffic->sig);
  double bytes = 0.0;
  for (int i = 0; i < where.number; ++i) {
    bytes += traffic->per_count[i] * static_cast<double>(count(params, where.first + i)) * 4.0 * g_scale;
  }
  return std::max(kMinKernelNs, bytes / kMemoryBytesPerNs);
}

}  // namespace layered
