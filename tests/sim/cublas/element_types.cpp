#include "element_types.h"

#include <bit>
#include <cstring>

namespace vgpusim_blas {

bool is_supported_element(cudaDataType type) {
  return type == CUDA_R_32F || type == CUDA_R_16F || type == CUDA_R_16BF;
}

std::size_t element_bytes(cudaDataType type) { return type == CUDA_R_32F ? 4 : 2; }

float half_bits_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
  std::uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);  // signed zero
  // Subnormal half: normalise it; every one is a normal float.
  std::uint32_t float_exponent = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --float_exponent;
  }
  return std::bit_cast<float>(sign | (float_exponent << 23) | ((mantissa & 0x3FFu) << 13));
}

float bfloat16_bits_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

std::uint16_t float_to_bfloat16_bits(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  // Adding half a unit of the kept part, less one when the kept part is even,
  // rounds to nearest with ties to even (and carries into the exponent, up to
  // infinity, as it should).
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

std::uint16_t float_to_half_bits(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  if (magnitude >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds past 65504: infinity
  const std::int32_t exponent = static_cast<std::int32_t>(magnitude >> 23) - 127;
  if (exponent >= -14) {
    // Normal half: drop 13 mantissa bits, ties to even; a carry moves into
    // the exponent field correctly.
    const std::uint32_t rebased = magnitude - (112u << 23);
    const std::uint32_t rounded = rebased + 0xFFFu + ((rebased >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (rounded >> 13));
  }
  if (exponent < -25) return sign;  // below half the smallest subnormal: zero
  // Subnormal half: the value in units of 2^-24, rounded to nearest even.
  const std::uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = static_cast<std::uint32_t>(-exponent - 1);  // 14 .. 24
  const std::uint32_t kept = mantissa >> shift;
  const std::uint32_t dropped = mantissa & ((1u << shift) - 1u);
  const std::uint32_t half_unit = 1u << (shift - 1);
  const bool round_up = dropped > half_unit || (dropped == half_unit && (kept & 1u) != 0);
  return static_cast<std::uint16_t>(sign | (kept + (round_up ? 1u : 0u)));
}

float load_element(const void* base, cudaDataType type, std::int64_t index) {
  const char* at = static_cast<const char*>(base) + index * static_cast<std::int64_t>(element_bytes(type));
  if (type == CUDA_R_32F) {
    float value;
    std::memcpy(&value, at, sizeof value);
    return value;
  }
  std::uint16_t bits;
  std::memcpy(&bits, at, sizeof bits);
  return type == CUDA_R_16F ? half_bits_to_float(bits) : bfloat16_bits_to_float(bits);
}

void store_element(void* base, cudaDataType type, std::int64_t index, float value) {
  char* at = static_cast<char*>(base) + index * static_cast<std::int64_t>(element_bytes(type));
  if (type == CUDA_R_32F) {
    std::memcpy(at, &value, sizeof value);
    return;
  }
  const std::uint16_t bits = type == CUDA_R_16F ? float_to_half_bits(value) : float_to_bfloat16_bits(value);
  std::memcpy(at, &bits, sizeof bits);
}

}  // namespace vgpusim_blas
