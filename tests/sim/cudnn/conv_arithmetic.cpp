// The convolutions and tensor operations on the host. Each output element is
// a float sum over its terms in one fixed order, scaled and blended with the
// prior output, and rounded once to the element type: results a test can
// predict exactly, identical whichever API launched the kernel.
#include <cstring>

#include "conv_operation.h"
#include "element_types.h"

namespace vgpusim_dnn {
namespace {

using vgpusim_blas::load_element;
using vgpusim_blas::store_element;

void* address(CUdeviceptr pointer) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(pointer)); }

std::int64_t offset(const std::int64_t (&strides)[4], std::int64_t n, std::int64_t c, std::int64_t h,
                    std::int64_t w) {
  return n * strides[0] + c * strides[1] + h * strides[2] + w * strides[3];
}

// The views every convolution shares.
struct ConvView {
  const ConvOperation& op;
  cudaDataType type;
  std::int64_t channels_per_group, filters_per_group;

  explicit ConvView(const ConvOperation& operation)
      : op(operation),
        type(static_cast<cudaDataType>(operation.data_type)),
        channels_per_group(operation.w_dims[1]),
        filters_per_group(operation.w_dims[0] / operation.groups) {}

  // The filter tap that filter element r (of R) applies at: CUDNN_CONVOLUTION
  // flips the filter, cross-correlation does not.
  std::int64_t tap(std::int64_t r, int axis) const {
    const std::int64_t extent = op.w_dims[2 + axis];
    return op.cross_correlation != 0 ? r : extent - 1 - r;
  }
  // Input row (axis 0) or column (axis 1) that output position `out` reads
  // through filter element r; may fall in the padding (outside the input).
  std::int64_t input_at(std::int64_t out, std::int64_t r, int axis) const {
    return out * op.filter_stride[axis] - op.pre_padding[axis] + tap(r, axis) * op.dilation[axis];
  }
  bool inside(std::int64_t at, int axis) const { return at >= 0 && at < op.x_dims[2 + axis]; }

  float x(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) const {
    return load_element(address(op.x), type, offset(op.x_strides, n, c, h, w));
  }
  float w(std::int64_t k, std::int64_t c, std::int64_t r, std::int64_t s) const {
    return load_element(address(op.w), type, offset(op.w_strides, k, c, r, s));
  }
  float y(std::int64_t n, std::int64_t k, std::int64_t p, std::int64_t q) const {
    return load_element(address(op.y), type, offset(op.y_strides, n, k, p, q));
  }

  // alpha * sum + beta * prior, the prior read only when beta != 0 (NaN or
  // garbage in an output that is overwritten never reaches the result).
  void store(CUdeviceptr base, std::int64_t at, float sum) const {
    float result = op.alpha * sum;
    if (op.beta != 0.0f) result += op.beta * load_element(address(base), type, at);
    store_element(address(base), type, at, result);
  }
};

void forward(const ConvView& v) {
  const ConvOperation& op = v.op;
  for (std::int64_t n = 0; n < op.y_dims[0]; ++n)
    for (std::int64_t k = 0; k < op.y_dims[1]; ++k) {
      const std::int64_t first_channel = k / v.filters_per_group * v.channels_per_group;
      for (std::int64_t p = 0; p < op.y_dims[2]; ++p)
        for (std::int64_t q = 0; q < op.y_dims[3]; ++q) {
          float sum = 0.0f;
          for (std::int64_t c = 0; c < v.channels_per_group; ++c)
            for (std::int64_t r = 0; r < op.w_dims[2]; ++r) {
              const std::int64_t h = v.input_at(p, r, 0);
              if (!v.inside(h, 0)) continue;
              for (std::int64_t s = 0; s < op.w_dims[3]; ++s) {
                const std::int64_t col = v.input_at(q, s, 1);
                if (!v.inside(col, 1)) continue;
                sum += v.x(n, first_channel + c, h, col) * v.w(k, c, r, s);
              }
            }
          v.store(op.y, offset(op.y_strides, n, k, p, q), sum);
        }
    }
}

// Output position along `axis` whose window reads input position `at` through
// filter element r, or -1 when none does (stride skips it, or out of range).
std::int64_t output_reading(const ConvView& v, std::int64_t at, std::int64_t r, int axis) {
  const std::int64_t shifted = at + v.op.pre_padding[axis] - v.tap(r, axis) * v.op.dilation[axis];
  if (shifted < 0 || shifted % v.op.filter_stride[axis] != 0) return -1;
  const std::int64_t out = shifted / v.op.filter_stride[axis];
  return out < v.op.y_dims[2 + axis] ? out : -1;
}

