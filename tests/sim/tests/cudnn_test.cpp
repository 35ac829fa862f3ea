// The simulated cuDNN (tests/sim/cudnn): each convolution checked against a
// direct host reference written here in the scatter form (each input element
// pushes its products out, where the library gathers), bias and tensor adds,
// cuDNN's alpha/beta rules, fp16/bf16 rounding (by CUDA's own cuda_fp16.h and
// cuda_bf16.h conversions), the backend graph API built as cudnn-frontend
// builds it and read back through its whole chain, validation that launches
// and writes nothing, and the launches' stream and duration.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "element_conversions.h"
#include "sim_test_support.h"

namespace {

using namespace simtest;

// ---- element conversions, by CUDA's headers (element_conversions.h) ----

Element element(cudnnDataType_t type) { return type == CUDNN_DATA_HALF ? Element::f16 : type == CUDNN_DATA_BFLOAT16 ? Element::bf16 : Element::f32; }
std::size_t bytes_of(cudnnDataType_t type) { return bytes_of(element(type)); }
float round_to(cudnnDataType_t type, float value) { return round_to(element(type), value); }
void put(void* base, cudnnDataType_t type, std::size_t index, float value) { put(base, element(type), index, value); }
float get(const void* base, cudnnDataType_t type, std::size_t index) { return get(base, element(type), index); }

// ---- problems and the reference ----

struct Case {
  int n, c, h, w, k, r, s;
  int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups;
  cudnnConvolutionMode_t mode;
  bool nhwc;
  int p() const { return (h + 2 * pad_h - ((r - 1) * dil_h + 1)) / stride_h + 1; }
  int q() const { return (w + 2 * pad_w - ((s - 1) * dil_w + 1)) / stride_w + 1; }
  int cg() const { return c / groups; }
};

// A logical NCHW tensor of host floats.
struct Tensor {
  int dims[4];
  std::vector<float> values;
  float& at(int n, int c, int h, int w) {
    return values[static_cast<std::size_t>(((n * dims[1] + c) * dims[2] + h) * dims[3] + w)];
  }
  float at(int n, int c, int h, int w) const {
    return values[static_cast<std::size_t>(((n * dims[1] + c) * dims[2] + h) * dims[3] + w)];
  }
  std::size_t size() const { return values.size(); }
};

Tensor zeros(int n, int c, int h, int w) {
  return Tensor{{n, c, h, w}, std::vector<float>(static_cast<std::size_t>(n) * c * h * w, 0.0f)};
}

// Quarters from -2 to 2: exact in fp32, fp16 and bf16, and every sum of the
// small problems here is exact in fp32, so the order of summation does not
// matter and fp32 results must match to the bit.
Tensor random_tensor(int n, int c, int h, int w, unsigned seed) {
  Tensor t = zeros(n, c, h, w);
  unsigned state = seed * 2654435761u + 7;
  for (float& v : t.values) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(static_cast<int>((state >> 16) % 17) - 8) * 0.25f;
  }
  return t;
}

// The filter value that tap (r, s) applies: CUDNN_CONVOLUTION flips the filter.
float tap(const Case& cs, const Tensor& w, int k, int c, int r, int s) {
  return cs.mode == CUDNN_CONVOLUTION ? w.at(k, c, cs.r - 1 - r, cs.s - 1 - s) : w.at(k, c, r, s);
}

// Calls f(n, k, p, q, channel, c, r, s, h, col) for every product term of the
// forward convolution whose input position is inside the image.
template <class F>
void for_each_term(const Case& cs, F f) {
  const int kg = cs.k / cs.groups;
  for (int n = 0; n < cs.n; ++n)
    for (int k = 0; k < cs.k; ++k)
      for (int p = 0; p < cs.p(); ++p)
        for (int q = 0; q < cs.q(); ++q)
          for (int c = 0; c < cs.cg(); ++c)
            for (int r = 0; r < cs.r; ++r)
              for (int s = 0; s < cs.s; ++s) {
                const int h = p * cs.stride_h - cs.pad_h + r * cs.dil_h;
                const int col = q * cs.stride_w - cs.pad_w + s * cs.dil_w;
                if (h < 0 || h >= cs.h || col < 0 || col >= cs.w) continue;
                f(n, k, p, q, k / kg * cs.cg() + c, c, r, s, h, col);
              }
}

Tensor reference_forward(const Case& cs, const Tensor& x, const Tensor& w) {
  Tensor y = zeros(cs.n, cs.k, cs.p(), cs.q());
  for_each_term(cs, [&](int n, int k, int p, int q, int channel, int c, int r, int s, int h, int col) {
    y.at(n, k, p, q) += x.at(n, channel, h, col) * tap(cs, w, k, c, r, s);
  });
  return y;
}

Tensor reference_backward_data(const Case& cs, const Tensor& dy, const Tensor& w) {
  Tensor dx = zeros(cs.n, cs.c, cs.h, cs.w);
  for_each_term(cs, [&](int n, int k, int p, int q, int channel, int c, int r, int s, int h, int col) {
    dx.at(n, channel, h, col) += dy.at(n, k, p, q) * tap(cs, w, k, c, r, s);
  });
  return dx;
}

Tensor reference_backward_filter(const Case& cs, const Tensor& x, const Tensor& dy) {
  Tensor dw = zeros(cs.k, cs.cg(), cs.r, cs.s);
  for_each_term(cs, [&](int n, int k, int p, int q, int channel, int c, int r, int s, int h, int col) {
    const int fr = cs.mode == CUDNN_CONVOLUTION ? cs.r - 1 - r : r;
    const int fs = cs.mode == CUDNN_CONVOLUTION ? cs.s - 1 - s : s;
    dw.at(k, c, fr, fs) += x.at(n, channel, h, col) * dy.at(n, k, p, q);
  });
  return dw;
}

