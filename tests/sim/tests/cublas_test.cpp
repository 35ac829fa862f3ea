// The simulated cuBLAS and cuBLASLt (tests/sim/cublas): every GEMM checked
// against a plain host reference (inputs and outputs converted with CUDA's own
// cuda_fp16.h/cuda_bf16.h host conversions, not the simulator's), cuBLAS's
// documented edge cases, validation that launches and writes nothing, and the
// launches' place and duration on the simulated timeline.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "element_conversions.h"
#include "sim_test_support.h"

namespace {

using namespace simtest;

// ---- element conversions, by CUDA's headers (element_conversions.h) ----

Element element(cudaDataType type) { return type == CUDA_R_16F ? Element::f16 : type == CUDA_R_16BF ? Element::bf16 : Element::f32; }
std::size_t bytes_of(cudaDataType type) { return bytes_of(element(type)); }
float round_to(cudaDataType type, float value) { return round_to(element(type), value); }
void put(void* base, cudaDataType type, std::size_t index, float value) { put(base, element(type), index, value); }
float get(const void* base, cudaDataType type, std::size_t index) { return get(base, element(type), index); }
std::uint16_t bits16(const void* base, std::size_t index) {
  std::uint16_t bits;
  std::memcpy(&bits, static_cast<const char*>(base) + 2 * index, 2);
  return bits;
}

// ---- the reference ----

// Column-major, as stored: `ld` rows a column, `cols` columns.
struct Matrix {
  std::int64_t rows, cols, ld;
  std::vector<float> values;  // ld * cols, representable in every type used
};

// Quarters from -4 to 4: exact in fp32, fp16 and bf16, so every type starts
// from the same inputs, and sums of a few products need rounding in bf16.
Matrix random_matrix(std::int64_t rows, std::int64_t cols, std::int64_t ld, unsigned seed) {
  Matrix matrix{rows, cols, ld, std::vector<float>(static_cast<std::size_t>(ld * cols))};
  unsigned state = seed * 2654435761u + 1;
  for (float& value : matrix.values) {
    state = state * 1664525u + 1013904223u;
    value = static_cast<float>(static_cast<int>((state >> 16) % 33) - 16) * 0.25f;
  }
  return matrix;
}

float op_element(const Matrix& x, bool transposed, std::int64_t row, std::int64_t col) {
  return transposed ? x.values[static_cast<std::size_t>(row * x.ld + col)]
                    : x.values[static_cast<std::size_t>(col * x.ld + row)];
}

// D = alpha op(A) op(B) + beta C over the m x n elements, the rest of D's
// storage as `d` was; results rounded to `type` with CUDA's conversions.
Matrix reference_gemm(bool ta, bool tb, float alpha, const Matrix& a, const Matrix& b, float beta, const Matrix& c,
                      Matrix d, std::int64_t k, cudaDataType type) {
  for (std::int64_t col = 0; col < d.cols; ++col) {
    for (std::int64_t row = 0; row < d.rows; ++row) {
      float sum = 0.0f;
      for (std::int64_t p = 0; p < k; ++p) sum += op_element(a, ta, row, p) * op_element(b, tb, p, col);
      float result = alpha * sum;
      if (beta != 0.0f) result += beta * c.values[static_cast<std::size_t>(col * c.ld + row)];
      d.values[static_cast<std::size_t>(col * d.ld + row)] = round_to(type, result);
    }
  }
  return d;
}

// The simulator's count of kernels launched so far, from its report.
long long kernels_launched() {
  const std::string path = "/tmp/vgpusim_cublas_report_" + std::to_string(getpid()) + ".json";
  if (vgpusimWriteReport(path.c_str()) != CUDA_SUCCESS) return -1;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  const std::string report = text.str();
  const std::string key = "\"kernels_launched\":";
  const std::size_t at = report.find(key);
  return at == std::string::npos ? -1 : std::stoll(report.substr(at + key.size()));
}

// The documented duration model (docs/simulated-driver.md): 3 µs plus
// 2·m·n·k·batch flops at 70 % of the H100 SXM's dense peak.
double documented_duration_ns(double m, double n, double k, double batch, double peak_flops) {
  return 3000.0 + 2.0 * m * n * k * batch / (0.7 * peak_flops) * 1e9;
}

class Cublas : public Simulator {
 protected:
  void SetUp() override {
    Simulator::SetUp();
    ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(cublasSetStream(handle_, stream_), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    if (handle_ != nullptr) {
      EXPECT_EQ(cublasDestroy(handle_), CUBLAS_STATUS_SUCCESS);
    }
    EXPECT_EQ(cuStreamDestroy(stream_), CUDA_SUCCESS);
    for (CUdeviceptr pointer : allocations_) EXPECT_EQ(cuMemFree(pointer), CUDA_SUCCESS);
  }
  // Device memory (a host address in the simulator) of `bytes`.
  void* device(std::size_t bytes) {
    CUdeviceptr pointer = 0;
    EXPECT_EQ(cuMemAlloc(&pointer, bytes), CUDA_SUCCESS);
    allocations_.push_back(pointer);
    return reinterpret_cast<void*>(pointer);
  }
  // `matrix` copied into new device memory as `type`.
  void* upload(const Matrix& matrix, cudaDataType type) {
    void* pointer = device(matrix.values.size() * bytes_of(type));
    for (std::size_t i = 0; i < matrix.values.size(); ++i) put(pointer, type, i, matrix.values[i]);
    return pointer;
  }
  // Every stored element of `expected` (gaps between columns included) equals the device's.
  void expect_matrix(const void* pointer, cudaDataType type, const Matrix& expected, const char* what) {
    for (std::size_t i = 0; i < expected.values.size(); ++i) {
      const float got = get(pointer, type, i);
      if (std::isnan(got) && std::isnan(expected.values[i])) continue;  // a NaN left alone, whatever its payload
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(expected.values[i]))
          << what << ": element " << i << " is " << got << ", expected " << expected.values[i];
    }
  }
  void wait() { ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS); }

