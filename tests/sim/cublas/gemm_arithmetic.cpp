// The arithmetic of the simulated GEMM kernel: a plain triple loop in float,
// in a fixed order (this file is built with -ffp-contract=off, so every
// product and sum is rounded as written), each result rounded once to D's type.
#include <cstring>

#include "element_types.h"
#include "gemm_operation.h"

namespace vgpusim_blas {
namespace {

// Column-major element (row, col) of op(X), X stored at `base` with leading
// dimension ld: op(X)(row, col) = X(col, row) when transposed.
float operand(const void* base, cudaDataType type, std::int64_t ld, bool transposed, std::int64_t row,
              std::int64_t col) {
  return transposed ? load_element(base, type, row * ld + col) : load_element(base, type, col * ld + row);
}

void* address(CUdeviceptr pointer, cudaDataType type, std::int64_t batch_index, std::int64_t stride) {
  return reinterpret_cast<char*>(static_cast<std::uintptr_t>(pointer)) +
         batch_index * stride * static_cast<std::int64_t>(element_bytes(type));
}

}  // namespace

void run_gemm(const GemmOperation& op, float alpha, float beta) {
  const auto type_a = static_cast<cudaDataType>(op.type_a), type_b = static_cast<cudaDataType>(op.type_b),
             type_c = static_cast<cudaDataType>(op.type_c), type_d = static_cast<cudaDataType>(op.type_d);
  for (std::int64_t batch = 0; batch < op.batch; ++batch) {
    const void* a = address(op.a, type_a, batch, op.stride_a);
    const void* b = address(op.b, type_b, batch, op.stride_b);
    const void* c = address(op.c, type_c, batch, op.stride_c);
    void* d = address(op.d, type_d, batch, op.stride_d);
    for (std::int64_t col = 0; col < op.n; ++col) {
      for (std::int64_t row = 0; row < op.m; ++row) {
        float sum = 0.0f;
        // As reference BLAS: alpha == 0 does not read A or B.
        if (alpha != 0.0f) {
          for (std::int64_t p = 0; p < op.k; ++p) {
            sum += operand(a, type_a, op.lda, op.transpose_a != 0, row, p) *
                   operand(b, type_b, op.ldb, op.transpose_b != 0, p, col);
          }
        }
        float result = alpha * sum;
        // beta == 0: C is not read at all, so NaN or garbage in it cannot
        // reach D (documented cuBLAS behaviour).
        if (beta != 0.0f) result += beta * load_element(c, type_c, col * op.ldc + row);
        store_element(d, type_d, col * op.ldd + row, result);
      }
    }
  }
}

}  // namespace vgpusim_blas
