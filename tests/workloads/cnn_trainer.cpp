// The CNN trainer: a small convolutional network trained with SGD through
// cuDNN, on the simulated driver and the simulated libcudnn.so.9
// (docs/simulated-driver.md, "cuDNN"), written as a framework drives cuDNN:
//   five 3x3 convolutions (the later ones grouped, as in ResNeXt-style
//   blocks, so the host-side simulation stays cheap), each followed by a bias
//   (cudnnAddTensor) and a ReLU (a kernel of its own); a global average pool
//   and a linear head with softmax cross-entropy (cnn_kernels.cpp); backward
//   with cudnnConvolutionBackwardData, ...BackwardFilter and ...BackwardBias;
//   an SGD kernel per parameter tensor.
// --api legacy (default) uses the legacy cudnnConvolution* calls; --api
// backend the graph API, one execution plan per layer and direction built on
// first use (from the engine config heuristics offer) and cached, as PyTorch
// 2.x does through cudnn-frontend. Both run
// the same kernels, so both give the same RESULT line.
//
// Memory: every tensor allocated once before the first step (as a warmed-up
// caching allocator holds them): weights, biases, their gradients, each
// layer's pre-activation and activation (saved for backward), a gradient
// buffer per layer, one cuDNN workspace. At the default --scale 1 (batch 8,
// 64x64 images) the first layer's feature maps are 2 MiB each; --scale S
// multiplies the batch, and so every feature map, by S.
//
// Deterministic: fixed seeds, a fixed order of every sum, one stream. The
// last line is machine-readable:
//   TIMING step_ns=<n>   (the last step, simulated time; before RESULT)
//   RESULT loss=<%.9g> weights_fnv1a=<hex> peak_device_bytes_wanted=<n>
// Any CUDA error prints "CUDA_ERROR <name> at <call>" and exits 3, any cuDNN
// error "CUDNN_ERROR <status> at <call>" (exit 3).
#include <cuda.h>
#include <cudnn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cnn_convolutions.h"
#include "cnn_kernels.h"

namespace {

void check(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) name = "UNKNOWN";
  std::printf("CUDA_ERROR %s at %s\n", name, what);
  std::exit(3);
}
#define CHECK(call) check((call), #call)
#define CUDNN_CHECK(call) cnn::check_cudnn((call), #call)

struct Options {
  int steps = 4, scale = 1, classes = 10, image = 64;
  unsigned seed = 7;
  float lr = 0.3f;
  bool backend = false;
};

[[noreturn]] void usage(const char* problem) {
  std::fprintf(stderr,
               "cnn_trainer: %s (accepted: --steps N (4) --scale S (1) --seed N (7) --api legacy|backend (legacy))\n",
               problem);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string key = argv[i];
    if (i + 1 >= argc) usage(("no value for " + key).c_str());
    const std::string value = argv[i + 1];
    if (key == "--api") {
      if (value != "legacy" && value != "backend") usage("--api is legacy or backend");
      o.backend = value == "backend";
      continue;
    }
    const int number = std::atoi(value.c_str());
    if (number < 1) usage((key + " must be a positive number").c_str());
    if (key == "--steps") o.steps = number;
    else if (key == "--scale") o.scale = number;
    else if (key == "--seed") o.seed = static_cast<unsigned>(number);
    else usage(("unknown option " + key).c_str());
  }
  return o;
}

// A tiny deterministic generator (the standard library's distributions are
// not guaranteed identical across implementations).
struct Random {
  std::uint64_t state;
  float uniform() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>((state >> 40) & 0xFFFFFF) / 16777216.0f;
  }
};

std::size_t g_live_bytes = 0, g_peak_bytes = 0;

struct Buffer {
  CUdeviceptr ptr = 0;
  std::size_t bytes = 0;
  void* get() const { return reinterpret_cast<void*>(ptr); }
};

Buffer allocate(std::size_t bytes) {
  Buffer b;
  b.bytes = bytes;
  CHECK(cuMemAlloc(&b.ptr, bytes));
  g_live_bytes += bytes;
  if (g_live_bytes > g_peak_bytes) g_peak_bytes = g_live_bytes;
  return b;
}

