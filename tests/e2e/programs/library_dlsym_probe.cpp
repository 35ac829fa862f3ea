// cuBLAS, cuBLASLt and cuDNN loaded as XLA, TensorFlow and PyTorch's lazy
// loaders load them: dlopen(RTLD_LOCAL | RTLD_NOW), every function found
// with dlsym on the handle; this program does not link them. Under paging,
// the output of a call that overwrites it whole is on the host when the call
// comes (the gemm_probe `beta0` scenario, tests/e2e/paging_library_test.cpp):
// only the shim's hook of the call, reached through the dlsym answer, saves
// the copy back (the trace's bytes_not_fetched).
//
//   library_dlsym_probe MODE [COPY], MODE one of
//     gemm     cublasGemmEx, beta = 0, into a 4 MiB C
//     lt       cublasLtMatmul, beta = 0, D = C, 4 MiB
//     conv     cudnnConvolutionForward, beta = 0, a 4 MiB output
//     indirect `gemm` through a library loaded RTLD_LOCAL that links cuBLAS
//              and calls cublasGemmEx itself (local_blas_user.cpp): no
//              dlsym names cuBLAS
//     lookups  what dlsym answers on each handle (resolve_report.h), and
//              for COPY (a second copy of libcublas.so.13 at another path)
//              what dlsym answers on its handle
//
// LIBRARY_PROBE_LOOKUP=dlvsym finds the functions with dlvsym instead, which
// the shim does not override: the control, with the library's own functions.
// Prints "<mode> ok" and "<mode> fnv <hash of the output>"; a wrong value
// prints "<mode> mismatch ..." and exits 4; a CUDA or library error exits 3.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "float_matrices.h"
#include "probe_support.h"
#include "resolve_report.h"

