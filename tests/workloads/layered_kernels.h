// The layered trainer's kernels (layered_trainer.cpp), as host functions for
// the simulated driver. A handful of bodies, one per parameter layout
// ("signature"); each is registered under many names (one per layer for the
// heavy kernels, whose simulated duration is fixed per layer, and one per
// operation kind for the memory-bound ones, whose duration follows the bytes
// they are passed).
//
// What a body computes: it folds a strided sample of every input it is
// passed (one 32-bit word in kSampleStride, and the last word) into a 64-bit
// hash, bit-exactly, and writes every word of every output as a float in
// [-0.5, 0.5) derived from that hash and the word's index (added to what is
// there when the launch says "accumulate"). So any changed bit in a sampled
// word, or in any word of a buffer that is accumulated into or updated by the
// optimizer, changes everything downstream: the loss and the weights' hash.
// The optimizer kernels are real SGD-with-momentum and AdamW over every word.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "vgpusim.h"

namespace layered {

// One word in this many is read by a body from each input (256 bytes).
constexpr std::size_t kSampleStride = 64;
// Memory-bound kernels: H100 HBM3 at an achievable 2.5 TB/s (peak 3.35).
constexpr double kMemoryBytesPerNs = 2500.0;
// No kernel takes less than this (launch and tail, as measured on H100s).
constexpr double kMinKernelNs = 3000.0;

// Parameter layouts. P: a device pointer, N: a count of 32-bit words
// (std::uint64_t), A: an accumulate flag (int), F: a float, I: an int.
enum class Sig {
  Heavy,      // a, b, ws, y | na, nb, nws, ny | acc        y (+)= f(a, b); ws written (a workspace)
  Unary,      // x, y | nx, ny                              y = f(x) (x == y: in place)
  UnaryPair,  // x, y, z | nx, ny, nz                       y = f(x), z = g(x) (dropout: its output, its mask)
  Binary,     // a, b, y | na, nb, ny | acc                 y (+)= f(a, b)
  UnaryBwd,   // x, y, dy, dx | nx, ny, ndy, ndx | acc      dx (+)= f(x, y, dy)
  BinaryBwd,  // a, y, dy, da, db | na, ny, ndy, nda, ndb | acc_a, acc_b
  Loss,       // logits, labels, dlogits, loss | nlogits, nlabels, ndlogits
  Sgd,        // w, dw, m | lr, momentum, weight_decay | n
  AdamW,      // w, dw, m, v | lr, beta1, beta2, eps, weight_decay | step | n
};

// The bytes a memory-bound kernel moves, per word of each count parameter
// (in declaration order, in units of the buffer's size: 2 = read twice).
struct Traffic {
  Sig sig = Sig::Unary;
  double per_count[5] = {0, 0, 0, 0, 0};
};

const std::vector<std::size_t>& param_sizes(Sig sig);
vgpusimKernelFn body(Sig sig);

// Every byte size the trainer allocates is its real one divided by the
// scale; memory-bound durations multiply the counts back.
void set_scale(unsigned scale);

// Duration of a memory-bound launch (the registered durationFn; `user` is a
// const Traffic*): the bytes it moves at kMemoryBytesPerNs, at least
// kMinKernelNs.
double traffic_duration(void** params, const vgpusimLaunch* launch, void* user);

// Where the count parameters of `sig` are: the index of the first, and how
// many there are.
struct Counts {
  int first = 0, number = 0;
};
Counts counts(Sig sig);

}  // namespace layered
