// The CNN trainer's own kernels (everything but the convolutions and bias
// adds, which cuDNN runs), as host functions for the simulated driver. Each
// reads and writes device memory directly in a fixed order, so results are
// bit-identical run to run.
#pragma once

#include <cuda.h>

namespace cnn {

// Registers every kernel with the simulated driver; false if the driver is
// not the simulator (vgpusimRegisterKernel missing) or registration failed.
bool register_kernels();

struct Kernels {
  CUfunction relu_forward;      // (Z, A, n)
  CUfunction relu_backward;     // (dA, Z, dZ, n)
  CUfunction avgpool_forward;   // (X, P, batch, channels, pixels): P[b][c] = mean of X[b][c][*]
  CUfunction avgpool_backward;  // (dP, dX, batch, channels, pixels)
  CUfunction head;              // (P, W, b, labels, loss, dP, dW, db, batch, features, classes):
                                //   linear + softmax cross-entropy, forward and backward at once
  CUfunction sgd;               // (W, dW, lr, n)
};
const Kernels& kernels();

}  // namespace cnn
