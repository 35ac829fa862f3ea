#include "interpose/gemm_operands.h"

#include <cstring>

namespace vgpumem::interpose {

ByteRange MatrixOperand::span() const {
  if (empty()) return {address, 0};
  const std::uint64_t last_element = static_cast<std::uint64_t>((batch - 1) * stride + (cols - 1) * ld + rows);
  return {address, last_element * element_bytes};
}

bool MatrixOperand::dense() const {
  const bool columns_touch = ld == rows || cols == 1;
  const bool matrices_touch = batch == 1 || stride == rows * cols;
  return columns_touch && matrices_touch;
}

std::size_t element_bytes(cudaDataType type) {
  switch (type) {
    case CUDA_R_8I:
    case CUDA_R_8U:
    case CUDA_R_8F_E4M3:
    case CUDA_R_8F_E5M2:
      return 1;
    case CUDA_R_16F:
    case CUDA_R_16BF:
    case CUDA_C_8I:
    case CUDA_C_8U:
      return 2;
    case CUDA_R_32F:
    case CUDA_R_32I:
    case CUDA_R_32U:
    case CUDA_C_16F:
    case CUDA_C_16BF:
      return 4;
    case CUDA_R_64F:
    case CUDA_C_32F:
    case CUDA_C_32I:
    case CUDA_C_32U:
      return 8;
    case CUDA_C_64F:
      return 16;
    default:
      return 0;
  }
}

bool scalar_is_zero(const void* host_value, cudaDataType type) {
  if (host_value == nullptr) return false;
  switch (type) {
    case CUDA_R_16F:
    case CUDA_R_16BF: {
      std::uint16_t bits = 0;
      std::memcpy(&bits, host_value, sizeof bits);
      return (bits & 0x7fffu) == 0;
    }
    case CUDA_R_32F: {
      float value = 0;
      std::memcpy(&value, host_value, sizeof value);
      return value == 0.0f;
    }
    case CUDA_R_64F: {
      double value = 0;
      std::memcpy(&value, host_value, sizeof value);
      return value == 0.0;
    }
    case CUDA_R_32I: {
      std::int32_t value = 0;
      std::memcpy(&value, host_value, sizeof value);
      return value == 0;
    }
    case CUDA_C_32F: {
      float value[2] = {};
      std::memcpy(value, host_value, sizeof value);
      return value[0] == 0.0f && value[1] == 0.0f;
    }
    case CUDA_C_64F: {
      double value[2] = {};
      std::memcpy(value, host_value, sizeof value);
      return value[0] == 0.0 && value[1] == 0.0;
    }
    default:
      return false;
  }
}

std::optional<ByteRange> overwritten_whole(const MatrixOperand& output, bool output_read,
                                           std::initializer_list<MatrixOperand> inputs) {
  if (!output.well_formed() || output.empty()) return std::nullopt;
  ReadRanges read;
  for (const MatrixOperand& input : inputs) {
    if (input.address == 0 || input.empty()) continue;
    // An input of unknown extent might reach anywhere past its start.
    read.add(input.well_formed() ? input.span() : ByteRange{input.address, ~std::uint64_t{0} - input.address});
  }
  return written_before_read(output.span(), output.dense(), output_read, read);
}

}  // namespace vgpumem::interpose
