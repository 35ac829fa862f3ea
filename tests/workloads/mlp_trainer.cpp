// The demo trainer: a small MLP trained with SGD, written against the CUDA
// driver API the way a framework uses it -- one allocation per tensor
// (weights, biases, activations, gradients), host-to-device input copies,
// kernel launches, a device-to-host loss read every step. Kernels are
// simulated (mlp_kernels.cpp), so it runs on the simulated driver.
//
// Deterministic: fixed-seed data and a fixed summation order make every run
// of the same binary bit-identical. The last line is machine-readable:
//   RESULT loss=<%.9g> weights_fnv1a=<hex> peak_device_bytes_wanted=<n>
// Any CUDA error prints "CUDA_ERROR <name> at <call>" and exits 3 (an
// out-of-memory error included: a program handles it by stopping cleanly).
#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mlp_kernels.h"

namespace {

void check(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) name = "UNKNOWN";
  std::printf("CUDA_ERROR %s at %s\n", name, what);
  std::exit(3);
}
#define CHECK(call) check((call), #call)

struct Options {
  int layers = 4, width = 256, batch = 64, steps = 8, inputs = 128, classes = 10;
  int change_at = 0, changed_batch = 0;  // --batch-change STEP:B: from step STEP (0-based) on, batch B
  unsigned seed = 7;
  float lr = 0.1f;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (key == "--batch-change") {
      // A new input shape mid-run (a last partial batch, a new sequence
      // length): every kernel's parameters change, and the activations' sizes.
      if (std::sscanf(argv[i + 1], "%d:%d", &o.change_at, &o.changed_batch) != 2 || o.change_at < 1 ||
          o.changed_batch < 1) {
        std::fprintf(stderr, "mlp_trainer: --batch-change \"%s\" is not STEP:BATCH (both positive)\n", argv[i + 1]);
        std::exit(2);
      }
      continue;
    }
    if (key == "--layers") o.layers = value;
    else if (key == "--width") o.width = value;
    else if (key == "--batch") o.batch = value;
    else if (key == "--steps") o.steps = value;
    else if (key == "--seed") o.seed = static_cast<unsigned>(value);
    else {
      std::fprintf(stderr,
                   "mlp_trainer: unknown option %s (accepted: --layers --width --batch --steps --seed "
                   "--batch-change STEP:B)\n",
                   key.c_str());
      std::exit(2);
    }
  }
  if (o.layers < 1 || o.width < 1 || o.batch < 1 || o.steps < 1) {
    std::fprintf(stderr, "mlp_trainer: --layers, --width, --batch and --steps must be positive\n");
    std::exit(2);
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

struct Tensor {
  CUdeviceptr ptr = 0;
  std::size_t bytes = 0;
};

std::size_t g_live_bytes = 0, g_peak_bytes = 0;

Tensor allocate(std::size_t count, std::size_t element = sizeof(float)) {
  Tensor t;
  t.bytes = count * element;
  CHECK(cuMemAlloc(&t.ptr, t.bytes));
  g_live_bytes += t.bytes;
  if (g_live_bytes > g_peak_bytes) g_peak_bytes = g_live_bytes;
  return t;
}

void release(Tensor& t) {
  CHECK(cuMemFree(t.ptr));
  g_live_bytes -= t.bytes;
  t = Tensor{};
}

void launch(CUfunction f, std::vector<void*> params) {
  CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params.data(), nullptr));
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  CHECK(cuInit(0));
  CUdevice device = 0;
  CHECK(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&context, device));
  CHECK(cuCtxSetCurrent(context));
  if (!mlp::register_kernels()) {
    std::printf("CUDA_ERROR kernels-unavailable at vgpusimRegisterKernel (this trainer needs the simulated driver)\n");
    return 3;
  }
  const mlp::Kernels& k = mlp::kernels();

  // Layer sizes: inputs -> width x (layers-1) -> classes.
  std::vector<int> dims{o.inputs};
  for (int i = 0; i + 1 < o.layers; ++i) dims.push_back(o.width);
  dims.push_back(o.classes);
  const int n_layers = static_cast<int>(dims.size()) - 1;

  Random rng{o.seed};
  std::vector<Tensor> W(n_layers), b(n_layers), dW(n_layers), db(n_layers);
  for (int l = 0; l < n_layers; ++l) {
    const std::size_t n = static_cast<std::size_t>(dims[l]) * dims[l + 1];
    std::vector<float> host(n);
    // He-uniform initialisation keeps the signal alive through the ReLUs.
    const float scale = std::sqrt(6.0f / static_cast<float>(dims[l]));
    for (float& v : host) v = (rng.uniform() * 2.0f - 1.0f) * scale;
    W[l] = allocate(n);
    CHECK(cuMemcpyHtoD(W[l].ptr, host.data(), W[l].bytes));
    std::vector<float> zeros(static_cast<std::size_t>(dims[l + 1]), 0.0f);
    b[l] = allocate(zeros.size());
    CHECK(cuMemcpyHtoD(b[l].ptr, zeros.data(), b[l].bytes));
    dW[l] = allocate(n);
    db[l] = allocate(zeros.size());
  }

  // Synthetic classification data: the label is the argmax of a fixed
  // projection of the input, so the loss really falls.
  const int most = std::max(o.batch, o.changed_batch);
  std::vector<float> x_host(static_cast<std::size_t>(most) * o.inputs);
  std::vector<int> y_host(static_cast<std::size_t>(most));
  Tensor x = allocate(x_host.size()), y = allocate(y_host.size(), sizeof(int)), loss = allocate(1);
  float last_loss = 0.0f;

  for (int step = 0; step < o.steps; ++step) {
    int batch = o.change_at > 0 && step >= o.change_at ? o.changed_batch : o.batch;
    for (int r = 0; r < batch; ++r) {
      float best = -1e30f;
      for (int i = 0; i < o.inputs; ++i) {
        const float v = rng.uniform() * 2.0f - 1.0f;
        x_host[static_cast<std::size_t>(r) * o.inputs + i] = v;
      }
      for (int c = 0; c < o.classes; ++c) {
        float s = 0.0f;
        for (int i = c; i < o.inputs; i += o.classes) s += x_host[static_cast<std::size_t>(r) * o.inputs + i];
        if (s > best) best = s, y_host[static_cast<std::size_t>(r)] = c;
      }
    }
    CHECK(cuMemcpyHtoD(x.ptr, x_host.data(), static_cast<std::size_t>(batch) * o.inputs * sizeof(float)));
    CHECK(cuMemcpyHtoD(y.ptr, y_host.data(), static_cast<std::size_t>(batch) * sizeof(int)));

    // Forward: activations are allocated per step and kept for backward,
    // like feature maps in a framework's autograd graph.
    std::vector<Tensor> Z(n_layers), A(n_layers);
    CUdeviceptr input = x.ptr;
    for (int l = 0; l < n_layers; ++l) {
      int in = dims[l], out = dims[l + 1];
      Z[l] = allocate(static_cast<std::size_t>(batch) * out);
      launch(k.linear_forward, {&input, &W[l].ptr, &b[l].ptr, &Z[l].ptr, &batch, &in, &out});
      if (l + 1 < n_layers) {
        A[l] = allocate(static_cast<std::size_t>(batch) * out);
        int n = batch * out;
        launch(k.relu_forward, {&Z[l].ptr, &A[l].ptr, &n});
        input = A[l].ptr;
      }
    }
    Tensor dZ = allocate(static_cast<std::size_t>(batch) * dims[n_layers]);
    int classes = o.classes;
    launch(k.softmax_xent, {&Z[n_layers - 1].ptr, &y.ptr, &dZ.ptr, &loss.ptr, &batch, &classes});

    // Backward, freeing each activation after its last use.
    for (int l = n_layers - 1; l >= 0; --l) {
      int in = dims[l], out = dims[l + 1];
      CUdeviceptr layer_input = l == 0 ? x.ptr : A[l - 1].ptr;
      Tensor dX;
      if (l > 0) dX = allocate(static_cast<std::size_t>(batch) * in);
      launch(k.linear_backward, {&layer_input, &W[l].ptr, &dZ.ptr, &dX.ptr, &dW[l].ptr, &db[l].ptr, &batch, &in, &out});
      release(dZ);
      release(Z[l]);
      if (l > 0) {
        Tensor dZ_prev = allocate(static_cast<std::size_t>(batch) * in);
        int n = batch * in;
        launch(k.relu_backward, {&dX.ptr, &Z[l - 1].ptr, &dZ_prev.ptr, &n});
        release(dX);
        release(A[l - 1]);
        dZ = dZ_prev;
      }
    }
    for (int l = 0; l < n_layers; ++l) {
      float lr = o.lr;
      int n = dims[l] * dims[l + 1];
      launch(k.sgd, {&W[l].ptr, &dW[l].ptr, &lr, &n});
      int nb = dims[l + 1];
      launch(k.sgd, {&b[l].ptr, &db[l].ptr, &lr, &nb});
    }
    CHECK(cuMemcpyDtoH(&last_loss, loss.ptr, sizeof(float)));
  }
  CHECK(cuCtxSynchronize());

  // FNV-1a over every weight and bias, in layer order.
  std::uint64_t hash = 1469598103934665603ULL;
  for (int l = 0; l < n_layers; ++l) {
    for (Tensor* t : {&W[l], &b[l]}) {
      std::vector<unsigned char> bytes(t->bytes);
      CHECK(cuMemcpyDtoH(bytes.data(), t->ptr, t->bytes));
      for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ULL;
    }
  }
  for (int l = 0; l < n_layers; ++l) {
    release(W[l]);
    release(b[l]);
    release(dW[l]);
    release(db[l]);
  }
  release(x);
  release(y);
  release(loss);
  std::printf("RESULT loss=%.9g weights_fnv1a=%016llx peak_device_bytes_wanted=%zu\n", static_cast<double>(last_loss),
              static_cast<unsigned long long>(hash), g_peak_bytes);
  return 0;
}
