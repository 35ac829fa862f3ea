// The memory a BLAS matrix-multiply names, from its arguments alone: which
// bytes each operand spans, and which output the call overwrites whole
// before reading any of it (so that bytes of it on the host need not come
// back first: vmm/library_call_scope.h). Column-major, as cuBLAS counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>

#include <library_types.h>

#include "interpose/operand_ranges.h"

namespace vgpumem::interpose {


// `batch` matrices of `rows` x `cols` elements of `element_bytes`, columns
// `ld` elements apart and matrices `stride` elements apart.
struct MatrixOperand {
  std::uint64_t address = 0;
  std::int64_t rows = 0, cols = 0, ld = 0;
  std::int64_t batch = 1, stride = 0;
  std::size_t element_bytes = 0;

  bool well_formed() const {
    return address != 0 && rows >= 0 && cols >= 0 && ld >= (rows > 0 ? rows : 1) && batch >= 0 && stride >= 0 &&
           element_bytes != 0;
  }
  bool empty() const { return rows == 0 || cols == 0 || batch == 0; }
  // Every byte it may touch, from its first element to its last.
  ByteRange span() const;
  // Whether that span is all elements: no gap between columns (ld == rows,
  // or one column) nor between matrices (stride == rows * cols, or one).
  bool dense() const;
};

// The stored shape of op(X) for a k-deep product: with no transpose X is
// `rows` x `cols`, transposed it is stored `cols` x `rows`.
inline void stored_shape(bool transposed, std::int64_t rows, std::int64_t cols, std::int64_t* stored_rows,
                         std::int64_t* stored_cols) {
  *stored_rows = transposed ? cols : rows;
  *stored_cols = transposed ? rows : cols;
}

// Bytes of one element of `type`; 0 for a type this does not know (then
// nothing is claimed about the call).
std::size_t element_bytes(cudaDataType type);

// Whether the scalar at `host_value`, of `type`, is zero (either sign).
// False for a type this does not know.
bool scalar_is_zero(const void* host_value, cudaDataType type);

// What the call overwrites whole: `output` when it is not read (`output_read`
// false: beta is zero, or the result goes elsewhere), is well formed and
// dense, and no input shares a byte with it (an input that aliases the
// output is read). Nothing otherwise: the output is then brought back
// whole, as any operand.
std::optional<ByteRange> overwritten_whole(const MatrixOperand& output, bool output_read,
                                           std::initializer_list<MatrixOperand> inputs);

}  // namespace vgpumem::interpose
