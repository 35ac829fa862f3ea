#include "cnn_convolutions.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace cnn {

void check_cudnn(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  std::printf("CUDNN_ERROR %s at %s\n", cudnnGetErrorString(status), what);
  std::exit(3);
}

namespace {

#define CUDNN_CHECK(call) check_cudnn((call), #call)

const float kOne = 1.0f, kZero = 0.0f;

// ---- the legacy API ----

class LegacyConvolutions final : public Convolutions {
 public:
  LegacyConvolutions(cudnnHandle_t handle, const std::vector<ConvShape>& layers) : handle_(handle) {
    for (const ConvShape& s : layers) {
      Layer l;
      CUDNN_CHECK(cudnnCreateTensorDescriptor(&l.x));
      CUDNN_CHECK(cudnnCreateTensorDescriptor(&l.y));
      CUDNN_CHECK(cudnnCreateFilterDescriptor(&l.w));
      CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&l.conv));
      CUDNN_CHECK(cudnnSetTensor4dDescriptor(l.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.batch, s.in_channels,
                                             s.in_size, s.in_size));
      CUDNN_CHECK(cudnnSetTensor4dDescriptor(l.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.batch, s.out_channels,
                                             s.out_size, s.out_size));
      CUDNN_CHECK(cudnnSetFilter4dDescriptor(l.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.out_channels,
                                             s.in_channels / s.groups, s.kernel, s.kernel));
      CUDNN_CHECK(cudnnSetConvolution2dDescriptor(l.conv, s.pad, s.pad, s.stride, s.stride, 1, 1,
                                                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
      CUDNN_CHECK(cudnnSetConvolutionGroupCount(l.conv, s.groups));
      // Algorithms as PyTorch picks them (heuristics, once per shape).
      int returned = 0;
      cudnnConvolutionFwdAlgoPerf_t fwd;
      CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, l.x, l.w, l.conv, l.y, 1, &returned, &fwd));
      cudnnConvolutionBwdDataAlgoPerf_t data;
      CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, l.w, l.y, l.conv, l.x, 1, &returned, &data));
      cudnnConvolutionBwdFilterAlgoPerf_t filter;
      CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, l.x, l.y, l.conv, l.w, 1, &returned, &filter));
      l.fwd = fwd.algo;
      l.data = data.algo;
      l.filter = filter.algo;
      std::size_t a = 0, b = 0, c = 0;
      CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle, l.x, l.w, l.conv, l.y, l.fwd, &a));
      CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, l.w, l.y, l.conv, l.x, l.data, &b));
      CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, l.x, l.y, l.conv, l.w, l.filter, &c));
      l.workspace = std::max({a, b, c});
      layers_.push_back(l);
    }
  }
  ~LegacyConvolutions() override {
    for (Layer& l : layers_) {
      cudnnDestroyTensorDescriptor(l.x);
      cudnnDestroyTensorDescriptor(l.y);
      cudnnDestroyFilterDescriptor(l.w);
      cudnnDestroyConvolutionDescriptor(l.conv);
    }
  }
  std::size_t workspace_bytes(int layer) override { return layers_[static_cast<std::size_t>(layer)].workspace; }
  void forward(int layer, void* x, void* w, void* y, void* workspace) override {
    const Layer& l = layers_[static_cast<std::size_t>(layer)];
    CUDNN_CHECK(cudnnConvolutionForward(handle_, &kOne, l.x, x, l.w, w, l.conv, l.fwd, workspace, l.workspace, &kZero,
                                        l.y, y));
  }
  void backward_data(int layer, void* dy, void* w, void* dx, void* workspace) override {
    const Layer& l = layers_[static_cast<std::size_t>(layer)];
    CUDNN_CHECK(cudnnConvolutionBackwardData(handle_, &kOne, l.w, w, l.y, dy, l.conv, l.data, workspace, l.workspace,
                                             &kZero, l.x, dx));
  }
  void backward_filter(int layer, void* x, void* dy, void* dw, void* workspace) override {
    const Layer& l = layers_[static_cast<std::size_t>(layer)];
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle_, &kOne, l.x, x, l.y, dy, l.conv, l.filter, workspace,
                                               l.workspace, &kZero, l.w, dw));
  }

 private:
  struct Layer {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    cudnnConvolutionFwdAlgo_t fwd{};
    cudnnConvolutionBwdDataAlgo_t data{};
    cudnnConvolutionBwdFilterAlgo_t filter{};
    std::size_t workspace = 0;
  };
  cudnnHandle_t handle_;
  std::vector<Layer> layers_;
};

// ---- the backend (graph) API ----