void backward_data(const ConvView& v) {
  const ConvOperation& op = v.op;
  for (std::int64_t n = 0; n < op.x_dims[0]; ++n)
    for (std::int64_t channel = 0; channel < op.x_dims[1]; ++channel) {
      const std::int64_t group = channel / v.channels_per_group, c = channel % v.channels_per_group;
      for (std::int64_t h = 0; h < op.x_dims[2]; ++h)
        for (std::int64_t col = 0; col < op.x_dims[3]; ++col) {
          float sum = 0.0f;
          for (std::int64_t kk = 0; kk < v.filters_per_group; ++kk) {
            const std::int64_t k = group * v.filters_per_group + kk;
            for (std::int64_t r = 0; r < op.w_dims[2]; ++r) {
              const std::int64_t p = output_reading(v, h, r, 0);
              if (p < 0) continue;
              for (std::int64_t s = 0; s < op.w_dims[3]; ++s) {
                const std::int64_t q = output_reading(v, col, s, 1);
                if (q < 0) continue;
                sum += v.y(n, k, p, q) * v.w(k, c, r, s);
              }
            }
          }
          v.store(op.x, offset(op.x_strides, n, channel, h, col), sum);
        }
    }
}

void backward_filter(const ConvView& v) {
  const ConvOperation& op = v.op;
  for (std::int64_t k = 0; k < op.w_dims[0]; ++k) {
    const std::int64_t first_channel = k / v.filters_per_group * v.channels_per_group;
    for (std::int64_t c = 0; c < op.w_dims[1]; ++c)
      for (std::int64_t r = 0; r < op.w_dims[2]; ++r)
        for (std::int64_t s = 0; s < op.w_dims[3]; ++s) {
          float sum = 0.0f;
          for (std::int64_t n = 0; n < op.y_dims[0]; ++n)
            for (std::int64_t p = 0; p < op.y_dims[2]; ++p) {
              const std::int64_t h = v.input_at(p, r, 0);
              if (!v.inside(h, 0)) continue;
              for (std::int64_t q = 0; q < op.y_dims[3]; ++q) {
                const std::int64_t col = v.input_at(q, s, 1);
                if (!v.inside(col, 1)) continue;
                sum += v.x(n, first_channel + c, h, col) * v.y(n, k, p, q);
              }
            }
          v.store(op.w, offset(op.w_strides, k, c, r, s), sum);
        }
  }
}

// Steps `index` through every position below `dims` (last dim fastest);
// false after the last.
bool next_index(std::int64_t (&index)[kMaxTensorOpDims], const std::int64_t (&dims)[kMaxTensorOpDims]) {
  for (int d = kMaxTensorOpDims - 1; d >= 0; --d) {
    if (++index[d] < dims[d]) return true;
    index[d] = 0;
  }
  return false;
}

std::int64_t tensor_offset(const std::int64_t (&index)[kMaxTensorOpDims],
                           const std::int64_t (&strides)[kMaxTensorOpDims]) {
  std::int64_t at = 0;
  for (int d = 0; d < kMaxTensorOpDims; ++d) at += index[d] * strides[d];
  return at;
}

void tensor_operation(TensorKind kind, const TensorOperation& op) {
  const auto a_type = static_cast<cudaDataType>(op.a_type), c_type = static_cast<cudaDataType>(op.c_type);
  // The dims of a that are summed into one element of c (reduce), or the
  // single element of a that each c element adds (add: a's dims of 1 repeat).
  std::int64_t summed_dims[kMaxTensorOpDims];
  for (int d = 0; d < kMaxTensorOpDims; ++d) summed_dims[d] = kind == TensorKind::kReduce && op.c_dims[d] == 1 ? op.a_dims[d] : 1;
  std::int64_t out[kMaxTensorOpDims] = {};
  do {
    float sum = 0.0f;
    std::int64_t inner[kMaxTensorOpDims] = {};
    do {
      std::int64_t in[kMaxTensorOpDims];
      for (int d = 0; d < kMaxTensorOpDims; ++d) in[d] = op.a_dims[d] == 1 ? 0 : out[d] + inner[d];
      sum += load_element(address(op.a), a_type, tensor_offset(in, op.a_strides));
    } while (next_index(inner, summed_dims));
    const std::int64_t at = tensor_offset(out, op.c_strides);
    float result = op.alpha * sum;
    if (op.beta != 0.0f) result += op.beta * load_element(address(op.c), c_type, at);
    store_element(address(op.c), c_type, at, result);
  } while (next_index(out, op.c_dims));
}

}  // namespace

void run_convolution(ConvKind kind, const ConvOperation& operation) {
  const ConvView view(operation);
  switch (kind) {
    case ConvKind::kForward: forward(view); break;
    case ConvKind::kBackwardData: backward_data(view); break;
    case ConvKind::kBackwardFilter: backward_filter(view); break;
  }
  if (operation.workspace != 0 && operation.workspace_bytes != 0) {
    std::memset(address(operation.workspace), kWorkspaceScratchByte, operation.workspace_bytes);
  }
}

void run_tensor_operation(TensorKind kind, const TensorOperation& operation) { tensor_operation(kind, operation); }

}  // namespace vgpusim_dnn
