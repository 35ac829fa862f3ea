// The layered trainer: deterministic training steps shaped like real DNN
// training (ResNet-50, VGG-16, BERT-large, GPT-2-medium, and a small CNN for
// tests), written against the CUDA driver API as a framework with a caching
// allocator drives it, on the simulated driver (layered_kernels.cpp). It is
// the workload of the learned-schedule benchmark (docs/workloads.md, "The
// layered workloads").
//
// Memory: every tensor is allocated once, before the first step, as a
// caching allocator that has warmed up keeps its blocks: fp32 master weights,
// their fp32 gradients and optimizer state (SGD momentum for the CNNs, AdamW
// m and v for the transformers, as PyTorch AMP keeps them); each layer's bf16
// output, saved for backward; a few gradient buffers for activations, reused
// across layers (a static plan: a buffer is free once the layer whose output
// gradient it holds has run backward; the fewest buffers, each as large as
// the largest gradient it ever holds); a workspace (cuDNN/cuBLAS) that every
// convolution and GEMM writes; the batch, the labels, the loss.
//
// --allocator caching (the default is `static`, the above): activations and
// activation gradients come from a caching allocator as PyTorch's
// CUDACachingAllocator hands them out (caching_allocator.h: its pools,
// segment sizes, best fit, splitting and coalescing, each size divided by
// --scale), taken and given back every step; everything else is allocated
// once as above. Lifetimes as autograd has them, from the static plan: a
// node's output is allocated as its forward launch is issued (an in-place
// node shares its input's) and freed after the last launch of the step that
// reads it (its last backward reader; in an evaluation step its last
// forward consumer); an activation gradient is allocated at its first
// contribution and freed once its node has run backward. Freeing is
// bookkeeping only (one stream: stream order protects the block), segments
// are never given back. Backward frees in reverse, so a step's forward may
// get other blocks than the step before: every launch's addresses are filled
// as it is issued. --report-addresses prints, before RESULT, for each two
// consecutive steps "ALTERNATES steps k-k+1: N of M activations moved".
//
// A step, all on one non-blocking stream (created with
// CU_STREAM_NON_BLOCKING; every copy, memset and launch of the program goes on
// it, so the legacy stream is never involved): the batch and its labels
// uploaded (cuMemcpyHtoDAsync from pinned memory), forward layer by layer, the
// loss, backward in reverse (each layer reads its saved input, its own output
// where the operation needs it, and its output's gradient; writes its input's
// gradient, and its weights' gradient), an optimizer kernel per weight
// tensor, the loss read back (cuMemcpyDtoHAsync into pinned memory, then
// cuStreamSynchronize). The launch stream is periodic with a period of one
// step; only the last step adds two events (cuEventRecord) around itself, to
// time it.
//
// --backward-thread: as PyTorch's autograd engine does, the loss and the
// backward launches are issued by a second host thread, created once before
// the first step (it makes the context current), on the same stream; the
// main thread hands each step's backward over (mutex and condition
// variable) and blocks until it is issued, then issues the optimizer, the
// read-back and the synchronize. The simulator gives each host thread its
// own clock and cannot see the handoff, so each message carries the
// sender's clock (vgpusimHostTimeNs) and the receiver catches up to it
// (vgpusimHostHandoff). Evaluation steps stay on the main thread. With
// --libraries the backward's cuBLAS and cuDNN calls come from that thread.
//
// Sizes: --scale S divides every byte size (a minimum of 256 bytes, rounded
// up to 256) so that the simulation stays cheap; declared kernel durations
// are not scaled. Run with VGPUSIM_LINK_GBPS=55/S to keep an H100's ratio of
// copy time to compute time.
//
// Where the numbers come from (per layer; B the batch):
//   * Shapes: the published architectures (torchvision resnet50 v1.5 with the
//     stride on the 3x3 conv, torchvision vgg16 without BN, BERT-large
//     (24 layers, hidden 1024, 16 heads, FFN 4096, vocab 30522, post-LN, MLM
//     head with the decoder tied to the word embeddings), GPT-2-medium (24
//     layers, hidden 1024, 16 heads, FFN 4096, vocab 50257, context 1024,
//     pre-LN, LM head tied to the word embeddings).
//   * Activations: bf16, 2 bytes per element of each layer's output, saved
//     for backward. ReLUs in VGG-16 run in place (no extra tensor), as
//     torchvision's do; in ResNet-50 batch norm and ReLU are one kernel with
//     its own output, after the convolution's. Attention is flash attention
//     (PyTorch's SDPA on an H100): it saves its output, no B*heads*s^2 matrix.
//     --attention eager (transformers; HuggingFace's eager attention in
//     training, bf16 autocast, attention dropout): per layer the scores
//     q kᵀ (a batched GEMM, B x heads x s x s bf16, not saved), their
//     softmax (in fp32, as autocast runs it; saved; GPT-2's causal mask
//     inside it), dropout (its output and a byte-per-element mask, saved)
//     and the context probs v; backward
//     in reverse, each s x s gradient as large as its tensor. --layers N
//     (transformers) builds N layers instead of 24.
//   * Weights: fp32 (PyTorch AMP's master weights), 4 bytes per parameter;
//     batch-norm and layer-norm affine parameters and biases are left out
//     (under 0.3% of the parameters of every model here).
//   * Convolutions: 2*B*Cin*Cout*k*k*Hout*Wout FLOPs at 400 TFLOP/s (bf16
//     cuDNN on an H100 SXM, 989 TFLOP/s dense peak), GEMMs 2*M*N*K at
//     600 TFLOP/s (eager attention's batched GEMMs too: 2*B*s^2*hidden each,
//     the masked half included), flash attention 4*B*s^2*hidden (halved when
//     causal) at 300 TFLOP/s forward, 2.5x those FLOPs at 250 TFLOP/s
//     backward (FA2's H100 figures at head dimension 64). Each is also at
//     least the time to move its operands at 2.5 TB/s (a roofline; this is
//     what the 7x7 maps of ResNet-50's last stage and the 1x1 convolutions
//     hit) and at least 3 us.
//     Backward of a convolution or GEMM is two kernels, data gradient and
//     weight gradient, each costing what the forward does (so 2x forward);
//     so is each of eager attention's GEMMs (dq and dk; dprobs and dv).
//   * Memory-bound kernels (batch norm, layer norm, ReLU, GELU, pooling,
//     residual adds, embedding, softmax, dropout, cross entropy, the
//     optimizer) move the bytes of their operands at 2.5 TB/s (HBM3
//     achievable; batch norm reads its input twice, statistics then
//     normalise), at least 3 us (layered_kernels.h, Traffic).
// `--describe` prints every layer's numbers and the totals.
// `--eval-every N`: every Nth step (never the last) is an evaluation step,
// forward and loss only, then the loss read: the launch stream changes
// there, as a training loop's does when it evaluates.
//
// Steps that are not all alike, as training loops issue them (each seeded,
// so deterministic):
// `--alternate`: steps alternate between two kinds, as a GAN's
// discriminator and generator steps do. The model's first half of nodes
// stands for the generator, the second half for the discriminator; both run
// forward and the loss. Even steps (the discriminator's) run backward
// through the second half only and update its weights; odd steps (the
// generator's) run backward through everything and update the first half's
// weights. Evaluation steps (--eval-every) take their turn as usual.
// `--buckets N` (2..4): each step's sequence length (image size) is drawn
// from N buckets (full, 3/4, 1/2, 1/4 of the largest) in seeded random
// order: every activation and activation gradient of the step is that
// fraction of its size, and so are the counts its kernels are passed (the
// weights and the batch's upload keep theirs). Under --allocator caching
// the buffers are taken at the bucket's size, so each bucket's kernels read
// other blocks; under the static allocator only the counts change, as with
// buffers kept at the largest bucket.
// `--warmup N`: the learning rate rises linearly over the first N steps
// (a float argument of every optimizer launch changes each step).
// `--log-every K`: every Kth step (never the last) ends with one more
// kernel, a metrics logger that folds the loss and the first weight tensor
// into a metrics buffer (summed into weights_fnv1a, after the weights).
//
// Deterministic: fixed-seed data, kernels that are pure functions of the
// bytes they read (never of an address, and never of a word no launch of
// the step wrote: the loss and the weights are the same bits with either
// allocator, with or without the backward thread). The last line is
// machine-readable:
//   RESULT loss=<%.9g> weights_fnv1a=<hex> peak_device_bytes_wanted=<n> step_ns=<n> compute_ns=<n>
//          copied_in=<n> copied_out=<n> launch_vmm_calls=<n> launch_pin_calls=<n> launch_driver_ns=<n>
// peak_device_bytes_wanted: the bytes the program allocated with cuMemAlloc
// (under --allocator caching: the persistent tensors plus the allocator's
// segments at the end, which it never gives back; --describe predicts it by
// a dry run); step_ns: simulated time of the last step (events around it);
// compute_ns: the sum of the declared durations of one step's kernels; copied_in/out:
// bytes of copies across the link issued during the last step (the batch,
// the loss and, under the shim, the pager's moves); launch_*: the VMM and
// pinning calls the threads that issued the last step (main and backward)
// made in it, and the simulated time they spent in them, locks included
// (vgpusimThreadDriverCalls): driver work on the launch path. Any CUDA error
// prints "CUDA_ERROR <name> at <call>" and exits 3.
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "caching_allocator.h"
#include "layered_kernels.h"
#include "layered_libraries.h"
#include "vgpusim.h"
#include "vgpusim_driver_calls.h"

namespace {

using layered::Sig;
using layered::Traffic;

void check(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) name = "UNKNOWN";
  std::printf("CUDA_ERROR %s at %s\n", name, what);
  std::exit(3);
}
#define CHECK(call) check((call), #call)

// ---------------------------------------------------------------- models

constexpr double kConvFlopsPerNs = 400e3;   // 400 TFLOP/s
constexpr double kGemmFlopsPerNs = 600e3;   // 600 TFLOP/s
constexpr double kAttnFwdFlopsPerNs = 300e3;
constexpr double kAttnBwdFlopsPerNs = 250e3;
constexpr std::uint64_t kBf16 = 2, kFp32 = 4;

enum class Op {
  Conv, Gemm, Attn, Embed, BnRelu, Bn, BnAddRelu, Relu, MaxPool, AvgPool, LayerNorm, Gelu, Add,
  // Eager attention (--attention eager): q kᵀ, softmax, dropout, probs v.
  AttnScores, Softmax, Dropout, AttnContext
};

constexpr int kInput = -1;  // the batch
constexpr int kNone = -2;

struct Node {
  std::string name;
  Op op = Op::Relu;
  int in0 = kInput, in1 = kNone;
  std::uint64_t c = 0, h = 1, w = 1;  // output shape of one sample: channels (features) x height (tokens) x width
  std::uint64_t out_bytes = 0;         // bf16, whole batch
  std::uint64_t aux_bytes = 0;         // a second output saved for backward (dropout's mask), 0: none
  bool inplace = false;                // writes its input's tensor (out_bytes 0)
  std::uint64_t weight_bytes = 0;      // fp32 parameters it owns
  int owner = -1;                      // whose weights it uses (itself, or the node it is tied to)
  std::uint64_t weight_used_bytes = 0; // of the owner's
  double flops = 0;                    // forward
  double fwd_ns = 0, dgrad_ns = 0, wgrad_ns = 0;  // heavy kernels (Conv, Gemm, AttnScores, AttnContext;
                                                  // Attn: fwd and dgrad)
  int ordinal = 0;                     // among nodes of its kind: conv_fwd_<ordinal>
};

struct Model {
  std::string name;
  int batch = 0;
  std::vector<Node> nodes;
  std::uint64_t input_c = 0, input_h = 1, input_w = 1;  // per sample
  std::uint64_t input_bytes = 0, label_bytes = 0, workspace_bytes = 0;
  bool adamw = false;
};

double roofline(double flops, double flops_per_ns, double bytes) {
  return std::max({flops / flops_per_ns, bytes / layered::kMemoryBytesPerNs, layered::kMinKernelNs});
}

class Builder {
 public:
  explicit Builder(Model& model) : m_(model) {}