// Strides of a logical NCHW shape stored NCHW or NHWC.
std::vector<int> strides_of(const int (&d)[4], bool nhwc) {
  if (nhwc) return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

std::size_t linear(const Tensor& t, bool nhwc, int n, int c, int h, int w) {
  const std::vector<int> st = strides_of(t.dims, nhwc);
  return static_cast<std::size_t>(n * st[0] + c * st[1] + h * st[2] + w * st[3]);
}

// The simulator's count of kernels launched so far, from its report.
long long kernels_launched() {
  const std::string path = "/tmp/vgpusim_cudnn_report_" + std::to_string(getpid()) + ".json";
  if (vgpusimWriteReport(path.c_str()) != CUDA_SUCCESS) return -1;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  const std::string report = text.str();
  const std::string key = "\"kernels_launched\":";
  const std::size_t at = report.find(key);
  return at == std::string::npos ? -1 : std::stoll(report.substr(at + key.size()));
}

// The documented duration model (docs/simulated-driver.md): 4 µs plus
// 2·(output elements)·(C/groups·R·S) flops at 65 % of the H100 SXM's peak.
double documented_conv_ns(double outputs, double terms, double peak) {
  return 4000.0 + 2.0 * outputs * terms / (0.65 * peak) * 1e9;
}

void idle_body(void**, const vgpusimLaunch*, void*) {}

enum class Kind { kForward, kBackwardData, kBackwardFilter };

// A backend descriptor destroyed with its scope.
class Backend {
 public:
  explicit Backend(cudnnBackendDescriptorType_t type) {
    EXPECT_EQ(cudnnBackendCreateDescriptor(type, &d_), CUDNN_STATUS_SUCCESS);
  }
  ~Backend() {
    if (d_ != nullptr) {
      EXPECT_EQ(cudnnBackendDestroyDescriptor(d_), CUDNN_STATUS_SUCCESS);
    }
  }
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  operator cudnnBackendDescriptor_t() const { return d_; }
  cudnnBackendDescriptor_t* address() { return &d_; }

  template <class T>
  cudnnStatus_t set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const std::vector<T>& values) {
    return cudnnBackendSetAttribute(d_, name, type, static_cast<std::int64_t>(values.size()), values.data());
  }
  template <class T>
  cudnnStatus_t set_one(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, T value) {
    return cudnnBackendSetAttribute(d_, name, type, 1, &value);
  }
  cudnnStatus_t set_descriptor(cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t value) {
    return cudnnBackendSetAttribute(d_, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
  }
  template <class T>
  std::vector<T> get(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type) const {
    std::int64_t count = -1;
    EXPECT_EQ(cudnnBackendGetAttribute(d_, name, type, 0, &count, nullptr), CUDNN_STATUS_SUCCESS);
    std::vector<T> values(static_cast<std::size_t>(count > 0 ? count : 0));
    std::int64_t again = -1;
    EXPECT_EQ(cudnnBackendGetAttribute(d_, name, type, count, &again, values.data()), CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(again, count);
    return values;
  }
  cudnnStatus_t finalize() { return cudnnBackendFinalize(d_); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

constexpr std::int64_t kUidX = 101, kUidW = 102, kUidY = 103;

class Cudnn : public Simulator {
 protected:
  void SetUp() override {
    Simulator::SetUp();
    ASSERT_EQ(cudnnCreate(&handle_), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(cudnnSetStream(handle_, stream_), CUDNN_STATUS_SUCCESS);
  }
  void TearDown() override {
    EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    if (handle_ != nullptr) {
      EXPECT_EQ(cudnnDestroy(handle_), CUDNN_STATUS_SUCCESS);
    }
    EXPECT_EQ(cuStreamDestroy(stream_), CUDA_SUCCESS);
    for (CUdeviceptr pointer : allocations_) EXPECT_EQ(cuMemFree(pointer), CUDA_SUCCESS);
  }
  void* device(std::size_t bytes) {
    CUdeviceptr pointer = 0;
    EXPECT_EQ(cuMemAlloc(&pointer, bytes), CUDA_SUCCESS);
    allocations_.push_back(pointer);
    return reinterpret_cast<void*>(pointer);
  }
  void* upload(const Tensor& t, cudnnDataType_t type, bool nhwc) {
    void* pointer = device(t.size() * bytes_of(type));
    for (int n = 0; n < t.dims[0]; ++n)
      for (int c = 0; c < t.dims[1]; ++c)
        for (int h = 0; h < t.dims[2]; ++h)
          for (int w = 0; w < t.dims[3]; ++w) put(pointer, type, linear(t, nhwc, n, c, h, w), t.at(n, c, h, w));
    return pointer;
  }
  Tensor download(const void* pointer, const Tensor& shape, cudnnDataType_t type, bool nhwc) {
    Tensor t = shape;
    for (int n = 0; n < t.dims[0]; ++n)
      for (int c = 0; c < t.dims[1]; ++c)
        for (int h = 0; h < t.dims[2]; ++h)
          for (int w = 0; w < t.dims[3]; ++w) t.at(n, c, h, w) = get(pointer, type, linear(t, nhwc, n, c, h, w));
    return t;
  }
  void expect_equal(const Tensor& got, const Tensor& expected, const char* what) {
    for (std::size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got.values[i]), std::bit_cast<std::uint32_t>(expected.values[i]))
          << what << ": element " << i << " is " << got.values[i] << ", expected " << expected.values[i];
    }
  }
  void wait() { ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS); }

  // Legacy descriptors for a case; destroyed with the fixture's call.
  struct Descriptors {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    ~Descriptors() {
      cudnnDestroyTensorDescriptor(x);
      cudnnDestroyTensorDescriptor(y);
      cudnnDestroyFilterDescriptor(w);
      cudnnDestroyConvolutionDescriptor(conv);
    }
  };
  void describe(const Case& cs, cudnnDataType_t type, Descriptors& d) {
    const cudnnTensorFormat_t format = cs.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    ASSERT_EQ(cudnnCreateTensorDescriptor(&d.x), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnCreateTensorDescriptor(&d.y), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnCreateFilterDescriptor(&d.w), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnCreateConvolutionDescriptor(&d.conv), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetTensor4dDescriptor(d.x, format, type, cs.n, cs.c, cs.h, cs.w), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetFilter4dDescriptor(d.w, type, format, cs.k, cs.cg(), cs.r, cs.s), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetConvolution2dDescriptor(d.conv, cs.pad_h, cs.pad_w, cs.stride_h, cs.stride_w, cs.dil_h,
                                              cs.dil_w, cs.mode, CUDNN_DATA_FLOAT),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetConvolutionGroupCount(d.conv, cs.groups), CUDNN_STATUS_SUCCESS);
    int n = 0, k = 0, p = 0, q = 0;
    ASSERT_EQ(cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &n, &k, &p, &q), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(n, cs.n);
    ASSERT_EQ(k, cs.k);
    ASSERT_EQ(p, cs.p());
    ASSERT_EQ(q, cs.q());
    ASSERT_EQ(cudnnSetTensor4dDescriptor(d.y, format, type, cs.n, cs.k, cs.p(), cs.q()), CUDNN_STATUS_SUCCESS);
  }

  // One legacy call of `kind` on device buffers x, w, y (dx / dw / dy by kind).
  cudnnStatus_t legacy(Kind kind, const Case& cs, cudnnDataType_t type, float alpha, float beta, void* x, void* w,
                       void* y) {
    Descriptors d;
    describe(cs, type, d);
    std::size_t bytes = 0;
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    switch (kind) {
      case Kind::kForward:
        EXPECT_EQ(cudnnGetConvolutionForwardWorkspaceSize(handle_, d.x, d.w, d.conv, d.y,
                                                          CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, &bytes),
                  CUDNN_STATUS_SUCCESS);
        status = cudnnConvolutionForward(handle_, &alpha, d.x, x, d.w, w, d.conv,
                                         CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, device(bytes), bytes, &beta,
                                         d.y, y);
        break;
      case Kind::kBackwardData:
        EXPECT_EQ(cudnnGetConvolutionBackwardDataWorkspaceSize(handle_, d.w, d.y, d.conv, d.x,
                                                               CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, &bytes),
                  CUDNN_STATUS_SUCCESS);
        status = cudnnConvolutionBackwardData(handle_, &alpha, d.w, w, d.y, y, d.conv,
                                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, device(bytes), bytes, &beta, d.x, x);
        break;
      case Kind::kBackwardFilter:
        EXPECT_EQ(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle_, d.x, d.y, d.conv, d.w,
                                                                 CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, &bytes),
                  CUDNN_STATUS_SUCCESS);
        status = cudnnConvolutionBackwardFilter(handle_, &alpha, d.x, x, d.y, y, d.conv,
                                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, device(bytes), bytes, &beta, d.w,
                                                w);
        break;
    }
    return status;
  }

  // A backend tensor as cudnn-frontend builds one.
  void backend_tensor(Backend& t, std::int64_t uid, cudnnDataType_t type, const int (&dims)[4], bool nhwc) {
    const std::vector<int> st = strides_of(dims, nhwc);
    ASSERT_EQ(t.set_one(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, type), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64,
                    std::vector<std::int64_t>{dims[0], dims[1], dims[2], dims[3]}),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, std::vector<std::int64_t>{st[0], st[1], st[2], st[3]}),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(t.set_one(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, uid), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(t.set_one(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, std::int64_t{16}), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(t.set_one(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, false), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(t.finalize(), CUDNN_STATUS_SUCCESS);
  }

  // The whole chain: tensors, conv desc, operation, graph, engine 0, config,
  // plan. The plan is left in `plan` for the caller to execute and inspect.
  struct Graph {
    Backend x{CUDNN_BACKEND_TENSOR_DESCRIPTOR}, w{CUDNN_BACKEND_TENSOR_DESCRIPTOR}, y{CUDNN_BACKEND_TENSOR_DESCRIPTOR};
    Backend conv{CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR};
    std::unique_ptr<Backend> op;
    Backend graph{CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR}, engine{CUDNN_BACKEND_ENGINE_DESCRIPTOR};
    Backend config{CUDNN_BACKEND_ENGINECFG_DESCRIPTOR}, plan{CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR};
  };
  static cudnnBackendDescriptorType_t op_type(Kind kind) {
    return kind == Kind::kForward        ? CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR
           : kind == Kind::kBackwardData ? CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
                                         : CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
  }
  // Attribute names of alpha, beta, conv, x, w, y for each kind.
  static std::vector<cudnnBackendAttributeName_t> op_attributes(Kind kind) {
    if (kind == Kind::kForward) {
      return {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
              CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y};
    }
    if (kind == Kind::kBackwardData) {
      return {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
              CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY};
    }
    return {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
            CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY};
  }
  void build_graph(Graph& g, Kind kind, const Case& cs, cudnnDataType_t type, double alpha, float beta) {
    const int x_dims[4] = {cs.n, cs.c, cs.h, cs.w}, w_dims[4] = {cs.k, cs.cg(), cs.r, cs.s};
    const int y_dims[4] = {cs.n, cs.k, cs.p(), cs.q()};
    backend_tensor(g.x, kUidX, type, x_dims, cs.nhwc);
    backend_tensor(g.w, kUidW, type, w_dims, cs.nhwc);
    backend_tensor(g.y, kUidY, type, y_dims, cs.nhwc);
    ASSERT_EQ(g.conv.set_one(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.conv.set_one(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, cs.mode),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.conv.set_one(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, std::int64_t{2}),
              CUDNN_STATUS_SUCCESS);
    const std::vector<std::int64_t> dilations{cs.dil_h, cs.dil_w}, strides{cs.stride_h, cs.stride_w},
        pads{cs.pad_h, cs.pad_w};
    ASSERT_EQ(g.conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, dilations), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, strides), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, pads), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, pads), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.conv.finalize(), CUDNN_STATUS_SUCCESS);

    g.op = std::make_unique<Backend>(op_type(kind));
    const std::vector<cudnnBackendAttributeName_t> names = op_attributes(kind);
    ASSERT_EQ(g.op->set_one(names[0], CUDNN_TYPE_DOUBLE, alpha), CUDNN_STATUS_SUCCESS);  // frontend: double or float
    ASSERT_EQ(g.op->set_one(names[1], CUDNN_TYPE_FLOAT, beta), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.op->set_descriptor(names[2], g.conv), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.op->set_descriptor(names[3], g.x), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.op->set_descriptor(names[4], g.w), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.op->set_descriptor(names[5], g.y), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.op->finalize(), CUDNN_STATUS_SUCCESS);

    cudnnBackendDescriptor_t ops[1] = {*g.op};
    ASSERT_EQ(cudnnBackendSetAttribute(g.graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, ops),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.graph.set_one(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, handle_), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.graph.finalize(), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.engine.set_descriptor(CUDNN_ATTR_ENGINE_OPERATION_GRAPH, g.graph), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.engine.set_one(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, std::int64_t{0}), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.engine.finalize(), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.config.set_descriptor(CUDNN_ATTR_ENGINECFG_ENGINE, g.engine), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.config.finalize(), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.plan.set_one(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, handle_), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, g.config), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(g.plan.finalize(), CUDNN_STATUS_SUCCESS);
  }
  cudnnStatus_t execute(const Graph& g, void* x, void* w, void* y, void* workspace) {
    Backend pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    EXPECT_EQ(pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, std::vector<std::int64_t>{kUidX, kUidW, kUidY}),
              CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, std::vector<void*>{x, w, y}),
              CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(pack.set_one(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, workspace), CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(pack.finalize(), CUDNN_STATUS_SUCCESS);
    return cudnnBackendExecute(handle_, g.plan, pack);
  }

  cudnnHandle_t handle_ = nullptr;
  CUstream stream_ = nullptr;
  std::vector<CUdeviceptr> allocations_;
};

