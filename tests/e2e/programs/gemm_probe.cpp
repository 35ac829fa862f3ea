// Matrix multiplies through cuBLAS and cuBLASLt (the simulated ones in CI)
// under paging, with the output on the host when the call comes: whether it
// comes back with or without its bytes copied in is the shim's business,
// what the program reads afterwards is not. Every matrix holds small
// integers, so each product is exact in float whatever the summation order
// and the host reference is exact too.
//
//   gemm_probe MODE, MODE one of
//     beta0        cublasGemmEx, beta = 0: C is overwritten whole
//     beta1        cublasGemmEx, beta = 1: C is read
//     gapped       beta = 0 but ldc > m: the bytes between columns stay
//     inside       beta = 0 into the middle of a larger buffer that holds
//                  B too: B is read, the bytes around the output stay
//     batched      cublasGemmStridedBatchedEx, beta = 0, contiguous batch
//     lt_other_c   cublasLtMatmul, D = A B + C with C another buffer
//     lt_in_place  cublasLtMatmul, D = A B + D (C is D)
//
// Prints "gemm ok" when every byte of every buffer is what it must be; a
// wrong value prints "gemm mismatch ..." and exits 4; a CUDA or cuBLAS error
// exits 3.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "float_matrices.h"
#include "probe_support.h"

namespace {

constexpr int kM = 1024, kN = 1024, kK = 8;  // C: 4 MiB of floats

void check_blas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  std::printf("CUBLAS_STATUS %d at %s\n", static_cast<int>(status), what);
  std::exit(3);
}
#define BLAS(call) check_blas((call), #call)

int expect_holds(const Buffer& b, const char* name) {
  std::vector<float> now(b.host.size());
  CHECK(cuMemcpyDtoH(now.data(), b.device, now.size() * sizeof(float)));
  for (std::size_t i = 0; i < now.size(); ++i) {
    if (std::memcmp(&now[i], &b.host[i], sizeof(float)) != 0) {
      std::printf("gemm mismatch in %s at %zu: %g, expected %g\n", name, i, static_cast<double>(now[i]),
                  static_cast<double>(b.host[i]));
      return 4;
    }
  }
  return 0;
}

cublasLtMatrixLayout_t layout(int rows, int cols) {
  cublasLtMatrixLayout_t l = nullptr;
  BLAS(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols), rows));
  return l;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::printf("usage: gemm_probe beta0|beta1|gapped|inside|batched|lt_other_c|lt_in_place\n");
    return 2;
  }
  const std::string mode = argv[1];
  use_primary_context();
  Fillers fillers;

  const bool batched = mode == "batched";
  const int batch = batched ? 4 : 1, n = batched ? kN / 4 : kN;
  Buffer a = make(static_cast<std::size_t>(kM) * kK * batch, small_a);
  Buffer b = make(static_cast<std::size_t>(kK) * n * batch, small_b);
  const int ldc = mode == "gapped" ? kM + 16 : kM;
  const std::size_t c_at = mode == "inside" ? (2 * kMiB + 4096) / sizeof(float) : 0;
  const std::size_t c_floats = mode == "inside" ? 8 * kMiB / sizeof(float) : static_cast<std::size_t>(ldc) * kN;
  Buffer c = make(c_floats, old_c);
  // inside: B is read from the output's own buffer, before the output.
  CUdeviceptr b_in = b.device;
  if (mode == "inside") {
    std::copy(b.host.begin(), b.host.end(), c.host.begin());
    CHECK(cuMemcpyHtoD(c.device, b.host.data(), b.host.size() * sizeof(float)));
    b_in = c.device;
  }
  Buffer other_c = make(mode == "lt_other_c" ? static_cast<std::size_t>(kM) * kN : 1, old_c);
  fillers.push_out();

  const float one = 1, zero = 0;
  const bool reads_c = mode == "beta1" || mode == "lt_other_c" || mode == "lt_in_place";
  const float* beta = reads_c ? &one : &zero;
  const CUdeviceptr out = c.device + c_at * sizeof(float);
  if (mode.rfind("lt_", 0) == 0) {
    cublasLtHandle_t lt = nullptr;
    BLAS(cublasLtCreate(&lt));
    cublasLtMatmulDesc_t desc = nullptr;
    BLAS(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatrixLayout_t la = layout(kM, kK), lb = layout(kK, kN), lc = layout(kM, kN);
    const CUdeviceptr c_in = mode == "lt_other_c" ? other_c.device : out;
    BLAS(cublasLtMatmul(lt, desc, &one, reinterpret_cast<void*>(a.device), la, reinterpret_cast<void*>(b.device), lb,
                        beta, reinterpret_cast<void*>(c_in), lc, reinterpret_cast<void*>(out), lc, nullptr, nullptr, 0,
                        nullptr));
    CHECK(cuCtxSynchronize());
    if (mode == "lt_other_c") {
      std::vector<float> sum = other_c.host;  // D = A B + C, into c
      reference(sum, 0, kM, a.host, 0, b.host, 0, kM, kN, kK, 1);
      c.host = sum;
    } else {
      reference(c.host, 0, kM, a.host, 0, b.host, 0, kM, kN, kK, 1);
    }
    for (auto* l : {la, lb, lc}) BLAS(cublasLtMatrixLayoutDestroy(l));
    BLAS(cublasLtMatmulDescDestroy(desc));
    BLAS(cublasLtDestroy(lt));
  } else {
    cublasHandle_t handle = nullptr;
    BLAS(cublasCreate(&handle));
    if (batched) {
      BLAS(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, kM, n, kK, &one,
                                      reinterpret_cast<void*>(a.device), CUDA_R_32F, kM, kM * kK,
                                      reinterpret_cast<void*>(b.device), CUDA_R_32F, kK, kK * n, beta,
                                      reinterpret_cast<void*>(out), CUDA_R_32F, kM, static_cast<long long>(kM) * n,
                                      batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      for (int i = 0; i < batch; ++i) {
        reference(c.host, static_cast<std::size_t>(i) * kM * n, kM, a.host, static_cast<std::size_t>(i) * kM * kK,
                  b.host, static_cast<std::size_t>(i) * kK * n, kM, n, kK, 0);
      }
    } else {
      BLAS(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, kM, kN, kK, &one, reinterpret_cast<void*>(a.device),
                        CUDA_R_32F, kM, reinterpret_cast<void*>(b_in), CUDA_R_32F, kK, beta,
                        reinterpret_cast<void*>(out), CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      reference(c.host, c_at, ldc, a.host, 0, b.host, 0, kM, kN, kK, reads_c ? 1 : 0);
    }
    CHECK(cuCtxSynchronize());
    BLAS(cublasDestroy(handle));
  }
  fillers.push_out();  // and back once more, through the host
  for (const auto& [buffer, name] : {std::pair{&a, "A"}, {&b, "B"}, {&c, "C"}, {&other_c, "other C"}}) {
    if (const int status = expect_holds(*buffer, name)) return status;
  }
  std::printf("gemm ok\n");
  return 0;
}
