// The process boundary: what crosses between the program and the shim --
// exceptions (never), the loader's lock (never against a lock of ours).
// Fork is tested with paging (paging_test.cpp), the reclaimer's signal mask
// in tests/unit/reclaimer_test.cpp, dlsym(RTLD_NEXT) in lookup_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "process.h"

namespace vgpumem::test {
namespace {

ProcessResult run_with_failing_allocations(const std::string& policy) {
  auto env = shim_environment();
  env["VGPUMEM_LIMIT"] = "64MiB";
  env["VGPUMEM_POLICY"] = policy;
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  env["VGPUMEMTEST_FAIL_ALLOCATIONS"] = "cuMemAlloc_v2#2";
  return run_process({program("boundary_probe")}, env);
}

void expect_out_of_memory_not_terminate(const ProcessResult& result) {
  EXPECT_EQ(result.signal, 0) << "killed by a signal (std::terminate aborts): " << result.err;
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(field(result.out, "boundary second"), "2") << "CUDA_ERROR_OUT_OF_MEMORY";
  EXPECT_NE(result.out.find("boundary ok"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("error: cuMemAlloc_v2 failed inside vgpumem: out of host memory (std::bad_alloc); the "
                            "call returns CUDA_ERROR_OUT_OF_MEMORY"),
            std::string::npos)
      << result.err;
}

// An allocation failure inside the shim (its operator new throws, made to by
// test-only fault injection) becomes CUDA_ERROR_OUT_OF_MEMORY and one log
// line, never an exception unwinding into the program's C frames
// (std::terminate); the next call works again.
TEST(Boundary, AnAllocationFailureInsideAPagedAllocationIsOutOfMemory) {
  if (!VGPUMEM_TEST_FAULT_INJECTION) GTEST_SKIP() << "built without fault injection (sanitizer builds)";
  expect_out_of_memory_not_terminate(run_with_failing_allocations("lru"));
}

TEST(Boundary, AnAllocationFailureInsideACappedAllocationIsOutOfMemory) {
  if (!VGPUMEM_TEST_FAULT_INJECTION) GTEST_SKIP() << "built without fault injection (sanitizer builds)";
  expect_out_of_memory_not_terminate(run_with_failing_allocations("off"));
}

// The control: without the fault injected, every call succeeds.
TEST(Boundary, WithoutTheFaultEveryAllocationSucceeds) {
  auto env = shim_environment();
  env["VGPUMEM_LIMIT"] = "64MiB";
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  const ProcessResult result = run_process({program("boundary_probe")}, env);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(field(result.out, "boundary second"), "0");
}

// A hook first run inside a library constructor (under the loader's lock)
// while another thread's first CUDA call loads the driver: neither waits for
// the other. Fresh processes, several times: the probe's alarm ends a stuck one.
TEST(BoundaryConcurrency, AHookInALibraryConstructorDoesNotDeadlockWithTheDriversLoad) {
  for (int run = 0; run < 3; ++run) {
    const ProcessResult result = run_process({program("ctor_probe"), VGPUMEM_TEST_CTOR_LIBRARY}, shim_environment());
    ASSERT_EQ(result.signal, 0) << "run " << run << ": stuck, ended by the probe's alarm";
    ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
    EXPECT_NE(result.out.find("ctor ok"), std::string::npos) << result.out;
  }
}

}  // namespace
}  // namespace vgpumem::test