// The shapes every convolution runs on: padding, stride, dilation, groups,
// both modes, both layouts, asymmetric images and filters.
const Case kCases[] = {
    {2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, false},
    {2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, CUDNN_CONVOLUTION, false},
    {1, 4, 9, 8, 6, 3, 2, 2, 0, 2, 3, 1, 1, 2, CUDNN_CROSS_CORRELATION, true},
    {2, 6, 8, 9, 6, 2, 3, 1, 2, 1, 2, 2, 1, 3, CUDNN_CONVOLUTION, true},
    {1, 2, 10, 10, 3, 3, 3, 0, 3, 3, 1, 2, 3, 1, CUDNN_CROSS_CORRELATION, false},
};

std::string describe_case(const Case& cs) {
  char text[200];
  std::snprintf(text, sizeof text, "n%d c%d %dx%d k%d %dx%d pad %d,%d stride %d,%d dil %d,%d groups %d %s %s", cs.n,
                cs.c, cs.h, cs.w, cs.k, cs.r, cs.s, cs.pad_h, cs.pad_w, cs.stride_h, cs.stride_w, cs.dil_h, cs.dil_w,
                cs.groups, cs.mode == CUDNN_CONVOLUTION ? "convolution" : "cross-correlation", cs.nhwc ? "NHWC" : "NCHW");
  return text;
}