  std::uint64_t elements(int node) const {
    const std::uint64_t b = static_cast<std::uint64_t>(m_.batch);
    if (node == kInput) return b * m_.input_c * m_.input_h * m_.input_w;
    const Node& n = m_.nodes[static_cast<std::size_t>(node)];
    return b * n.c * n.h * n.w;
  }
  const Node& at(int node) const { return m_.nodes[static_cast<std::size_t>(node)]; }
  std::uint64_t c(int node) const { return node == kInput ? m_.input_c : at(node).c; }
  std::uint64_t h(int node) const { return node == kInput ? m_.input_h : at(node).h; }
  std::uint64_t w(int node) const { return node == kInput ? m_.input_w : at(node).w; }

  int conv(const std::string& name, int in, std::uint64_t cout, std::uint64_t k, std::uint64_t stride) {
    Node n = shaped(name, Op::Conv, in, cout, (h(in) + stride - 1) / stride, (w(in) + stride - 1) / stride);
    const std::uint64_t weights = c(in) * cout * k * k;
    n.weight_bytes = weights * kFp32;
    n.weight_used_bytes = n.weight_bytes;
    n.flops = 2.0 * static_cast<double>(elements_of(n)) * static_cast<double>(c(in) * k * k);
    heavy_times(n, in, weights, kConvFlopsPerNs);
    n.ordinal = convs_++;
    return add(n);
  }

  // y = x W over the last dimension (features); tied: use node `tied`'s
  // first fin*fout weights instead of owning some.
  int gemm(const std::string& name, int in, std::uint64_t fout, int tied = -1) {
    Node n = shaped(name, Op::Gemm, in, fout, h(in), w(in));
    const std::uint64_t weights = c(in) * fout;
    if (tied < 0) n.weight_bytes = weights * kFp32;
    n.owner = tied;
    n.weight_used_bytes = weights * kFp32;
    n.flops = 2.0 * static_cast<double>(elements_of(n)) * static_cast<double>(c(in));
    heavy_times(n, in, weights, kGemmFlopsPerNs);
    n.ordinal = gemms_++;
    return add(n);
  }

  // Flash attention over a qkv tensor (3*hidden features).
  int attention(const std::string& name, int qkv, bool causal) {
    const std::uint64_t hidden = c(qkv) / 3, seq = h(qkv);
    Node n = shaped(name, Op::Attn, qkv, hidden, seq, 1);
    n.flops = 4.0 * m_.batch * static_cast<double>(seq * seq * hidden) * (causal ? 0.5 : 1.0);
    const double in_bytes = static_cast<double>(elements(qkv) * kBf16), out = static_cast<double>(n.out_bytes);
    n.fwd_ns = roofline(n.flops, kAttnFwdFlopsPerNs, in_bytes + out);
    n.dgrad_ns = roofline(2.5 * n.flops, kAttnBwdFlopsPerNs, 2 * in_bytes + 2 * out);
    n.ordinal = attns_++;
    return add(n);
  }

  // Eager attention's first batched GEMM (torch.matmul(q, k.transpose)):
  // the scores of every head, B x heads x s x s, from the qkv tensor. Its
  // backward is two GEMMs (dq = dS k, dk = dSᵀ q), each costing the forward.
  int attention_scores(const std::string& name, int qkv, std::uint64_t heads) {
    const std::uint64_t hidden = c(qkv) / 3, seq = h(qkv);
    Node n = shaped(name, Op::AttnScores, qkv, heads, seq, seq);
    n.flops = attention_gemm_flops(seq, hidden);
    const double qk = static_cast<double>(elements(qkv) * kBf16) * 2.0 / 3.0, s2 = static_cast<double>(n.out_bytes);
    n.fwd_ns = roofline(n.flops, kGemmFlopsPerNs, qk + s2);
    n.dgrad_ns = n.wgrad_ns = roofline(n.flops, kGemmFlopsPerNs, s2 + qk + qk / 2);
    n.ordinal = scores_++;
    return add(n);
  }

  // Eager attention's second batched GEMM: context = probs v, B x s x
  // hidden. Backward: dprobs = dC vᵀ and dv = probsᵀ dC.
  int attention_context(const std::string& name, int probs, int qkv) {
    const std::uint64_t hidden = c(qkv) / 3, seq = h(qkv);
    Node n = shaped(name, Op::AttnContext, probs, hidden, seq, 1);
    n.in1 = qkv;
    n.flops = attention_gemm_flops(seq, hidden);
    const double p = static_cast<double>(elements(probs) * kBf16), v = static_cast<double>(elements(qkv) * kBf16) / 3.0;
    const double y = static_cast<double>(n.out_bytes);
    n.fwd_ns = roofline(n.flops, kGemmFlopsPerNs, p + v + y);
    n.dgrad_ns = n.wgrad_ns = roofline(n.flops, kGemmFlopsPerNs, y + v + p);
    n.ordinal = contexts_++;
    return add(n);
  }

  // Dropout in training: its output (bf16) and its mask (a byte per
  // element), both saved for backward.
  int dropout(const std::string& name, int in) {
    Node n = shaped(name, Op::Dropout, in, c(in), h(in), w(in));
    n.aux_bytes = elements_of(n);
    return add(n);
  }

  int embedding(const std::string& name, std::uint64_t rows, std::uint64_t hidden) {
    Node n = shaped(name, Op::Embed, kInput, hidden, m_.input_h, 1);
    n.weight_bytes = rows * hidden * kFp32;
    n.weight_used_bytes = n.weight_bytes;
    return add(n);
  }

  // A node whose output is fp32 rather than bf16: under bf16 autocast,
  // softmax is on autocast's fp32 list, and autograd saves its fp32 output.
  int in_float32(int node) {
    Node& n = m_.nodes[static_cast<std::size_t>(node)];
    n.out_bytes = elements_of(n) * kFp32;
    return node;
  }

  int light(const std::string& name, Op op, int in, int in1 = kNone, bool inplace = false) {
    Node n = shaped(name, op, in, c(in), h(in), w(in));
    n.in1 = in1;
    if (inplace) {
      n.inplace = true;
      n.out_bytes = 0;
    }
    return add(n);
  }

  int pool(const std::string& name, Op op, int in, std::uint64_t stride) {
    const std::uint64_t oh = op == Op::AvgPool ? 1 : (h(in) + stride - 1) / stride;
    const std::uint64_t ow = op == Op::AvgPool ? 1 : (w(in) + stride - 1) / stride;
    return add(shaped(name, op, in, c(in), oh, ow));
  }

 private:
  std::uint64_t elements_of(const Node& n) const { return static_cast<std::uint64_t>(m_.batch) * n.c * n.h * n.w; }

  // One of eager attention's batched GEMMs: 2 * B * heads * s * s * (hidden /
  // heads) FLOPs, the full s x s (eager attention computes the masked half too).
  double attention_gemm_flops(std::uint64_t seq, std::uint64_t hidden) const {
    return 2.0 * m_.batch * static_cast<double>(seq * seq * hidden);
  }

  Node shaped(const std::string& name, Op op, int in, std::uint64_t ch, std::uint64_t hh, std::uint64_t ww) const {
    Node n;
    n.name = name;
    n.op = op;
    n.in0 = in;
    n.c = ch;
    n.h = hh;
    n.w = ww;
    n.out_bytes = elements_of(n) * kBf16;
    return n;
  }

  void heavy_times(Node& n, int in, std::uint64_t weights, double rate) const {
    const double x = static_cast<double>(elements(in) * kBf16), y = static_cast<double>(n.out_bytes);
    const double wb = static_cast<double>(weights * kBf16), wg = static_cast<double>(weights * kFp32);
    n.fwd_ns = roofline(n.flops, rate, x + wb + y);
    n.dgrad_ns = roofline(n.flops, rate, y + wb + x);
    n.wgrad_ns = roofline(n.flops, rate, x + y + wg);
  }

  int add(Node n) {
    const int index = static_cast<int>(m_.nodes.size());
    if (n.weight_bytes > 0) n.owner = index;
    m_.nodes.push_back(n);
    return index;
  }

  Model& m_;
  int convs_ = 0, gemms_ = 0, attns_ = 0, scores_ = 0, contexts_ = 0;
};

void image_input(Model& m, std::uint64_t channels, std::uint64_t size) {
  m.input_c = channels;
  m.input_h = m.input_w = size;
  m.input_bytes = static_cast<std::uint64_t>(m.batch) * channels * size * size * kBf16;
  m.label_bytes = static_cast<std::uint64_t>(m.batch) * 4;  // int32 class per image
}

void token_input(Model& m, std::uint64_t seq) {
  m.input_c = 1;
  m.input_h = seq;
  m.input_bytes = static_cast<std::uint64_t>(m.batch) * seq * 4;  // int32 token ids
  m.label_bytes = m.input_bytes;                                   // a target per token
}

Model resnet50(int batch) {
  Model m{"resnet50", batch, {}, 0, 1, 1, 0, 0, 64ull << 20, false};
  image_input(m, 3, 224);
  Builder b(m);
  int x = b.conv("conv1", kInput, 64, 7, 2);
  x = b.light("bn1_relu", Op::BnRelu, x);
  x = b.pool("maxpool", Op::MaxPool, x, 2);
  const struct {
    int blocks;
    std::uint64_t mid, out, stride;
  } stages[] = {{3, 64, 256, 1}, {4, 128, 512, 2}, {6, 256, 1024, 2}, {3, 512, 2048, 2}};
  for (int s = 0; s < 4; ++s) {
    for (int i = 0; i < stages[s].blocks; ++i) {
      const std::string p = "layer" + std::to_string(s + 1) + "." + std::to_string(i) + ".";
      const std::uint64_t stride = i == 0 ? stages[s].stride : 1;
      int y = b.conv(p + "conv1", x, stages[s].mid, 1, 1);
      y = b.light(p + "bn1_relu", Op::BnRelu, y);
      y = b.conv(p + "conv2", y, stages[s].mid, 3, stride);
      y = b.light(p + "bn2_relu", Op::BnRelu, y);
      y = b.conv(p + "conv3", y, stages[s].out, 1, 1);
      int skip = x;
      if (i == 0) {
        skip = b.conv(p + "downsample.conv", x, stages[s].out, 1, stride);
        skip = b.light(p + "downsample.bn", Op::Bn, skip);
      }
      x = b.light(p + "bn3_add_relu", Op::BnAddRelu, y, skip);
    }
  }
  x = b.pool("avgpool", Op::AvgPool, x, 1);
  b.gemm("fc", x, 1000);
  return m;
}

Model vgg16(int batch) {
  Model m{"vgg16", batch, {}, 0, 1, 1, 0, 0, 64ull << 20, false};
  image_input(m, 3, 224);
  Builder b(m);
  int x = kInput;
  const std::uint64_t channels[] = {64, 128, 256, 512, 512};
  const int convs[] = {2, 2, 3, 3, 3};
  for (int s = 0; s < 5; ++s) {
    for (int i = 0; i < convs[s]; ++i) {
      const std::string p = "features." + std::to_string(s + 1) + "." + std::to_string(i);
      x = b.conv(p + ".conv", x, channels[s], 3, 1);
      x = b.light(p + ".relu", Op::Relu, x, kNone, true);
    }
    x = b.pool("features." + std::to_string(s + 1) + ".maxpool", Op::MaxPool, x, 2);
  }
  // The classifier sees the 512x7x7 map flattened: 25088 features.
  Node& last = m.nodes.back();
  last.c = last.c * last.h * last.w;
  last.h = last.w = 1;
  x = b.gemm("classifier.fc1", x, 4096);
  x = b.light("classifier.relu1", Op::Relu, x, kNone, true);
  x = b.gemm("classifier.fc2", x, 4096);
  x = b.light("classifier.relu2", Op::Relu, x, kNone, true);
  b.gemm("classifier.fc3", x, 1000);
  return m;
}

// What a transformer's layers are made of beyond its published shape.
struct TransformerChoices {
  int layers = 24;
  bool eager_attention = false;  // softmax(q kᵀ) v with the s x s matrices, not flash attention
};

// Attention over a qkv tensor: one flash-attention node, or eager
// attention's four (HuggingFace's eager_attention_forward in training: the
// scores, their softmax -- masked causally for GPT-2, the mask applied
// inside the softmax kernel here, in fp32 as bf16 autocast runs it --,
// dropout, the context).
int attention_block(Builder& b, const std::string& p, int qkv, std::uint64_t heads, bool causal, bool eager) {
  if (!eager) return b.attention(p + "attn.flash", qkv, causal);
  int y = b.attention_scores(p + "attn.scores", qkv, heads);
  y = b.in_float32(b.light(p + (causal ? "attn.masked_softmax" : "attn.softmax"), Op::Softmax, y));
  y = b.dropout(p + "attn.dropout", y);
  return b.attention_context(p + "attn.context", y, qkv);
}

