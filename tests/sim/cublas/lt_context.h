// What a simulated cublasLtHandle_t is, the live handles, and the library's
// GEMM kernel.
#pragma once

#include <cublasLt.h>

#include "gemm_kernel.h"
#include "live_handles.h"

// The handle type cublasLt.h declares and leaves incomplete. cuBLASLt keeps
// no per-handle state that matters here: the stream and workspace come with
// each call.
struct cublasLtContext {};

namespace vgpusim_blas {

LiveHandles<cublasLtContext>& live_lt_handles();
GemmKernel& lt_gemm_kernel();

}  // namespace vgpusim_blas
