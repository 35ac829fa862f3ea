// A library that uses cuBLAS the way a framework's own library does: linked
// against it (NEEDED), calling cublasGemmEx through its PLT. Loaded by the
// program with dlopen(RTLD_LOCAL) (library_dlsym_probe's `indirect` mode),
// so cuBLAS is in no scope the shim can search, and no dlsym ever names
// cublasGemmEx: its call still lands in the preloaded hook (the global scope
// is searched first), which must find cuBLAS among the loaded objects.
#include <cublas_v2.h>

extern "C" __attribute__((visibility("default"))) int local_gemm_beta0(const void* a, const void* b, void* c, int m,
                                                                      int n, int k) {
  cublasHandle_t handle = nullptr;
  if (const cublasStatus_t status = cublasCreate(&handle); status != CUBLAS_STATUS_SUCCESS) return status;
  const float one = 1, zero = 0;
  const cublasStatus_t status = cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, CUDA_R_32F, m, b,
                                             CUDA_R_32F, k, &zero, c, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                                             CUBLAS_GEMM_DEFAULT);
  cublasDestroy(handle);
  return status;
}