// A transformer encoder (BERT, post-LN) or decoder (GPT-2, pre-LN).
Model transformer(const std::string& name, int batch, std::uint64_t seq, std::uint64_t vocab, std::uint64_t positions,
                  bool gpt, const TransformerChoices& choices) {
  Model m{name, batch, {}, 0, 1, 1, 0, 0, 32ull << 20, true};
  token_input(m, seq);
  Builder b(m);
  const std::uint64_t hidden = 1024, ffn = 4096, heads = 16;
  const int layers = choices.layers;
  // Word, position (and for BERT token-type) embeddings: one table here.
  const int embed = b.embedding("embeddings", vocab + positions + (gpt ? 0 : 2), hidden);
  int x = embed;
  if (!gpt) x = b.light("embeddings.layernorm", Op::LayerNorm, x);
  for (int l = 0; l < layers; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    const int residual = x;
    int y = gpt ? b.light(p + "ln1", Op::LayerNorm, x) : x;
    y = b.gemm(p + "attn.qkv", y, 3 * hidden);
    y = attention_block(b, p, y, heads, gpt, choices.eager_attention);
    y = b.gemm(p + "attn.proj", y, hidden);
    x = b.light(p + "attn.residual_add", Op::Add, y, residual);
    if (!gpt) x = b.light(p + "ln1", Op::LayerNorm, x);
    const int residual2 = x;
    y = gpt ? b.light(p + "ln2", Op::LayerNorm, x) : x;
    y = b.gemm(p + "mlp.fc1", y, ffn);
    y = b.light(p + "mlp.gelu", Op::Gelu, y);
    y = b.gemm(p + "mlp.fc2", y, hidden);
    x = b.light(p + "mlp.residual_add", Op::Add, y, residual2);
    if (!gpt) x = b.light(p + "ln2", Op::LayerNorm, x);
  }
  if (gpt) {
    x = b.light("ln_f", Op::LayerNorm, x);
  } else {
    x = b.gemm("mlm.dense", x, hidden);
    x = b.light("mlm.gelu", Op::Gelu, x);
    x = b.light("mlm.layernorm", Op::LayerNorm, x);
  }
  b.gemm(gpt ? "lm_head" : "mlm.decoder", x, vocab, embed);
  return m;
}

// For tests: a small CNN (64x64 images, four 3x3 conv layers at 64 and 128
// channels, a 256-channel one, a classifier), cheap to simulate.
Model cnn_small(int batch) {
  Model m{"cnn-small", batch, {}, 0, 1, 1, 0, 0, 16ull << 20, false};
  image_input(m, 3, 64);
  Builder b(m);
  int x = b.conv("conv1", kInput, 64, 3, 1);
  x = b.light("bn1_relu", Op::BnRelu, x);
  x = b.conv("conv2", x, 64, 3, 1);
  x = b.light("bn2_relu", Op::BnRelu, x);
  x = b.pool("pool1", Op::MaxPool, x, 2);
  x = b.conv("conv3", x, 128, 3, 1);
  x = b.light("bn3_relu", Op::BnRelu, x);
  x = b.conv("conv4", x, 128, 3, 1);
  x = b.light("bn4_relu", Op::BnRelu, x);
  x = b.pool("pool2", Op::MaxPool, x, 2);
  x = b.conv("conv5", x, 256, 3, 1);
  x = b.light("bn5_relu", Op::BnRelu, x);
  x = b.pool("avgpool", Op::AvgPool, x, 1);
  b.gemm("fc", x, 100);
  return m;
}

const char* const kModels = "resnet50, vgg16, bert-large, gpt2-medium, cnn-small";

bool is_transformer(const std::string& name) { return name == "bert-large" || name == "gpt2-medium"; }

bool make_model(const std::string& name, int batch, const TransformerChoices& choices, Model* out) {
  if (name == "resnet50") *out = resnet50(batch > 0 ? batch : 128);
  else if (name == "vgg16") *out = vgg16(batch > 0 ? batch : 64);
  else if (name == "bert-large") *out = transformer(name, batch > 0 ? batch : 16, 512, 30522, 512, false, choices);
  else if (name == "gpt2-medium") *out = transformer(name, batch > 0 ? batch : 8, 1024, 50257, 1024, true, choices);
  else if (name == "cnn-small") *out = cnn_small(batch > 0 ? batch : 256);
  else return false;
  return true;
}

// ---------------------------------------------------------------- options

struct Options {
  std::string model;
  int steps = 6, batch = 0, eval_every = 0;
  bool alternate = false;        // --alternate: discriminator and generator steps in turn
  int buckets = 0;               // --buckets N: 0 (one shape) or 2..4 buckets
  int warmup = 0, log_every = 0;  // --warmup N, --log-every K (0: none)
  unsigned scale = 64, seed = 7;
  bool describe = false;
  bool libraries = false;
  bool backward_thread = false;   // backward issued by a second host thread, as PyTorch's autograd engine does
  bool caching_allocator = false;  // per-step tensors from a caching allocator (else all allocated once)
  bool report_addresses = false;   // ALTERNATES lines: activations whose address moved between steps
  TransformerChoices transformer;
  bool layers_given = false, attention_given = false;
};

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr,
               "layered_trainer: %s\n"
               "accepted: --model <%s> [--steps N (6)] [--scale S (64)] [--batch B (per model)] [--seed N (7)] "
               "[--eval-every N (0: never)] [--libraries] [--backward-thread] [--allocator static|caching (static)] "
               "[--attention flash|eager (flash; transformers)] [--layers N (24; transformers)] "
               "[--alternate] [--buckets N (2..4)] [--warmup N] [--log-every K] [--report-addresses] [--describe]\n",
               what.c_str(), kModels);
  std::exit(2);
}

long integer(const std::string& key, const char* text, long least) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || value < least || value > (1L << 30)) {
    usage_error(key + (least > 0 ? " wants a positive integer" : " wants an integer >= 0") + ", not '" + text + "'");
  }
  return value;
}
long positive(const std::string& key, const char* text) { return integer(key, text, 1); }

// One of two words: false for the first (the default), true for the second.
bool choice(const std::string& key, const std::string& value, const char* first, const char* second) {
  if (value != first && value != second) {
    usage_error(key + " wants " + first + " or " + second + ", not '" + value + "'");
  }
  return value == second;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    // The options that take no value.
    static constexpr std::pair<const char*, bool Options::*> kFlags[] = {
        {"--describe", &Options::describe},
        {"--libraries", &Options::libraries},
        {"--backward-thread", &Options::backward_thread},
        {"--report-addresses", &Options::report_addresses},
        {"--alternate", &Options::alternate}};
    const auto flag = std::find_if(std::begin(kFlags), std::end(kFlags), [&](const auto& f) { return key == f.first; });
    if (flag != std::end(kFlags)) {
      o.*(flag->second) = true;
      continue;
    }
    if (key != "--model" && key != "--steps" && key != "--scale" && key != "--batch" && key != "--seed" &&
        key != "--eval-every" && key != "--allocator" && key != "--attention" && key != "--layers" &&
        key != "--buckets" && key != "--warmup" && key != "--log-every") {
      usage_error("unknown option " + key);
    }
    if (i + 1 >= argc) usage_error(key + " wants a value");
    const char* value = argv[++i];
    if (key == "--model") o.model = value;
    else if (key == "--steps") o.steps = static_cast<int>(positive(key, value));
    else if (key == "--scale") o.scale = static_cast<unsigned>(positive(key, value));
    else if (key == "--batch") o.batch = static_cast<int>(positive(key, value));
    else if (key == "--eval-every") o.eval_every = static_cast<int>(integer(key, value, 0));
    else if (key == "--buckets") o.buckets = static_cast<int>(integer(key, value, 0));
    else if (key == "--warmup") o.warmup = static_cast<int>(integer(key, value, 0));
    else if (key == "--log-every") o.log_every = static_cast<int>(integer(key, value, 0));
    else if (key == "--allocator") o.caching_allocator = choice(key, value, "static", "caching");
    else if (key == "--attention") o.transformer.eager_attention = choice(key, value, "flash", "eager");
    else if (key == "--layers") o.transformer.layers = static_cast<int>(positive(key, value));
    else o.seed = static_cast<unsigned>(integer(key, value, 0));
    o.layers_given = o.layers_given || key == "--layers";
    o.attention_given = o.attention_given || key == "--attention";
  }
  if (o.model.empty()) usage_error("--model is required");
  if (o.buckets == 1 || o.buckets > 4) usage_error("--buckets wants 0 (none) or 2 to 4");
  if ((o.layers_given || o.attention_given) && !is_transformer(o.model)) {
    usage_error("--layers and --attention are for the transformers (bert-large, gpt2-medium), not " + o.model);
  }
  return o;
}

// ---------------------------------------------------------------- the plan

enum class Role { Input, Labels, Loss, Workspace, Activation, Weight, WeightGrad, Moment1, Moment2, Gradient };

struct Tensor {
  std::string name;
  Role role;
  std::uint64_t bytes = 0;   // unscaled
  std::uint64_t scaled = 0;  // what is allocated
  CUdeviceptr ptr = 0;
};

unsigned g_scale = 64;

std::uint64_t scaled_bytes(std::uint64_t bytes, unsigned scale) {
  const std::uint64_t s = (bytes + scale - 1) / scale;
  return std::max<std::uint64_t>(256, (s + 255) / 256 * 256);
}
std::uint64_t scaled_bytes(std::uint64_t bytes) { return scaled_bytes(bytes, g_scale); }

// Activations and activation gradients live for part of a step; under
// --allocator caching they are taken and given back every step.
bool per_step(Role role) { return role == Role::Activation || role == Role::Gradient; }
std::uint64_t words(std::uint64_t bytes) { return scaled_bytes(bytes) / 4; }

struct Kernel {
  std::string name;
  Sig sig;
  double fixed_ns = 0;           // heavy kernels
  const Traffic* traffic = nullptr;  // memory-bound ones
  CUfunction fn = nullptr;
};

// One argument of a launch: a tensor's address, or a value.
struct Arg {
  int tensor = -1;
  std::size_t size = 0;
  unsigned char bytes[8] = {};
};

Arg tensor_arg(int tensor) {
  Arg a;
  a.tensor = tensor;
  a.size = sizeof(CUdeviceptr);
  return a;
}
template <typename T>
Arg value_arg(T value) {
  Arg a;
  a.size = sizeof(T);
  std::memcpy(a.bytes, &value, sizeof(T));
  return a;
}
Arg n_arg(std::uint64_t bytes) { return value_arg<std::uint64_t>(words(bytes)); }
template <typename T>
T arg_value(const Arg& a) {
  T value;
  std::memcpy(&value, a.bytes, sizeof value);
  return value;
}

// A per-step tensor a launch needs allocated before it runs: an activation
// it writes, or the gradient buffer (`tensor`, a Role::Gradient one) of the
// first gradient it contributes to, `bytes` of it (unscaled).
struct Request {
  int tensor = -1;
  std::uint64_t bytes = 0;
};

struct Launch {
  int kernel = 0;
  std::vector<Arg> args;
  int node = -1;          // whose (for --describe), -1 for the loss and the optimizer
  bool backward = false;
  std::vector<Request> takes;  // the static plan's lifetimes: allocated before this launch,
  std::vector<int> releases;   // gradient buffers whose gradient is done after it
  int updates = -1;            // an optimizer launch: the node whose weights it updates
};