void release(Buffer& b) {
  if (b.ptr == 0) return;
  CHECK(cuMemFree(b.ptr));
  g_live_bytes -= b.bytes;
  b = Buffer{};
}

CUstream g_stream = nullptr;

void launch(CUfunction f, std::vector<void*> params) {
  CHECK(cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, g_stream, params.data(), nullptr));
}

struct Layer {
  cnn::ConvShape shape;
  Buffer w, b, dw, db;
  Buffer z, a;   // pre-activation and activation, saved for backward
  Buffer dz;     // gradient of z (then of the bias and weights)
  Buffer da;     // gradient of a (written by the next layer's backward data, or the pool)
  cudnnTensorDescriptor_t y_desc = nullptr, bias_desc = nullptr;
  std::size_t outputs() const {
    return static_cast<std::size_t>(shape.batch) * shape.out_channels * shape.out_size * shape.out_size;
  }
  std::size_t weights() const {
    return static_cast<std::size_t>(shape.out_channels) * (shape.in_channels / shape.groups) * shape.kernel *
           shape.kernel;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  CHECK(cuInit(0));
  CUdevice device = 0;
  CHECK(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&context, device));
  CHECK(cuCtxSetCurrent(context));
  if (!cnn::register_kernels()) {
    std::printf("CUDA_ERROR kernels-unavailable at vgpusimRegisterKernel (this trainer needs the simulated driver)\n");
    return 3;
  }
  const cnn::Kernels& k = cnn::kernels();
  CHECK(cuStreamCreate(&g_stream, CU_STREAM_NON_BLOCKING));
  cudnnHandle_t handle = nullptr;
  CUDNN_CHECK(cudnnCreate(&handle));
  CUDNN_CHECK(cudnnSetStream(handle, g_stream));

  // The network: channels, stride and groups of each 3x3 convolution.
  const int batch = 8 * o.scale;
  struct Spec {
    int out_channels, stride, groups;
  };
  const Spec specs[] = {{16, 1, 1}, {32, 2, 2}, {32, 1, 4}, {64, 2, 4}, {64, 1, 8}};
  std::vector<Layer> layers;
  int channels = 3, size = o.image;
  for (const Spec& s : specs) {
    Layer l;
    l.shape = {batch, channels, s.out_channels, size, (size + 2 - 3) / s.stride + 1, 3, s.stride, 1, s.groups};
    layers.push_back(l);
    channels = s.out_channels;
    size = l.shape.out_size;
  }
  std::vector<cnn::ConvShape> shapes;
  for (const Layer& l : layers) shapes.push_back(l.shape);
  const std::unique_ptr<cnn::Convolutions> conv =
      o.backend ? cnn::make_backend_convolutions(handle, shapes) : cnn::make_legacy_convolutions(handle, shapes);

