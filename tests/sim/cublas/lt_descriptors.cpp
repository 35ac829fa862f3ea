// cublasLtMatmulDesc*, cublasLtMatrixLayout* and cublasLtMatmulPreference*:
// create, destroy, set and get. Attributes the simulator does not implement,
// or values of them other than the default (an epilogue, a row-major order),
// are CUBLAS_STATUS_NOT_SUPPORTED when set, so a caller never believes an
// option took effect when it did not.
#include <new>

#include "api_export.h"
#include "gemm_checks.h"
#include "lt_attributes.h"
#include "lt_descriptors.h"

using namespace vgpusim_blas;

// ---- matmul descriptor ----

VGPUSIM_BLAS_API cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                                         cudaDataType_t scale) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* created = new (std::nothrow) MatmulDescriptor;
  if (created == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  created->compute_type = compute;
  created->scale_type = scale;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(created);
  return CUBLAS_STATUS_SUCCESS;
}

VGPUSIM_BLAS_API cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete descriptor(desc);
  return CUBLAS_STATUS_SUCCESS;
}

VGPUSIM_BLAS_API cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                               cublasLtMatmulDescAttributes_t attribute,
                                                               const void* buffer, size_t bytes) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  MatmulDescriptor& d = *descriptor(desc);
  std::int32_t value = 0;
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
      return read_attribute(buffer, bytes, d.compute_type);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
      return read_attribute(buffer, bytes, d.scale_type);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
      if (const cublasStatus_t read = read_attribute(buffer, bytes, value); read != CUBLAS_STATUS_SUCCESS) return read;
      if (value == CUBLASLT_POINTER_MODE_HOST || value == CUBLASLT_POINTER_MODE_DEVICE) {
        d.pointer_mode = value;
        return CUBLAS_STATUS_SUCCESS;
      }
      // The vector modes exist but are not simulated.
      return value >= CUBLASLT_POINTER_MODE_DEVICE_VECTOR && value <= CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST
                 ? CUBLAS_STATUS_NOT_SUPPORTED
                 : CUBLAS_STATUS_INVALID_VALUE;
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB:
      if (const cublasStatus_t read = read_attribute(buffer, bytes, value); read != CUBLAS_STATUS_SUCCESS) return read;
      if (!is_valid_operation(static_cast<cublasOperation_t>(value))) return CUBLAS_STATUS_INVALID_VALUE;
      (attribute == CUBLASLT_MATMUL_DESC_TRANSA ? d.transa : d.transb) = value;
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
      std::uint32_t epilogue = 0;
      if (const cublasStatus_t read = read_attribute(buffer, bytes, epilogue); read != CUBLAS_STATUS_SUCCESS) {
        return read;
      }
      if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) return CUBLAS_STATUS_NOT_SUPPORTED;
      d.epilogue = epilogue;
      return CUBLAS_STATUS_SUCCESS;
    }
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

VGPUSIM_BLAS_API cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t desc,
                                                               cublasLtMatmulDescAttributes_t attribute, void* buffer,
                                                               size_t bytes, size_t* written) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const MatmulDescriptor& d = *descriptor(desc);
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return write_attribute(d.compute_type, buffer, bytes, written);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return write_attribute(d.scale_type, buffer, bytes, written);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return write_attribute(d.pointer_mode, buffer, bytes, written);
    case CUBLASLT_MATMUL_DESC_TRANSA: return write_attribute(d.transa, buffer, bytes, written);
    case CUBLASLT_MATMUL_DESC_TRANSB: return write_attribute(d.transb, buffer, bytes, written);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return write_attribute(d.epilogue, buffer, bytes, written);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

// ---- matrix layout ----

VGPUSIM_BLAS_API cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* desc, cudaDataType type,
                                                           uint64_t rows, uint64_t cols, int64_t ld) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* created = new (std::nothrow) MatrixLayout;
  if (created == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  created->type = static_cast<std::uint32_t>(type);
  created->rows = rows;
  created->cols = cols;
  created->ld = ld;
  *desc = reinterpret_cast<cublasLtMatrixLayout_t>(created);
  return CUBLAS_STATUS_SUCCESS;
}

