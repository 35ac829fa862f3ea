// Every way a process finds a driver entry point must end at the shim's hook
// for the right ABI variant (checked with dladdr in a fresh, preloaded
// process), and everything else must end where it would without the shim.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "process.h"

namespace vgpumem::test {
namespace {

constexpr const char* kShim = "libvgpumem.so";
constexpr const char* kDriver = "libcuda.so.1";

class LookupTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    preloaded_ = new ProcessResult(run_process({program("lookup_paths"), "all"}, shim_environment()));
    plain_ = new ProcessResult(run_process({program("lookup_paths"), "all"}, simulator_environment()));
  }
  static void TearDownTestSuite() {
    delete preloaded_;
    delete plain_;
  }
  // "<symbol> <object>" that `label` resolved to under the shim.
  static std::string resolved(const std::string& label) { return field(preloaded_->out, label); }
  static std::string resolved_without_shim(const std::string& label) { return field(plain_->out, label); }

  static ProcessResult* preloaded_;
  static ProcessResult* plain_;
};
ProcessResult* LookupTest::preloaded_ = nullptr;
ProcessResult* LookupTest::plain_ = nullptr;

std::string at(const std::string& symbol, const std::string& object) { return symbol + " " + object; }

TEST_F(LookupTest, ProgramsRanToCompletion) {
  ASSERT_EQ(preloaded_->exit_code, 0) << preloaded_->out << preloaded_->err;
  ASSERT_EQ(plain_->exit_code, 0) << plain_->out << plain_->err;
  EXPECT_EQ(lines_starting_with(preloaded_->out, "error").size(), 0u) << preloaded_->out;
  EXPECT_NE(preloaded_->out.find("done"), std::string::npos);
}

TEST_F(LookupTest, ExportedSymbolsBindToHooks) {
  EXPECT_EQ(resolved("exported.cuMemAlloc_v2"), at("cuMemAlloc_v2", kShim));
  EXPECT_EQ(resolved("exported.cuLaunchKernel"), at("cuLaunchKernel", kShim));
  EXPECT_EQ(resolved("exported.cuMemGetInfo_v2"), at("cuMemGetInfo_v2", kShim));
  // Not in the hooked set: the real driver's own function.
  EXPECT_EQ(resolved("exported.cuInit"), at("cuInit", kDriver));
}

TEST_F(LookupTest, WithoutTheShimEverythingIsTheDriver) {
  // The control: the same program unpreloaded sees the driver everywhere, so
  // the assertions above can fail.
  EXPECT_EQ(resolved_without_shim("exported.cuMemAlloc_v2"), at("cuMemAlloc_v2", kDriver));
  EXPECT_EQ(resolved_without_shim("dlsym.handle.cuLaunchKernel_ptsz"), at("cuLaunchKernel_ptsz", kDriver));
  EXPECT_EQ(resolved_without_shim("gpa2.cuLaunchKernel@7000/2"), at("cuLaunchKernel_ptsz", kDriver));
}

TEST_F(LookupTest, DlsymOnHandleDefaultAndNext) {
  for (const char* name : {"cuMemAlloc_v2", "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx_ptsz",
                           "cuMemcpyHtoD_v2_ptds", "cuGetProcAddress", "cuGetProcAddress_v2", "cuMemCreate"}) {
    EXPECT_EQ(resolved(std::string("dlsym.handle.") + name), at(name, kShim)) << name;
    EXPECT_EQ(resolved(std::string("dlsym.default.") + name), at(name, kShim)) << name;
  }
  for (const char* name : {"cuInit", "cuStreamIsCapturing"}) {
    EXPECT_EQ(resolved(std::string("dlsym.handle.") + name), at(name, kDriver)) << name;
  }
  EXPECT_EQ(resolved("dlsym.next.cuMemAlloc_v2"), at("cuMemAlloc_v2", kShim));
  EXPECT_EQ(resolved("dlsym.handle.cuNoSuchFunction"), "null -");
}