  Random rng{o.seed};
  std::size_t workspace_bytes = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    Layer& l = layers[i];
    const cnn::ConvShape& s = l.shape;
    std::vector<float> host(l.weights());
    // He-uniform initialisation keeps the signal alive through the ReLUs.
    const float bound = std::sqrt(6.0f / static_cast<float>((s.in_channels / s.groups) * s.kernel * s.kernel));
    for (float& v : host) v = (rng.uniform() * 2.0f - 1.0f) * bound;
    l.w = allocate(host.size() * sizeof(float));
    CHECK(cuMemcpyHtoD(l.w.ptr, host.data(), l.w.bytes));
    std::vector<float> zeros(static_cast<std::size_t>(s.out_channels), 0.0f);
    l.b = allocate(zeros.size() * sizeof(float));
    CHECK(cuMemcpyHtoD(l.b.ptr, zeros.data(), l.b.bytes));
    l.dw = allocate(l.w.bytes);
    l.db = allocate(l.b.bytes);
    l.z = allocate(l.outputs() * sizeof(float));
    l.a = allocate(l.outputs() * sizeof(float));
    l.dz = allocate(l.outputs() * sizeof(float));
    l.da = allocate(l.outputs() * sizeof(float));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&l.y_desc));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&l.bias_desc));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(l.y_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.batch, s.out_channels,
                                           s.out_size, s.out_size));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(l.bias_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, s.out_channels, 1, 1));
    workspace_bytes = std::max(workspace_bytes, conv->workspace_bytes(static_cast<int>(i)));
  }
  Buffer workspace = allocate(workspace_bytes > 0 ? workspace_bytes : 1);

  // The head: pooled features -> classes.
  const int features = channels, pixels = size * size;
  std::vector<float> head_host(static_cast<std::size_t>(features) * o.classes);
  const float head_bound = std::sqrt(6.0f / static_cast<float>(features));
  for (float& v : head_host) v = (rng.uniform() * 2.0f - 1.0f) * head_bound;
  Buffer head_w = allocate(head_host.size() * sizeof(float)), head_dw = allocate(head_w.bytes);
  CHECK(cuMemcpyHtoD(head_w.ptr, head_host.data(), head_w.bytes));
  std::vector<float> head_zeros(static_cast<std::size_t>(o.classes), 0.0f);
  Buffer head_b = allocate(head_zeros.size() * sizeof(float)), head_db = allocate(head_b.bytes);
  CHECK(cuMemcpyHtoD(head_b.ptr, head_zeros.data(), head_b.bytes));
  Buffer pooled = allocate(static_cast<std::size_t>(batch) * features * sizeof(float));
  Buffer dpooled = allocate(pooled.bytes);

  // Synthetic images: noise plus a 16x16 block, anywhere, in the channel and
  // of the brightness the label names (what a global average pool keeps),
  // so the network has something to learn.
  const std::size_t image_floats = static_cast<std::size_t>(3) * o.image * o.image;
  std::vector<float> x_host(static_cast<std::size_t>(batch) * image_floats);
  std::vector<int> y_host(static_cast<std::size_t>(batch));
  Buffer x = allocate(x_host.size() * sizeof(float)), labels = allocate(y_host.size() * sizeof(int));
  Buffer loss = allocate(sizeof(float));
  float last_loss = 0.0f;
  const float one = 1.0f;

  // The last step is timed (two events around it, the simulated clock's):
  // printed apart from RESULT, which runs compare whole.
  CUevent step_began = nullptr, step_ended = nullptr;
  CHECK(cuEventCreate(&step_began, CU_EVENT_DEFAULT));
  CHECK(cuEventCreate(&step_ended, CU_EVENT_DEFAULT));
  for (int step = 0; step < o.steps; ++step) {
    if (step == o.steps - 1) CHECK(cuEventRecord(step_began, g_stream));
    for (int r = 0; r < batch; ++r) {
      float* image = &x_host[static_cast<std::size_t>(r) * image_floats];
      for (std::size_t i = 0; i < image_floats; ++i) image[i] = rng.uniform() * 0.5f;
      const int label = static_cast<int>(rng.uniform() * static_cast<float>(o.classes)) % o.classes;
      const int channel = label % 3;
      const float brightness = 0.5f * static_cast<float>(1 + label / 3);
      const int top = static_cast<int>(rng.uniform() * static_cast<float>(o.image - 16));
      const int left = static_cast<int>(rng.uniform() * static_cast<float>(o.image - 16));
      for (int h = top; h < top + 16; ++h)
        for (int w = left; w < left + 16; ++w)
          image[(static_cast<std::size_t>(channel) * o.image + h) * o.image + w] += brightness;
      y_host[static_cast<std::size_t>(r)] = label;
    }
    CHECK(cuMemcpyHtoDAsync(x.ptr, x_host.data(), x.bytes, g_stream));
    CHECK(cuMemcpyHtoDAsync(labels.ptr, y_host.data(), labels.bytes, g_stream));

    // Forward.
    for (std::size_t i = 0; i < layers.size(); ++i) {
      Layer& l = layers[i];
      void* input = i == 0 ? x.get() : layers[i - 1].a.get();
      conv->forward(static_cast<int>(i), input, l.w.get(), l.z.get(), workspace.get());
      CUDNN_CHECK(cudnnAddTensor(handle, &one, l.bias_desc, l.b.get(), &one, l.y_desc, l.z.get()));
      long long n = static_cast<long long>(l.outputs());
      launch(k.relu_forward, {&l.z.ptr, &l.a.ptr, &n});
    }
    Layer& last = layers.back();
    int b = batch, f = features, px = pixels, classes = o.classes;
    launch(k.avgpool_forward, {&last.a.ptr, &pooled.ptr, &b, &f, &px});
    launch(k.head, {&pooled.ptr, &head_w.ptr, &head_b.ptr, &labels.ptr, &loss.ptr, &dpooled.ptr, &head_dw.ptr,
                    &head_db.ptr, &b, &f, &classes});
    launch(k.avgpool_backward, {&dpooled.ptr, &last.da.ptr, &b, &f, &px});

    // Backward, last layer first.
    for (std::size_t i = layers.size(); i-- > 0;) {
      Layer& l = layers[i];
      long long n = static_cast<long long>(l.outputs());
      launch(k.relu_backward, {&l.da.ptr, &l.z.ptr, &l.dz.ptr, &n});
      const float zero = 0.0f;
      CUDNN_CHECK(cudnnConvolutionBackwardBias(handle, &one, l.y_desc, l.dz.get(), &zero, l.bias_desc, l.db.get()));
      void* input = i == 0 ? x.get() : layers[i - 1].a.get();
      conv->backward_filter(static_cast<int>(i), input, l.dz.get(), l.dw.get(), workspace.get());
      if (i > 0) conv->backward_data(static_cast<int>(i), l.dz.get(), l.w.get(), layers[i - 1].da.get(), workspace.get());
    }

    // SGD.
    float lr = o.lr;
    for (Layer& l : layers) {
      long long nw = static_cast<long long>(l.weights()), nb = l.shape.out_channels;
      launch(k.sgd, {&l.w.ptr, &l.dw.ptr, &lr, &nw});
      launch(k.sgd, {&l.b.ptr, &l.db.ptr, &lr, &nb});
    }
    long long nh = static_cast<long long>(features) * o.classes, nhb = o.classes;
    launch(k.sgd, {&head_w.ptr, &head_dw.ptr, &lr, &nh});
    launch(k.sgd, {&head_b.ptr, &head_db.ptr, &lr, &nhb});
    CHECK(cuMemcpyDtoHAsync(&last_loss, loss.ptr, sizeof(float), g_stream));
    if (step == o.steps - 1) CHECK(cuEventRecord(step_ended, g_stream));
    CHECK(cuStreamSynchronize(g_stream));
    std::printf("step %d loss %.6f\n", step, static_cast<double>(last_loss));
  }

  // FNV-1a over every weight and bias, in layer order, then the head's.
  std::uint64_t hash = 1469598103934665603ULL;
  std::vector<Buffer*> parameters;
  for (Layer& l : layers) {
    parameters.push_back(&l.w);
    parameters.push_back(&l.b);
  }
  parameters.push_back(&head_w);
  parameters.push_back(&head_b);
  for (Buffer* t : parameters) {
    std::vector<unsigned char> bytes(t->bytes);
    CHECK(cuMemcpyDtoH(bytes.data(), t->ptr, t->bytes));
    for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ULL;
  }

  for (Layer& l : layers) {
    for (Buffer* t : {&l.w, &l.b, &l.dw, &l.db, &l.z, &l.a, &l.dz, &l.da}) release(*t);
    cudnnDestroyTensorDescriptor(l.y_desc);
    cudnnDestroyTensorDescriptor(l.bias_desc);
  }
  for (Buffer* t : {&workspace, &head_w, &head_dw, &head_b, &head_db, &pooled, &dpooled, &x, &labels, &loss}) {
    release(*t);
  }
  float step_ms = 0;
  if (o.steps > 0) CHECK(cuEventElapsedTime(&step_ms, step_began, step_ended));
  CHECK(cuEventDestroy(step_began));
  CHECK(cuEventDestroy(step_ended));
  CUDNN_CHECK(cudnnDestroy(handle));
  CHECK(cuStreamDestroy(g_stream));
  std::printf("TIMING step_ns=%.0f\n", static_cast<double>(step_ms) * 1e6);
  std::printf("RESULT loss=%.9g weights_fnv1a=%016llx peak_device_bytes_wanted=%zu\n", static_cast<double>(last_loss),
              static_cast<unsigned long long>(hash), g_peak_bytes);
  return 0;
}
