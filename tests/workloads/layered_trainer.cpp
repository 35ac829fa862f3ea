// A layered training loop on the simulated driver, shaped like a real
// network's (layered_models.h): the benchmark's workloads (`vgpumem bench`)
// and the learned schedule's end-to-end tests.
//
// Like a framework with a caching allocator, it allocates every tensor
// once (input, each layer's output activation, weights, weight gradients,
// two activation-gradient buffers, the loss), then each step: uploads a
// batch, runs the forward pass (per layer a heavy kernel, named conv_* or
// gemm_*, and a memory-bound one), the loss, the backward pass in reverse
// (data and weight gradients), an SGD update per layer, and reads the loss
// back — all on the legacy default stream, so the launch stream repeats
// with a period of one step.
//
// Kernels compute a deterministic mix of one 8-byte word in every 4 KiB of
// each operand they read and write the same sample of their output (a
// wrong byte in a moved 2 MiB chunk changes the result); their simulated
// durations are the model's, unscaled. Byte sizes are divided by --scale.
//
// Last line: RESULT loss=<hex> weights_fnv1a=<hex> peak_device_bytes_wanted=<n>
// step_ns=<the last step, simulated> compute_ns=<declared kernel time a step>.
// CUDA errors print "CUDA_ERROR <name> at <call>" and exit 3.
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "layered_models.h"
#include "vgpusim.h"

namespace {

void check(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) name = "UNKNOWN";
  std::printf("CUDA_ERROR %s at %s\n", name, what);
  std::exit(3);
}
#define CHECK(call) check((call), #call)

constexpr std::uint64_t kSample = 4096;  // one word a page

struct Options {
  std::string model = "cnn-small";
  int steps = 6, scale = 64;
  unsigned seed = 7;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "layered_trainer: %s needs a value\n", key.c_str());
      std::exit(2);
    }
    const std::string value = argv[i + 1];
    if (key == "--model") o.model = value;
    else if (key == "--steps") o.steps = std::atoi(value.c_str());
    else if (key == "--scale") o.scale = std::atoi(value.c_str());
    else if (key == "--seed") o.seed = static_cast<unsigned>(std::atoi(value.c_str()));
    else {
      std::fprintf(stderr, "layered_trainer: unknown option %s (accepted: --model --steps --scale --seed)\n",
                   key.c_str());
      std::exit(2);
    }
  }
  if (layered::model(o.model).layers.empty()) {
    std::string names;
    for (const std::string& name : layered::model_names()) names += " " + name;
    std::fprintf(stderr, "layered_trainer: unknown model %s (accepted:%s)\n", o.model.c_str(), names.c_str());
    std::exit(2);
  }
  if (o.steps < 1 || o.scale < 1) {
    std::fprintf(stderr, "layered_trainer: --steps and --scale must be positive\n");
    std::exit(2);
  }
  return o;
}

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

// Parameters: in0, in1, out, bytes of each, salt, duration (ns).
struct Params {
  CUdeviceptr in0, in1, out;
  std::uint64_t bytes0, bytes1, bytes_out, salt;
  double ns;
};
const std::size_t kParamSizes[] = {8, 8, 8, 8, 8, 8, 8, 8};

void body(void** params, const vgpusimLaunch*, void*) {
  const auto word = [&](int i) { return *static_cast<std::uint64_t*>(params[i]); };
  std::uint64_t h = word(6);
  for (int operand = 0; operand < 3; ++operand) {  // the output is read too: element-wise and updates are in place
    const auto* base = reinterpret_cast<const unsigned char*>(word(operand));
    const std::uint64_t bytes = word(3 + operand);
    if (base == nullptr) continue;
    for (std::uint64_t at = 0; at + 8 <= bytes; at += kSample) {
      std::uint64_t v;
      std::memcpy(&v, base + at, 8);
      h = mix(h, v);
    }
  }
  auto* out = reinterpret_cast<unsigned char*>(word(2));
  for (std::uint64_t at = 0; at + 8 <= word(5); at += kSample) {
    const std::uint64_t v = mix(h, at);
    std::memcpy(out + at, &v, 8);
  }
}

double duration(void** params, const vgpusimLaunch*, void*) { return *static_cast<double*>(params[7]); }

CUfunction kernel(const char* name) {
  vgpusimKernelDesc desc{};
  desc.name = name;
  desc.body = &body;
  desc.paramCount = 8;
  desc.paramSizes = kParamSizes;
  desc.durationFn = &duration;
  CUfunction f = nullptr;
  if (vgpusimRegisterKernel(&desc, &f) != CUDA_SUCCESS) {
    std::printf("CUDA_ERROR kernels-unavailable at vgpusimRegisterKernel (this trainer needs the simulated driver)\n");
    std::exit(3);
  }
  return f;
}

struct Tensor {
  CUdeviceptr ptr = 0;
  std::uint64_t bytes = 0;
};

std::uint64_t g_wanted = 0;
double g_compute_ns = 0;

Tensor allocate(std::uint64_t bytes) {
  Tensor t;
  t.bytes = std::max<std::uint64_t>(bytes, 8);
  CHECK(cuMemAlloc(&t.ptr, t.bytes));
  CHECK(cuMemsetD8(t.ptr, 0, t.bytes));
  g_wanted += t.bytes;
  return t;
}

