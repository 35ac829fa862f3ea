// The shapes of the layered workloads (layered_trainer.cpp): per layer, the
// activation bytes the forward pass keeps for the backward pass, the weight
// bytes, and the simulated time of its heavy kernel and of the
// memory-bound kernels around it, for an H100 in bf16 at a typical batch.
//
// Where the numbers come from (docs/benchmarks.md, "The layered workloads"):
// * Heavy kernels: the layer's forward FLOPs at an achieved 250 TFLOP/s for
//   convolutions and 400 TFLOP/s for transformer GEMMs (the H100 SXM's dense
//   bf16 peak is 989; cuDNN and cuBLAS reach 25-45 % of it on these shapes).
//   The backward pass costs twice the forward (data and weight gradients).
// * Memory-bound kernels (normalisation, activation, dropout, softmax):
//   each reads and writes the layer's activations at 2.5 TB/s (of the
//   H100's 3.35 TB/s HBM3).
// * Activations: ResNet-50 and VGG-16 from their feature-map sizes (a
//   bottleneck block keeps about four maps of its output size);
//   transformers from Korthikanti et al. 2022 (s·b·h·(34 + 5·a·s/h) bytes
//   per layer in 16-bit, without recomputation).
// * Weights: two bytes a parameter; the optimizer is plain SGD (one update
//   kernel a layer), so optimizer state adds nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace layered {

struct Layer {
  std::uint64_t activation_bytes;  // the layer's output, kept for the backward pass
  std::uint64_t weight_bytes;
  double heavy_ns;                 // its convolution or GEMMs, forward
  double elementwise_ns;           // the memory-bound kernels after it, forward
  bool convolution;
};

struct Model {
  std::string name;
  int batch = 0;
  std::uint64_t input_bytes = 0;
  std::vector<Layer> layers;
};

// Unknown name: an empty model.
Model model(const std::string& name);
std::vector<std::string> model_names();

}  // namespace layered