  cublasHandle_t handle_ = nullptr;
  CUstream stream_ = nullptr;
  std::vector<CUdeviceptr> allocations_;
};

constexpr cudaDataType kTypes[] = {CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF};

// ---- the arithmetic ----

TEST_F(Cublas, SgemmMatchesTheReferenceInAllFourTransposeCombinations) {
  const std::int64_t m = 5, n = 4, k = 3;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      // Leading dimensions larger than the rows: the gaps hold values that
      // must survive (the reference keeps C's).
      const Matrix a = random_matrix(ta ? k : m, ta ? m : k, (ta ? k : m) + 2, 1);
      const Matrix b = random_matrix(tb ? n : k, tb ? k : n, (tb ? n : k) + 1, 2);
      const Matrix c = random_matrix(m, n, m + 3, 3);
      float* da = static_cast<float*>(upload(a, CUDA_R_32F));
      float* db = static_cast<float*>(upload(b, CUDA_R_32F));
      float* dc = static_cast<float*>(upload(c, CUDA_R_32F));
      const float alpha = 1.5f, beta = -0.5f;
      ASSERT_EQ(cublasSgemm(handle_, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha,
                            da, static_cast<int>(a.ld), db, static_cast<int>(b.ld), &beta, dc,
                            static_cast<int>(c.ld)),
                CUBLAS_STATUS_SUCCESS);
      wait();
      const Matrix expected = reference_gemm(ta, tb, alpha, a, b, beta, c, c, k, CUDA_R_32F);
      expect_matrix(dc, CUDA_R_32F, expected, ta ? (tb ? "TT" : "TN") : (tb ? "NT" : "NN"));
      // The reference is not vacuous: the result differs from C somewhere.
      EXPECT_NE(expected.values, c.values);
    }
  }
}

TEST_F(Cublas, KnownValuesOfATwoByTwoProduct) {
  // [1 2; 3 4] (column-major {1,3,2,4}) times [5 6; 7 8] = [19 22; 43 50].
  float* a = static_cast<float*>(device(16));
  float* b = static_cast<float*>(device(16));
  float* c = static_cast<float*>(device(16));
  const float av[] = {1, 3, 2, 4}, bv[] = {5, 7, 6, 8};
  std::memcpy(a, av, 16);
  std::memcpy(b, bv, 16);
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &alpha, a, 2, b, 2, &beta, c, 2),
            CUBLAS_STATUS_SUCCESS);
  wait();
  EXPECT_EQ(c[0], 19.0f);
  EXPECT_EQ(c[1], 43.0f);
  EXPECT_EQ(c[2], 22.0f);
  EXPECT_EQ(c[3], 50.0f);
  // A^T B: [1 3; 2 4] [5 6; 7 8] = [26 30; 38 44].
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 2, &alpha, a, 2, b, 2, &beta, c, 2),
            CUBLAS_STATUS_SUCCESS);
  wait();
  EXPECT_EQ(c[0], 26.0f);
  EXPECT_EQ(c[1], 38.0f);
  EXPECT_EQ(c[2], 30.0f);
  EXPECT_EQ(c[3], 44.0f);
}

TEST_F(Cublas, GemmExRoundsToEachTypeAsCudaDoes) {
  const std::int64_t m = 7, n = 6, k = 5;
  for (const cudaDataType type : kTypes) {
    for (const cudaDataType c_type : {type, CUDA_R_32F}) {
      const Matrix a = random_matrix(m, k, m, 11), b = random_matrix(n, k, n + 1, 12), c = random_matrix(m, n, m, 13);
      void* da = upload(a, type);
      void* db = upload(b, type);
      void* dc = upload(c, c_type);
      const float alpha = 0.3f, beta = 0.7f;  // results that need rounding
      ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &alpha, da, type, m, db, type, n + 1, &beta,
                             dc, c_type, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                CUBLAS_STATUS_SUCCESS)
          << type << " " << c_type;
      wait();
      expect_matrix(dc, c_type, reference_gemm(false, true, alpha, a, b, beta, c, c, k, c_type), "GemmEx");
    }
  }
}

