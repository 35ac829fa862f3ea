// cublasStatus_t's names and descriptions, shared by both libraries
// (cublasGetStatusName/String, cublasLtGetStatusName/String).
#pragma once

#include <cublas_api.h>

namespace vgpusim_blas {

const char* status_name(cublasStatus_t status);
const char* status_string(cublasStatus_t status);

}  // namespace vgpusim_blas