void launch(CUfunction f, const Tensor& in0, const Tensor& in1, const Tensor& out, std::uint64_t salt, double ns) {
  Params p{in0.ptr, in1.ptr, out.ptr, in0.bytes, in1.bytes, out.bytes, salt, ns};
  void* params[] = {&p.in0, &p.in1, &p.out, &p.bytes0, &p.bytes1, &p.bytes_out, &p.salt, &p.ns};
  CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  g_compute_ns += ns;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const layered::Model model = layered::model(o.model);
  CHECK(cuInit(0));
  CUdevice device = 0;
  CHECK(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&context, device));
  CHECK(cuCtxSetCurrent(context));
  const CUfunction conv_fwd = kernel("conv_fwd"), conv_bwd_data = kernel("conv_bwd_data"),
                   conv_bwd_weight = kernel("conv_bwd_weight"), gemm_fwd = kernel("gemm_fwd"),
                   gemm_bwd_data = kernel("gemm_bwd_data"), gemm_bwd_weight = kernel("gemm_bwd_weight"),
                   norm_act = kernel("norm_act_fwd"), loss_kernel = kernel("loss_and_grad"),
                   sgd = kernel("sgd_update");

  const auto scaled = [&](std::uint64_t bytes) { return bytes / static_cast<std::uint64_t>(o.scale); };
  const std::size_t n = model.layers.size();
  std::vector<Tensor> activation(n + 1), weight(n), weight_grad(n);
  activation[0] = allocate(scaled(model.input_bytes));
  std::uint64_t largest = activation[0].bytes;
  for (std::size_t l = 0; l < n; ++l) {
    weight[l] = allocate(scaled(model.layers[l].weight_bytes));
    weight_grad[l] = allocate(scaled(model.layers[l].weight_bytes));
    activation[l + 1] = allocate(scaled(model.layers[l].activation_bytes));
    largest = std::max(largest, activation[l + 1].bytes);
  }
  Tensor grad[2] = {allocate(largest), allocate(largest)};
  Tensor loss = allocate(8);
  const Tensor none{};
  // Weights from the seed, written by a kernel over each (no host copies of
  // their size).
  for (std::size_t l = 0; l < n; ++l) launch(sgd, none, none, weight[l], o.seed * 1000 + l, 0);
  CHECK(cuCtxSynchronize());
  g_compute_ns = 0;

  std::vector<unsigned char> batch(activation[0].bytes);
  void* pinned = nullptr;
  CHECK(cuMemAllocHost(&pinned, batch.size()));
  CUevent begin = nullptr, end = nullptr;
  CHECK(cuEventCreate(&begin, CU_EVENT_DEFAULT));
  CHECK(cuEventCreate(&end, CU_EVENT_DEFAULT));
  std::uint64_t loss_value = 0;
  for (int step = 0; step < o.steps; ++step) {
    if (step + 1 == o.steps) {
      CHECK(cuEventRecord(begin, nullptr));
      g_compute_ns = 0;
    }
    for (std::uint64_t at = 0; at + 8 <= batch.size(); at += kSample) {
      const std::uint64_t v = mix(o.seed + static_cast<std::uint64_t>(step), at);
      std::memcpy(static_cast<unsigned char*>(pinned) + at, &v, 8);
    }
    CHECK(cuMemcpyHtoDAsync(activation[0].ptr, pinned, activation[0].bytes, nullptr));
    for (std::size_t l = 0; l < n; ++l) {
      const layered::Layer& layer = model.layers[l];
      launch(layer.convolution ? conv_fwd : gemm_fwd, activation[l], weight[l], activation[l + 1], l, layer.heavy_ns);
      launch(norm_act, none, none, activation[l + 1], l, layer.elementwise_ns);
    }
    launch(loss_kernel, activation[n], none, grad[0], static_cast<std::uint64_t>(step), 10'000);
    launch(loss_kernel, grad[0], none, loss, 0, 2'000);
    int current = 0;
    for (std::size_t l = n; l-- > 0;) {
      const layered::Layer& layer = model.layers[l];
      launch(layer.convolution ? conv_bwd_weight : gemm_bwd_weight, grad[current], activation[l], weight_grad[l], l,
             layer.heavy_ns);
      launch(layer.convolution ? conv_bwd_data : gemm_bwd_data, grad[current], weight[l], grad[1 - current], l,
             layer.heavy_ns + layer.elementwise_ns);
      current = 1 - current;
    }
    for (std::size_t l = 0; l < n; ++l) {
      launch(sgd, weight_grad[l], none, weight[l], l, 3.0 * weight[l].bytes * o.scale / 2500.0);
    }
    CHECK(cuMemcpyDtoH(&loss_value, loss.ptr, 8));
    if (step + 1 == o.steps) CHECK(cuEventRecord(end, nullptr));
  }
  CHECK(cuEventSynchronize(end));
  float step_ms = 0;
  CHECK(cuEventElapsedTime(&step_ms, begin, end));

  // The weights, sampled as the kernels see them.
  std::uint64_t fnv = 0xcbf29ce484222325ULL;
  std::vector<unsigned char> host;
  for (const Tensor& w : weight) {
    host.resize(w.bytes);
    CHECK(cuMemcpyDtoH(host.data(), w.ptr, w.bytes));
    for (std::uint64_t at = 0; at + 8 <= w.bytes; at += kSample) {
      for (int k = 0; k < 8; ++k) fnv = (fnv ^ host[at + k]) * 0x100000001b3ULL;
    }
  }
  CHECK(cuMemFreeHost(pinned));
  std::printf("RESULT loss=%016llx weights_fnv1a=%016llx peak_device_bytes_wanted=%llu step_ns=%llu compute_ns=%llu\n",
              static_cast<unsigned long long>(loss_value), static_cast<unsigned long long>(fnv),
              static_cast<unsigned long long>(g_wanted), static_cast<unsigned long long>(step_ms * 1e6),
              static_cast<unsigned long long>(g_compute_ns));
  return 0;
}