TEST_F(Cublas, HalfAndBfloat16ResultsRoundToNearestEven) {
  // 1x1x1 with A = B = 1: D = alpha exactly, rounded once to the output type.
  // Ties: 1 + 2^-8 lies halfway between bf16 1.0 and 1.0078125 and goes to
  // the even 1.0 (0x3F80); 1 + 3*2^-8 goes up to the even 1.015625 (0x3F82).
  // The same for fp16 at 2^-11: 0x3C00 and 0x3C02. Just above a tie rounds up.
  struct Case {
    cudaDataType type;
    float alpha;
    std::uint16_t bits;
  };
  const Case cases[] = {
      {CUDA_R_16BF, 1.0f + 0x1p-8f, 0x3F80},          {CUDA_R_16BF, 1.0f + 3 * 0x1p-8f, 0x3F82},
      {CUDA_R_16BF, 1.0f + 0x1p-8f + 0x1p-20f, 0x3F81}, {CUDA_R_16F, 1.0f + 0x1p-11f, 0x3C00},
      {CUDA_R_16F, 1.0f + 3 * 0x1p-11f, 0x3C02},       {CUDA_R_16F, 1.0f + 0x1p-11f + 0x1p-20f, 0x3C01},
      {CUDA_R_16F, 70000.0f, 0x7C00},  // past fp16's largest: infinity
  };
  for (const Case& test : cases) {
    void* one = device(2);
    void* d = device(2);
    put(one, test.type, 0, 1.0f);
    const float beta = 0.0f;
    ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &test.alpha, one, test.type, 1, one, test.type,
                           1, &beta, d, test.type, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    wait();
    EXPECT_EQ(bits16(d, 0), test.bits) << "alpha " << test.alpha << " type " << test.type;
  }
}

TEST_F(Cublas, StridedBatchedComputesEachMemberAndLeavesTheSpaceBetween) {
  const std::int64_t m = 3, n = 2, k = 4, batch = 3;
  const std::int64_t stride_a = m * k + 5, stride_b = k * n + 2, stride_c = m * n + 4;  // gaps between members
  for (const cudaDataType type : kTypes) {
    const Matrix a_all = random_matrix(stride_a, batch, stride_a, 21);  // batch members one after another
    const Matrix b_all = random_matrix(stride_b, batch, stride_b, 22);
    const Matrix c_all = random_matrix(stride_c, batch, stride_c, 23);
    void* da = upload(a_all, type);
    void* db = upload(b_all, type);
    void* dc = upload(c_all, type);
    const float alpha = 2.0f, beta = 1.0f;
    ASSERT_EQ(cublasGemmStridedBatchedEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da, type, m, stride_a,
                                         db, type, k, stride_b, &beta, dc, type, m, stride_c, batch,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    wait();
    Matrix expected = c_all;
    for (std::int64_t member = 0; member < batch; ++member) {
      auto slice = [&](const Matrix& all, std::int64_t stride, std::int64_t rows, std::int64_t cols) {
        const auto first = all.values.begin() + member * stride;
        return Matrix{rows, cols, rows, std::vector<float>(first, first + rows * cols)};
      };
      const Matrix c = slice(c_all, stride_c, m, n);
      const Matrix d = reference_gemm(false, false, alpha, slice(a_all, stride_a, m, k), slice(b_all, stride_b, k, n),
                                      beta, c, c, k, type);
      std::copy(d.values.begin(), d.values.end(), expected.values.begin() + member * stride_c);
    }
    expect_matrix(dc, type, expected, "strided batched");
  }
}

TEST_F(Cublas, BetaZeroNeverReadsC) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const cudaDataType type : kTypes) {
    const Matrix a = random_matrix(4, 3, 4, 31), b = random_matrix(3, 5, 3, 32);
    Matrix c{4, 5, 6, std::vector<float>(30, nan)};  // NaN everywhere, gaps included
    void* da = upload(a, type);
    void* db = upload(b, type);
    void* dc = upload(c, type);
    const float alpha = 1.0f, beta = 0.0f;
    ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 4, 5, 3, &alpha, da, type, 4, db, type, 3, &beta, dc,
                           type, 6, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    wait();
    for (std::int64_t col = 0; col < 5; ++col) {
      for (std::int64_t row = 0; row < 6; ++row) {
        const float got = get(dc, type, static_cast<std::size_t>(col * 6 + row));
        if (row < 4) {
          EXPECT_FALSE(std::isnan(got)) << "NaN in C reached D at " << row << "," << col;
        } else {
          EXPECT_TRUE(std::isnan(got)) << "a gap element was written";
        }
      }
    }
    Matrix zeros = c;
    for (float& v : zeros.values) v = 0.0f;
    Matrix expected = reference_gemm(false, false, alpha, a, b, 0.0f, zeros, c, 3, type);
    expect_matrix(dc, type, expected, "beta 0");
  }
}