// Traffic per kernel kind (bytes moved per word of each count parameter).
const std::map<std::string, Traffic>& traffics() {
  static const std::map<std::string, Traffic> t{
      {"bn_relu_fwd", {Sig::Unary, {2, 1}}},
      {"bn_fwd", {Sig::Unary, {2, 1}}},
      {"relu_fwd", {Sig::Unary, {1, 1}}},
      {"maxpool_fwd", {Sig::Unary, {1, 1}}},
      {"avgpool_fwd", {Sig::Unary, {1, 1}}},
      {"layernorm_fwd", {Sig::Unary, {1, 1}}},
      {"gelu_fwd", {Sig::Unary, {1, 1}}},
      {"add_fwd", {Sig::Binary, {1, 1, 1}}},
      {"bn_add_relu_fwd", {Sig::Binary, {2, 1, 1}}},
      {"embedding_fwd", {Sig::Binary, {1, 0, 2}}},  // ids, the rows gathered (as many as the output), the output
      {"bn_relu_bwd", {Sig::UnaryBwd, {2, 1, 2, 1}}},
      {"bn_bwd", {Sig::UnaryBwd, {2, 0, 2, 1}}},
      {"relu_bwd", {Sig::UnaryBwd, {0, 1, 1, 1}}},
      {"maxpool_bwd", {Sig::UnaryBwd, {1, 1, 1, 1}}},
      {"avgpool_bwd", {Sig::UnaryBwd, {0, 0, 1, 1}}},
      {"layernorm_bwd", {Sig::UnaryBwd, {1, 0, 2, 1}}},
      {"gelu_bwd", {Sig::UnaryBwd, {1, 0, 1, 1}}},
      {"add_bwd", {Sig::BinaryBwd, {0, 0, 1, 1, 1}}},
      {"bn_add_relu_bwd", {Sig::BinaryBwd, {2, 1, 2, 1, 1}}},
      {"embedding_bwd", {Sig::Binary, {1, 2, 1}}},  // ids, the gradient (read twice: scatter-add), the table (zeroed)
      {"softmax_fwd", {Sig::Unary, {1, 1}}},
      {"dropout_fwd", {Sig::UnaryPair, {1, 1, 1}}},   // x read; y and the mask written
      {"softmax_bwd", {Sig::UnaryBwd, {0, 1, 1, 1}}},  // its output (passed as x and y) and dy read; dx written
      {"dropout_bwd", {Sig::UnaryBwd, {1, 0, 1, 1}}},  // the mask (passed as x and y) and dy read; dx written
      {"cross_entropy_fwd_bwd", {Sig::Loss, {2, 1, 1}}},
      {"sgd_momentum", {Sig::Sgd, {5}}},  // w, dw, m read; w, m written
      {"adamw", {Sig::AdamW, {7}}},       // w, dw, m, v read; w, m, v written
      {"log_metrics", {Sig::Binary, {1, 1, 2}}},  // --log-every: the loss and a weight read, the metrics accumulated
  };
  return t;
}

const char* light_name(Op op) {
  switch (op) {
    case Op::BnRelu: return "bn_relu";
    case Op::Bn: return "bn";
    case Op::BnAddRelu: return "bn_add_relu";
    case Op::Relu: return "relu";
    case Op::MaxPool: return "maxpool";
    case Op::AvgPool: return "avgpool";
    case Op::LayerNorm: return "layernorm";
    case Op::Gelu: return "gelu";
    case Op::Add: return "add";
    case Op::Embed: return "embedding";
    case Op::Softmax: return "softmax";
    case Op::Dropout: return "dropout";
    default: return "?";
  }
}

struct Plan {
  Model model;
  std::vector<Tensor> tensors;
  std::vector<Kernel> kernels;
  std::vector<Launch> launches;  // one step's, in issue order
  std::vector<int> act;          // node -> its output tensor
  std::vector<int> aux;          // node -> its second output (dropout's mask), -1
  std::vector<int> weight, weight_grad, moment1, moment2;  // node -> tensor (owners), -1
  std::vector<int> weight_tensors;                         // in node order
  int input = 0, labels = 0, loss = 0, workspace = 0;
  int loss_launch = 0, first_backward = 0, first_optimizer = 0;
  std::vector<std::pair<int, int>> step_args;  // AdamW's step: (launch, argument), set every step
  int metrics = -1, log_kernel = -1;           // --log-every: its buffer and its kernel
  int gradient_buffers = 0;
  std::vector<Request> pending_takes;  // for the next launch

  bool is(int t, Role role) const { return tensors[static_cast<std::size_t>(t)].role == role; }

  int tensor(const std::string& name, Role role, std::uint64_t bytes) {
    tensors.push_back({name, role, bytes, scaled_bytes(bytes), 0});
    return static_cast<int>(tensors.size()) - 1;
  }

  int kernel(const std::string& name, Sig sig, double fixed_ns) {
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      if (kernels[i].name == name) return static_cast<int>(i);
    }
    Kernel k{name, sig, fixed_ns, nullptr, nullptr};
    if (fixed_ns <= 0) k.traffic = &traffics().at(name);
    kernels.push_back(k);
    return static_cast<int>(kernels.size()) - 1;
  }

  void launch(int k, std::vector<Arg> args, int node, bool backward) {
    launches.push_back({k, std::move(args), node, backward, std::move(pending_takes), {}});
    pending_takes.clear();
  }
};

