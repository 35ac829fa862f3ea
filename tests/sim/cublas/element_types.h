// The element types the simulated cuBLAS libraries compute with: fp32, fp16
// and bf16 in memory, float in arithmetic. The conversions are written here,
// bit by bit, so the simulated kernels need nothing from CUDA's own headers
// beyond the type codes.
#pragma once

#include <library_types.h>

#include <cstddef>
#include <cstdint>

namespace vgpusim_blas {

// CUDA_R_32F, CUDA_R_16F and CUDA_R_16BF; everything else is refused.
bool is_supported_element(cudaDataType type);

// Bytes of one element of a supported type.
std::size_t element_bytes(cudaDataType type);

float half_bits_to_float(std::uint16_t bits);
float bfloat16_bits_to_float(std::uint16_t bits);
// Round to nearest, ties to even, as the tensor cores' epilogue stores
// (overflow gives infinity, NaN stays a quiet NaN).
std::uint16_t float_to_half_bits(float value);
std::uint16_t float_to_bfloat16_bits(float value);

// Element `index` of an array of `type` at `base`, widened to float.
float load_element(const void* base, cudaDataType type, std::int64_t index);
// Stores `value`, rounded to `type`, as element `index` of the array at `base`.
void store_element(void* base, cudaDataType type, std::int64_t index, float value);

}  // namespace vgpusim_blas
