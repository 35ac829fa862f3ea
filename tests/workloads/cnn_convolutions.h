// The CNN trainer's convolutions through either cuDNN API: the legacy
// descriptors and cudnnConvolution* calls, or the backend graph API with one
// execution plan per (layer, direction) built on first use and cached, as
// PyTorch's cuDNN v8 path does (the engine config from heuristics). Both run
// the same simulated kernels, so a training run gives the same bits whichever
// is chosen.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace cnn {

// One 2-d convolution layer, NCHW fp32, square images and filters.
struct ConvShape {
  int batch, in_channels, out_channels, in_size, out_size, kernel, stride, pad, groups;
};

// Stops the program with "CUDNN_ERROR <status> at <what>" (exit 3) unless
// `status` is success.
void check_cudnn(cudnnStatus_t status, const char* what);

class Convolutions {
 public:
  virtual ~Convolutions() = default;
  // Workspace any call on `layer` needs.
  virtual std::size_t workspace_bytes(int layer) = 0;
  // y = conv(x, w)
  virtual void forward(int layer, void* x, void* w, void* y, void* workspace) = 0;
  // dx = conv^T(dy, w)
  virtual void backward_data(int layer, void* dy, void* w, void* dx, void* workspace) = 0;
  // dw = x (*) dy
  virtual void backward_filter(int layer, void* x, void* dy, void* dw, void* workspace) = 0;
};

std::unique_ptr<Convolutions> make_legacy_convolutions(cudnnHandle_t handle, const std::vector<ConvShape>& layers);
std::unique_ptr<Convolutions> make_backend_convolutions(cudnnHandle_t handle, const std::vector<ConvShape>& layers);

}  // namespace cnn
