// cuBLASLt's matmul: D = alpha op(A) op(B) + beta C. D is written whole
// before anything reads it unless it is C itself with a non-zero beta; the
// shapes come from the layouts, asked of the library (the layouts are its
// opaque objects). See hooks_cublas.cpp for what a hook here does.
#include <cstdint>
#include <optional>

#include <cublasLt.h>

#include "interpose/gemm_operands.h"
#include "interpose/library_call.h"

using namespace vgpumem;
using namespace vgpumem::interpose;

namespace {

// One attribute of a cuBLASLt descriptor, read with `get` (the library's
// getter for that kind of descriptor); false unless it reads back whole.
template <typename Getter, typename Descriptor, typename Attribute, typename Value>
bool attribute(Getter get, Descriptor desc, Attribute name, Value* value) {
  std::size_t written = 0;
  return get != nullptr && get(desc, name, value, sizeof *value, &written) == CUBLAS_STATUS_SUCCESS &&
         written == sizeof *value;
}

template <typename Value>
bool layout_attribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t name, Value* value) {
  return attribute(NEXT(cublasLtMatrixLayoutGetAttribute), layout, name, value);
}

template <typename Value>
bool matmul_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t name, Value* value) {
  return attribute(NEXT(cublasLtMatmulDescGetAttribute), desc, name, value);
}

// A matrix as its layout describes it; not well formed (so claiming nothing)
// when the layout cannot be read or is not column-major.
MatrixOperand operand(const void* address, cublasLtMatrixLayout_t layout) {
  MatrixOperand matrix{reinterpret_cast<std::uint64_t>(address)};
  std::uint32_t type = 0, batch_mode = 0;
  std::int32_t order = CUBLASLT_ORDER_COL, batch = 1;
  std::uint64_t rows = 0, cols = 0;
  std::int64_t ld = 0, stride = 0, plane_offset = 0;
  if (layout == nullptr || !layout_attribute(layout, CUBLASLT_MATRIX_LAYOUT_TYPE, &type) ||
      !layout_attribute(layout, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows) ||
      !layout_attribute(layout, CUBLASLT_MATRIX_LAYOUT_COLS, &cols) ||
      !layout_attribute(layout, CUBLASLT_MATRIX_LAYOUT_LD, &ld) ||
      !layout_attribute(layout, CUBLASLT_MATRIX_LAYOUT_ORDER, &order) ||
      !layout_attribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch) ||
      !layout_attribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride) ||
      !layout_attribute(layout, CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, &plane_offset) ||
      !layout_attribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &batch_mode) || order != CUBLASLT_ORDER_COL ||
      plane_offset != 0 || batch_mode != 0) {
    // Another order, planar complex, or an array of pointers to the matrices
    // (whose elements are then elsewhere): nothing is claimed about it.
    matrix.ld = -1;  // not well formed
    return matrix;
  }
  matrix.rows = static_cast<std::int64_t>(rows);
  matrix.cols = static_cast<std::int64_t>(cols);
  matrix.ld = ld;
  matrix.batch = batch;
  matrix.stride = stride;
  matrix.element_bytes = element_bytes(static_cast<cudaDataType>(type));
  return matrix;
}

// Whether beta is zero: a host scalar that is, or the pointer mode that says
// so. A device scalar counts as non-zero.
bool beta_is_zero(cublasLtMatmulDesc_t desc, const void* beta) {
  std::int32_t mode = CUBLASLT_POINTER_MODE_HOST, scale = CUDA_R_32F;
  if (!matmul_attribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode) ||
      !matmul_attribute(desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, &scale)) {
    return false;
  }
  if (mode == CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO) return true;
  const bool beta_on_host =
      mode == CUBLASLT_POINTER_MODE_HOST || mode == CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
  return beta_on_host && scalar_is_zero(beta, static_cast<cudaDataType>(scale));
}

std::optional<ByteRange> matmul_overwrites(cublasLtMatmulDesc_t desc, const void* A, cublasLtMatrixLayout_t Adesc,
                                           const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                                           const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                                           cublasLtMatrixLayout_t Ddesc) {
  if (LibraryCall::inside_one() || D == nullptr) return std::nullopt;
  const bool c_read = !beta_is_zero(desc, beta);
  const MatrixOperand d = operand(D, Ddesc);
  // C read in place is D read; C read from elsewhere must not share D's bytes.
  const bool d_read = c_read && C == D;
  const MatrixOperand c = c_read && C != D ? operand(C, Cdesc) : MatrixOperand{};
  return overwritten_whole(d, d_read, {operand(A, Adesc), operand(B, Bdesc), c});
}

}  // namespace

VGPUMEM_LIBRARY_HOOK cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                                                   const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                                                   const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                                                   const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                                                   cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,
                                                   void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  return call_library(
      LIBRARY_HOOK(cublasLtMatmul), NEXT(cublasLtMatmul), CUBLAS_STATUS_NOT_INITIALIZED, LibraryOp::matmul,
      [&] { return matmul_overwrites(computeDesc, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc); },
      [&] { return stream; }, lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,
      workspace, workspaceSizeInBytes, stream);
}