// ---- the arithmetic, legacy API ----

TEST_F(Cudnn, ForwardMatchesTheReference) {
  for (const Case& cs : kCases) {
    SCOPED_TRACE(describe_case(cs));
    const Tensor x = random_tensor(cs.n, cs.c, cs.h, cs.w, 1), w = random_tensor(cs.k, cs.cg(), cs.r, cs.s, 2);
    const Tensor y0 = zeros(cs.n, cs.k, cs.p(), cs.q());
    void* dx = upload(x, CUDNN_DATA_FLOAT, cs.nhwc);
    void* dw = upload(w, CUDNN_DATA_FLOAT, cs.nhwc);
    void* dy = upload(y0, CUDNN_DATA_FLOAT, cs.nhwc);
    ASSERT_EQ(legacy(Kind::kForward, cs, CUDNN_DATA_FLOAT, 1.0f, 0.0f, dx, dw, dy), CUDNN_STATUS_SUCCESS);
    wait();
    expect_equal(download(dy, y0, CUDNN_DATA_FLOAT, cs.nhwc), reference_forward(cs, x, w), "y");
  }
}

TEST_F(Cudnn, BackwardDataMatchesTheReference) {
  for (const Case& cs : kCases) {
    SCOPED_TRACE(describe_case(cs));
    const Tensor dy = random_tensor(cs.n, cs.k, cs.p(), cs.q(), 3), w = random_tensor(cs.k, cs.cg(), cs.r, cs.s, 4);
    const Tensor dx0 = zeros(cs.n, cs.c, cs.h, cs.w);
    void* ddx = upload(dx0, CUDNN_DATA_FLOAT, cs.nhwc);
    void* dw = upload(w, CUDNN_DATA_FLOAT, cs.nhwc);
    void* ddy = upload(dy, CUDNN_DATA_FLOAT, cs.nhwc);
    ASSERT_EQ(legacy(Kind::kBackwardData, cs, CUDNN_DATA_FLOAT, 1.0f, 0.0f, ddx, dw, ddy), CUDNN_STATUS_SUCCESS);
    wait();
    expect_equal(download(ddx, dx0, CUDNN_DATA_FLOAT, cs.nhwc), reference_backward_data(cs, dy, w), "dx");
  }
}

TEST_F(Cudnn, BackwardFilterMatchesTheReference) {
  for (const Case& cs : kCases) {
    SCOPED_TRACE(describe_case(cs));
    const Tensor x = random_tensor(cs.n, cs.c, cs.h, cs.w, 5), dy = random_tensor(cs.n, cs.k, cs.p(), cs.q(), 6);
    const Tensor dw0 = zeros(cs.k, cs.cg(), cs.r, cs.s);
    void* dx = upload(x, CUDNN_DATA_FLOAT, cs.nhwc);
    void* ddw = upload(dw0, CUDNN_DATA_FLOAT, cs.nhwc);
    void* ddy = upload(dy, CUDNN_DATA_FLOAT, cs.nhwc);
    ASSERT_EQ(legacy(Kind::kBackwardFilter, cs, CUDNN_DATA_FLOAT, 1.0f, 0.0f, dx, ddw, ddy), CUDNN_STATUS_SUCCESS);
    wait();
    expect_equal(download(ddw, dw0, CUDNN_DATA_FLOAT, cs.nhwc), reference_backward_filter(cs, x, dy), "dw");
  }
}

