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

// (A code inside CUresult's range, 0 to 1023, that cuda.h does not name: a
// newer driver's. One outside the range is no CUresult at all, and
// UBSan's enum check rightly faults its load.)
TEST(DriverError, ACodeWithoutANameIsStillNumbered) {
  const auto unnamed = static_cast<CUresult>(950);
  EXPECT_EQ(driver_error_name(unnamed), nullptr);
  EXPECT_EQ(driver_error(unnamed), "CUDA error 950");
}

}  // namespace
}  // namespace vgpumem::vmm
