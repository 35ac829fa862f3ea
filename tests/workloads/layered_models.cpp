#include "layered_models.h"

namespace layered {
namespace {

constexpr double kConvFlopsPerNs = 250e3;     // 250 TFLOP/s
constexpr double kGemmFlopsPerNs = 400e3;     // 400 TFLOP/s
constexpr double kMemoryBytesPerNs = 2500.0;  // 2.5 TB/s

double memory_ns(double bytes) { return 2 * bytes / kMemoryBytesPerNs; }  // read and write

Layer conv(double flops, double activation, double weights) {
  return {static_cast<std::uint64_t>(activation), static_cast<std::uint64_t>(weights), flops / kConvFlopsPerNs,
          memory_ns(activation), true};
}

Model resnet50() {
  Model m{"resnet50", 128, 0, {}};
  const double b = m.batch;
  m.input_bytes = static_cast<std::uint64_t>(224.0 * 224 * 3 * 2 * b);
  // Stem: 7x7 convolution to 112x112x64, batch norm, ReLU, pooling.
  m.layers.push_back(conv(0.118e9 * 2 * b, 112.0 * 112 * 64 * 2 * b * 2, 9408.0 * 2));
  // Sixteen bottleneck blocks in four stages; each stage costs about the
  // same FLOPs (ResNet's design: 4.1 GFLOP an image in all).
  const struct {
    int blocks, size, channels;
  } stages[] = {{3, 56, 256}, {4, 28, 512}, {6, 14, 1024}, {3, 7, 2048}};
  const double block_flops = (4.1e9 - 0.118e9) * 2 / 16 * b;  // multiply-adds count twice
  for (const auto& stage : stages) {
    const double weights = 17.0 * stage.channels * stage.channels / 16 * 2;  // 1x1, 3x3, 1x1 at a quarter width
    for (int i = 0; i < stage.blocks; ++i) {
      m.layers.push_back(conv(block_flops, 4.0 * stage.size * stage.size * stage.channels * 2 * b, weights));
    }
  }
  // Pooling and the classifier: small.
  m.layers.push_back({static_cast<std::uint64_t>(1000.0 * 2 * b), 2048ull * 1000 * 2, 2048.0 * 1000 * 2 * b / kGemmFlopsPerNs,
                      memory_ns(2048.0 * 2 * b), false});
  return m;
}

Model vgg16() {
  Model m{"vgg16", 64, 0, {}};
  const double b = m.batch;
  m.input_bytes = static_cast<std::uint64_t>(224.0 * 224 * 3 * 2 * b);
  const struct {
    int in, out, size;
  } convs[] = {{3, 64, 224},    {64, 64, 224},   {64, 128, 112},  {128, 128, 112}, {128, 256, 56},
               {256, 256, 56},  {256, 256, 56},  {256, 512, 28},  {512, 512, 28},  {512, 512, 28},
               {512, 512, 14},  {512, 512, 14},  {512, 512, 14}};
  for (const auto& c : convs) {
    const double flops = 2.0 * c.size * c.size * c.in * c.out * 9 * b;
    m.layers.push_back(conv(flops, 2.0 * c.size * c.size * c.out * 2 * b, 9.0 * c.in * c.out * 2));  // conv and ReLU out
  }
  const int fc[][2] = {{25088, 4096}, {4096, 4096}, {4096, 1000}};
  for (const auto& f : fc) {
    const double flops = 2.0 * f[0] * f[1] * b;
    m.layers.push_back({static_cast<std::uint64_t>(2.0 * f[1] * 2 * b), static_cast<std::uint64_t>(2.0 * f[0] * f[1]),
                        flops / kGemmFlopsPerNs, memory_ns(2.0 * f[1] * 2 * b), false});
  }
  return m;
}

// A decoder or encoder layer: QKV, attention, projection and the MLP.
Model transformer(const std::string& name, int layers, int batch, int sequence, int hidden, int heads) {
  Model m{name, batch, 0, {}};
  const double s = sequence, b = batch, h = hidden, a = heads;
  m.input_bytes = static_cast<std::uint64_t>(s * b * h * 2);
  const double activation = s * b * h * (34 + 5 * a * s / h);
  const double flops = 24 * b * s * h * h + 4 * b * s * s * h;
  for (int i = 0; i < layers; ++i) {
    m.layers.push_back({static_cast<std::uint64_t>(activation), static_cast<std::uint64_t>(12 * h * h * 2),
                        flops / kGemmFlopsPerNs, memory_ns(activation), false});
  }
  return m;
}

// Small and compute-bound: every byte that moves can hide under compute
// (a 32 MiB map crosses the link in 0.6 ms; its layer computes for 2 ms).
Model cnn_small() {
  Model m{"cnn-small", 32, 4ull << 20, {}};
  for (int i = 0; i < 8; ++i) m.layers.push_back({32ull << 20, 2ull << 20, 2'000'000, 100'000, true});
  return m;
}

}  // namespace

Model model(const std::string& name) {
  if (name == "resnet50") return resnet50();
  if (name == "vgg16") return vgg16();
  if (name == "bert-large") return transformer(name, 24, 16, 512, 1024, 16);
  if (name == "gpt2-medium") return transformer(name, 24, 8, 1024, 1024, 16);
  if (name == "cnn-small") return cnn_small();
  return {};
}

std::vector<std::string> model_names() { return {"resnet50", "vgg16", "bert-large", "gpt2-medium", "cnn-small"}; }

}  // namespace layered