TEST_F(Cudnn, BetaZeroNeverReadsTheOutputAndBetaOneAccumulates) {
  const Case& cs = kCases[2];
  const Tensor x = random_tensor(cs.n, cs.c, cs.h, cs.w, 7), w = random_tensor(cs.k, cs.cg(), cs.r, cs.s, 8);
  Tensor nan = zeros(cs.n, cs.k, cs.p(), cs.q());
  for (float& v : nan.values) v = std::numeric_limits<float>::quiet_NaN();
  void* dx = upload(x, CUDNN_DATA_FLOAT, cs.nhwc);
  void* dw = upload(w, CUDNN_DATA_FLOAT, cs.nhwc);
  void* dy = upload(nan, CUDNN_DATA_FLOAT, cs.nhwc);
  const Tensor expected = reference_forward(cs, x, w);
  ASSERT_EQ(legacy(Kind::kForward, cs, CUDNN_DATA_FLOAT, 1.0f, 0.0f, dx, dw, dy), CUDNN_STATUS_SUCCESS);
  wait();
  expect_equal(download(dy, nan, CUDNN_DATA_FLOAT, cs.nhwc), expected, "beta 0 over NaN");

  // beta 1, alpha 0.5: y = 0.5 conv + y.
  ASSERT_EQ(legacy(Kind::kForward, cs, CUDNN_DATA_FLOAT, 0.5f, 1.0f, dx, dw, dy), CUDNN_STATUS_SUCCESS);
  wait();
  Tensor accumulated = expected;
  for (float& v : accumulated.values) v = 0.5f * v + v;
  expect_equal(download(dy, nan, CUDNN_DATA_FLOAT, cs.nhwc), accumulated, "beta 1");

  // Backward filter accumulates the same way (how frameworks sum gradients).
  const Tensor dyv = random_tensor(cs.n, cs.k, cs.p(), cs.q(), 9);
  void* ddy = upload(dyv, CUDNN_DATA_FLOAT, cs.nhwc);
  Tensor dw_nan = zeros(cs.k, cs.cg(), cs.r, cs.s);
  for (float& v : dw_nan.values) v = std::numeric_limits<float>::quiet_NaN();
  void* ddw = upload(dw_nan, CUDNN_DATA_FLOAT, cs.nhwc);
  ASSERT_EQ(legacy(Kind::kBackwardFilter, cs, CUDNN_DATA_FLOAT, 1.0f, 0.0f, dx, ddw, ddy), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(legacy(Kind::kBackwardFilter, cs, CUDNN_DATA_FLOAT, 1.0f, 1.0f, dx, ddw, ddy), CUDNN_STATUS_SUCCESS);
  wait();
  Tensor twice = reference_backward_filter(cs, x, dyv);
  for (float& v : twice.values) v *= 2.0f;
  expect_equal(download(ddw, dw_nan, CUDNN_DATA_FLOAT, cs.nhwc), twice, "dw accumulated");
}

TEST_F(Cudnn, HalfAndBfloat16RoundOnceToNearestEven) {
  // 0.25-valued inputs whose sums (up to 27 terms of 2.x) need more bits than
  // bf16 and fp16 keep: the output must be the fp32 sum rounded once.
  const Case cs{1, 3, 6, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, false};
  Tensor x = random_tensor(cs.n, cs.c, cs.h, cs.w, 11), w = random_tensor(cs.k, cs.cg(), cs.r, cs.s, 12);
  // Inputs with more mantissa bits than bf16 keeps; each type first rounds
  // them (below) so the library and the reference start from the same values.
  for (float& v : x.values) v = v * 1.0078125f + 3.0f;
  for (cudnnDataType_t type : {CUDNN_DATA_HALF, CUDNN_DATA_BFLOAT16}) {
    SCOPED_TRACE(type == CUDNN_DATA_HALF ? "fp16" : "bf16");
    Tensor xr = x;
    for (float& v : xr.values) v = round_to(type, v);
    const Tensor y0 = zeros(cs.n, cs.k, cs.p(), cs.q());
    void* dx = upload(xr, type, false);
    void* dw = upload(w, type, false);
    void* dy = upload(y0, type, false);
    ASSERT_EQ(legacy(Kind::kForward, cs, type, 1.0f, 0.0f, dx, dw, dy), CUDNN_STATUS_SUCCESS);
    wait();
    Tensor expected = reference_forward(cs, xr, w);
    int rounded = 0;
    for (float& v : expected.values) {
      const float r = round_to(type, v);
      rounded += r != v ? 1 : 0;
      v = r;
    }
    EXPECT_GT(rounded, 0) << "the case does not exercise rounding";
    expect_equal(download(dy, y0, type, false), expected, "y");
  }
}

TEST_F(Cudnn, BiasAddAndBiasGradient) {
  const int n = 2, k = 3, h = 4, w = 5;
  const Tensor y = random_tensor(n, k, h, w, 13), bias = random_tensor(1, k, 1, 1, 14);
  for (bool nhwc : {false, true}) {
    SCOPED_TRACE(nhwc ? "NHWC" : "NCHW");
    void* dy = upload(y, CUDNN_DATA_FLOAT, nhwc);
    void* db = upload(bias, CUDNN_DATA_FLOAT, false);
    cudnnTensorDescriptor_t yd = nullptr, bd = nullptr;
    ASSERT_EQ(cudnnCreateTensorDescriptor(&yd), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnCreateTensorDescriptor(&bd), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetTensor4dDescriptor(yd, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, h, w),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetTensor4dDescriptor(bd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, k, 1, 1), CUDNN_STATUS_SUCCESS);
    // y = 1 * bias + 1 * y, bias broadcast over n, h, w.
    const float one = 1.0f, zero = 0.0f, two = 2.0f;
    ASSERT_EQ(cudnnAddTensor(handle_, &one, bd, db, &one, yd, dy), CUDNN_STATUS_SUCCESS);
    wait();
    Tensor added = y;
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < k; ++c)
        for (int r = 0; r < h; ++r)
          for (int s = 0; s < w; ++s) added.at(i, c, r, s) += bias.at(0, c, 0, 0);
    expect_equal(download(dy, y, CUDNN_DATA_FLOAT, nhwc), added, "y + bias");
    // db = 2 * sum over n, h, w of y (beta 0: the old bias is not read).
    ASSERT_EQ(cudnnConvolutionBackwardBias(handle_, &two, yd, dy, &zero, bd, db), CUDNN_STATUS_SUCCESS);
    wait();
    Tensor sums = zeros(1, k, 1, 1);
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < k; ++c)
        for (int r = 0; r < h; ++r)
          for (int s = 0; s < w; ++s) sums.at(0, c, 0, 0) += added.at(i, c, r, s);
    for (float& v : sums.values) v *= 2.0f;
    expect_equal(download(db, sums, CUDNN_DATA_FLOAT, false), sums, "bias gradient");
    cudnnDestroyTensorDescriptor(yd);
    cudnnDestroyTensorDescriptor(bd);
  }
}

// ---- the backend API ----

TEST_F(Cudnn, BackendMatchesTheLegacyApiBitForBit) {
  for (const Case& cs : kCases) {
    SCOPED_TRACE(describe_case(cs));
    for (Kind kind : {Kind::kForward, Kind::kBackwardData, Kind::kBackwardFilter}) {
      SCOPED_TRACE(static_cast<int>(kind));
      const cudnnDataType_t type = CUDNN_DATA_BFLOAT16;  // rounding makes any difference in order visible
      const Tensor x = random_tensor(cs.n, cs.c, cs.h, cs.w, 21), w = random_tensor(cs.k, cs.cg(), cs.r, cs.s, 22);
      const Tensor y = random_tensor(cs.n, cs.k, cs.p(), cs.q(), 23);
      void* lx = upload(x, type, cs.nhwc);
      void* lw = upload(w, type, cs.nhwc);
      void* ly = upload(y, type, cs.nhwc);
      void* bx = upload(x, type, cs.nhwc);
      void* bw = upload(w, type, cs.nhwc);
      void* by = upload(y, type, cs.nhwc);
      ASSERT_EQ(legacy(kind, cs, type, 0.75f, 0.5f, lx, lw, ly), CUDNN_STATUS_SUCCESS);
      Graph g;
      build_graph(g, kind, cs, type, 0.75, 0.5f);
      const std::vector<std::int64_t> workspace =
          g.plan.get<std::int64_t>(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64);
      ASSERT_EQ(workspace.size(), 1u);
      ASSERT_GT(workspace[0], 0);
      auto* scratch = static_cast<unsigned char*>(device(static_cast<std::size_t>(workspace[0])));
      std::memset(scratch, 0, static_cast<std::size_t>(workspace[0]));
      ASSERT_EQ(execute(g, bx, bw, by, scratch), CUDNN_STATUS_SUCCESS);
      wait();
      EXPECT_EQ(std::memcmp(lx, bx, x.size() * 2), 0) << "x / dx differ";
      EXPECT_EQ(std::memcmp(lw, bw, w.size() * 2), 0) << "w / dw differ";
      EXPECT_EQ(std::memcmp(ly, by, y.size() * 2), 0) << "y / dy differ";
      EXPECT_NE(scratch[0], 0) << "the workspace was not written";
      EXPECT_NE(scratch[workspace[0] - 1], 0) << "the workspace's end was not written";
    }
  }
}