TEST_F(Cublas, BetaScalesCAndKZeroLeavesBetaTimesC) {
  float* a = static_cast<float*>(device(4));
  float* b = static_cast<float*>(device(4));
  float* c = static_cast<float*>(device(4));
  *a = 2.0f;
  *b = 3.0f;
  *c = 10.0f;
  float alpha = 2.0f, beta = 0.5f;
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &alpha, a, 1, b, 1, &beta, c, 1),
            CUBLAS_STATUS_SUCCESS);
  wait();
  EXPECT_EQ(*c, 17.0f);  // 2*2*3 + 0.5*10
  // k == 0: C = beta * C, A and B untouched.
  beta = 3.0f;
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 0, &alpha, a, 1, b, 1, &beta, c, 1),
            CUBLAS_STATUS_SUCCESS);
  wait();
  EXPECT_EQ(*c, 51.0f);
  // k == 0 and beta == 0: C = 0, even from NaN.
  *c = std::numeric_limits<float>::quiet_NaN();
  beta = 0.0f;
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 0, &alpha, a, 1, b, 1, &beta, c, 1),
            CUBLAS_STATUS_SUCCESS);
  wait();
  EXPECT_EQ(*c, 0.0f);
}

TEST_F(Cublas, DevicePointerModeReadsAlphaAndBetaWhenTheKernelRuns) {
  float* a = static_cast<float*>(device(4));
  float* b = static_cast<float*>(device(4));
  float* c = static_cast<float*>(device(4));
  float* scalars = static_cast<float*>(device(8));  // alpha, beta
  *a = 2.0f;
  *b = 3.0f;
  *c = 10.0f;
  scalars[0] = 1.0f;
  scalars[1] = 1.0f;
  ASSERT_EQ(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_DEVICE), CUBLAS_STATUS_SUCCESS);
  cublasPointerMode_t mode = CUBLAS_POINTER_MODE_HOST;
  ASSERT_EQ(cublasGetPointerMode(handle_, &mode), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mode, CUBLAS_POINTER_MODE_DEVICE);
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &scalars[0], a, 1, b, 1, &scalars[1], c, 1),
            CUBLAS_STATUS_SUCCESS);
  // Changed after the launch, before the kernel runs: a kernel reading
  // device memory sees these values.
  scalars[0] = 4.0f;
  scalars[1] = -1.0f;
  wait();
  EXPECT_EQ(*c, 14.0f);  // 4*6 - 10
}

// ---- validation ----