Plan make_plan(const Model& model) {
  Plan p;
  p.model = model;
  const std::vector<Node>& nodes = p.model.nodes;
  const int count = static_cast<int>(nodes.size());
  p.input = p.tensor("input", Role::Input, model.input_bytes);
  p.labels = p.tensor("labels", Role::Labels, model.label_bytes);
  p.loss = p.tensor("loss", Role::Loss, 4);
  p.workspace = p.tensor("workspace", Role::Workspace, model.workspace_bytes);
  p.weight.assign(static_cast<std::size_t>(count), -1);
  p.weight_grad = p.moment1 = p.moment2 = p.weight;
  p.act.assign(static_cast<std::size_t>(count), -1);
  for (int i = 0; i < count; ++i) {
    const Node& n = nodes[static_cast<std::size_t>(i)];
    if (n.weight_bytes > 0) {
      const auto u = static_cast<std::size_t>(i);
      p.weight[u] = p.tensor(n.name + ".weight", Role::Weight, n.weight_bytes);
      p.weight_tensors.push_back(p.weight[u]);
      p.weight_grad[u] = p.tensor(n.name + ".weight.grad", Role::WeightGrad, n.weight_bytes);
      p.moment1[u] = p.tensor(n.name + (model.adamw ? ".exp_avg" : ".momentum"), Role::Moment1, n.weight_bytes);
      if (model.adamw) p.moment2[u] = p.tensor(n.name + ".exp_avg_sq", Role::Moment2, n.weight_bytes);
    }
  }
  p.aux.assign(static_cast<std::size_t>(count), -1);
  for (int i = 0; i < count; ++i) {
    const Node& n = nodes[static_cast<std::size_t>(i)];
    p.act[static_cast<std::size_t>(i)] =
        n.inplace ? p.act[static_cast<std::size_t>(n.in0)] : p.tensor(n.name + ".out", Role::Activation, n.out_bytes);
    if (n.aux_bytes > 0) p.aux[static_cast<std::size_t>(i)] = p.tensor(n.name + ".mask", Role::Activation, n.aux_bytes);
  }
  const auto act = [&](int i) { return i == kInput ? p.input : p.act[static_cast<std::size_t>(i)]; };
  // The bytes of a node's output as a tensor (in place: its input's).
  std::vector<std::uint64_t> out_bytes(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    const Node& n = nodes[static_cast<std::size_t>(i)];
    out_bytes[static_cast<std::size_t>(i)] = n.inplace ? out_bytes[static_cast<std::size_t>(n.in0)] : n.out_bytes;
  }
  const auto obytes = [&](int i) { return i == kInput ? model.input_bytes : out_bytes[static_cast<std::size_t>(i)]; };

  // Forward. Each node's output (and mask) is allocated as its launch is
  // issued (in place: its input's, already there).
  for (int i = 0; i < count; ++i) {
    const Node& n = nodes[static_cast<std::size_t>(i)];
    const int y = act(i);
    if (!n.inplace) p.pending_takes.push_back({y, n.out_bytes});
    const int mask = p.aux[static_cast<std::size_t>(i)];
    if (mask >= 0) p.pending_takes.push_back({mask, n.aux_bytes});
    switch (n.op) {
      case Op::Conv:
      case Op::Gemm: {
        const std::string kind = n.op == Op::Conv ? "conv" : "gemm";
        const int k = p.kernel(kind + "_fwd_" + std::to_string(n.ordinal), Sig::Heavy, n.fwd_ns);
        const int wt = p.weight[static_cast<std::size_t>(n.owner)];
        p.launch(k,
                 {tensor_arg(act(n.in0)), tensor_arg(wt), tensor_arg(p.workspace), tensor_arg(y), n_arg(obytes(n.in0)),
                  n_arg(n.weight_used_bytes), n_arg(model.workspace_bytes), n_arg(obytes(i)), value_arg<int>(0)},
                 i, false);
        break;
      }
      case Op::Attn:
      case Op::AttnScores: {
        const std::string kind = n.op == Op::Attn ? "attn_fwd_" : "attn_scores_fwd_";
        const int k = p.kernel(kind + std::to_string(n.ordinal), Sig::Unary, n.fwd_ns);
        p.launch(k, {tensor_arg(act(n.in0)), tensor_arg(y), n_arg(obytes(n.in0)), n_arg(obytes(i))}, i, false);
        break;
      }
      case Op::AttnContext: {  // probs (in0) and qkv (in1)
        const int k = p.kernel("attn_context_fwd_" + std::to_string(n.ordinal), Sig::Binary, n.fwd_ns);
        p.launch(k,
                 {tensor_arg(act(n.in0)), tensor_arg(act(n.in1)), tensor_arg(y), n_arg(obytes(n.in0)),
                  n_arg(obytes(n.in1)), n_arg(obytes(i)), value_arg<int>(0)},
                 i, false);
        break;
      }
      case Op::Dropout: {
        p.launch(p.kernel("dropout_fwd", Sig::UnaryPair, 0),
                 {tensor_arg(act(n.in0)), tensor_arg(y), tensor_arg(mask), n_arg(obytes(n.in0)), n_arg(obytes(i)),
                  n_arg(n.aux_bytes)},
                 i, false);
        break;
      }
      case Op::Embed: {
        const int k = p.kernel("embedding_fwd", Sig::Binary, 0);
        p.launch(k,
                 {tensor_arg(p.input), tensor_arg(p.weight[static_cast<std::size_t>(i)]), tensor_arg(y),
                  n_arg(model.input_bytes), n_arg(n.weight_bytes), n_arg(obytes(i)), value_arg<int>(0)},
                 i, false);
        break;
      }
      case Op::Add:
      case Op::BnAddRelu: {
        const int k = p.kernel(std::string(light_name(n.op)) + "_fwd", Sig::Binary, 0);
        p.launch(k,
                 {tensor_arg(act(n.in0)), tensor_arg(act(n.in1)), tensor_arg(y), n_arg(obytes(n.in0)),
                  n_arg(obytes(n.in1)), n_arg(obytes(i)), value_arg<int>(0)},
                 i, false);
        break;
      }
      default: {
        const int k = p.kernel(std::string(light_name(n.op)) + "_fwd", Sig::Unary, 0);
        p.launch(k, {tensor_arg(act(n.in0)), tensor_arg(y), n_arg(obytes(n.in0)), n_arg(obytes(i))}, i, false);
        break;
      }
    }
  }

  // Gradient buffers: a static plan over the backward order. grad[i] is the
  // buffer holding node i's output gradient; a buffer is taken when the
  // first contribution to a gradient is written and given back once its node
  // has run backward; each is as large as the largest gradient it holds.
  std::vector<int> grad(static_cast<std::size_t>(count), -1);
  std::vector<std::uint64_t> buffer_bytes;
  std::vector<bool> buffer_free;
  const auto take = [&](int node) {
    const std::uint64_t need = obytes(node);
    int best = -1;
    for (std::size_t b = 0; b < buffer_bytes.size(); ++b) {
      if (!buffer_free[b]) continue;
      const int candidate = static_cast<int>(b);
      if (best < 0) {
        best = candidate;
        continue;
      }
      const std::uint64_t have = buffer_bytes[b], best_have = buffer_bytes[static_cast<std::size_t>(best)];
      // The smallest that fits, else the largest (which then grows).
      const bool fits = have >= need, best_fits = best_have >= need;
      if ((fits && (!best_fits || have < best_have)) || (!fits && !best_fits && have > best_have)) best = candidate;
    }
    if (best < 0) {
      buffer_bytes.push_back(0);
      buffer_free.push_back(true);
      best = static_cast<int>(buffer_bytes.size()) - 1;
    }
    const auto b = static_cast<std::size_t>(best);
    buffer_free[b] = false;
    buffer_bytes[b] = std::max(buffer_bytes[b], need);
    grad[static_cast<std::size_t>(node)] = best;
    p.pending_takes.push_back({-(100 + best), need});  // (a placeholder, patched below)
  };
  // Placeholder tensor ids for gradient buffers are patched once the buffers
  // are known: encode buffer b as -(100 + b). The first contribution to a
  // gradient takes a buffer (for the launch that writes it).
  const auto grad_arg = [&](int node) { return tensor_arg(-(100 + grad[static_cast<std::size_t>(node)])); };
  std::vector<bool> weight_written(static_cast<std::size_t>(count), false);
  // First contribution writes, later ones accumulate.
  const auto contribute = [&](int node) {
    if (grad[static_cast<std::size_t>(node)] >= 0) return 1;
    take(node);
    return 0;
  };
  const auto contribute_weight = [&](int owner) {
    const auto u = static_cast<std::size_t>(owner);
    const int acc = weight_written[u] ? 1 : 0;
    weight_written[u] = true;
    return acc;
  };
  // Half of a batched GEMM's backward at node i (Sig::Binary): out (+)= f(a, b).
  const auto binary_backward = [&](const std::string& name, double ns, Arg a, Arg b, Arg out, int a_node, int b_node,
                                   int out_node, int acc, int i) {
    p.launch(p.kernel(name, Sig::Binary, ns),
             {a, b, out, n_arg(obytes(a_node)), n_arg(obytes(b_node)), n_arg(obytes(out_node)), value_arg<int>(acc)},
             i, true);
  };

  // The loss: logits in, their gradient out.
  const int last = count - 1;
  take(last);
  p.loss_launch = static_cast<int>(p.launches.size());
  p.launch(p.kernel("cross_entropy_fwd_bwd", Sig::Loss, 0),
           {tensor_arg(act(last)), tensor_arg(p.labels), grad_arg(last), tensor_arg(p.loss), n_arg(obytes(last)),
            n_arg(model.label_bytes), n_arg(obytes(last))},
           -1, true);
  p.first_backward = static_cast<int>(p.launches.size());

  for (int i = last; i >= 0; --i) {
    const Node& n = nodes[static_cast<std::size_t>(i)];
    if (grad[static_cast<std::size_t>(i)] < 0) continue;  // nothing consumes it (never here)
    switch (n.op) {
      case Op::Conv:
      case Op::Gemm: {
        const std::string kind = n.op == Op::Conv ? "conv" : "gemm";
        const int wt = p.weight[static_cast<std::size_t>(n.owner)];
        if (n.in0 != kInput) {
          const int acc = contribute(n.in0);
          const int k = p.kernel(kind + "_dgrad_" + std::to_string(n.ordinal), Sig::Heavy, n.dgrad_ns);
          p.launch(k,
                   {grad_arg(i), tensor_arg(wt), tensor_arg(p.workspace), grad_arg(n.in0), n_arg(obytes(i)),
                    n_arg(n.weight_used_bytes), n_arg(model.workspace_bytes), n_arg(obytes(n.in0)),
                    value_arg<int>(acc)},
                   i, true);
        }
        const int acc = contribute_weight(n.owner);
        const int k = p.kernel(kind + "_wgrad_" + std::to_string(n.ordinal), Sig::Heavy, n.wgrad_ns);
        p.launch(k,
                 {tensor_arg(act(n.in0)), grad_arg(i), tensor_arg(p.workspace),
                  tensor_arg(p.weight_grad[static_cast<std::size_t>(n.owner)]), n_arg(obytes(n.in0)),
                  n_arg(obytes(i)), n_arg(model.workspace_bytes), n_arg(n.weight_used_bytes), value_arg<int>(acc)},
                 i, true);
        break;
      }
      case Op::AttnScores: {  // dq = dS k, then dk = dSᵀ q: both into qkv's gradient
        const std::string ordinal = std::to_string(n.ordinal);
        const int acc = contribute(n.in0);
        binary_backward("attn_scores_dgrad_" + ordinal, n.dgrad_ns, grad_arg(i), tensor_arg(act(n.in0)),
                        grad_arg(n.in0), i, n.in0, n.in0, acc, i);
        binary_backward("attn_scores_wgrad_" + ordinal, n.wgrad_ns, grad_arg(i), tensor_arg(act(n.in0)),
                        grad_arg(n.in0), i, n.in0, n.in0, 1, i);
        break;
      }
      case Op::AttnContext: {  // dprobs = dC vᵀ (reads qkv), then dv = probsᵀ dC (into qkv's gradient)
        const std::string ordinal = std::to_string(n.ordinal);
        const int acc0 = contribute(n.in0);
        binary_backward("attn_context_dgrad_" + ordinal, n.dgrad_ns, grad_arg(i), tensor_arg(act(n.in1)),
                        grad_arg(n.in0), i, n.in1, n.in0, acc0, i);
        const int acc1 = contribute(n.in1);
        binary_backward("attn_context_wgrad_" + ordinal, n.wgrad_ns, tensor_arg(act(n.in0)), grad_arg(i),
                        grad_arg(n.in1), n.in0, i, n.in1, acc1, i);
        break;
      }
      case Op::Softmax:
      case Op::Dropout: {
        // What autograd saved: softmax its output (not its input, the
        // scores), dropout its mask; passed as both x and y.
        const int saved = n.op == Op::Softmax ? act(i) : p.aux[static_cast<std::size_t>(i)];
        const std::uint64_t saved_bytes = n.op == Op::Softmax ? obytes(i) : n.aux_bytes;
        const int acc = contribute(n.in0);
        p.launch(p.kernel(std::string(light_name(n.op)) + "_bwd", Sig::UnaryBwd, 0),
                 {tensor_arg(saved), tensor_arg(saved), grad_arg(i), grad_arg(n.in0), n_arg(saved_bytes),
                  n_arg(saved_bytes), n_arg(obytes(i)), n_arg(obytes(n.in0)), value_arg<int>(acc)},
                 i, true);
        break;
      }
      case Op::Embed: {
        const int acc = contribute_weight(i);
        p.launch(p.kernel("embedding_bwd", Sig::Binary, 0),
                 {tensor_arg(p.input), grad_arg(i), tensor_arg(p.weight_grad[static_cast<std::size_t>(i)]),
                  n_arg(model.input_bytes), n_arg(obytes(i)), n_arg(n.weight_bytes), value_arg<int>(acc)},
                 i, true);
        break;
      }
      case Op::Add:
      case Op::BnAddRelu: {
        const int acc0 = contribute(n.in0), acc1 = contribute(n.in1);
        p.launch(p.kernel(std::string(light_name(n.op)) + "_bwd", Sig::BinaryBwd, 0),
                 {tensor_arg(act(n.in0)), tensor_arg(act(i)), grad_arg(i), grad_arg(n.in0), grad_arg(n.in1),
                  n_arg(obytes(n.in0)), n_arg(obytes(i)), n_arg(obytes(i)), n_arg(obytes(n.in0)), n_arg(obytes(n.in1)),
                  value_arg<int>(acc0), value_arg<int>(acc1)},
                 i, true);
        break;
      }
      default: {  // unary: attention and the memory-bound ones
        const int acc = contribute(n.in0);
        const int k = n.op == Op::Attn ? p.kernel("attn_bwd_" + std::to_string(n.ordinal), Sig::UnaryBwd, n.dgrad_ns)
                                       : p.kernel(std::string(light_name(n.op)) + "_bwd", Sig::UnaryBwd, 0);
        p.launch(k,
                 {tensor_arg(act(n.in0)), tensor_arg(act(i)), grad_arg(i), grad_arg(n.in0), n_arg(obytes(n.in0)),
                  n_arg(obytes(i)), n_arg(obytes(i)), n_arg(obytes(n.in0)), value_arg<int>(acc)},
                 i, true);
        break;
      }
    }
    // Node i's output gradient is done: its buffer is free.
    buffer_free[static_cast<std::size_t>(grad[static_cast<std::size_t>(i)])] = true;
    p.launches.back().releases.push_back(-(100 + grad[static_cast<std::size_t>(i)]));
  }

  // The optimizer, a kernel per weight tensor, in layer order.
  p.first_optimizer = static_cast<int>(p.launches.size());
  for (int i = 0; i < count; ++i) {
    const auto u = static_cast<std::size_t>(i);
    if (p.weight[u] < 0) continue;
    const std::uint64_t wb = nodes[u].weight_bytes;
    if (model.adamw) {
      p.step_args.emplace_back(static_cast<int>(p.launches.size()), 9);
      p.launch(p.kernel("adamw", Sig::AdamW, 0),
               {tensor_arg(p.weight[u]), tensor_arg(p.weight_grad[u]), tensor_arg(p.moment1[u]),
                tensor_arg(p.moment2[u]), value_arg<float>(1e-4f), value_arg<float>(0.9f), value_arg<float>(0.999f),
                value_arg<float>(1e-8f), value_arg<float>(0.01f), value_arg<int>(1), n_arg(wb)},
               -1, false);
    } else {
      p.launch(p.kernel("sgd_momentum", Sig::Sgd, 0),
               {tensor_arg(p.weight[u]), tensor_arg(p.weight_grad[u]), tensor_arg(p.moment1[u]),
                value_arg<float>(0.01f), value_arg<float>(0.9f), value_arg<float>(1e-4f), n_arg(wb)},
               -1, false);
    }
    p.launches.back().updates = i;
  }

  // The gradient buffers become tensors; patch the placeholders.
  std::vector<int> buffer_tensor;
  for (std::size_t b = 0; b < buffer_bytes.size(); ++b) {
    buffer_tensor.push_back(p.tensor("activation_grad." + std::to_string(b), Role::Gradient, buffer_bytes[b]));
  }
  const auto patched = [&](int placeholder) { return buffer_tensor[static_cast<std::size_t>(-placeholder - 100)]; };
  for (Launch& l : p.launches) {
    for (Arg& a : l.args) {
      if (a.tensor <= -100) a.tensor = patched(a.tensor);
    }
    for (Request& r : l.takes) {
      if (r.tensor <= -100) r.tensor = patched(r.tensor);
    }
    for (int& t : l.releases) t = patched(t);
  }
  p.gradient_buffers = static_cast<int>(buffer_bytes.size());
  return p;
}

double declared_ns(const Plan& p, int kernel, const std::vector<Arg>& launch_args) {
  const Kernel& k = p.kernels[static_cast<std::size_t>(kernel)];
  if (k.traffic == nullptr) return k.fixed_ns;
  std::vector<Arg> args = launch_args;
  std::vector<void*> params;
  for (Arg& a : args) params.push_back(a.bytes);
  vgpusimLaunch none{};
  return layered::traffic_duration(params.data(), &none, const_cast<Traffic*>(k.traffic));
}
double declared_ns(const Plan& p, const Launch& l) { return declared_ns(p, l.kernel, l.args); }

std::uint64_t total_bytes(const Plan& p, bool scaled) {
  std::uint64_t sum = 0;
  for (const Tensor& t : p.tensors) sum += scaled ? t.scaled : t.bytes;
  return sum;
}

std::string mib(std::uint64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  return text;
}

// ---------------------------------------------------------------- per-step memory (--allocator caching)

bool is_evaluation(const Options& o, int step) {
  const bool last = step + 1 == o.steps;
  return o.eval_every > 0 && (step + 1) % o.eval_every == 0 && !last;
}

// What a step issues (the header's --eval-every and --alternate).
enum class StepKind { training, evaluation, discriminator, generator };
constexpr std::size_t kStepKinds = 4;

StepKind kind_of(const Options& o, int step) {
  if (is_evaluation(o, step)) return StepKind::evaluation;
  if (!o.alternate) return StepKind::training;
  return step % 2 == 0 ? StepKind::discriminator : StepKind::generator;
}

// The launches of a step of `kind`, in issue order (indices into p.launches).
std::vector<std::size_t> launches_of(const Plan& p, StepKind kind) {
  const int split = static_cast<int>(p.model.nodes.size()) / 2;  // the discriminator's first node
  std::vector<std::size_t> order;
  for (std::size_t l = 0; l < p.launches.size(); ++l) {
    const Launch& launch = p.launches[l];
    const bool forward = l <= static_cast<std::size_t>(p.loss_launch);
    const bool optimizer = l >= static_cast<std::size_t>(p.first_optimizer);
    bool issued = true;
    switch (kind) {
      case StepKind::training: break;
      case StepKind::evaluation: issued = forward; break;
      case StepKind::discriminator: issued = forward || (optimizer ? launch.updates >= split : launch.node >= split); break;
      case StepKind::generator: issued = !optimizer || launch.updates < split; break;
    }
    if (issued) order.push_back(l);
  }
  return order;
}