TEST_F(Cudnn, BackendReadsBackThroughTheWholeChain) {
  const Case& cs = kCases[3];  // NHWC, groups, convolution mode
  Graph g;
  build_graph(g, Kind::kBackwardData, cs, CUDNN_DATA_HALF, 0.5, 0.25f);

  Backend config(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR), engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  Backend graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  std::int64_t count = -1;
  ASSERT_EQ(cudnnBackendGetAttribute(g.plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &count, config.address()),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(g.plan.get<cudnnHandle_t>(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE),
            std::vector<cudnnHandle_t>{handle_});
  EXPECT_EQ(config.get<std::int64_t>(CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64),
            g.plan.get<std::int64_t>(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64));
  ASSERT_EQ(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                                     engine.address()),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(engine.get<std::int64_t>(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64), std::vector<std::int64_t>{0});
  ASSERT_EQ(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &count, graph.address()),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(graph.get<cudnnHandle_t>(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE),
            std::vector<cudnnHandle_t>{handle_});
  EXPECT_EQ(graph.get<std::int64_t>(CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64),
            std::vector<std::int64_t>{1});
  ASSERT_EQ(cudnnBackendGetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                     nullptr),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(count, 1);
  // The caller must guess the operation's type: a wrong one is BAD_PARAM.
  Backend wrong(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  EXPECT_EQ(cudnnBackendGetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                                     wrong.address()),
            CUDNN_STATUS_BAD_PARAM);
  Backend op(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR);
  ASSERT_EQ(cudnnBackendGetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                                     op.address()),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(op.get<double>(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_DOUBLE),
            std::vector<double>{0.5});
  EXPECT_EQ(op.get<float>(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT), std::vector<float>{0.25f});

  struct Expected {
    cudnnBackendAttributeName_t name;
    std::int64_t uid;
    int dims[4];
  };
  const Expected tensors[] = {
      {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, kUidX, {cs.n, cs.c, cs.h, cs.w}},
      {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, kUidW, {cs.k, cs.cg(), cs.r, cs.s}},
      {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, kUidY, {cs.n, cs.k, cs.p(), cs.q()}},
  };
  for (const Expected& e : tensors) {
    Backend t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    ASSERT_EQ(cudnnBackendGetAttribute(op, e.name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, t.address()),
              CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(t.get<std::int64_t>(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64), std::vector<std::int64_t>{e.uid});
    EXPECT_EQ(t.get<cudnnDataType_t>(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE),
              std::vector<cudnnDataType_t>{CUDNN_DATA_HALF});
    EXPECT_EQ(t.get<std::int64_t>(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64),
              (std::vector<std::int64_t>{e.dims[0], e.dims[1], e.dims[2], e.dims[3]}));
    const std::vector<int> st = strides_of(e.dims, true);
    EXPECT_EQ(t.get<std::int64_t>(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64),
              (std::vector<std::int64_t>{st[0], st[1], st[2], st[3]}));
    EXPECT_EQ(t.get<std::int64_t>(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64), std::vector<std::int64_t>{16});
    bool is_virtual = true;
    ASSERT_EQ(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &count, &is_virtual),
              CUDNN_STATUS_SUCCESS);
    EXPECT_FALSE(is_virtual);
  }
  Backend conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  ASSERT_EQ(cudnnBackendGetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, conv.address()),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(conv.get<cudnnConvolutionMode_t>(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE),
            std::vector<cudnnConvolutionMode_t>{cs.mode});
  EXPECT_EQ(conv.get<std::int64_t>(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64),
            (std::vector<std::int64_t>{cs.stride_h, cs.stride_w}));
  EXPECT_EQ(conv.get<std::int64_t>(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64),
            (std::vector<std::int64_t>{cs.dil_h, cs.dil_w}));
  EXPECT_EQ(conv.get<std::int64_t>(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64),
            (std::vector<std::int64_t>{cs.pad_h, cs.pad_w}));
  EXPECT_EQ(conv.get<cudnnDataType_t>(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE),
            std::vector<cudnnDataType_t>{CUDNN_DATA_FLOAT});
  // A wrong attribute type is BAD_PARAM.
  EXPECT_EQ(cudnnBackendGetAttribute(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT32, 2, &count, nullptr),
            CUDNN_STATUS_BAD_PARAM_NULL_POINTER);
  std::int32_t small[2];
  EXPECT_EQ(cudnnBackendGetAttribute(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT32, 2, &count, small),
            CUDNN_STATUS_BAD_PARAM);
}

TEST_F(Cudnn, BackendFinalizeChecksAsCudnnDoes) {
  Backend t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  ASSERT_EQ(t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, std::vector<std::int64_t>{1, 2, 3, 4}),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(t.finalize(), CUDNN_STATUS_BAD_PARAM) << "no strides, uid, type or alignment";
  std::int64_t count = 0;
  EXPECT_EQ(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 0, &count, nullptr),
            CUDNN_STATUS_NOT_INITIALIZED)
      << "read before finalize";
  ASSERT_EQ(t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, std::vector<std::int64_t>{24, 12, 4, 1}),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(t.set_one(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, std::int64_t{1}), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(t.set_one(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(t.finalize(), CUDNN_STATUS_BAD_PARAM) << "no byte alignment";
  ASSERT_EQ(t.set_one(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, std::int64_t{4}), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(t.finalize(), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(t.set_one(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, std::int64_t{2}), CUDNN_STATUS_NOT_INITIALIZED)
      << "a finalized descriptor changed";
  EXPECT_EQ(t.set_one(CUDNN_ATTR_TENSOR_VECTOR_COUNT, CUDNN_TYPE_INT64, std::int64_t{4}), CUDNN_STATUS_NOT_INITIALIZED);

  Backend u(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  EXPECT_EQ(u.set_one(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT32, 1), CUDNN_STATUS_BAD_PARAM) << "wrong type";
  EXPECT_EQ(u.set_one(CUDNN_ATTR_TENSOR_VECTOR_COUNT, CUDNN_TYPE_INT64, std::int64_t{4}), CUDNN_STATUS_NOT_SUPPORTED);
  cudnnBackendDescriptor_t unsupported = nullptr;
  EXPECT_EQ(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, &unsupported),
            CUDNN_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &unsupported),
            CUDNN_STATUS_NOT_SUPPORTED);

  // An operation whose y does not have the output's dims.
  const Case& cs = kCases[0];
  Graph g;
  build_graph(g, Kind::kForward, cs, CUDNN_DATA_FLOAT, 1.0, 0.0f);
  Backend bad_y(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const int wrong_dims[4] = {cs.n, cs.k, cs.p() + 1, cs.q()};
  backend_tensor(bad_y, kUidY, CUDNN_DATA_FLOAT, wrong_dims, false);
  Backend op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  ASSERT_EQ(op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, g.x), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, g.w), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, g.conv), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(op.finalize(), CUDNN_STATUS_BAD_PARAM) << "no y";
  ASSERT_EQ(op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, bad_y), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(op.finalize(), CUDNN_STATUS_BAD_PARAM) << "y of the wrong dims";
  EXPECT_EQ(op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, g.conv), CUDNN_STATUS_BAD_PARAM)
      << "a convolution descriptor as a tensor";
  Backend unfinished(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  EXPECT_EQ(op.set_descriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, unfinished),
            CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED);

  Backend engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  ASSERT_EQ(engine.set_descriptor(CUDNN_ATTR_ENGINE_OPERATION_GRAPH, g.graph), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(engine.set_one(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, std::int64_t{1}), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(engine.finalize(), CUDNN_STATUS_BAD_PARAM) << "engine 1 of 1";
  Backend plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  ASSERT_EQ(plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, g.config), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(plan.finalize(), CUDNN_STATUS_BAD_PARAM) << "no handle";
}

// cudnn-frontend's usual route (and PyTorch's): heuristics give engine
// configs, the plan is built from one of them.
TEST_F(Cudnn, HeuristicsOfferEngineZeroAndItsPlanRuns) {
  const Case& cs = kCases[2];
  Graph g;
  build_graph(g, Kind::kForward, cs, CUDNN_DATA_FLOAT, 1.0, 0.0f);
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_INSTANT, CUDNN_HEUR_MODE_FALLBACK}) {
    SCOPED_TRACE(static_cast<int>(mode));
    Backend heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    EXPECT_EQ(heuristics.finalize(), CUDNN_STATUS_BAD_PARAM) << "no graph, no mode";
    ASSERT_EQ(heuristics.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, g.graph), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(heuristics.set_one(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, mode), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(heuristics.finalize(), CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(heuristics.get<cudnnBackendHeurMode_t>(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE),
              std::vector<cudnnBackendHeurMode_t>{mode});
    std::int64_t count = -1;
    ASSERT_EQ(cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                       &count, nullptr),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(count, 1);
    Backend config(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR), engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    ASSERT_EQ(cudnnBackendGetAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                       &count, config.address()),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                                       engine.address()),
              CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(engine.get<std::int64_t>(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64), std::vector<std::int64_t>{0});
    // What cudnn-frontend filters on: no notes, no knobs.
    EXPECT_TRUE(engine.get<cudnnBackendNumericalNote_t>(CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE)
                    .empty());
    EXPECT_TRUE(
        engine.get<cudnnBackendBehaviorNote_t>(CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE).empty());
    EXPECT_EQ(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                       &count, nullptr),
              CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(count, 0);

    Backend plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    ASSERT_EQ(plan.set_one(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, handle_), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(plan.finalize(), CUDNN_STATUS_SUCCESS);
    const Tensor x = random_tensor(cs.n, cs.c, cs.h, cs.w, 51), w = random_tensor(cs.k, cs.cg(), cs.r, cs.s, 52);
    const Tensor y0 = zeros(cs.n, cs.k, cs.p(), cs.q());
    void* dx = upload(x, CUDNN_DATA_FLOAT, cs.nhwc);
    void* dw = upload(w, CUDNN_DATA_FLOAT, cs.nhwc);
    void* dy = upload(y0, CUDNN_DATA_FLOAT, cs.nhwc);
    Backend pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    ASSERT_EQ(pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, std::vector<std::int64_t>{kUidY, kUidX, kUidW}),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, std::vector<void*>{dy, dx, dw}),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(pack.set_one(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, device(4096)), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(pack.finalize(), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnBackendExecute(handle_, plan, pack), CUDNN_STATUS_SUCCESS);
    wait();
    expect_equal(download(dy, y0, CUDNN_DATA_FLOAT, cs.nhwc), reference_forward(cs, x, w), "y");
  }
}

// ---- validation ----

TEST_F(Cudnn, InvalidArgumentsLaunchAndWriteNothing) {
  const Case& cs = kCases[0];
  const Tensor x = random_tensor(cs.n, cs.c, cs.h, cs.w, 31), w = random_tensor(cs.k, cs.cg(), cs.r, cs.s, 32);
  const Tensor y = random_tensor(cs.n, cs.k, cs.p(), cs.q(), 33);
  void* dx = upload(x, CUDNN_DATA_FLOAT, false);
  void* dw = upload(w, CUDNN_DATA_FLOAT, false);
  void* dy = upload(y, CUDNN_DATA_FLOAT, false);
  Descriptors d;
  describe(cs, CUDNN_DATA_FLOAT, d);
  Graph g;
  build_graph(g, Kind::kForward, cs, CUDNN_DATA_FLOAT, 1.0, 0.0f);
  void* workspace = device(4096);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  const long long launched = kernels_launched();
  const unsigned long long clock = vgpusimHostTimeNs();
  const float one = 1.0f, zero = 0.0f;
  const auto algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;

  EXPECT_EQ(cudnnConvolutionForward(handle_, &one, d.x, dx, d.w, dw, d.conv, algo, workspace, 4095, &zero, d.y, dy),
            CUDNN_STATUS_BAD_PARAM)
      << "workspace too small";
  EXPECT_EQ(cudnnConvolutionForward(handle_, nullptr, d.x, dx, d.w, dw, d.conv, algo, workspace, 4096, &zero, d.y, dy),
            CUDNN_STATUS_BAD_PARAM)
      << "no alpha";
  EXPECT_EQ(cudnnConvolutionForward(handle_, &one, d.x, dx, d.w, dw, d.conv, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                    workspace, 4096, &zero, d.y, dy),
            CUDNN_STATUS_BAD_PARAM)
      << "no such algorithm";
  // y's dims are not the output's.
  cudnnTensorDescriptor_t wrong = nullptr;
  ASSERT_EQ(cudnnCreateTensorDescriptor(&wrong), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnSetTensor4dDescriptor(wrong, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, cs.n, cs.k, cs.p(), cs.q() - 1),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudnnConvolutionForward(handle_, &one, d.x, dx, d.w, dw, d.conv, algo, workspace, 4096, &zero, wrong, dy),
            CUDNN_STATUS_BAD_PARAM);
  // Mixed types, and a group count that does not divide the channels.
  ASSERT_EQ(cudnnSetTensor4dDescriptor(wrong, CUDNN_TENSOR_NCHW, CUDNN_DATA_HALF, cs.n, cs.k, cs.p(), cs.q()),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudnnConvolutionForward(handle_, &one, d.x, dx, d.w, dw, d.conv, algo, workspace, 4096, &zero, wrong, dy),
            CUDNN_STATUS_BAD_PARAM);
  ASSERT_EQ(cudnnSetConvolutionGroupCount(d.conv, 2), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudnnConvolutionForward(handle_, &one, d.x, dx, d.w, dw, d.conv, algo, workspace, 4096, &zero, d.y, dy),
            CUDNN_STATUS_BAD_PARAM);
  ASSERT_EQ(cudnnSetConvolutionGroupCount(d.conv, 1), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudnnSetTensor4dDescriptor(wrong, CUDNN_TENSOR_NCHW, CUDNN_DATA_DOUBLE, 1, 1, 1, 1),
            CUDNN_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cudnnAddTensor(handle_, &one, d.y, dy, &one, d.x, dx), CUDNN_STATUS_BAD_PARAM) << "shapes do not broadcast";
  cudnnDestroyTensorDescriptor(wrong);

  // Backend: a pack without y's pointer, or without a workspace.
  Backend pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  ASSERT_EQ(pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, std::vector<std::int64_t>{kUidX, kUidW}),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, std::vector<void*>{dx, dw}),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(pack.set_one(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, workspace), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(pack.finalize(), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudnnBackendExecute(handle_, g.plan, pack), CUDNN_STATUS_BAD_PARAM);
  EXPECT_EQ(execute(g, dx, dw, dy, nullptr), CUDNN_STATUS_BAD_PARAM) << "no workspace";
  Backend unfinished(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  EXPECT_EQ(cudnnBackendExecute(handle_, g.plan, unfinished), CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED);

  // A destroyed handle.
  cudnnHandle_t gone = nullptr;
  ASSERT_EQ(cudnnCreate(&gone), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnDestroy(gone), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(cudnnConvolutionForward(gone, &one, d.x, dx, d.w, dw, d.conv, algo, workspace, 4096, &zero, d.y, dy),
            CUDNN_STATUS_BAD_PARAM);

  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(kernels_launched(), launched) << "a refused call launched a kernel";
  EXPECT_EQ(vgpusimHostTimeNs(), clock) << "the simulated clock moved";
  expect_equal(download(dx, x, CUDNN_DATA_FLOAT, false), x, "x");
  expect_equal(download(dw, w, CUDNN_DATA_FLOAT, false), w, "w");
  expect_equal(download(dy, y, CUDNN_DATA_FLOAT, false), y, "y");
}

TEST_F(Cudnn, DescriptorsReadBack) {
  Descriptors d;
  const Case cs{2, 6, 9, 8, 4, 3, 2, 1, 2, 2, 1, 1, 2, 2, CUDNN_CONVOLUTION, true};
  describe(cs, CUDNN_DATA_BFLOAT16, d);
  cudnnDataType_t type;
  int n, c, h, w, ns, cst, hs, ws;
  ASSERT_EQ(cudnnGetTensor4dDescriptor(d.x, &type, &n, &c, &h, &w, &ns, &cst, &hs, &ws), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(type, CUDNN_DATA_BFLOAT16);
  EXPECT_EQ((std::vector<int>{n, c, h, w, ns, cst, hs, ws}), (std::vector<int>{2, 6, 9, 8, 432, 1, 48, 6}));
  int nb = 0, dims[8], strides[8];
  ASSERT_EQ(cudnnGetTensorNdDescriptor(d.y, 8, &type, &nb, dims, strides), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(nb, 4);
  EXPECT_EQ(dims[1], 4);
  EXPECT_EQ(strides[1], 1);
  cudnnTensorFormat_t format;
  ASSERT_EQ(cudnnGetFilter4dDescriptor(d.w, &type, &format, &n, &c, &h, &w), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ((std::vector<int>{format, n, c, h, w}), (std::vector<int>{CUDNN_TENSOR_NHWC, 4, 3, 3, 2}));
  ASSERT_EQ(cudnnGetFilterNdDescriptor(d.w, 8, &type, &format, &nb, dims), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(nb, 4);
  int ph, pw, u, v, dh, dw2;
  cudnnConvolutionMode_t mode;
  ASSERT_EQ(cudnnGetConvolution2dDescriptor(d.conv, &ph, &pw, &u, &v, &dh, &dw2, &mode, &type), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ((std::vector<int>{ph, pw, u, v, dh, dw2, mode, type}),
            (std::vector<int>{1, 2, 2, 1, 1, 2, CUDNN_CONVOLUTION, CUDNN_DATA_FLOAT}));
  int groups = 0;
  ASSERT_EQ(cudnnGetConvolutionGroupCount(d.conv, &groups), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(groups, 2);
  int out[4];
  ASSERT_EQ(cudnnGetConvolutionNdForwardOutputDim(d.conv, d.x, d.w, 4, out), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ((std::vector<int>{out[0], out[1], out[2], out[3]}), (std::vector<int>{2, 4, cs.p(), cs.q()}));
  cudnnConvolutionFwdAlgoPerf_t perf[2];
  int returned = 0;
  ASSERT_EQ(cudnnGetConvolutionForwardAlgorithm_v7(handle_, d.x, d.w, d.conv, d.y, 2, &returned, perf),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(returned, 1);
  EXPECT_EQ(perf[0].status, CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(perf[0].memory, 4096u);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudnnGetStream(handle_, &stream), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(stream, stream_);
  EXPECT_EQ(cudnnGetVersion(), static_cast<std::size_t>(CUDNN_VERSION));
  EXPECT_STREQ(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM");
}

// ---- the timeline ----

TEST_F(Cudnn, ConvolutionsRunOnTheHandlesStreamForTheDocumentedDuration) {
  // The clock's mechanics, exactly: the idle model charges no host time per call.
  ASSERT_EQ(vgpusimSetCostModel("idle"), CUDA_SUCCESS);

  static CUfunction one_ms = register_kernel("cudnn_test_1ms", idle_body, {}, 1'000'000);
  const Case cs{4, 16, 32, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, false};
  const Tensor x = random_tensor(cs.n, cs.c, cs.h, cs.w, 41), w = random_tensor(cs.k, cs.cg(), cs.r, cs.s, 42);
  Tensor y = zeros(cs.n, cs.k, cs.p(), cs.q());
  for (cudnnDataType_t type : {CUDNN_DATA_FLOAT, CUDNN_DATA_HALF}) {
    SCOPED_TRACE(type == CUDNN_DATA_FLOAT ? "fp32" : "fp16");
    void* dx = upload(x, type, false);
    void* dw = upload(w, type, false);
    void* dy = upload(y, type, false);
    put(dy, type, 0, 1234.0f);
    ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    const unsigned long long before = vgpusimHostTimeNs();
    ASSERT_EQ(launch(one_ms, stream_, {}), CUDA_SUCCESS);
    ASSERT_EQ(legacy(Kind::kForward, cs, type, 1.0f, 0.0f, dx, dw, dy), CUDNN_STATUS_SUCCESS);
    EXPECT_EQ(get(dy, type, 0), 1234.0f) << "ran before its stream reached it";
    wait();
    EXPECT_NE(get(dy, type, 0), 1234.0f) << "synchronising the handle's stream did not run it";
    const double outputs = 4.0 * 32 * 32 * 32, terms = 16.0 * 9;
    const double expected = documented_conv_ns(outputs, terms, type == CUDNN_DATA_FLOAT ? 67e12 : 989e12);
    EXPECT_NEAR(static_cast<double>(vgpusimHostTimeNs() - before), 1e6 + expected, 2.0);
  }
  // The model itself, worked by hand: 2·131072·144 flops at 0.65·67 TFLOP/s.
  EXPECT_NEAR(documented_conv_ns(131072.0, 144.0, 67e12), 4000.0 + 866.79, 0.01);
}

}  // namespace

int main(int argc, char** argv) {
  g_self = argv[0];
  setenv("VGPUSIM_DEVICE_MEMORY", "1GiB", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
