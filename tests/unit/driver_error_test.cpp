// Driver errors in log lines are named (vmm/driver_error.h), not numbers a
// reader must look up in cuda.h.
#include <gtest/gtest.h>

#include <string>

#include "vmm/driver_error.h"

namespace vgpumem::vmm {
namespace {

TEST(DriverError, NamesTheCodesTheDriversCallsReturn) {
  EXPECT_EQ(driver_error(CUDA_ERROR_OUT_OF_MEMORY), "CUDA_ERROR_OUT_OF_MEMORY (2)");
  EXPECT_EQ(driver_error(CUDA_ERROR_ILLEGAL_ADDRESS), "CUDA_ERROR_ILLEGAL_ADDRESS (700)");
  EXPECT_STREQ(driver_error_name(CUDA_SUCCESS), "CUDA_SUCCESS");
  EXPECT_STREQ(driver_error_name(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED), "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED");
}

TEST(DriverError, ACodeWithoutANameIsStillNumbered) {
  const auto unnamed = static_cast<CUresult>(12345);
  EXPECT_EQ(driver_error_name(unnamed), nullptr);
  EXPECT_EQ(driver_error(unnamed), "CUDA error 12345");
}

}  // namespace
}  // namespace vgpumem::vmm
