// The functions of CUDA libraries (not the driver) that libvgpumem.so
// exports under the library's own name: hooks_cublas.cpp,
// hooks_cublaslt.cpp. Each forwards to the library's definition (the next in
// the search order); the build-time export check reads this list.
#pragma once

namespace vgpumem::interpose {

inline constexpr const char* kLibraryHooks[] = {
    "cublasGemmEx",   "cublasGemmEx_64",  "cublasGemmStridedBatchedEx", "cublasGemmStridedBatchedEx_64",
    "cublasSgemm_v2", "cublasLtMatmul",
};

}  // namespace vgpumem::interpose