namespace {

void check_status(int status, const char* what) {
  if (status == 0) return;
  std::printf("LIBRARY_STATUS %d at %s\n", status, what);
  std::exit(3);
}
#define LIB(call) check_status(static_cast<int>(call), #call)

void* open_library(const char* name) {
  void* library = dlopen(name, RTLD_LOCAL | RTLD_NOW);
  if (library == nullptr) {
    std::printf("error dlopen %s: %s\n", name, dlerror());
    std::exit(3);
  }
  return library;
}

// The function `name` of `library`, as the program's loader would find it.
template <typename Fn>
Fn find(void* library, const char* name, const char* version) {
  const char* how = std::getenv("LIBRARY_PROBE_LOOKUP");
  void* function = how != nullptr && std::strcmp(how, "dlvsym") == 0 ? dlvsym(library, name, version)
                                                                      : dlsym(library, name);
  if (function == nullptr) {
    std::printf("error no %s: %s\n", name, dlerror());
    std::exit(3);
  }
  report_resolution((std::string("found.") + name).c_str(), function);
  return reinterpret_cast<Fn>(function);
}
#define CUBLAS(library, name) find<decltype(&name)>(library, #name, "libcublas.so.13")
#define CUBLASLT(library, name) find<decltype(&name)>(library, #name, "libcublasLt.so.13")
#define CUDNN(library, name) find<decltype(&name)>(library, #name, "libcudnn.so.9")

// The C entry point (cublas_api.h overloads the name for C++).
using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                  const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                  cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

std::uint64_t fnv1a(const std::vector<float>& values) {
  std::uint64_t hash = 1469598103934665603ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (std::size_t i = 0; i < values.size() * sizeof(float); ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash;
}

// Compares the device's bytes with `expected` (when given) and prints their hash.
int expect_holds(const std::string& mode, const Buffer& b, bool check) {
  std::vector<float> now(b.host.size());
  CHECK(cuMemcpyDtoH(now.data(), b.device, now.size() * sizeof(float)));
  for (std::size_t i = 0; check && i < now.size(); ++i) {
    if (std::memcmp(&now[i], &b.host[i], sizeof(float)) != 0) {
      std::printf("%s mismatch at %zu: %g, expected %g\n", mode.c_str(), i, static_cast<double>(now[i]),
                  static_cast<double>(b.host[i]));
      return 4;
    }
  }
  std::printf("%s fnv %llu\n", mode.c_str(), static_cast<unsigned long long>(fnv1a(now)));
  return 0;
}

constexpr int kM = 1024, kN = 1024, kK = 8;  // C: 4 MiB of floats

// C = A B with beta = 0: the operands, on the host by the time the case is
// made; the call comes between that and check().
struct GemmCase {
  Fillers fillers;
  Buffer a = make(static_cast<std::size_t>(kM) * kK, small_a);
  Buffer b = make(static_cast<std::size_t>(kK) * kN, small_b);
  Buffer c = make(static_cast<std::size_t>(kM) * kN, old_c);
  GemmCase() { fillers.push_out(); }
  // C once more through the host, then compared with the product.
  int check(const std::string& mode) {
    reference(c.host, 0, kM, a.host, 0, b.host, 0, kM, kN, kK, 0);
    fillers.push_out();
    return expect_holds(mode, c, true);
  }
};

int run_gemm(const std::string& mode) {
  void* cublas = open_library("libcublas.so.13");
  auto create = CUBLAS(cublas, cublasCreate_v2);
  auto destroy = CUBLAS(cublas, cublasDestroy_v2);
  auto gemm = reinterpret_cast<GemmEx>(find<void*>(cublas, "cublasGemmEx", "libcublas.so.13"));
  GemmCase gemm_case;
  cublasHandle_t handle = nullptr;
  LIB(create(&handle));
  const float one = 1, zero = 0;
  LIB(gemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, kM, kN, kK, &one, gemm_case.a.pointer(), CUDA_R_32F, kM,
           gemm_case.b.pointer(), CUDA_R_32F, kK, &zero, gemm_case.c.pointer(), CUDA_R_32F, kM,
           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  CHECK(cuCtxSynchronize());
  LIB(destroy(handle));
  return gemm_case.check(mode);
}

// `gemm` again, through a library the program loaded RTLD_LOCAL that links
// cuBLAS itself (local_blas_user.cpp): the program never looks cuBLAS up.
int run_indirect(const std::string& mode) {
  void* user = open_library("liblocal_blas_user.so");
  using Gemm = int (*)(const void*, const void*, void*, int, int, int);
  auto gemm = reinterpret_cast<Gemm>(dlsym(user, "local_gemm_beta0"));
  if (gemm == nullptr) {
    std::printf("error no local_gemm_beta0: %s\n", dlerror());
    return 3;
  }
  GemmCase gemm_case;
  LIB(gemm(gemm_case.a.pointer(), gemm_case.b.pointer(), gemm_case.c.pointer(), kM, kN, kK));
  CHECK(cuCtxSynchronize());
  return gemm_case.check(mode);
}

int run_lt(const std::string& mode) {
  void* lt = open_library("libcublasLt.so.13");
  auto create = CUBLASLT(lt, cublasLtCreate);
  auto destroy = CUBLASLT(lt, cublasLtDestroy);
  auto desc_create = CUBLASLT(lt, cublasLtMatmulDescCreate);
  auto desc_destroy = CUBLASLT(lt, cublasLtMatmulDescDestroy);
  auto layout_create = CUBLASLT(lt, cublasLtMatrixLayoutCreate);
  auto layout_destroy = CUBLASLT(lt, cublasLtMatrixLayoutDestroy);
  auto matmul = CUBLASLT(lt, cublasLtMatmul);
  GemmCase gemm_case;  // D = A B into C's buffer, given as C too (beta = 0)
  cublasLtHandle_t handle = nullptr;
  LIB(create(&handle));
  cublasLtMatmulDesc_t desc = nullptr;
  LIB(desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  LIB(layout_create(&la, CUDA_R_32F, kM, kK, kM));
  LIB(layout_create(&lb, CUDA_R_32F, kK, kN, kK));
  LIB(layout_create(&ld, CUDA_R_32F, kM, kN, kM));
  const float one = 1, zero = 0;
  void* out = gemm_case.c.pointer();
  LIB(matmul(handle, desc, &one, gemm_case.a.pointer(), la, gemm_case.b.pointer(), lb, &zero, out, ld,
             out, ld, nullptr, nullptr, 0, nullptr));
  CHECK(cuCtxSynchronize());
  for (auto* l : {la, lb, ld}) LIB(layout_destroy(l));
  LIB(desc_destroy(desc));
  LIB(destroy(handle));
  return gemm_case.check(mode);
}

// A 3x3 convolution of a 4 x 1 x 128 x 128 input into 16 channels: a
// 4 MiB output. Small integers throughout, so every order of summation
// gives the same bits; the test compares the hash with a run without the shim.
int run_conv(const std::string& mode) {
  void* cudnn = open_library("libcudnn.so.9");
  auto create = CUDNN(cudnn, cudnnCreate);
  auto destroy = CUDNN(cudnn, cudnnDestroy);
  auto create_tensor = CUDNN(cudnn, cudnnCreateTensorDescriptor);
  auto set_tensor = CUDNN(cudnn, cudnnSetTensor4dDescriptor);
  auto create_filter = CUDNN(cudnn, cudnnCreateFilterDescriptor);
  auto set_filter = CUDNN(cudnn, cudnnSetFilter4dDescriptor);
  auto create_conv = CUDNN(cudnn, cudnnCreateConvolutionDescriptor);
  auto set_conv = CUDNN(cudnn, cudnnSetConvolution2dDescriptor);
  auto workspace_size = CUDNN(cudnn, cudnnGetConvolutionForwardWorkspaceSize);
  auto forward = CUDNN(cudnn, cudnnConvolutionForward);
  auto destroy_tensor = CUDNN(cudnn, cudnnDestroyTensorDescriptor);
  auto destroy_filter = CUDNN(cudnn, cudnnDestroyFilterDescriptor);
  auto destroy_conv = CUDNN(cudnn, cudnnDestroyConvolutionDescriptor);
  constexpr int kBatch = 4, kIn = 1, kOut = 16, kSize = 128, kKernel = 3;
  Fillers fillers;
  Buffer x = make(static_cast<std::size_t>(kBatch) * kIn * kSize * kSize, small_a);
  Buffer w = make(static_cast<std::size_t>(kOut) * kIn * kKernel * kKernel, small_b);
  Buffer y = make(static_cast<std::size_t>(kBatch) * kOut * kSize * kSize, old_c);
  cudnnHandle_t handle = nullptr;
  LIB(create(&handle));
  cudnnTensorDescriptor_t x_desc = nullptr, y_desc = nullptr;
  cudnnFilterDescriptor_t w_desc = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  LIB(create_tensor(&x_desc));
  LIB(create_tensor(&y_desc));
  LIB(create_filter(&w_desc));
  LIB(create_conv(&conv));
  LIB(set_tensor(x_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, kBatch, kIn, kSize, kSize));
  LIB(set_tensor(y_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, kBatch, kOut, kSize, kSize));
  LIB(set_filter(w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, kOut, kIn, kKernel, kKernel));
  LIB(set_conv(conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  const auto algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  std::size_t workspace_bytes = 0;
  LIB(workspace_size(handle, x_desc, w_desc, conv, y_desc, algo, &workspace_bytes));
  CUdeviceptr workspace = 0;
  CHECK(cuMemAlloc(&workspace, workspace_bytes > 0 ? workspace_bytes : 1));
  fillers.push_out();
  const float one = 1, zero = 0;
  LIB(forward(handle, &one, x_desc, reinterpret_cast<void*>(x.device), w_desc, reinterpret_cast<void*>(w.device), conv,
              algo, reinterpret_cast<void*>(workspace), workspace_bytes, &zero, y_desc,
              reinterpret_cast<void*>(y.device)));
  CHECK(cuCtxSynchronize());
  LIB(destroy_tensor(x_desc));
  LIB(destroy_tensor(y_desc));
  LIB(destroy_filter(w_desc));
  LIB(destroy_conv(conv));
  CHECK(cuMemFree(workspace));
  LIB(destroy(handle));
  fillers.push_out();
  return expect_holds(mode, y, false);
}

void lookups(const char* copy) {
  void* cublas = open_library("libcublas.so.13");
  void* lt = open_library("libcublasLt.so.13");
  void* cudnn = open_library("libcudnn.so.9");
  const std::pair<void*, const char*> asked[] = {
      {cublas, "cublasGemmEx"},           {cublas, "cublasSgemm_v2"},         {cublas, "cublasGemmStridedBatchedEx"},
      {cublas, "cublasCreate_v2"},        {lt, "cublasLtMatmul"},             {lt, "cublasLtCreate"},
      {cudnn, "cudnnConvolutionForward"}, {cudnn, "cudnnBackendExecute"},    {cudnn, "cudnnCreate"},
  };
  for (const auto& [library, name] : asked) report_resolution((std::string("handle.") + name).c_str(), dlsym(library, name));
  // A library name its library does not define: NULL, with the loader's error.
  for (const auto& [library, name] :
       {std::pair{cublas, "cudnnConvolutionForward"}, std::pair{cudnn, "cublasGemmEx"}, std::pair{cublas, "cublasNoSuch"}}) {
    dlerror();
    void* found = dlsym(library, name);
    const char* error = dlerror();
    report_resolution((std::string("missing.") + name).c_str(), found);
    std::printf("missing.%s.error %s\n", name, error != nullptr && std::strstr(error, name) != nullptr ? "names-it" : "none");
  }
  report_resolution("default.cublasGemmEx", dlsym(RTLD_DEFAULT, "cublasGemmEx"));
  report_resolution("next.cublasLtMatmul", dlsym(RTLD_NEXT, "cublasLtMatmul"));
  if (copy != nullptr) {
    void* second = open_library(copy);
    void* first_copy = dlsym(cublas, "cublasGemmEx");
    void* theirs = dlsym(second, "cublasGemmEx");  // the last look-up of the name
    report_resolution("copy.cublasGemmEx", theirs);
    std::printf("copy.distinct %s\n", theirs != nullptr && theirs != first_copy ? "yes" : "no");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::printf("usage: library_dlsym_probe gemm|lt|conv|indirect|lookups [COPY]\n");
    return 2;
  }
  const std::string mode = argv[1];
  use_primary_context();
  CUdeviceptr first = 0;  // a first allocation starts the shim's runtime, which writes the trace at exit
  CHECK(cuMemAlloc(&first, 4096));
  CHECK(cuMemFree(first));
  if (mode == "lookups") {
    lookups(argc > 2 ? argv[2] : nullptr);
    std::printf("lookups ok\n");
    return 0;
  }
  const int status = mode == "gemm"       ? run_gemm(mode)
                     : mode == "lt"       ? run_lt(mode)
                     : mode == "conv"     ? run_conv(mode)
                     : mode == "indirect" ? run_indirect(mode)
                                          : 2;
  if (status == 0) std::printf("%s ok\n", mode.c_str());
  return status;
}