TEST_F(Cublas, InvalidArgumentsLaunchAndWriteNothing) {
  float* a = static_cast<float*>(device(64 * 4));
  float* b = static_cast<float*>(device(64 * 4));
  float* c = static_cast<float*>(device(64 * 4));
  for (int i = 0; i < 64; ++i) a[i] = b[i] = c[i] = 1.0f;
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  const long long launched = kernels_launched();
  const unsigned long long clock = vgpusimHostTimeNs();
  ASSERT_GE(launched, 0);
  auto sgemm = [&](cublasHandle_t h, cublasOperation_t ta, int m, int n, int k, int lda, int ldb, int ldc) {
    return cublasSgemm(h, ta, CUBLAS_OP_N, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc);
  };
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_N, -1, 2, 2, 2, 2, 2), CUBLAS_STATUS_INVALID_VALUE) << "m < 0";
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_N, 2, -1, 2, 2, 2, 2), CUBLAS_STATUS_INVALID_VALUE) << "n < 0";
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_N, 2, 2, -1, 2, 2, 2), CUBLAS_STATUS_INVALID_VALUE) << "k < 0";
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_N, 4, 2, 2, 3, 2, 4), CUBLAS_STATUS_INVALID_VALUE) << "lda < m";
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_T, 2, 2, 4, 3, 4, 2), CUBLAS_STATUS_INVALID_VALUE) << "lda < k (A^T)";
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_N, 2, 2, 4, 2, 3, 2), CUBLAS_STATUS_INVALID_VALUE) << "ldb < k";
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_N, 4, 2, 2, 4, 2, 3), CUBLAS_STATUS_INVALID_VALUE) << "ldc < m";
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_CONJG, 2, 2, 2, 2, 2, 2), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(sgemm(nullptr, CUBLAS_OP_N, 2, 2, 2, 2, 2, 2), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasGemmStridedBatchedEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &alpha, a, CUDA_R_32F, 2, 4, b,
                                       CUDA_R_32F, 2, 4, &beta, c, CUDA_R_32F, 2, 4, -1, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE)
      << "batchCount < 0";
  // Types and compute modes it does not simulate.
  EXPECT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &alpha, a, CUDA_R_64F, 2, b, CUDA_R_64F, 2, &beta,
                         c, CUDA_R_64F, 2, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &alpha, a, CUDA_R_16F, 2, b, CUDA_R_16F, 2, &beta,
                         c, CUDA_R_16F, 2, CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_NOT_SUPPORTED)
      << "fp16 accumulation";
  EXPECT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &alpha, a, CUDA_R_16F, 2, b, CUDA_R_16BF, 2,
                         &beta, c, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_NOT_SUPPORTED)
      << "A and B of different types";
  // Nothing to compute: success, no launch.
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_N, 0, 2, 2, 1, 2, 1), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_N, 2, 0, 2, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGemmStridedBatchedEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &alpha, a, CUDA_R_32F, 2, 4, b,
                                       CUDA_R_32F, 2, 4, &beta, c, CUDA_R_32F, 2, 4, 0, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(kernels_launched(), launched) << "a refused or empty GEMM launched a kernel";
  EXPECT_EQ(vgpusimHostTimeNs(), clock) << "the simulated clock moved";
  for (int i = 0; i < 64; ++i) ASSERT_EQ(c[i], 1.0f) << "C written at " << i;
  // The count is live: a valid GEMM is one launch.
  EXPECT_EQ(sgemm(handle_, CUBLAS_OP_N, 2, 2, 2, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
  wait();
  EXPECT_EQ(kernels_launched(), launched + 1);
  EXPECT_EQ(c[0], 2.0f);
}

TEST_F(Cublas, ADestroyedHandleIsNotInitialized) {
  cublasHandle_t other = nullptr;
  ASSERT_EQ(cublasCreate(&other), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasDestroy(other), CUBLAS_STATUS_SUCCESS);
  const float one = 1.0f;
  float* c = static_cast<float*>(device(4));
  EXPECT_EQ(cublasSgemm(other, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, c, 1, c, 1, &one, c, 1),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasSetStream(other, stream_), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasDestroy(other), CUBLAS_STATUS_NOT_INITIALIZED);
}

TEST_F(Cublas, HandleStateReadsBack) {
  CUstream stream = nullptr;
  ASSERT_EQ(cublasGetStream(handle_, &stream), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(stream, stream_);
  ASSERT_EQ(cublasSetMathMode(handle_, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  ASSERT_EQ(cublasGetMathMode(handle_, &math), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(math, CUBLAS_TF32_TENSOR_OP_MATH);
  int version = 0;
  ASSERT_EQ(cublasGetVersion(handle_, &version), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(version, CUBLAS_VERSION);
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  EXPECT_STRNE(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE), "");
}

// ---- the timeline ----

void sleep_body(void**, const vgpusimLaunch*, void*) {}

TEST_F(Cublas, GemmRunsInOrderOnTheHandlesStreamForTheDocumentedDuration) {
  // The clock's mechanics, exactly: the idle model charges no host time per call.
  ASSERT_EQ(vgpusimSetCostModel("idle"), CUDA_SUCCESS);

  static CUfunction one_ms = register_kernel("cublas_test_1ms", sleep_body, {}, 1'000'000);
  const int m = 256, n = 256, k = 256;
  float* a = static_cast<float*>(device(4));  // alpha == 0: A and B are not read
  void* c16 = device(m * n * 2);
  float* c32 = static_cast<float*>(device(m * n * 4));
  c32[0] = 5.0f;
  const float alpha = 0.0f, beta = 2.0f;
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  const unsigned long long before = vgpusimHostTimeNs();
  ASSERT_EQ(launch(one_ms, stream_, {}), CUDA_SUCCESS);
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, m, a, k, &beta, c32, m),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(c32[0], 5.0f) << "the GEMM ran before its stream reached it";
  ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);  // this stream only
  EXPECT_EQ(c32[0], 10.0f) << "synchronising the handle's stream did not run the GEMM";
  const double fp32 = documented_duration_ns(m, n, k, 1, 67e12);
  EXPECT_NEAR(static_cast<double>(vgpusimHostTimeNs() - before), 1e6 + fp32, 2.0);
  EXPECT_NEAR(fp32, 3000.0 + 715.45, 0.01);  // the model itself, worked by hand

  // bf16 runs at the tensor-core rate.
  const unsigned long long bf16_start = vgpusimHostTimeNs();
  ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, CUDA_R_16BF, m, a, CUDA_R_16BF, k,
                         &beta, c16, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  wait();
  EXPECT_NEAR(static_cast<double>(vgpusimHostTimeNs() - bf16_start), documented_duration_ns(m, n, k, 1, 989e12), 2.0);
}

// ---- cuBLASLt ----

class CublasLt : public Cublas {
 protected:
  void SetUp() override {
    Cublas::SetUp();
    ASSERT_EQ(cublasLtCreate(&lt_), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    for (cublasLtMatrixLayout_t layout : layouts_) EXPECT_EQ(cublasLtMatrixLayoutDestroy(layout), CUBLAS_STATUS_SUCCESS);
    if (desc_ != nullptr) {
      EXPECT_EQ(cublasLtMatmulDescDestroy(desc_), CUBLAS_STATUS_SUCCESS);
    }
    EXPECT_EQ(cublasLtDestroy(lt_), CUBLAS_STATUS_SUCCESS);
    Cublas::TearDown();
  }
  cublasLtMatrixLayout_t layout(cudaDataType type, const Matrix& matrix) {
    cublasLtMatrixLayout_t created = nullptr;
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&created, type, static_cast<std::uint64_t>(matrix.rows),
                                         static_cast<std::uint64_t>(matrix.cols), matrix.ld),
              CUBLAS_STATUS_SUCCESS);
    layouts_.push_back(created);
    return created;
  }
  cublasLtMatmulDesc_t descriptor(cublasOperation_t ta, cublasOperation_t tb) {
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), CUBLAS_STATUS_SUCCESS);
    return desc_;
  }
  cublasLtHandle_t lt_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  std::vector<cublasLtMatrixLayout_t> layouts_;
};

