// Reading and writing one descriptor attribute with cuBLASLt's size rules:
// the buffer must be exactly the attribute's size; a get with size 0 asks
// for the size.
#pragma once

#include <cublas_api.h>

#include <cstddef>
#include <cstring>

namespace vgpusim_blas {

template <class T>
cublasStatus_t read_attribute(const void* buffer, std::size_t bytes, T& value) {
  if (buffer == nullptr || bytes != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&value, buffer, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

template <class T>
cublasStatus_t write_attribute(const T& value, void* buffer, std::size_t bytes, std::size_t* written) {
  if (bytes == 0) {
    if (written == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *written = sizeof(T);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (buffer == nullptr || bytes != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buffer, &value, sizeof(T));
  if (written != nullptr) *written = sizeof(T);
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace vgpusim_blas