TEST_F(LookupTest, GetProcAddressRoutesEachAbiVariantToItsOwnHook) {
  const std::pair<const char*, const char*> expected[] = {
      {"cuMemAlloc@3020/0", "cuMemAlloc_v2"},
      {"cuMemFree@3020/0", "cuMemFree_v2"},
      {"cuLaunchKernel@4000/0", "cuLaunchKernel"},
      {"cuLaunchKernel@7000/2", "cuLaunchKernel_ptsz"},
      {"cuLaunchKernel@12000/1", "cuLaunchKernel"},
      {"cuLaunchKernelEx@11060/0", "cuLaunchKernelEx"},
      {"cuLaunchKernelEx@11060/2", "cuLaunchKernelEx_ptsz"},
      {"cuMemAllocAsync@11020/2", "cuMemAllocAsync_ptsz"},
      {"cuMemcpyHtoD@3020/0", "cuMemcpyHtoD_v2"},
      {"cuMemcpyHtoD@7000/2", "cuMemcpyHtoD_v2_ptds"},
      {"cuMemcpyAsync@7000/2", "cuMemcpyAsync_ptsz"},
      {"cuMemGetInfo@3020/0", "cuMemGetInfo_v2"},
      {"cuMemCreate@10020/0", "cuMemCreate"},
      {"cuGraphLaunch@10000/2", "cuGraphLaunch_ptsz"},
      {"cuGetProcAddress@12000/0", "cuGetProcAddress_v2"},
      {"cuGetProcAddress@11030/0", "cuGetProcAddress"},
  };
  for (const char* resolver : {"gpa2.", "gpa1."}) {
    for (const auto& [request, symbol] : expected) {
      EXPECT_EQ(resolved(std::string(resolver) + request), at(symbol, kShim)) << resolver << request;
    }
    // Not hooked: the driver's variant, chosen by the driver.
    EXPECT_EQ(resolved(std::string(resolver) + "cuStreamIsCapturing@10000/2"), at("cuStreamIsCapturing_ptsz", kDriver));
    EXPECT_EQ(resolved(std::string(resolver) + "cuInit@2000/0"), at("cuInit", kDriver));
  }
}

TEST_F(LookupTest, NullNameIsAnErrorNotACrash) {
  for (const char* label : {"gpa2.null.result", "gpa1.null.result"}) {
    EXPECT_EQ(field(preloaded_->out, label), "1 untouched") << label;  // CUDA_ERROR_INVALID_VALUE
  }
}

TEST_F(LookupTest, CudartBootstrapStaysHooked) {
  EXPECT_EQ(resolved("cudart.dlsym.cuGetProcAddress_v2"), at("cuGetProcAddress_v2", kShim));
  // The empty-name probe must not look like a stub library (34), or cudart
  // falls back to dlsym of every versioned name.
  EXPECT_NE(field(preloaded_->out, "cudart.probe.result"), "34");
  EXPECT_EQ(field(preloaded_->out, "cudart.probe.result"), field(plain_->out, "cudart.probe.result"));
  EXPECT_EQ(resolved("cudart.cuInit"), at("cuInit", kDriver));
  EXPECT_EQ(resolved("cudart.self@11030"), at("cuGetProcAddress", kShim));
  EXPECT_EQ(resolved("cudart.self@12000"), at("cuGetProcAddress_v2", kShim));
  // Look-ups through the swapped-in resolver, legacy and per-thread.
  EXPECT_EQ(resolved("cudart.cuMemAlloc/0"), at("cuMemAlloc_v2", kShim));
  EXPECT_EQ(resolved("cudart.cuLaunchKernel/0"), at("cuLaunchKernel", kShim));
  EXPECT_EQ(resolved("cudart.cuLaunchKernel/2"), at("cuLaunchKernel_ptsz", kShim));
  EXPECT_EQ(resolved("cudart.cuLaunchKernelEx/2"), at("cuLaunchKernelEx_ptsz", kShim));
  EXPECT_EQ(resolved("cudart.cuMemcpyHtoDAsync/0"), at("cuMemcpyHtoDAsync_v2", kShim));
  EXPECT_EQ(resolved("cudart.cuMemcpyHtoDAsync/2"), at("cuMemcpyHtoDAsync_v2_ptsz", kShim));
  EXPECT_EQ(resolved("cudart.cuMemFreeAsync/2"), at("cuMemFreeAsync_ptsz", kShim));
  EXPECT_EQ(resolved("cudart.cuGraphLaunch/2"), at("cuGraphLaunch_ptsz", kShim));
  EXPECT_EQ(resolved("cudart.cuCtxSynchronize/0").find(kDriver) != std::string::npos, true)
      << resolved("cudart.cuCtxSynchronize/0");
}

