// The convolutions and tensor operations on the host. Each output element is
// a float sum over its terms in one fixed order, scaled and blended with the
// prior output, and rounded once to the element type: results a test can
// predict exactly, identical whichever API launched the kernel.
#include <cstring>
#include <vector>

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

// A tensor's elements widened to float once, densely in NCHW order: each
// element is read K * R * S times or so, and widening is exact, so the sums
// (same terms, same order) are what reading memory each time would give.
class WideTensor {
 public:
  WideTensor(CUdeviceptr base, cudaDataType type, const std::int64_t (&dims)[4], const std::int64_t (&strides)[4])
      : c_(dims[1]), h_(dims[2]), w_(dims[3]), values_(static_cast<std::size_t>(dims[0] * dims[1] * dims[2] * dims[3])) {
    std::size_t at = 0;
    for (std::int64_t n = 0; n < dims[0]; ++n)
      for (std::int64_t c = 0; c < dims[1]; ++c)
        for (std::int64_t h = 0; h < dims[2]; ++h)
          for (std::int64_t w = 0; w < dims[3]; ++w) values_[at++] = load_element(address(base), type, offset(strides, n, c, h, w));
  }
  // Where row h of channel c of image n begins (its W elements follow).
  std::int64_t row(std::int64_t n, std::int64_t c, std::int64_t h) const { return ((n * c_ + c) * h_ + h) * w_; }
  const float* data() const { return values_.data(); }

 private:
  std::int64_t c_, h_, w_;
  std::vector<float> values_;
};

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

  // The operands a convolution reads, widened (WideTensor).
  WideTensor x() const { return WideTensor(op.x, type, op.x_dims, op.x_strides); }
  WideTensor w() const { return WideTensor(op.w, type, op.w_dims, op.w_strides); }
  WideTensor y() const { return WideTensor(op.y, type, op.y_dims, op.y_strides); }

  // alpha * sum + beta * prior, the prior read only when beta != 0 (NaN or
  // garbage in an output that is overwritten never reaches the result).
  void store(CUdeviceptr base, std::int64_t at, float sum) const {
    float result = op.alpha * sum;
    if (op.beta != 0.0f) result += op.beta * load_element(address(base), type, at);
    store_element(address(base), type, at, result);
  }
};

// The three convolutions' loops multiply and add the widened copies only,
// at indices their loops and position tables keep inside the dims:
// sanitizer builds leave them uninstrumented, where checking each term
// made the simulated convolutions nine times slower and the CNN tests the
// longest in the suite. What they read from device memory and write back
// (WideTensor, ConvView::store) stays instrumented.
#if defined(__clang__) || defined(__GNUC__)
#define VGPUSIM_UNCHECKED_LOOPS __attribute__((no_sanitize("address", "undefined")))
#else
#define VGPUSIM_UNCHECKED_LOOPS
#endif

// position_of(at, r) for every position `at` along `axis` of the tensor whose
// dims are `dims` and every filter element r along it, at [at * taps + r]:
// worked out once, not once a term.
template <typename PositionOf>
std::vector<std::int64_t> position_table(const ConvView& v, const std::int64_t (&dims)[4], int axis,
                                         PositionOf position_of) {
  const std::int64_t positions = dims[2 + axis], taps = v.op.w_dims[2 + axis];
  std::vector<std::int64_t> table(static_cast<std::size_t>(positions * taps));
  for (std::int64_t at = 0; at < positions; ++at)
    for (std::int64_t r = 0; r < taps; ++r) table[static_cast<std::size_t>(at * taps + r)] = position_of(at, r);
  return table;
}

// For every output position along `axis` and filter element r, the input
// position it reads, or -1 in the padding.
std::vector<std::int64_t> inputs_read(const ConvView& v, int axis) {
  return position_table(v, v.op.y_dims, axis, [&](std::int64_t out, std::int64_t r) {
    const std::int64_t at = v.input_at(out, r, axis);
    return v.inside(at, axis) ? at : std::int64_t{-1};
  });
}