TEST_F(CublasLt, MatmulWritesDAndLeavesCAlone) {
  const std::int64_t m = 6, n = 5, k = 4;
  for (const cudaDataType type : kTypes) {
    desc_ = nullptr;
    const Matrix a = random_matrix(k, m, k + 1, 41), b = random_matrix(k, n, k, 42);  // A^T, B
    const Matrix c = random_matrix(m, n, m + 2, 43), d0 = random_matrix(m, n, m + 1, 44);
    void* da = upload(a, type);
    void* db = upload(b, type);
    void* dc = upload(c, type);
    void* dd = upload(d0, type);
    const float alpha = 0.75f, beta = -1.25f;
    cublasLtMatmulDesc_t desc = descriptor(CUBLAS_OP_T, CUBLAS_OP_N);
    ASSERT_EQ(cublasLtMatmul(lt_, desc, &alpha, da, layout(type, a), db, layout(type, b), &beta, dc, layout(type, c),
                             dd, layout(type, d0), nullptr, nullptr, 0, stream_),
              CUBLAS_STATUS_SUCCESS);
    wait();
    expect_matrix(dd, type, reference_gemm(true, false, alpha, a, b, beta, c, d0, k, type), "D");
    expect_matrix(dc, type, c, "C");
    EXPECT_EQ(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);
  }
  desc_ = nullptr;
}

TEST_F(CublasLt, MatmulInPlaceWithCEqualToD) {
  const std::int64_t m = 4, n = 3, k = 5;
  const cudaDataType type = CUDA_R_16BF;
  const Matrix a = random_matrix(m, k, m, 51), b = random_matrix(n, k, n, 52), c = random_matrix(m, n, m + 3, 53);
  void* da = upload(a, type);
  void* db = upload(b, type);
  void* dc = upload(c, type);
  const float alpha = 1.0f, beta = 0.5f;
  cublasLtMatrixLayout_t c_layout = layout(type, c);
  ASSERT_EQ(cublasLtMatmul(lt_, descriptor(CUBLAS_OP_N, CUBLAS_OP_T), &alpha, da, layout(type, a), db,
                           layout(type, b), &beta, dc, c_layout, dc, c_layout, nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_SUCCESS);
  wait();
  expect_matrix(dc, type, reference_gemm(false, true, alpha, a, b, beta, c, c, k, type), "in place");
}

TEST_F(CublasLt, BetaZeroWithNanInCAndDevicePointerMode) {
  const cudaDataType type = CUDA_R_16F;
  const Matrix a = random_matrix(3, 2, 3, 61), b = random_matrix(2, 3, 2, 62);
  const Matrix c{3, 3, 3, std::vector<float>(9, std::numeric_limits<float>::quiet_NaN())};
  const Matrix d0{3, 3, 3, std::vector<float>(9, 0.0f)};
  void* da = upload(a, type);
  void* db = upload(b, type);
  void* dc = upload(c, type);
  void* dd = upload(d0, type);
  float* scalars = static_cast<float*>(device(8));
  scalars[0] = 2.0f;
  scalars[1] = 0.0f;
  cublasLtMatmulDesc_t desc = descriptor(CUBLAS_OP_N, CUBLAS_OP_N);
  const std::int32_t device_mode = CUBLASLT_POINTER_MODE_DEVICE;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &device_mode, sizeof device_mode),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmul(lt_, desc, &scalars[0], da, layout(type, a), db, layout(type, b), &scalars[1], dc,
                           layout(type, c), dd, layout(type, d0), nullptr, nullptr, 0, stream_),
            CUBLAS_STATUS_SUCCESS);
  wait();
  expect_matrix(dd, type, reference_gemm(false, false, 2.0f, a, b, 0.0f, d0, d0, 2, type), "D");
}