// --buckets: the fraction of its largest size a step's activations have.
struct Fraction {
  std::uint64_t num = 1, den = 1;
  std::uint64_t of(std::uint64_t n) const { return n * num / den; }
};

std::uint64_t mix64(std::uint64_t x);

Fraction bucket_of(const Options& o, int step) {
  if (o.buckets == 0) return {};
  const std::uint64_t bucket = mix64(o.seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(step) + 1) %
                               static_cast<std::uint64_t>(o.buckets);
  return {4 - bucket, 4};
}

// A per-step tensor's bytes in a bucket: its scaled size times the
// fraction, rounded up to 256 (so that every count the bucket's kernels are
// passed, the full count times the fraction rounded down, stays inside).
std::uint64_t bucket_bytes(std::uint64_t scaled, Fraction f) {
  const std::uint64_t bytes = (scaled * f.num + f.den - 1) / f.den;
  return std::max<std::uint64_t>(256, (bytes + 255) / 256 * 256);
}

// Where one kind of step (training, evaluation) takes and gives back its
// per-step tensors: the static plan's lifetimes, launch by launch. An
// activation is given back after the last launch of the step that names it
// (in a training step its last backward reader, in an evaluation step its
// last forward consumer); a gradient buffer after its node ran backward, or
// after the step's last launch where the step ends first (an evaluation
// step's loss gradient).
//
// Except the logits (the last node's output): a training loop holds them in
// a variable (`out = model(x)`) until the next step's assignment replaces
// them, so they are given back only once the next step has taken its own.
// That one block alive across the step boundary is why PyTorch's allocator
// places a step's tensors differently from the step before and the same as
// the step before that: addresses alternate with a period of two steps.
struct StepMemory {
  std::vector<std::size_t> order;  // the step's launches (launches_of); the rest is by position in it
  std::vector<std::vector<Request>> allocate_before;
  std::vector<std::vector<int>> free_after;
  int held_over = -1;  // the logits' tensor
};

StepMemory step_memory(const Plan& p, StepKind kind) {
  StepMemory m;
  m.order = launches_of(p, kind);
  const std::size_t launches = m.order.size();
  m.allocate_before.resize(launches);
  m.free_after.resize(launches);
  std::map<int, std::size_t> last_named;  // activation -> the last launch naming it
  std::vector<int> unreleased;            // gradient buffers taken and not yet given back
  for (std::size_t l = 0; l < launches; ++l) {
    const Launch& launch = p.launches[m.order[l]];
    m.allocate_before[l] = launch.takes;
    for (const Request& r : launch.takes) {
      if (p.is(r.tensor, Role::Gradient)) unreleased.push_back(r.tensor);
    }
    for (const Arg& a : launch.args) {
      if (a.tensor >= 0 && p.is(a.tensor, Role::Activation)) last_named[a.tensor] = l;
    }
    for (int t : launch.releases) {
      const auto taken = std::find(unreleased.begin(), unreleased.end(), t);
      if (taken == unreleased.end()) continue;  // (a step that skips part of backward never took it)
      m.free_after[l].push_back(t);
      unreleased.erase(taken);
    }
  }
  m.held_over = p.act.back();
  for (const auto& [tensor, launch] : last_named) {
    if (tensor != m.held_over) m.free_after[launch].push_back(tensor);
  }
  for (int t : unreleased) m.free_after[launches - 1].push_back(t);
  return m;
}

layered::CachingRules caching_rules(unsigned scale) {
  return layered::CachingRules::scaled([scale](std::uint64_t bytes) { return scaled_bytes(bytes, scale); });
}

// The requests are scaled as every tensor is (at least 256 bytes, a multiple
// of 256); the allocator rounds them up to 512.
void allocate_before(const StepMemory& m, std::size_t launch, unsigned scale, layered::CachingAllocator& allocator,
                     std::vector<Tensor>& tensors, Fraction bucket) {
  for (const Request& r : m.allocate_before[launch]) {
    Tensor& tensor = tensors[static_cast<std::size_t>(r.tensor)];
    const CUdeviceptr previous = tensor.ptr;  // the last step's logits, still held (StepMemory)
    tensor.ptr = allocator.allocate(bucket_bytes(scaled_bytes(r.bytes, scale), bucket));
    if (r.tensor == m.held_over && previous != 0) allocator.free(previous);
  }
}

void free_after(const StepMemory& m, std::size_t launch, layered::CachingAllocator& allocator,
                std::vector<Tensor>& tensors) {
  for (int t : m.free_after[launch]) {
    Tensor& tensor = tensors[static_cast<std::size_t>(t)];
    allocator.free(tensor.ptr);
    tensor.ptr = 0;  // a launch that still named it would fault, not read a stranger's block
  }
}

std::uint64_t persistent_bytes(const Plan& p, bool scaled) {
  std::uint64_t sum = 0;
  for (const Tensor& t : p.tensors) {
    if (!per_step(t.role)) sum += scaled ? t.scaled : t.bytes;
  }
  return sum;
}

// What the caching allocator takes from the driver over the run's steps,
// found without a driver (segment addresses from a counter, increasing as
// the simulated driver's are): for --describe.
struct CachingEstimate {
  std::uint64_t reserved = 0, peak_allocated = 0;
  std::size_t segments = 0;
};

CachingEstimate dry_run(const Plan& p, const Options& o, bool scaled) {
  const unsigned scale = scaled ? g_scale : 1;
  CUdeviceptr next = 1ull << 40;
  layered::CachingAllocator allocator(caching_rules(scale), [&next](std::uint64_t bytes) {
    const CUdeviceptr at = next;
    next += (bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    return at;
  });
  std::vector<Tensor> tensors = p.tensors;
  std::vector<StepMemory> kinds;
  for (std::size_t k = 0; k < kStepKinds; ++k) kinds.push_back(step_memory(p, static_cast<StepKind>(k)));
  for (int step = 0; step < o.steps; ++step) {
    const StepMemory& m = kinds[static_cast<std::size_t>(kind_of(o, step))];
    for (std::size_t l = 0; l < m.order.size(); ++l) {
      allocate_before(m, l, scale, allocator, tensors, bucket_of(o, step));
      free_after(m, l, allocator, tensors);
    }
  }
  return {allocator.reserved_bytes(), allocator.peak_allocated_bytes(), allocator.segments().size()};
}

// ---------------------------------------------------------------- --describe

// Under --allocator caching: what a dry run of the run's steps reserves, and
// the peak that gives (RESULT's peak_device_bytes_wanted is the same sum).
void describe_caching(const Plan& p, const Options& o) {
  const CachingEstimate real = dry_run(p, o, false), scaled = dry_run(p, o, true);
  std::printf("caching allocator (a dry run of %d steps): %zu segments, %s reserved (scaled %s); at most %s "
              "allocated at once (scaled %s)\n",
              o.steps, real.segments, mib(real.reserved).c_str(), mib(scaled.reserved).c_str(),
              mib(real.peak_allocated).c_str(), mib(scaled.peak_allocated).c_str());
  const std::uint64_t persistent = persistent_bytes(p, false), persistent_scaled = persistent_bytes(p, true);
  std::printf("  static plan's peak %s; persistent tensors %s, with the most allocated at once %s\n",
              mib(total_bytes(p, false)).c_str(), mib(persistent).c_str(),
              mib(persistent + real.peak_allocated).c_str());
  std::size_t persistent_tensors = 0;
  for (const Tensor& t : p.tensors) persistent_tensors += per_step(t.role) ? 0 : 1;
  const std::uint64_t peak = persistent + real.reserved, peak_scaled = persistent_scaled + scaled.reserved;
  std::printf("peak device bytes %" PRIu64 " (%s), scaled %" PRIu64 " (%s) in %zu allocations\n", peak,
              mib(peak).c_str(), peak_scaled, mib(peak_scaled).c_str(), persistent_tensors + scaled.segments);
}

void describe(const Plan& p, const Options& o) {
  const Model& m = p.model;
  std::printf("model %s batch %d scale %u\n", m.name.c_str(), m.batch, g_scale);
  std::printf("%-4s %-34s %12s %12s %11s %11s %11s\n", "#", "layer", "out", "weights", "GFLOP", "fwd_us", "bwd_us");
  std::vector<double> fwd(m.nodes.size(), 0.0), bwd(m.nodes.size(), 0.0);
  double loss_ns = 0, opt_ns = 0, heavy_ns = 0, light_ns = 0;
  for (const Launch& l : p.launches) {
    const double ns = declared_ns(p, l);
    const bool heavy = p.kernels[static_cast<std::size_t>(l.kernel)].traffic == nullptr;
    (heavy ? heavy_ns : light_ns) += ns;
    if (l.node < 0) {
      (l.backward ? loss_ns : opt_ns) += ns;
    } else {
      (l.backward ? bwd : fwd)[static_cast<std::size_t>(l.node)] += ns;
    }
  }
  double fwd_total = 0, bwd_total = 0;
  for (std::size_t i = 0; i < m.nodes.size(); ++i) {
    const Node& n = m.nodes[i];
    std::printf("%-4zu %-34s %12s %12s %11.2f %11.1f %11.1f\n", i, n.name.c_str(), mib(n.out_bytes).c_str(),
                mib(n.weight_bytes).c_str(), n.flops / 1e9, fwd[i] / 1e3, bwd[i] / 1e3);
    fwd_total += fwd[i];
    bwd_total += bwd[i];
  }
  std::map<Role, std::uint64_t> by_role, by_role_scaled;
  for (const Tensor& t : p.tensors) {
    by_role[t.role] += t.bytes;
    by_role_scaled[t.role] += t.scaled;
  }
  std::printf("launches per step %zu (kernels) + 3 copies; %zu kernels registered; %d activation-gradient buffers\n",
              p.launches.size(), p.kernels.size(), p.gradient_buffers);
  std::printf("compute per step %.3f ms: forward %.3f, loss %.3f, backward %.3f, optimizer %.3f "
              "(heavy kernels %.3f, memory-bound %.3f)\n",
              (fwd_total + bwd_total + loss_ns + opt_ns) / 1e6, fwd_total / 1e6, loss_ns / 1e6, bwd_total / 1e6,
              opt_ns / 1e6, heavy_ns / 1e6, light_ns / 1e6);
  const char* names[] = {"input", "labels", "loss", "workspace", "activations", "weights", "weight grads",
                         "optimizer m", "optimizer v", "activation grads"};
  for (const auto& [role, bytes] : by_role) {
    std::printf("  %-17s %12s  scaled %12s\n", names[static_cast<int>(role)], mib(bytes).c_str(),
                mib(by_role_scaled[role]).c_str());
  }
  if (o.caching_allocator) {
    describe_caching(p, o);
    return;
  }
  std::printf("peak device bytes %" PRIu64 " (%s), scaled %" PRIu64 " (%s) in %zu allocations\n", total_bytes(p, false),
              mib(total_bytes(p, false)).c_str(), total_bytes(p, true), mib(total_bytes(p, true)).c_str(),
              p.tensors.size());
}

// ---------------------------------------------------------------- running

std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

using Register = CUresult (*)(const vgpusimKernelDesc*, CUfunction*);

bool register_kernels(Plan& p) {
  // Found at run time so the same binary fails cleanly on a real driver.
  auto reg = reinterpret_cast<Register>(dlsym(RTLD_DEFAULT, "vgpusimRegisterKernel"));
  if (reg == nullptr) return false;
  for (Kernel& k : p.kernels) {
    const std::vector<std::size_t>& sizes = layered::param_sizes(k.sig);
    vgpusimKernelDesc desc{};
    desc.name = k.name.c_str();
    desc.body = layered::body(k.sig);
    desc.paramCount = static_cast<unsigned>(sizes.size());
    desc.paramSizes = sizes.data();
    if (k.traffic != nullptr) {
      desc.durationFn = layered::traffic_duration;
      desc.user = const_cast<Traffic*>(k.traffic);
    } else {
      desc.durationNs = k.fixed_ns;
    }
    if (reg(&desc, &k.fn) != CUDA_SUCCESS) return false;
  }
  return true;
}

// The simulator's per-thread clocks (vgpusim.h), found at run time as the
// kernels are: a handoff between host threads carries the sender's time.
struct HostClock {
  unsigned long long (*now)() = nullptr;
  void (*handoff)(unsigned long long) = nullptr;

  static bool find(HostClock* clock) {
    clock->now = reinterpret_cast<unsigned long long (*)()>(dlsym(RTLD_DEFAULT, "vgpusimHostTimeNs"));
    clock->handoff = reinterpret_cast<void (*)(unsigned long long)>(dlsym(RTLD_DEFAULT, "vgpusimHostHandoff"));
    return clock->now != nullptr && clock->handoff != nullptr;
  }
};

// --backward-thread: PyTorch's autograd engine issues a backward pass from
// its own long-lived thread per device while the thread that called
// backward() waits for it. Created once; each step the main thread hands it
// a range of launches and blocks until they are issued. Both directions
// carry the sender's simulated clock (the simulator cannot see the mutex).
class BackwardThread {
 public:
  using Issue = std::function<void(std::size_t begin, std::size_t end)>;

  BackwardThread(CUcontext context, HostClock clock, Issue issue)
      : clock_(clock), issue_(std::move(issue)), thread_([this, context] { serve(context); }) {}

  ~BackwardThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  BackwardThread(const BackwardThread&) = delete;
  BackwardThread& operator=(const BackwardThread&) = delete;

  // Issues launches [begin, end) on the backward thread; returns once they are issued.
  void run(std::size_t begin, std::size_t end) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      begin_ = begin;
      end_ = end;
      clock_ns_ = clock_.now();
      pending_ = true;
      done_ = false;
    }
    changed_.notify_all();
    unsigned long long done_at = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return done_; });
      done_at = clock_ns_;
    }
    clock_.handoff(done_at);
  }

 private:
  void serve(CUcontext context) {
    ::pthread_setname_np(::pthread_self(), "pt_autograd_0");  // as PyTorch names its autograd thread
    check(cuCtxSetCurrent(context), "cuCtxSetCurrent (backward thread)");
    for (;;) {
      std::size_t begin = 0, end = 0;
      unsigned long long sent_at = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [this] { return pending_ || stopping_; });
        if (stopping_) return;
        pending_ = false;
        begin = begin_;
        end = end_;
        sent_at = clock_ns_;
      }
      clock_.handoff(sent_at);
      issue_(begin, end);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        clock_ns_ = clock_.now();
        done_ = true;
      }
      changed_.notify_all();
    }
  }

  const HostClock clock_;
  const Issue issue_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool pending_ = false, done_ = false, stopping_ = false;
  std::size_t begin_ = 0, end_ = 0;
  unsigned long long clock_ns_ = 0;  // the sender's clock with the last message
  std::thread thread_;               // last: it starts once everything above is there
};