TEST_F(LookupTest, ForeignRtldNextStaysRelativeToTheCaller) {
  // libnext_first.so asks for the next vgpumem_probe_value: libnext_second's (2).
  EXPECT_EQ(field(preloaded_->out, "rtld_next.value"), "2 marker 22");
  EXPECT_EQ(field(plain_->out, "rtld_next.value"), "2 marker 22");
}

// dlsym(RTLD_NEXT, driver name) is glibc's answer for the caller, with the
// driver's function replaced by the hook. Search order: the program, the
// shim, libnext_before_driver, libcuda, libnext_first, libnext_second,
// libnext_after_driver (which defines a cuMemAlloc_v2 of its own).
void expect_rtld_next_relative_to_the_caller(const std::string& out, const std::string& out_without_shim) {
  // Before the driver: the next definition is the driver's, so the hook.
  EXPECT_EQ(field(out, "rtld_next.driver.before"), at("cuMemAlloc_v2", kShim));
  EXPECT_EQ(field(out_without_shim, "rtld_next.driver.before"), at("cuMemAlloc_v2", kDriver));
  // After the driver: another library's definition, left alone (that library
  // links the driver, which does not make it the driver).
  EXPECT_EQ(field(out, "rtld_next.driver.between"), at("cuMemAlloc_v2", "libnext_after_driver.so"));
  EXPECT_EQ(field(out_without_shim, "rtld_next.driver.between"), at("cuMemAlloc_v2", "libnext_after_driver.so"));
  // Nothing after the caller defines it: NULL, as glibc says.
  EXPECT_EQ(field(out, "rtld_next.driver.after"), "null -");
  EXPECT_EQ(field(out_without_shim, "rtld_next.driver.after"), "null -");
  // RTLD_DEFAULT: the first definition in the global scope -- the shim's.
  EXPECT_EQ(field(out, "rtld_default.driver.after"), at("cuMemAlloc_v2", kShim));
  EXPECT_EQ(field(out_without_shim, "rtld_default.driver.after"), at("cuMemAlloc_v2", kDriver));
  EXPECT_EQ(field(out, "rtld_next.after_marker"), "33");
}

TEST_F(LookupTest, RtldNextForADriverNameIsRelativeToTheCaller) {
  expect_rtld_next_relative_to_the_caller(preloaded_->out, plain_->out);
}

// The same before anything has made the shim load the driver: a driver
// function is then recognised by what its object itself exports.
TEST(LookupBeforeTheDriverLoads, RtldNextForADriverNameIsRelativeToTheCaller) {
  const ProcessResult preloaded = run_process({program("lookup_paths"), "rtld_next"}, shim_environment());
  const ProcessResult plain = run_process({program("lookup_paths"), "rtld_next"}, simulator_environment());
  ASSERT_EQ(preloaded.exit_code, 0) << preloaded.out << preloaded.err;
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  expect_rtld_next_relative_to_the_caller(preloaded.out, plain.out);
}

TEST_F(LookupTest, NonDriverNamesPassThrough) {
  EXPECT_EQ(resolved("cudnn.dlsym.default.cudnnCreate"), "null -");
  EXPECT_EQ(resolved("cudnn.dlsym.default.cublasCreate_v2"), "null -");
  EXPECT_EQ(resolved("plain.dlsym.default.printf"), resolved_without_shim("plain.dlsym.default.printf"));
}

TEST(LookupTrace, LookupsAppearInTheTraceSummary) {
  const std::string trace = temp_path("lookup-trace.json");
  auto env = shim_environment();
  env["VGPUMEM_TRACE"] = trace;
  const ProcessResult result = run_process({program("lookup_paths"), "cudart"}, env);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::ifstream in(trace);
  ASSERT_TRUE(in.good()) << "no trace at " << trace;
  const nlohmann::json doc = nlohmann::json::parse(in);
  const auto& lookups = doc.at("vgpumem").at("lookups");
  bool saw_ptsz_launch = false;
  for (const auto& lookup : lookups) {
    if (lookup.at("name") == "cuLaunchKernel" && lookup.at("flags") == 2 && lookup.at("hooked") == true) {
      saw_ptsz_launch = true;
    }
  }
  EXPECT_TRUE(saw_ptsz_launch) << lookups.dump(1);
}

}  // namespace
}  // namespace vgpumem::test
