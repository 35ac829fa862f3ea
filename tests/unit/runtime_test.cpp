// The runtime without the preload library: shim/ linked with vmm/,
// scheduler/, cupti/ and trace/ over the simulated driver, no interpose/ in
// the program (tests/unit/CMakeLists.txt links no vgpumem target that has
// it). A stand-in Platform answers what the preloaded library's would: the
// simulator's DriverOps, its device sizes, and calls to describe.
//
// Its own program: the runtime is one per process, and the configuration
// (a cap of half the simulated device, paging on) is read from the
// environment at load, so main() sets it and starts the program again.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "shim/platform.h"
#include "shim/runtime.h"
#include "sim_driver_ops.h"
#include "vgpusim.h"

namespace vgpumem::test {
namespace {

constexpr std::uint64_t kMiB = 1u << 20;

class SimulatedPlatform final : public Platform {
 public:
  const vmm::DriverOps* driver_ops() override {
    ++driver_ops_asked;
    return &simulated_driver_ops();
  }
  int device_count() override {
    int count = 0;
    return cuDeviceGetCount(&count) == CUDA_SUCCESS ? count : -1;
  }
  CUresult device_total_memory(int device, std::size_t* bytes) override {
    ++sizes_asked;
    return cuDeviceTotalMem_v2(bytes, device);
  }
  cupti::SymbolLookup symbol_lookup() override { return &dlsym; }
  void describe_calls(nlohmann::json& summary) const override {
    summary["calls_by_api"] = {{"cuStandInCall", 3}};
  }
  void forget_calls_after_fork() override {}

  int driver_ops_asked = 0;
  int sizes_asked = 0;
};

SimulatedPlatform& platform() {
  static SimulatedPlatform* platform = new SimulatedPlatform();  // outlives the runtime, which is never destroyed
  return *platform;
}

class RuntimeWithoutInterposer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    CUcontext context = nullptr;
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(context), CUDA_SUCCESS);
    Runtime::install_platform(platform());
  }
};

// The percent cap is resolved through the platform (the device's size), and
// a paged allocation past it succeeds: the pager offloads what it must.
TEST_F(RuntimeWithoutInterposer, ResolvesTheCapAndPagesPastItThroughThePlatform) {
  Runtime& runtime = Runtime::get();
  ASSERT_TRUE(runtime.config().any_limit()) << "main() sets VGPUMEM_LIMIT";
  EXPECT_EQ(runtime.accounting().usage(0).cap, 32 * kMiB) << "half of the simulated 64 MiB device";
  EXPECT_GE(platform().sizes_asked, 1);

  vmm::Pager* pager = runtime.pager_for(0);
  ASSERT_NE(pager, nullptr) << "paging stays off when the platform gives no DriverOps";
  EXPECT_EQ(platform().driver_ops_asked, 1);
  CUdeviceptr first = 0, second = 0;
  ASSERT_EQ(pager->allocate(0, 24 * kMiB, &first), CUDA_SUCCESS);
  ASSERT_EQ(pager->allocate(0, 24 * kMiB, &second), CUDA_SUCCESS) << "48 MiB allocated under a 32 MiB cap";
  EXPECT_NE(first, second);
  EXPECT_LE(pager->resident_bytes(0), 32 * kMiB);

  CUresult freed = CUDA_ERROR_UNKNOWN;
  EXPECT_TRUE(pager->free(first, &freed));
  EXPECT_EQ(freed, CUDA_SUCCESS);
}

// The summary and the trace file carry what the platform describes, next to
// the runtime's own accounting and paging.
TEST_F(RuntimeWithoutInterposer, WritesATraceWithWhatThePlatformDescribes) {
  Runtime& runtime = Runtime::get();
  ASSERT_TRUE(runtime.tracing()) << "main() sets VGPUMEM_TRACE";
  ASSERT_NE(runtime.pager_for(0), nullptr);
  runtime.write_trace();
  std::ifstream file(runtime.config().trace_path);
  ASSERT_TRUE(file.good()) << runtime.config().trace_path;
  const nlohmann::json trace = nlohmann::json::parse(file);
  const nlohmann::json& summary = trace["vgpumem"];
  EXPECT_EQ(summary["calls_by_api"].value("cuStandInCall", 0), 3) << summary["calls_by_api"].dump();
  ASSERT_TRUE(summary.contains("paging")) << "the pager made through the platform reports";
  EXPECT_EQ(summary["paging"].value("policy", ""), "lru");
  std::remove(runtime.config().trace_path.c_str());
}

}  // namespace
}  // namespace vgpumem::test

int main(int argc, char** argv) {
  // The configuration was read when this program loaded (shim/lifecycle.cpp):
  // the first time through, set it and load the program again.
  if (std::getenv("VGPUMEM_TRACE") == nullptr) {
    setenv("VGPUMEM_LIMIT", "50%", 1);
    setenv("VGPUMEM_POLICY", "lru", 1);
    setenv("VGPUMEM_CUPTI", "off", 1);
    setenv("VGPUSIM_DEVICE_MEMORY", "64MiB", 1);
    setenv("VGPUMEM_TRACE", VGPUMEM_UNIT_TMP_DIR "/runtime_test_trace.json", 1);
    execv("/proc/self/exe", argv);
    std::perror("execv /proc/self/exe");
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
