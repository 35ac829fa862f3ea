// The layered trainer: deterministic training steps shaped like real DNN
// training (ResNet-50, VGG-16, BERT-large, GPT-2-medium, and a small CNN for
// tests), written against the CUDA driver API as a framework with a caching
// allocator drives it, on the simulated driver (layered_kernels.cpp). It is
// the workload of the learned-schedule benchmark (docs/benchmarks.md, "The
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
//   * Weights: fp32 (PyTorch AMP's master weights), 4 bytes per parameter;
//     batch-norm and layer-norm affine parameters and biases are left out
//     (under 0.3% of the parameters of every model here).
//   * Convolutions: 2*B*Cin*Cout*k*k*Hout*Wout FLOPs at 400 TFLOP/s (bf16
//     cuDNN on an H100 SXM, 989 TFLOP/s dense peak), GEMMs 2*M*N*K at
//     600 TFLOP/s, flash attention 4*B*s^2*hidden (halved when causal) at
//     300 TFLOP/s forward, 2.5x those FLOPs at 250 TFLOP/s backward (FA2's
//     H100 figures at head dimension 64). Each is also at least the time to
//     move its operands at 2.5 TB/s (a roofline; this is what the 7x7 maps of
//     ResNet-50's last stage and the 1x1 convolutions hit) and at least 3 us.
//     Backward of a convolution or GEMM is two kernels, data gradient and
//     weight gradient, each costing what the forward does (so 2x forward).
//   * Memory-bound kernels (batch norm, layer norm, ReLU, GELU, pooling,
//     residual adds, embedding, cross entropy, the optimizer) move the bytes
//     of their operands at 2.5 TB/s (HBM3 achievable; batch norm reads its
//     input twice, statistics then normalise), at least 3 us
//     (layered_kernels.h, Traffic).
// `--describe` prints every layer's numbers and the totals.
// `--eval-every N`: every Nth step (never the last) is an evaluation step,
// forward and loss only, then the loss read: the launch stream changes
// there, as a training loop's does when it evaluates.
//
// Deterministic: fixed-seed data, kernels that are pure functions of the
// bytes they read. The last line is machine-readable:
//   RESULT loss=<%.9g> weights_fnv1a=<hex> peak_device_bytes_wanted=<n> step_ns=<n> compute_ns=<n>
//          copied_in=<n> copied_out=<n>
// step_ns: simulated time of the last step (events around it); compute_ns:
// the sum of the declared durations of one step's kernels; copied_in/out:
// bytes of copies across the link issued during the last step (the batch,
// the loss and, under the shim, the pager's moves). Any CUDA error
// prints "CUDA_ERROR <name> at <call>" and exits 3.
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "layered_kernels.h"
#include "layered_libraries.h"
#include "vgpusim.h"

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

enum class Op { Conv, Gemm, Attn, Embed, BnRelu, Bn, BnAddRelu, Relu, MaxPool, AvgPool, LayerNorm, Gelu, Add };

constexpr int kInput = -1;  // the batch
constexpr int kNone = -2;

struct Node {
  std::string name;
  Op op = Op::Relu;
  int in0 = kInput, in1 = kNone;
  std::uint64_t c = 0, h = 1, w = 1;  // output shape of one sample: channels (features) x height (tokens) x width
  std::uint64_t out_bytes = 0;         // bf16, whole batch
  bool inplace = false;                // writes its input's tensor (out_bytes 0)
  std::uint64_t weight_bytes = 0;      // fp32 parameters it owns
  int owner = -1;                      // whose weights it uses (itself, or the node it is tied to)
  std::uint64_t weight_used_bytes = 0; // of the owner's
  double flops = 0;                    // forward
  double fwd_ns = 0, dgrad_ns = 0, wgrad_ns = 0;  // heavy kernels (Conv, Gemm; Attn: fwd and dgrad)
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