// The driver's VMM and pinning calls a thread has made, and the simulated
// time they took it: what the program's launch threads spend on paging.
using vgpusim::DriverCalls;

// Issues one step's launches, from either thread: takes and gives back
// per-step tensors (--allocator caching), fills each launch's addresses as
// they are now, and launches the kernel or makes the library call.
class Issuer {
 public:
  Issuer(Plan& plan, CUstream stream) : plan_(plan), stream_(stream) {
    for (const Launch& l : plan.launches) args_.push_back(l.args);
    library_.assign(plan.launches.size(), -1);
    for (std::size_t k = 0; k < kStepKinds; ++k) kinds_.push_back(step_memory(plan_, static_cast<StepKind>(k)));
  }

  std::vector<std::vector<Arg>>& args() { return args_; }
  void use_libraries(layered::Libraries* libraries, std::vector<int> library) {
    libraries_ = libraries;
    library_ = std::move(library);
  }
  void use_allocator(layered::CachingAllocator* allocator) { allocator_ = allocator; }

  // The step about to be issued: its kind, its bucket, its learning rate's
  // share of the full one (--warmup), whether its declared time is summed
  // (the last step), where its activations' addresses are noted.
  void begin_step(StepKind kind, Fraction bucket, float lr_share, bool counting,
                  std::vector<CUdeviceptr>* activation_addresses) {
    memory_ = &kinds_[static_cast<std::size_t>(kind)];
    bucket_ = bucket;
    lr_share_ = lr_share;
    counting_ = counting;
    addresses_ = activation_addresses;
  }
  // The step's launches, in issue order (issue_range takes positions in it).
  const std::vector<std::size_t>& order() const { return memory_->order; }
  double compute_ns() const { return compute_ns_; }

  void issue_range(std::size_t begin, std::size_t end) {
    // The main thread's calls are counted around its whole step (main()).
    const bool other_thread = counting_ && std::this_thread::get_id() != main_thread_;
    const DriverCalls before = other_thread ? DriverCalls::of_this_thread() : DriverCalls{};
    for (std::size_t l = begin; l < end; ++l) issue(l);
    if (other_thread) other_threads_calls_ += DriverCalls::of_this_thread().since(before);
  }
  // What threads other than the main one spent in the driver's VMM and
  // pinning calls issuing the counted step (the backward thread's share).
  const DriverCalls& other_threads_calls() const { return other_threads_calls_; }

 private:
  // The launch at `position` of the step.
  void issue(std::size_t position) {
    const std::size_t l = memory_->order[position];
    if (allocator_ != nullptr) {
      allocate_before(*memory_, position, g_scale, *allocator_, plan_.tensors, bucket_);
      note_addresses(position);
    }
    std::vector<Arg>& args = args_[l];
    fill_addresses(args);
    fit_to_step(l, args);
    const Kernel& k = plan_.kernels[static_cast<std::size_t>(plan_.launches[l].kernel)];
    if (counting_) compute_ns_ += declared_ns(plan_, plan_.launches[l].kernel, args);
    if (library_[l] >= 0) {
      call_library(library_[l], args, k.name);
    } else {
      std::vector<void*> params;
      for (Arg& a : args) params.push_back(a.bytes);
      check(cuLaunchKernel(k.fn, 1, 1, 1, 1, 1, 1, 0, stream_, params.data(), nullptr), k.name.c_str());
    }
    if (allocator_ != nullptr) free_after(*memory_, position, *allocator_, plan_.tensors);
  }

  // The counts of the launch's per-step tensors, the bucket's fraction of
  // the plan's (the k-th count goes with the k-th pointer), and an
  // optimizer's learning rate, the warm-up's share of the plan's.
  void fit_to_step(std::size_t l, std::vector<Arg>& args) const {
    const Launch& launch = plan_.launches[l];
    const Sig sig = plan_.kernels[static_cast<std::size_t>(launch.kernel)].sig;
    if (sig == Sig::Sgd || sig == Sig::AdamW) {
      const std::size_t lr = sig == Sig::Sgd ? 3 : 4;
      const float rate = arg_value<float>(launch.args[lr]) * lr_share_;
      std::memcpy(args[lr].bytes, &rate, sizeof rate);
      return;
    }
    const layered::Counts counts = layered::counts(sig);
    for (int k = 0; k < counts.number; ++k) {
      const int tensor = launch.args[static_cast<std::size_t>(k)].tensor;
      if (tensor < 0 || !per_step(plan_.tensors[static_cast<std::size_t>(tensor)].role)) continue;
      const auto at = static_cast<std::size_t>(counts.first + k);
      const std::uint64_t count = bucket_.of(arg_value<std::uint64_t>(launch.args[at]));
      std::memcpy(args[at].bytes, &count, sizeof count);
    }
  }

  void fill_addresses(std::vector<Arg>& args) const {
    for (Arg& arg : args) {
      if (arg.tensor < 0) continue;
      const CUdeviceptr ptr = plan_.tensors[static_cast<std::size_t>(arg.tensor)].ptr;
      std::memcpy(arg.bytes, &ptr, sizeof ptr);
    }
  }

  void note_addresses(std::size_t position) {
    if (addresses_ == nullptr) return;
    for (const Request& r : memory_->allocate_before[position]) {
      const Tensor& t = plan_.tensors[static_cast<std::size_t>(r.tensor)];
      if (t.role == Role::Activation) (*addresses_)[static_cast<std::size_t>(r.tensor)] = t.ptr;
    }
  }

  // Sig::Heavy: a, b, ws, y | ...
  void call_library(int index, const std::vector<Arg>& args, const std::string& name) {
    const layered::Libraries::Operands operands{arg_value<CUdeviceptr>(args[0]), arg_value<CUdeviceptr>(args[1]),
                                                arg_value<CUdeviceptr>(args[3])};
    std::string why;
    if (!libraries_->run(index, operands, &why)) {
      std::printf("CUDA_ERROR library-call at %s (%s)\n", name.c_str(), why.c_str());
      std::exit(3);
    }
  }

  Plan& plan_;
  const CUstream stream_;
  std::vector<std::vector<Arg>> args_;  // the parameter arrays, addresses filled at each issue
  layered::Libraries* libraries_ = nullptr;
  std::vector<int> library_;  // launch -> its prepared library call, -1
  layered::CachingAllocator* allocator_ = nullptr;
  std::vector<StepMemory> kinds_;  // by StepKind
  const StepMemory* memory_ = nullptr;
  Fraction bucket_;
  float lr_share_ = 1.0f;
  bool counting_ = false;
  double compute_ns_ = 0;
  const std::thread::id main_thread_ = std::this_thread::get_id();
  DriverCalls other_threads_calls_;  // written by the backward thread, read after the handoff back
  std::vector<CUdeviceptr>* addresses_ = nullptr;
};

// Persistent tensors (all of them without a caching allocator), allocated
// once before the first step; the sum of their bytes.
std::uint64_t allocate_tensors(Plan& plan, bool caching) {
  std::uint64_t bytes = 0;
  for (Tensor& t : plan.tensors) {
    if (caching && per_step(t.role)) continue;
    CHECK(cuMemAlloc(&t.ptr, t.scaled));
    bytes += t.scaled;
  }
  return bytes;
}

// Weights: small uniform values from the seed; everything else allocated
// now is zero, so nothing is ever read before it was written (a tied
// embedding's gradient accumulates over rows the LM head's does not cover).
// Per-step tensors from the caching allocator need no zeroing: every
// kernel reads only words a launch of the same step wrote.
void initialise_tensors(const Plan& plan, unsigned seed, CUstream stream) {
  std::uint64_t rng = mix64(seed);
  for (const Tensor& t : plan.tensors) {
    if (t.ptr == 0) continue;
    if (t.role == Role::Weight) {
      std::vector<float> host(t.scaled / 4);
      for (float& v : host) {
        rng = mix64(rng + 0x9E3779B97F4A7C15ULL);
        v = (static_cast<float>(rng >> 40) / 16777216.0f - 0.5f) * 0.1f;
      }
      CHECK(cuMemcpyHtoDAsync(t.ptr, host.data(), t.scaled, stream));
      CHECK(cuStreamSynchronize(stream));  // the host buffer goes out of scope
    } else {
      CHECK(cuMemsetD32Async(t.ptr, 0, t.scaled / 4, stream));
    }
  }
  CHECK(cuStreamSynchronize(stream));
}

// --libraries: the convolutions and GEMMs as cuDNN and cuBLAS calls
// (layered_libraries.h); the result's [l] is launch l's prepared call, or -1.
std::vector<int> prepare_library_calls(const Plan& plan, const std::vector<std::vector<Arg>>& args,
                                       layered::Libraries& libraries) {
  std::vector<int> library(plan.launches.size(), -1);
  for (std::size_t l = 0; l < plan.launches.size(); ++l) {
    const Kernel& k = plan.kernels[static_cast<std::size_t>(plan.launches[l].kernel)];
    layered::HeavyOperation op;
    if (!layered::heavy_kind(k.name, &op.kind)) continue;
    const std::vector<Arg>& a = args[l];  // Sig::Heavy: a, b, ws, y | na, nb, nws, ny | acc
    const auto count = [&](int i) { return arg_value<std::uint64_t>(a[static_cast<std::size_t>(i)]); };
    op.a_words = count(4);
    op.b_words = count(5);
    op.y_words = count(7);
    op.accumulate = arg_value<int>(a[8]) != 0;
    op.ns = k.fixed_ns;
    std::string why;
    if (!libraries.prepare(op, &library[l], &why)) {
      std::printf("CUDA_ERROR library-shape at %s (%s)\n", k.name.c_str(), why.c_str());
      std::exit(3);
    }
  }
  return library;
}

