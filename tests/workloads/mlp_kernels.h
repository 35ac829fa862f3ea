// The demo trainer's kernels, as host functions for the simulated driver.
// Each reads and writes device memory directly (device pointers are host
// addresses in the simulator) in a fixed order, so results are bit-identical
// run to run.
#pragma once

#include <cuda.h>

namespace mlp {

// Registers every kernel with the simulated driver; false if the driver is
// not the simulator (vgpusimRegisterKernel missing) or registration failed.
bool register_kernels();

struct Kernels {
  CUfunction linear_forward;   // (X, W, b, Z, batch, in, out)
  CUfunction relu_forward;     // (Z, A, n)
  CUfunction softmax_xent;     // (logits, labels, dlogits, loss, batch, classes)
  CUfunction relu_backward;    // (dA, Z, dZ, n)
  CUfunction linear_backward;  // (X, W, dZ, dX, dW, db, batch, in, out); dX may be 0
  CUfunction sgd;              // (W, dW, lr, n)
};
const Kernels& kernels();

}  // namespace mlp