// A backend descriptor owned for the lifetime of the object.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_));
  }
  ~Descriptor() { cudnnBackendDestroyDescriptor(d_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  operator cudnnBackendDescriptor_t() const { return d_; }
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count, const void* values) {
    CUDNN_CHECK(cudnnBackendSetAttribute(d_, name, type, count, values));
  }
  void set_descriptor(cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t value) {
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
  }
  void finalize() { CUDNN_CHECK(cudnnBackendFinalize(d_)); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

enum Direction { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };
constexpr std::int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y';

// A plan and what built it (the graph's descriptors may be destroyed once the
// plan is finalized, but keeping them is what cudnn-frontend does).
struct Plan {
  std::vector<std::unique_ptr<Descriptor>> parts;
  std::unique_ptr<Descriptor> plan;
  std::int64_t workspace = 0;
};

std::unique_ptr<Descriptor> tensor(std::int64_t uid, int n, int c, int h, int w) {
  auto t = std::make_unique<Descriptor>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const std::int64_t dims[4] = {n, c, h, w};
  const std::int64_t strides[4] = {static_cast<std::int64_t>(c) * h * w, static_cast<std::int64_t>(h) * w, w, 1};
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  const std::int64_t alignment = 16;
  const bool is_virtual = false;
  t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  t->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
  t->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
  t->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  t->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  t->set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  t->finalize();
  return t;
}

Plan build_plan(cudnnHandle_t handle, const ConvShape& s, Direction direction) {
  Plan p;
  auto x = tensor(kUidX, s.batch, s.in_channels, s.in_size, s.in_size);
  auto w = tensor(kUidW, s.out_channels, s.in_channels / s.groups, s.kernel, s.kernel);
  auto y = tensor(kUidY, s.batch, s.out_channels, s.out_size, s.out_size);
  auto conv = std::make_unique<Descriptor>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const std::int64_t spatial = 2, ones[2] = {1, 1}, strides[2] = {s.stride, s.stride}, pads[2] = {s.pad, s.pad};
  conv->set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  conv->set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  conv->set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial);
  conv->set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, ones);
  conv->set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, strides);
  conv->set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pads);
  conv->set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pads);
  conv->finalize();

  static const cudnnBackendDescriptorType_t kOperation[3] = {
      CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
  // alpha, beta, conv, x, w, y for each direction.
  static const cudnnBackendAttributeName_t kNames[3][6] = {
      {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
      {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY},
      {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY}};
  const cudnnBackendAttributeName_t* names = kNames[direction];
  auto op = std::make_unique<Descriptor>(kOperation[direction]);
  const double alpha = 1.0, beta = 0.0;  // cudnn-frontend passes double scalars for float compute
  op->set(names[0], CUDNN_TYPE_DOUBLE, 1, &alpha);
  op->set(names[1], CUDNN_TYPE_DOUBLE, 1, &beta);
  op->set_descriptor(names[2], *conv);
  op->set_descriptor(names[3], *x);
  op->set_descriptor(names[4], *w);
  op->set_descriptor(names[5], *y);
  op->finalize();

  auto graph = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  const cudnnBackendDescriptor_t ops[1] = {*op};
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, ops);
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  graph->finalize();
  // The engine config comes from heuristics, as PyTorch asks for it.
  auto heuristics = std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t heur_mode = CUDNN_HEUR_MODE_INSTANT;
  heuristics->set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *graph);
  heuristics->set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &heur_mode);
  heuristics->finalize();
  auto config = std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  std::int64_t offered = 0;
  cudnnBackendDescriptor_t configs[1] = {*config};  // filled in by the library
  CUDNN_CHECK(cudnnBackendGetAttribute(*heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                       &offered, configs));
  if (offered < 1) check_cudnn(CUDNN_STATUS_NOT_SUPPORTED, "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS): none");
  p.plan = std::make_unique<Descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  p.plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  p.plan->set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *config);
  p.plan->finalize();
  std::int64_t count = 0;
  CUDNN_CHECK(cudnnBackendGetAttribute(*p.plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count,
                                       &p.workspace));
  for (auto* part : {&x, &w, &y, &conv, &op, &graph, &heuristics, &config}) p.parts.push_back(std::move(*part));
  return p;
}

class BackendConvolutions final : public Convolutions {
 public:
  BackendConvolutions(cudnnHandle_t handle, const std::vector<ConvShape>& layers)
      : handle_(handle), shapes_(layers), plans_(layers.size() * 3) {}

  std::size_t workspace_bytes(int layer) override {
    std::int64_t most = 0;
    for (Direction d : {kForward, kBackwardData, kBackwardFilter}) most = std::max(most, plan(layer, d).workspace);
    return static_cast<std::size_t>(most);
  }
  void forward(int layer, void* x, void* w, void* y, void* workspace) override {
    execute(plan(layer, kForward), x, w, y, workspace);
  }
  void backward_data(int layer, void* dy, void* w, void* dx, void* workspace) override {
    execute(plan(layer, kBackwardData), dx, w, dy, workspace);
  }
  void backward_filter(int layer, void* x, void* dy, void* dw, void* workspace) override {
    execute(plan(layer, kBackwardFilter), x, dw, dy, workspace);
  }

 private:
  // Built on first use and kept: PyTorch caches plans by problem shape.
  const Plan& plan(int layer, Direction direction) {
    std::unique_ptr<Plan>& slot = plans_[static_cast<std::size_t>(layer) * 3 + direction];
    if (slot == nullptr) {
      slot = std::make_unique<Plan>(build_plan(handle_, shapes_[static_cast<std::size_t>(layer)], direction));
    }
    return *slot;
  }
  // A variant pack per call, as PyTorch builds one for each execution.
  void execute(const Plan& p, void* x, void* w, void* y, void* workspace) {
    Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    const std::int64_t uids[3] = {kUidX, kUidW, kUidY};
    void* pointers[3] = {x, w, y};
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers);
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    pack.finalize();
    CUDNN_CHECK(cudnnBackendExecute(handle_, *p.plan, pack));
  }

  cudnnHandle_t handle_;
  std::vector<ConvShape> shapes_;
  std::vector<std::unique_ptr<Plan>> plans_;
};

}  // namespace

std::unique_ptr<Convolutions> make_legacy_convolutions(cudnnHandle_t handle, const std::vector<ConvShape>& layers) {
  return std::make_unique<LegacyConvolutions>(handle, layers);
}

std::unique_ptr<Convolutions> make_backend_convolutions(cudnnHandle_t handle, const std::vector<ConvShape>& layers) {
  return std::make_unique<BackendConvolutions>(handle, layers);
}

}  // namespace cnn