TEST_F(CublasLt, HeuristicOffersOneAlgorithmAndTheWorkspaceIsWritten) {
  const cudaDataType type = CUDA_R_32F;
  const Matrix a = random_matrix(2, 2, 2, 71), b = random_matrix(2, 2, 2, 72), c = random_matrix(2, 2, 2, 73);
  void* da = upload(a, type);
  void* db = upload(b, type);
  void* dc = upload(c, type);
  constexpr std::size_t kWorkspace = 1 << 20;
  auto* workspace = static_cast<unsigned char*>(device(kWorkspace));
  std::memset(workspace, 0, kWorkspace);
  cublasLtMatmulDesc_t desc = descriptor(CUBLAS_OP_N, CUBLAS_OP_N);
  cublasLtMatrixLayout_t la = layout(type, a), lb = layout(type, b), lc = layout(type, c);
  cublasLtMatmulPreference_t preference = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  const std::uint64_t max_workspace = kWorkspace;
  ASSERT_EQ(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                                                 sizeof max_workspace),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                                                 4),
            CUBLAS_STATUS_INVALID_VALUE)
      << "wrong size";
  cublasLtMatmulHeuristicResult_t results[4] = {};
  int returned = -1;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(lt_, desc, la, lb, lc, lc, preference, 4, results, &returned),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(returned, 1);
  EXPECT_EQ(results[0].state, CUBLAS_STATUS_SUCCESS);
  EXPECT_LE(results[0].workspaceSize, kWorkspace);
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(lt_, desc, la, lb, lc, lc, preference, 0, results, &returned),
            CUBLAS_STATUS_INVALID_VALUE);
  ASSERT_EQ(cublasLtMatmulPreferenceDestroy(preference), CUBLAS_STATUS_SUCCESS);

  const float alpha = 1.0f, beta = 1.0f;
  ASSERT_EQ(cublasLtMatmul(lt_, desc, &alpha, da, la, db, lb, &beta, dc, lc, dc, lc, &results[0].algo, workspace,
                           kWorkspace, stream_),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(workspace[0], 0) << "written before the kernel ran";
  wait();
  EXPECT_NE(workspace[0], 0) << "the kernel wrote no scratch into its workspace";
  expect_matrix(dc, type, reference_gemm(false, false, alpha, a, b, beta, c, c, 2, type), "D");
}

TEST_F(CublasLt, DescriptorAttributesReadBackAndWhatIsNotSimulatedIsRefused) {
  cublasLtMatmulDesc_t desc = descriptor(CUBLAS_OP_T, CUBLAS_OP_N);
  std::int32_t transa = -1;
  std::size_t written = 0;
  ASSERT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(transa, CUBLAS_OP_T);
  EXPECT_EQ(written, sizeof transa);
  ASSERT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, nullptr, 0, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(written, sizeof(std::int32_t)) << "size 0 asks for the size";
  const std::uint32_t relu = CUBLASLT_EPILOGUE_RELU, plain = CUBLASLT_EPILOGUE_DEFAULT;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu, sizeof relu),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &plain, sizeof plain),
            CUBLAS_STATUS_SUCCESS);
  const std::int32_t vector_mode = CUBLASLT_POINTER_MODE_DEVICE_VECTOR;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &vector_mode, sizeof vector_mode),
            CUBLAS_STATUS_NOT_SUPPORTED);
  const void* bias = nullptr;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
            CUBLAS_STATUS_NOT_SUPPORTED);

  const Matrix a{4, 3, 5, {}};
  cublasLtMatrixLayout_t la = layout(CUDA_R_16F, a);
  std::int64_t ld = 0;
  ASSERT_EQ(cublasLtMatrixLayoutGetAttribute(la, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(ld, 5);
  const std::int32_t batch = 7;
  const std::int64_t stride = 100;
  ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
            CUBLAS_STATUS_SUCCESS);
  std::int64_t stride_back = 0;
  ASSERT_EQ(cublasLtMatrixLayoutGetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride_back,
                                             sizeof stride_back, nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(stride_back, 100);
  const std::int32_t row_major = CUBLASLT_ORDER_ROW;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_ORDER, &row_major, sizeof row_major),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_LD, &ld, 4), CUBLAS_STATUS_INVALID_VALUE);
  // Arrays of matrix pointers are not simulated; the default (strided) reads back.
  const std::uint32_t pointer_array = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &pointer_array,
                                             sizeof pointer_array),
            CUBLAS_STATUS_NOT_SUPPORTED);
  std::uint32_t batch_mode = 9;
  ASSERT_EQ(cublasLtMatrixLayoutGetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &batch_mode, sizeof batch_mode,
                                             nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(batch_mode, std::uint32_t{CUBLASLT_BATCH_MODE_STRIDED});
  EXPECT_STRNE(cublasLtGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED), "");
}

