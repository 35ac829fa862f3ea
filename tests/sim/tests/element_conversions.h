// Host reference conversions for the simulated libraries' tests: elements
// of fp32, fp16 and bf16 written and read with CUDA's own host conversions
// (cuda_fp16.h, cuda_bf16.h), never the simulator's, so a rounding mistake in
// the simulator cannot hide in the reference.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstring>

namespace simtest {

enum class Element { f32, f16, bf16 };

inline std::size_t bytes_of(Element type) { return type == Element::f32 ? 4 : 2; }

// `value` as an element of `type` holds it (rounded to nearest even).
inline float round_to(Element type, float value) {
  if (type == Element::f16) return __half2float(__float2half_rn(value));
  if (type == Element::bf16) return __bfloat162float(__float2bfloat16_rn(value));
  return value;
}

inline void put(void* base, Element type, std::size_t index, float value) {
  char* at = static_cast<char*>(base) + index * bytes_of(type);
  if (type == Element::f32) {
    std::memcpy(at, &value, 4);
  } else if (type == Element::f16) {
    const __half h = __float2half_rn(value);
    std::memcpy(at, &h, 2);
  } else {
    const __nv_bfloat16 b = __float2bfloat16_rn(value);
    std::memcpy(at, &b, 2);
  }
}

inline float get(const void* base, Element type, std::size_t index) {
  const char* at = static_cast<const char*>(base) + index * bytes_of(type);
  if (type == Element::f32) {
    float value;
    std::memcpy(&value, at, 4);
    return value;
  }
  if (type == Element::f16) {
    __half h;
    std::memcpy(&h, at, 2);
    return __half2float(h);
  }
  __nv_bfloat16 b;
  std::memcpy(&b, at, 2);
  return __bfloat162float(b);
}

}  // namespace simtest