VGPUSIM_BLAS_API cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t desc) {
  delete layout(desc);
  return CUBLAS_STATUS_SUCCESS;
}

VGPUSIM_BLAS_API cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t desc,
                                                                 cublasLtMatrixLayoutAttribute_t attribute,
                                                                 const void* buffer, size_t bytes) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  MatrixLayout& l = *layout(desc);
  switch (attribute) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return read_attribute(buffer, bytes, l.type);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: {
      std::int32_t order = 0;
      if (const cublasStatus_t read = read_attribute(buffer, bytes, order); read != CUBLAS_STATUS_SUCCESS) return read;
      if (order != CUBLASLT_ORDER_COL) return CUBLAS_STATUS_NOT_SUPPORTED;  // column-major only
      l.order = order;
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return read_attribute(buffer, bytes, l.rows);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return read_attribute(buffer, bytes, l.cols);
    case CUBLASLT_MATRIX_LAYOUT_LD: return read_attribute(buffer, bytes, l.ld);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return read_attribute(buffer, bytes, l.batch_count);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return read_attribute(buffer, bytes, l.batch_stride);
    // Planar complex and arrays of matrix pointers are not simulated: only
    // their defaults (interleaved, strided) are accepted.
    case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET: {
      std::int64_t offset = 0;
      if (const cublasStatus_t read = read_attribute(buffer, bytes, offset); read != CUBLAS_STATUS_SUCCESS) return read;
      return offset == 0 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
    }
    case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE: {
      std::uint32_t mode = 0;
      if (const cublasStatus_t read = read_attribute(buffer, bytes, mode); read != CUBLAS_STATUS_SUCCESS) return read;
      return mode == CUBLASLT_BATCH_MODE_STRIDED ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
    }
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

VGPUSIM_BLAS_API cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t desc,
                                                                 cublasLtMatrixLayoutAttribute_t attribute,
                                                                 void* buffer, size_t bytes, size_t* written) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const MatrixLayout& l = *layout(desc);
  switch (attribute) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return write_attribute(l.type, buffer, bytes, written);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return write_attribute(l.order, buffer, bytes, written);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return write_attribute(l.rows, buffer, bytes, written);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return write_attribute(l.cols, buffer, bytes, written);
    case CUBLASLT_MATRIX_LAYOUT_LD: return write_attribute(l.ld, buffer, bytes, written);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return write_attribute(l.batch_count, buffer, bytes, written);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return write_attribute(l.batch_stride, buffer, bytes, written);
    case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET: return write_attribute(std::int64_t{0}, buffer, bytes, written);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE:
      return write_attribute(std::uint32_t{CUBLASLT_BATCH_MODE_STRIDED}, buffer, bytes, written);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

// ---- heuristic preference ----
// Every preference is accepted and kept: the one simulated algorithm needs no
// workspace and no alignment, so it satisfies any of them.

VGPUSIM_BLAS_API cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  auto* created = new (std::nothrow) MatmulPreference;
  if (created == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(created);
  return CUBLAS_STATUS_SUCCESS;
}

VGPUSIM_BLAS_API cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete preference(pref);
  return CUBLAS_STATUS_SUCCESS;
}

VGPUSIM_BLAS_API cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                                     cublasLtMatmulPreferenceAttributes_t attribute,
                                                                     const void* buffer, size_t bytes) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  MatmulPreference& p = *preference(pref);
  switch (attribute) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return read_attribute(buffer, bytes, p.search_mode);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return read_attribute(buffer, bytes, p.max_workspace_bytes);
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: return read_attribute(buffer, bytes, p.reduction_scheme_mask);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return read_attribute(buffer, bytes, p.min_alignment_bytes[0]);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return read_attribute(buffer, bytes, p.min_alignment_bytes[1]);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return read_attribute(buffer, bytes, p.min_alignment_bytes[2]);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return read_attribute(buffer, bytes, p.min_alignment_bytes[3]);
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT: return read_attribute(buffer, bytes, p.max_waves_count);
    case CUBLASLT_MATMUL_PREF_IMPL_MASK: return read_attribute(buffer, bytes, p.implementation_mask);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}