TEST_F(CublasLt, InvalidProblemsLaunchAndWriteNothing) {
  const cudaDataType type = CUDA_R_32F;
  const Matrix a{2, 3, 2, std::vector<float>(6, 1.0f)}, b{3, 2, 3, std::vector<float>(6, 1.0f)};
  const Matrix c{2, 2, 2, std::vector<float>(4, 1.0f)};
  void* da = upload(a, type);
  void* db = upload(b, type);
  void* dc = upload(c, type);
  cublasLtMatmulDesc_t desc = descriptor(CUBLAS_OP_N, CUBLAS_OP_N);
  cublasLtMatrixLayout_t la = layout(type, a), lb = layout(type, b), lc = layout(type, c);
  const Matrix wrong_k{4, 2, 4, {}}, short_ld{2, 2, 1, {}};
  cublasLtMatrixLayout_t lb_wrong = layout(type, wrong_k), lc_short = layout(type, short_ld);
  cublasLtMatrixLayout_t lc_half = layout(CUDA_R_16F, c);
  const float alpha = 1.0f, beta = 1.0f;
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  const long long launched = kernels_launched();
  const unsigned long long clock = vgpusimHostTimeNs();
  auto matmul = [&](cublasLtHandle_t h, cublasLtMatrixLayout_t b_layout, cublasLtMatrixLayout_t c_layout,
                    cublasLtMatrixLayout_t d_layout) {
    return cublasLtMatmul(h, desc, &alpha, da, la, db, b_layout, &beta, dc, c_layout, dc, d_layout, nullptr, nullptr,
                          0, stream_);
  };
  EXPECT_EQ(matmul(lt_, lb_wrong, lc, lc), CUBLAS_STATUS_INVALID_VALUE) << "op(B) rows != k";
  EXPECT_EQ(matmul(lt_, lb, lc_short, lc_short), CUBLAS_STATUS_INVALID_VALUE) << "ld < rows";
  EXPECT_EQ(matmul(lt_, lb, lc_half, lc_half), CUBLAS_STATUS_NOT_SUPPORTED) << "fp32 A, B with fp16 C, D";
  EXPECT_EQ(matmul(nullptr, lb, lc, lc), CUBLAS_STATUS_NOT_INITIALIZED);
  const std::int32_t half_scale = CUDA_R_16F;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, &half_scale, sizeof half_scale),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(matmul(lt_, lb, lc, lc), CUBLAS_STATUS_NOT_SUPPORTED) << "fp16 alpha and beta";
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_EQ(kernels_launched(), launched);
  EXPECT_EQ(vgpusimHostTimeNs(), clock);
  expect_matrix(dc, type, c, "C");
}

TEST_F(CublasLt, MatmulRunsOnItsStreamForTheDocumentedDuration) {
  // The clock's mechanics, exactly: the idle model charges no host time per call.
  ASSERT_EQ(vgpusimSetCostModel("idle"), CUDA_SUCCESS);

  const std::int64_t m = 512, n = 128, k = 1024, batch = 2;
  const cudaDataType type = CUDA_R_16F;
  const Matrix a{m, k, m, {}}, b{k, n, k, {}}, c{m, n, m, {}};
  void* operand = device(16);  // alpha == 0: A and B are not read
  void* dc = device(static_cast<std::size_t>(m * n * batch * 2));
  cublasLtMatmulDesc_t desc = descriptor(CUBLAS_OP_N, CUBLAS_OP_N);
  cublasLtMatrixLayout_t la = layout(type, a), lb = layout(type, b), lc = layout(type, c);
  const std::int32_t batch_count = static_cast<std::int32_t>(batch);
  const std::int64_t stride_c = m * n;
  for (cublasLtMatrixLayout_t l : {la, lb, lc}) {
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch_count, sizeof batch_count),
              CUBLAS_STATUS_SUCCESS);
  }
  ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride_c, sizeof stride_c),
            CUBLAS_STATUS_SUCCESS);
  put(dc, type, 0, 3.0f);
  put(dc, type, static_cast<std::size_t>(stride_c), 5.0f);
  const float alpha = 0.0f, beta = 2.0f;
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  const unsigned long long before = vgpusimHostTimeNs();
  ASSERT_EQ(cublasLtMatmul(lt_, desc, &alpha, operand, la, operand, lb, &beta, dc, lc, dc, lc, nullptr, nullptr, 0,
                           stream_),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(get(dc, type, 0), 3.0f) << "ran before its stream reached it";
  wait();
  EXPECT_EQ(get(dc, type, 0), 6.0f);
  EXPECT_EQ(get(dc, type, static_cast<std::size_t>(stride_c)), 10.0f) << "second batch member";
  EXPECT_NEAR(static_cast<double>(vgpusimHostTimeNs() - before), documented_duration_ns(m, n, k, batch, 989e12), 2.0);
}

}  // namespace

int main(int argc, char** argv) {
  g_self = argv[0];
  setenv("VGPUSIM_DEVICE_MEMORY", "1GiB", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
