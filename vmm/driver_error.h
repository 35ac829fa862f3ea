// Driver results as a log line names them: "CUDA_ERROR_OUT_OF_MEMORY (2)",
// never a bare number a reader must look up in cuda.h.
#pragma once

#include <cuda.h>

#include <string>

namespace vgpumem::vmm {

// The name of `result` (CUDA_SUCCESS, CUDA_ERROR_...) for the codes the
// driver calls the shim makes can return, or nullptr for any other.
const char* driver_error_name(CUresult result) noexcept;

// "CUDA_ERROR_OUT_OF_MEMORY (2)", or "CUDA error 999" for a code without a
// name here: what a log line says went wrong.
std::string driver_error(CUresult result);

}  // namespace vgpumem::vmm