VGPUSIM_UNCHECKED_LOOPS void forward(const ConvView& v) {
  const ConvOperation& op = v.op;
  const WideTensor x = v.x(), w = v.w();
  const std::vector<std::int64_t> rows = inputs_read(v, 0), cols = inputs_read(v, 1);
  const std::int64_t R = op.w_dims[2], S = op.w_dims[3];
  const float *xs = x.data(), *ws = w.data();
  const std::int64_t* row_of = rows.data();
  for (std::int64_t n = 0; n < op.y_dims[0]; ++n)
    for (std::int64_t k = 0; k < op.y_dims[1]; ++k) {
      const std::int64_t first_channel = k / v.filters_per_group * v.channels_per_group;
      for (std::int64_t p = 0; p < op.y_dims[2]; ++p)
        for (std::int64_t q = 0; q < op.y_dims[3]; ++q) {
          const std::int64_t* col_of = cols.data() + q * S;
          float sum = 0.0f;
          for (std::int64_t c = 0; c < v.channels_per_group; ++c)
            for (std::int64_t r = 0; r < R; ++r) {
              const std::int64_t h = row_of[p * R + r];
              if (h < 0) continue;
              const float* x_row = xs + x.row(n, first_channel + c, h);
              const float* w_row = ws + w.row(k, c, r);
              for (std::int64_t s = 0; s < S; ++s) {
                if (col_of[s] < 0) continue;
                sum += x_row[col_of[s]] * w_row[s];
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

// output_reading for every input position and filter element along `axis`.
std::vector<std::int64_t> outputs_reading(const ConvView& v, int axis) {
  return position_table(v, v.op.x_dims, axis,
                        [&](std::int64_t at, std::int64_t r) { return output_reading(v, at, r, axis); });
}

VGPUSIM_UNCHECKED_LOOPS void backward_data(const ConvView& v) {
  const ConvOperation& op = v.op;
  const WideTensor y = v.y(), w = v.w();
  const std::vector<std::int64_t> rows = outputs_reading(v, 0), cols = outputs_reading(v, 1);
  const std::int64_t R = op.w_dims[2], S = op.w_dims[3];
  const float *ys = y.data(), *ws = w.data();
  const std::int64_t* row_of = rows.data();
  for (std::int64_t n = 0; n < op.x_dims[0]; ++n)
    for (std::int64_t channel = 0; channel < op.x_dims[1]; ++channel) {
      const std::int64_t group = channel / v.channels_per_group, c = channel % v.channels_per_group;
      for (std::int64_t h = 0; h < op.x_dims[2]; ++h)
        for (std::int64_t col = 0; col < op.x_dims[3]; ++col) {
          const std::int64_t* q_of = cols.data() + col * S;
          float sum = 0.0f;
          for (std::int64_t kk = 0; kk < v.filters_per_group; ++kk) {
            const std::int64_t k = group * v.filters_per_group + kk;
            for (std::int64_t r = 0; r < R; ++r) {
              const std::int64_t p = row_of[h * R + r];
              if (p < 0) continue;
              const float* y_row = ys + y.row(n, k, p);
              const float* w_row = ws + w.row(k, c, r);
              for (std::int64_t s = 0; s < S; ++s) {
                if (q_of[s] < 0) continue;
                sum += y_row[q_of[s]] * w_row[s];
              }
            }
          }
          v.store(op.x, offset(op.x_strides, n, channel, h, col), sum);
        }
    }
}

VGPUSIM_UNCHECKED_LOOPS void backward_filter(const ConvView& v) {
  const ConvOperation& op = v.op;
  const WideTensor x = v.x(), y = v.y();
  const std::vector<std::int64_t> rows = inputs_read(v, 0), cols = inputs_read(v, 1);
  const std::int64_t R = op.w_dims[2], S = op.w_dims[3];
  const float *xs = x.data(), *ys = y.data();
  const std::int64_t *row_of = rows.data(), *col_of = cols.data();
  for (std::int64_t k = 0; k < op.w_dims[0]; ++k) {
    const std::int64_t first_channel = k / v.filters_per_group * v.channels_per_group;
    for (std::int64_t c = 0; c < op.w_dims[1]; ++c)
      for (std::int64_t r = 0; r < R; ++r)
        for (std::int64_t s = 0; s < S; ++s) {
          float sum = 0.0f;
          for (std::int64_t n = 0; n < op.y_dims[0]; ++n)
            for (std::int64_t p = 0; p < op.y_dims[2]; ++p) {
              const std::int64_t h = row_of[p * R + r];
              if (h < 0) continue;
              const float* x_row = xs + x.row(n, first_channel + c, h);
              const float* y_row = ys + y.row(n, k, p);
              for (std::int64_t q = 0; q < op.y_dims[3]; ++q) {
                const std::int64_t col = col_of[q * S + s];
                if (col < 0) continue;
                sum += x_row[col] * y_row[q];
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
