// The functions of CUDA libraries (not the driver) that libvgpumem.so
// exports under the library's own name: hooks_cublas.cpp and
// hooks_cublaslt.cpp (matrix multiplies), hooks_cudnn.cpp and
// hooks_cudnn_backend.cpp (convolutions), hooks_cupti.cpp (the entry points
// a profiler starts with: vgpumem steps aside from CUPTI first). Each
// forwards to the library's definition (the next in the search order); the
// build-time export check reads this list.
#pragma once

namespace vgpumem::interpose {

inline constexpr const char* kLibraryHooks[] = {
    "cublasGemmEx",   "cublasGemmEx_64",  "cublasGemmStridedBatchedEx", "cublasGemmStridedBatchedEx_64",
    "cublasSgemm_v2", "cublasLtMatmul",
    "cudnnConvolutionForward", "cudnnConvolutionBackwardData", "cudnnConvolutionBackwardFilter",
    "cudnnConvolutionBackwardBias", "cudnnBackendExecute", "cudnnBackendDestroyDescriptor",
    "cuptiSubscribe", "cuptiSubscribe_v2", "cuptiActivityRegisterCallbacks", "cuptiActivityEnable",
    "cuptiActivityEnableContext",
};

}  // namespace vgpumem::interpose