// The batch of step `step`: token ids or pixels, and labels, from the seed.
void write_batch(const Options& o, int step, bool tokens, std::uint64_t classes, const Tensor& input,
                 const Tensor& labels, void* pinned_input, void* pinned_labels) {
  auto* in = static_cast<std::uint32_t*>(pinned_input);
  std::uint64_t h = mix64(o.seed * 0x100000001b3ULL + static_cast<std::uint64_t>(step));
  for (std::uint64_t i = 0; i < input.scaled / 4; ++i) {
    h = mix64(h + i);
    if (tokens) {
      in[i] = static_cast<std::uint32_t>(h % classes);
    } else {
      const float v = static_cast<float>(h >> 40) / 8388608.0f - 1.0f;
      std::memcpy(&in[i], &v, sizeof v);
    }
  }
  auto* lab = static_cast<std::uint32_t*>(pinned_labels);
  for (std::uint64_t i = 0; i < labels.scaled / 4; ++i) {
    h = mix64(h + i);
    lab[i] = static_cast<std::uint32_t>(h % classes);
  }
}

// --report-addresses: for each two consecutive steps, how many activations
// (of those allocated in both) were placed elsewhere the second time.
void report_addresses(const Plan& plan, const std::vector<std::vector<CUdeviceptr>>& by_step) {
  std::size_t activations = 0;
  for (const Tensor& t : plan.tensors) activations += t.role == Role::Activation ? 1 : 0;
  for (std::size_t s = 0; s + 1 < by_step.size(); ++s) {
    std::size_t moved = 0;
    for (std::size_t t = 0; t < plan.tensors.size(); ++t) {
      const CUdeviceptr a = by_step[s][t], b = by_step[s + 1][t];
      if (a != 0 && b != 0 && a != b) ++moved;
    }
    std::printf("ALTERNATES steps %zu-%zu: %zu of %zu activations moved\n", s + 1, s + 2, moved, activations);
  }
}

// --log-every: the metrics logger, a kernel the step does not always have.
void log_metrics(const Plan& plan, CUstream stream) {
  const Tensor& loss = plan.tensors[static_cast<std::size_t>(plan.loss)];
  const Tensor& weight = plan.tensors[static_cast<std::size_t>(plan.weight_tensors.front())];
  const Tensor& metrics = plan.tensors[static_cast<std::size_t>(plan.metrics)];
  CUdeviceptr a = loss.ptr, b = weight.ptr, y = metrics.ptr;
  std::uint64_t na = loss.scaled / 4, nb = weight.scaled / 4, ny = metrics.scaled / 4;
  int accumulate = 1;
  void* params[] = {&a, &b, &y, &na, &nb, &ny, &accumulate};
  check(cuLaunchKernel(plan.kernels[static_cast<std::size_t>(plan.log_kernel)].fn, 1, 1, 1, 1, 1, 1, 0, stream, params,
                       nullptr),
        "log_metrics");
}

// FNV-1a over every weight, in layer order (and the metrics, where logged).
std::uint64_t weights_hash(const Plan& plan, CUstream stream) {
  std::uint64_t hash = 1469598103934665603ULL;
  std::vector<int> hashed = plan.weight_tensors;
  if (plan.metrics >= 0) hashed.push_back(plan.metrics);
  for (int t : hashed) {
    const Tensor& w = plan.tensors[static_cast<std::size_t>(t)];
    std::vector<unsigned char> bytes(w.scaled);
    CHECK(cuMemcpyDtoHAsync(bytes.data(), w.ptr, w.scaled, stream));
    CHECK(cuStreamSynchronize(stream));
    for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ULL;
  }
  return hash;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  g_scale = o.scale;
  layered::set_scale(o.scale);
  Model model;
  if (!make_model(o.model, o.batch, o.transformer, &model)) {
    usage_error("unknown model '" + o.model + "' (models: " + kModels + ")");
  }
  Plan plan = make_plan(model);
  if (o.log_every > 0) {
    plan.metrics = plan.tensor("metrics", Role::Loss, 1024);
    plan.log_kernel = plan.kernel("log_metrics", Sig::Binary, 0);
  }
  if (o.describe) {
    describe(plan, o);
    return 0;
  }

  CHECK(cuInit(0));
  CUdevice device = 0;
  CHECK(cuDeviceGet(&device, 0));
  CUcontext context = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&context, device));
  CHECK(cuCtxSetCurrent(context));
  if (!register_kernels(plan)) {
    std::printf("CUDA_ERROR kernels-unavailable at vgpusimRegisterKernel (this trainer needs the simulated driver)\n");
    return 3;
  }
  HostClock clock;
  if (o.backward_thread && !HostClock::find(&clock)) {
    std::printf("CUDA_ERROR clock-unavailable at vgpusimHostHandoff (--backward-thread needs the simulated driver)\n");
    return 3;
  }
  CUstream stream = nullptr;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  // Persistent tensors once, before the first step; per-step ones too
  // unless a caching allocator hands them out (its segments are added to
  // the peak as it takes them).
  std::uint64_t peak = allocate_tensors(plan, o.caching_allocator);
  initialise_tensors(plan, o.seed, stream);
  std::unique_ptr<layered::CachingAllocator> allocator;
  if (o.caching_allocator) {
    allocator = std::make_unique<layered::CachingAllocator>(caching_rules(g_scale), [](std::uint64_t bytes) {
      CUdeviceptr segment = 0;
      CHECK(cuMemAlloc(&segment, bytes));
      return segment;
    });
  }

  const Tensor& input = plan.tensors[static_cast<std::size_t>(plan.input)];
  const Tensor& labels = plan.tensors[static_cast<std::size_t>(plan.labels)];
  const Tensor& loss = plan.tensors[static_cast<std::size_t>(plan.loss)];
  void* pinned_input = nullptr;
  void* pinned_labels = nullptr;
  void* pinned_loss = nullptr;
  CHECK(cuMemAllocHost(&pinned_input, input.scaled));
  CHECK(cuMemAllocHost(&pinned_labels, labels.scaled));
  CHECK(cuMemAllocHost(&pinned_loss, sizeof(float)));
  const bool tokens = model.adamw;
  // Token ids and labels below the vocabulary; classes below the classifier's width.
  const std::uint64_t classes = model.nodes.back().c;

  Issuer issuer(plan, stream);
  issuer.use_allocator(allocator.get());
  std::unique_ptr<layered::Libraries> libraries;
  if (o.libraries) {
    const Tensor& workspace = plan.tensors[static_cast<std::size_t>(plan.workspace)];
    std::string why;
    libraries = layered::Libraries::open(stream, workspace.ptr, workspace.scaled, &why);
    if (!libraries) {
      std::printf("CUDA_ERROR libraries-unavailable at --libraries (%s)\n", why.c_str());
      return 3;
    }
    issuer.use_libraries(libraries.get(), prepare_library_calls(plan, issuer.args(), *libraries));
  }
  std::unique_ptr<BackwardThread> backward;
  if (o.backward_thread) {
    backward = std::make_unique<BackwardThread>(
        context, clock, [&issuer](std::size_t begin, std::size_t end) { issuer.issue_range(begin, end); });
  }
  const auto loss_launch = static_cast<std::size_t>(plan.loss_launch);
  const auto first_optimizer = static_cast<std::size_t>(plan.first_optimizer);

  CUevent start = nullptr, end = nullptr;
  CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CHECK(cuEventCreate(&end, CU_EVENT_DEFAULT));
  float last_loss = 0.0f;
  unsigned long long copied_in = 0, copied_out = 0;  // across the link during the last step (issued)
  DriverCalls main_calls_before, launch_calls;  // the launch threads' VMM and pinning calls in the last step
  std::vector<std::vector<CUdeviceptr>> addresses;   // --report-addresses: per step, per tensor
  for (int step = 0; step < o.steps; ++step) {
    const bool last = step + 1 == o.steps;
    // The batch: the host writes the next one while nothing reads the pinned
    // buffers (the previous step ended with a synchronize).
    write_batch(o, step, tokens, classes, input, labels, pinned_input, pinned_labels);
    for (const auto& [launch, index] : plan.step_args) {
      const int step_number = step + 1;
      std::memcpy(issuer.args()[static_cast<std::size_t>(launch)][static_cast<std::size_t>(index)].bytes,
                  &step_number, sizeof step_number);
    }
    std::vector<CUdeviceptr>* noted = nullptr;
    if (o.report_addresses) {
      addresses.emplace_back(plan.tensors.size(), 0);
      noted = &addresses.back();
      // Without a caching allocator every activation stays where it was put.
      for (std::size_t t = 0; t < plan.tensors.size() && !allocator; ++t) {
        if (plan.tensors[t].role == Role::Activation) (*noted)[t] = plan.tensors[t].ptr;
      }
    }
    const StepKind kind = kind_of(o, step);
    const float lr_share = o.warmup > 0 ? std::min(1.0f, static_cast<float>(step + 1) / static_cast<float>(o.warmup)) : 1.0f;
    issuer.begin_step(kind, bucket_of(o, step), lr_share, last, noted);
    // Where the step's loss and optimizer begin, as positions in its order.
    const std::vector<std::size_t>& order = issuer.order();
    const auto position_of = [&order](std::size_t launch) {
      return static_cast<std::size_t>(std::lower_bound(order.begin(), order.end(), launch) - order.begin());
    };
    const std::size_t loss_at = position_of(loss_launch), optimizer_at = position_of(first_optimizer);

    if (last) {
      CHECK(cuEventRecord(start, stream));
      vgpusimCopiedBytes(&copied_in, &copied_out);
      main_calls_before = DriverCalls::of_this_thread();
    }
    CHECK(cuMemcpyHtoDAsync(input.ptr, pinned_input, input.scaled, stream));
    CHECK(cuMemcpyHtoDAsync(labels.ptr, pinned_labels, labels.scaled, stream));
    if (kind == StepKind::evaluation) {
      issuer.issue_range(0, order.size());  // forward and the loss, on this thread
    } else {
      issuer.issue_range(0, loss_at);
      if (backward) {
        backward->run(loss_at, optimizer_at);
      } else {
        issuer.issue_range(loss_at, optimizer_at);
      }
      issuer.issue_range(optimizer_at, order.size());
    }
    if (o.log_every > 0 && (step + 1) % o.log_every == 0 && !last) log_metrics(plan, stream);
    CHECK(cuMemcpyDtoHAsync(pinned_loss, loss.ptr, sizeof(float), stream));
    if (last) CHECK(cuEventRecord(end, stream));
    CHECK(cuStreamSynchronize(stream));
    std::memcpy(&last_loss, pinned_loss, sizeof last_loss);
    if (last) {
      unsigned long long in_now = 0, out_now = 0;
      vgpusimCopiedBytes(&in_now, &out_now);
      copied_in = in_now - copied_in;
      copied_out = out_now - copied_out;
      launch_calls = DriverCalls::of_this_thread().since(main_calls_before);
      launch_calls += issuer.other_threads_calls();
    }
  }
  float step_ms = 0.0f;
  CHECK(cuEventElapsedTime(&step_ms, start, end));

  const std::uint64_t hash = weights_hash(plan, stream);
  backward.reset();
  libraries.reset();
  CHECK(cuEventDestroy(start));
  CHECK(cuEventDestroy(end));
  for (Tensor& t : plan.tensors) {
    if (allocator && per_step(t.role) && t.ptr != 0) {
      allocator->free(t.ptr);  // the last step's logits, held until now
      t.ptr = 0;
    }
    if (t.ptr != 0) CHECK(cuMemFree(t.ptr));
  }
  if (allocator) {
    // The segments are never given back during the run, as PyTorch keeps its own.
    peak += allocator->reserved_bytes();
    for (const CUdeviceptr segment : allocator->segments()) CHECK(cuMemFree(segment));
  }
  CHECK(cuMemFreeHost(pinned_input));
  CHECK(cuMemFreeHost(pinned_labels));
  CHECK(cuMemFreeHost(pinned_loss));
  CHECK(cuStreamDestroy(stream));
  if (o.report_addresses) report_addresses(plan, addresses);
  std::printf("RESULT loss=%.9g weights_fnv1a=%016" PRIx64 " peak_device_bytes_wanted=%" PRIu64
              " step_ns=%.0f compute_ns=%.0f copied_in=%llu copied_out=%llu launch_vmm_calls=%llu"
              " launch_pin_calls=%llu launch_driver_ns=%llu\n",
              static_cast<double>(last_loss), hash, peak, static_cast<double>(step_ms) * 1e6, issuer.compute_ns(),
              copied_in, copied_out, launch_calls.vmm, launch_calls.pin, launch_calls.ns);
  return 0;
}