  int embedding(const std::string& name, std::uint64_t rows, std::uint64_t hidden) {
    Node n = shaped(name, Op::Embed, kInput, hidden, m_.input_h, 1);
    n.weight_bytes = rows * hidden * kFp32;
    n.weight_used_bytes = n.weight_bytes;
    return add(n);
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
  int convs_ = 0, gemms_ = 0, attns_ = 0;
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

// A transformer encoder (BERT, post-LN) or decoder (GPT-2, pre-LN).
Model transformer(const std::string& name, int batch, std::uint64_t seq, std::uint64_t vocab, std::uint64_t positions,
                  bool gpt) {
  Model m{name, batch, {}, 0, 1, 1, 0, 0, 32ull << 20, true};
  token_input(m, seq);
  Builder b(m);
  const std::uint64_t hidden = 1024, ffn = 4096;
  const int layers = 24;
  // Word, position (and for BERT token-type) embeddings: one table here.
  const int embed = b.embedding("embeddings", vocab + positions + (gpt ? 0 : 2), hidden);
  int x = embed;
  if (!gpt) x = b.light("embeddings.layernorm", Op::LayerNorm, x);
  for (int l = 0; l < layers; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    const int residual = x;
    int y = gpt ? b.light(p + "ln1", Op::LayerNorm, x) : x;
    y = b.gemm(p + "attn.qkv", y, 3 * hidden);
    y = b.attention(p + "attn.flash", y, gpt);
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

bool make_model(const std::string& name, int batch, Model* out) {
  if (name == "resnet50") *out = resnet50(batch > 0 ? batch : 128);
  else if (name == "vgg16") *out = vgg16(batch > 0 ? batch : 64);
  else if (name == "bert-large") *out = transformer(name, batch > 0 ? batch : 16, 512, 30522, 512, false);
  else if (name == "gpt2-medium") *out = transformer(name, batch > 0 ? batch : 8, 1024, 50257, 1024, true);
  else if (name == "cnn-small") *out = cnn_small(batch > 0 ? batch : 256);
  else return false;
  return true;
}

// ---------------------------------------------------------------- options

struct Options {
  std::string model;
  int steps = 6, batch = 0, eval_every = 0;
  unsigned scale = 64, seed = 7;
  bool describe = false;
  bool libraries = false;
};

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr,
               "layered_trainer: %s\n"
               "accepted: --model <%s> [--steps N (6)] [--scale S (64)] [--batch B (per model)] [--seed N (7)] "
               "[--eval-every N (0: never)] [--libraries] [--describe]\n",
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

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (key == "--describe") {
      o.describe = true;
      continue;
    }
    if (key == "--libraries") {
      o.libraries = true;
      continue;
    }
    if (key != "--model" && key != "--steps" && key != "--scale" && key != "--batch" && key != "--seed" &&
        key != "--eval-every") {
      usage_error("unknown option " + key);
    }
    if (i + 1 >= argc) usage_error(key + " wants a value");
    const char* value = argv[++i];
    if (key == "--model") o.model = value;
    else if (key == "--steps") o.steps = static_cast<int>(positive(key, value));
    else if (key == "--scale") o.scale = static_cast<unsigned>(positive(key, value));
    else if (key == "--batch") o.batch = static_cast<int>(positive(key, value));
    else if (key == "--eval-every") o.eval_every = static_cast<int>(integer(key, value, 0));
    else o.seed = static_cast<unsigned>(integer(key, value, 0));
  }
  if (o.model.empty()) usage_error("--model is required");
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

std::uint64_t scaled_bytes(std::uint64_t bytes) {
  const std::uint64_t s = (bytes + g_scale - 1) / g_scale;
  return std::max<std::uint64_t>(256, (s + 255) / 256 * 256);
}
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

struct Launch {
  int kernel = 0;
  std::vector<Arg> args;
  int node = -1;          // whose (for --describe), -1 for the loss and the optimizer
  bool backward = false;
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
      {"cross_entropy_fwd_bwd", {Sig::Loss, {2, 1, 1}}},
      {"sgd_momentum", {Sig::Sgd, {5}}},  // w, dw, m read; w, m written
      {"adamw", {Sig::AdamW, {7}}},       // w, dw, m, v read; w, m, v written
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
    default: return "?";
  }
}

struct Plan {
  Model model;
  std::vector<Tensor> tensors;
  std::vector<Kernel> kernels;
  std::vector<Launch> launches;  // one step's, in issue order
  std::vector<int> act;          // node -> its output tensor
  std::vector<int> weight, weight_grad, moment1, moment2;  // node -> tensor (owners), -1
  std::vector<int> weight_tensors;                         // in node order
  int input = 0, labels = 0, loss = 0, workspace = 0;
  int loss_launch = 0, first_backward = 0, first_optimizer = 0;
  std::vector<std::pair<int, int>> step_args;  // AdamW's step: (launch, argument), set every step
  int gradient_buffers = 0;

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
    launches.push_back({k, std::move(args), node, backward});
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
  for (int i = 0; i < count; ++i) {
    const Node& n = nodes[static_cast<std::size_t>(i)];
    p.act[static_cast<std::size_t>(i)] =
        n.inplace ? p.act[static_cast<std::size_t>(n.in0)] : p.tensor(n.name + ".out", Role::Activation, n.out_bytes);
  }
  const auto act = [&](int i) { return i == kInput ? p.input : p.act[static_cast<std::size_t>(i)]; };
  // The bytes of a node's output as a tensor (in place: its input's).
  std::vector<std::uint64_t> out_bytes(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    const Node& n = nodes[static_cast<std::size_t>(i)];
    out_bytes[static_cast<std::size_t>(i)] = n.inplace ? out_bytes[static_cast<std::size_t>(n.in0)] : n.out_bytes;
  }
  const auto obytes = [&](int i) { return i == kInput ? model.input_bytes : out_bytes[static_cast<std::size_t>(i)]; };

  // Forward.
  for (int i = 0; i < count; ++i) {
    const Node& n = nodes[static_cast<std::size_t>(i)];
    const int y = act(i);
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
      case Op::Attn: {
        const int k = p.kernel("attn_fwd_" + std::to_string(n.ordinal), Sig::Unary, n.fwd_ns);
        p.launch(k, {tensor_arg(act(n.in0)), tensor_arg(y), n_arg(obytes(n.in0)), n_arg(obytes(i))}, i, false);
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
  };
  // Placeholder tensor ids for gradient buffers are patched once the buffers
  // are known: encode buffer b as -(100 + b).
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
    buffer_free[static_cast<std::size_t>(grad[static_cast<std::size_t>(i)])] = true;
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
  }

  // The gradient buffers become tensors; patch the placeholders.
  std::vector<int> buffer_tensor;
  for (std::size_t b = 0; b < buffer_bytes.size(); ++b) {
    buffer_tensor.push_back(p.tensor("activation_grad." + std::to_string(b), Role::Gradient, buffer_bytes[b]));
  }
  for (Launch& l : p.launches) {
    for (Arg& a : l.args) {
      if (a.tensor <= -100) a.tensor = buffer_tensor[static_cast<std::size_t>(-a.tensor - 100)];
    }
  }
  p.gradient_buffers = static_cast<int>(buffer_bytes.size());
  return p;
}

double declared_ns(const Plan& p, const Launch& l) {
  const Kernel& k = p.kernels[static_cast<std::size_t>(l.kernel)];
  if (k.traffic == nullptr) return k.fixed_ns;
  std::vector<Arg> args = l.args;
  std::vector<void*> params;
  for (Arg& a : args) params.push_back(a.bytes);
  vgpusimLaunch none{};
  return layered::traffic_duration(params.data(), &none, const_cast<Traffic*>(k.traffic));
}

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

void describe(const Plan& p) {
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

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  g_scale = o.scale;
  layered::set_scale(o.scale);
  Model model;
  if (!make_model(o.model, o.batch, &model)) usage_error("unknown model '" + o.model + "' (models: " + kModels + ")");
  Plan plan = make_plan(model);
  if (o.describe) {
    describe(plan);
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
  CUstream stream = nullptr;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  // Everything, once, before the first step.
  std::uint64_t peak = 0;
  for (Tensor& t : plan.tensors) {
    CHECK(cuMemAlloc(&t.ptr, t.scaled));
    peak += t.scaled;
  }
  // Weights: small uniform values from the seed; everything else zero, so
  // nothing is ever read before it was written (a tied embedding's gradient
  // accumulates over rows the LM head's does not cover).
  std::uint64_t rng = mix64(o.seed);
  for (const Tensor& t : plan.tensors) {
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

  // The parameter arrays, filled with addresses once.
  std::vector<std::vector<Arg>> args;
  for (const Launch& l : plan.launches) {
    std::vector<Arg> a = l.args;
    for (Arg& arg : a) {
      if (arg.tensor >= 0) {
        const CUdeviceptr ptr = plan.tensors[static_cast<std::size_t>(arg.tensor)].ptr;
        std::memcpy(arg.bytes, &ptr, sizeof ptr);
      }
    }
    args.push_back(std::move(a));
  }

  // --libraries: the convolutions and GEMMs as cuDNN and cuBLAS calls
  // (layered_libraries.h); library[l] is launch l's prepared call, or -1.
  std::unique_ptr<layered::Libraries> libraries;
  std::vector<int> library(plan.launches.size(), -1);
  if (o.libraries) {
    const Tensor& workspace = plan.tensors[static_cast<std::size_t>(plan.workspace)];
    std::string why;
    libraries = layered::Libraries::open(stream, workspace.ptr, workspace.scaled, &why);
    if (!libraries) {
      std::printf("CUDA_ERROR libraries-unavailable at --libraries (%s)\n", why.c_str());
      return 3;
    }
    for (std::size_t l = 0; l < plan.launches.size(); ++l) {
      const Kernel& k = plan.kernels[static_cast<std::size_t>(plan.launches[l].kernel)];
      layered::HeavyOperation op;
      if (!layered::heavy_kind(k.name, &op.kind)) continue;
      const std::vector<Arg>& a = args[l];  // Sig::Heavy: a, b, ws, y | na, nb, nws, ny | acc
      const auto pointer = [&](int i) { return arg_value<CUdeviceptr>(a[static_cast<std::size_t>(i)]); };
      const auto count = [&](int i) { return arg_value<std::uint64_t>(a[static_cast<std::size_t>(i)]); };
      op.a = pointer(0);
      op.b = pointer(1);
      op.y = pointer(3);
      op.a_words = count(4);
      op.b_words = count(5);
      op.y_words = count(7);
      op.accumulate = arg_value<int>(a[8]) != 0;
      op.ns = k.fixed_ns;
      if (!libraries->prepare(op, &library[l], &why)) {
        std::printf("CUDA_ERROR library-shape at %s (%s)\n", k.name.c_str(), why.c_str());
        return 3;
      }
    }
  }

  CUevent start = nullptr, end = nullptr;
  CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CHECK(cuEventCreate(&end, CU_EVENT_DEFAULT));
  float last_loss = 0.0f;
  double compute_ns = 0.0;
  unsigned long long copied_in = 0, copied_out = 0;  // across the link during the last step (issued)
  for (int step = 0; step < o.steps; ++step) {
    const bool last = step + 1 == o.steps;
    // The batch: the host writes the next one while nothing reads the pinned
    // buffers (the previous step ended with a synchronize).
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
    for (const auto& [launch, index] : plan.step_args) {
      const int step_number = step + 1;
      std::memcpy(args[static_cast<std::size_t>(launch)][static_cast<std::size_t>(index)].bytes, &step_number,
                  sizeof step_number);
    }

    if (last) {
      CHECK(cuEventRecord(start, stream));
      vgpusimCopiedBytes(&copied_in, &copied_out);
    }
    CHECK(cuMemcpyHtoDAsync(input.ptr, pinned_input, input.scaled, stream));
    CHECK(cuMemcpyHtoDAsync(labels.ptr, pinned_labels, labels.scaled, stream));
    const bool evaluation = o.eval_every > 0 && (step + 1) % o.eval_every == 0 && !last;
    const std::size_t launches = evaluation ? static_cast<std::size_t>(plan.loss_launch) + 1 : plan.launches.size();
    for (std::size_t l = 0; l < launches; ++l) {
      const Kernel& k = plan.kernels[static_cast<std::size_t>(plan.launches[l].kernel)];
      std::vector<void*> params;
      for (Arg& a : args[l]) params.push_back(a.bytes);
      if (last) {
        Launch counted = plan.launches[l];
        counted.args = args[l];
        compute_ns += declared_ns(plan, counted);
      }
      if (library[l] >= 0) {
        std::string why;
        if (!libraries->run(library[l], &why)) {
          std::printf("CUDA_ERROR library-call at %s (%s)\n", k.name.c_str(), why.c_str());
          return 3;
        }
        continue;
      }
      check(cuLaunchKernel(k.fn, 1, 1, 1, 1, 1, 1, 0, stream, params.data(), nullptr), k.name.c_str());
    }
    CHECK(cuMemcpyDtoHAsync(pinned_loss, loss.ptr, sizeof(float), stream));
    if (last) CHECK(cuEventRecord(end, stream));
    CHECK(cuStreamSynchronize(stream));
    std::memcpy(&last_loss, pinned_loss, sizeof last_loss);
    if (last) {
      unsigned long long in_now = 0, out_now = 0;
      vgpusimCopiedBytes(&in_now, &out_now);
      copied_in = in_now - copied_in;
      copied_out = out_now - copied_out;
    }
  }
  float step_ms = 0.0f;
  CHECK(cuEventElapsedTime(&step_ms, start, end));

  // FNV-1a over every weight, in layer order.
  std::uint64_t hash = 1469598103934665603ULL;
  for (int t : plan.weight_tensors) {
    const Tensor& w = plan.tensors[static_cast<std::size_t>(t)];
    std::vector<unsigned char> bytes(w.scaled);
    CHECK(cuMemcpyDtoHAsync(bytes.data(), w.ptr, w.scaled, stream));
    CHECK(cuStreamSynchronize(stream));
    for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ULL;
  }
  libraries.reset();
  CHECK(cuEventDestroy(start));
  CHECK(cuEventDestroy(end));
  for (Tensor& t : plan.tensors) CHECK(cuMemFree(t.ptr));
  CHECK(cuMemFreeHost(pinned_input));
  CHECK(cuMemFreeHost(pinned_labels));
  CHECK(cuMemFreeHost(pinned_loss));
  CHECK(cuStreamDestroy(stream));
  std::printf("RESULT loss=%.9g weights_fnv1a=%016" PRIx64 " peak_device_bytes_wanted=%" PRIu64
              " step_ns=%.0f compute_ns=%.0f copied_in=%llu copied_out=%llu\n",
              static_cast<double>(last_loss), hash, peak, static_cast<double>(step_ms) * 1e6, compute_ns, copied_in,
              copied_out);
  return 0;
}
