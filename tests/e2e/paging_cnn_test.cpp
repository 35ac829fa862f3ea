// The cuDNN trainer (tests/workloads/cnn_trainer.cpp) under paging at half
// its peak, through either cuDNN API (legacy calls, or the graph API's
// plans): bit-identical to the uncapped run, and the scheduler's profile of
// its step has the layers and the backward pass exactly where the
// convolution calls put them (interpose/hooks_cudnn.cpp,
// hooks_cudnn_backend.cpp; scheduler/iteration_profile.h). Convolution
// outputs written with beta = 0 come back without a copy.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

// The flags of an operation of the profiled step (scheduler/profile_json.cpp).
constexpr unsigned kHeavy = 2, kLibraryShift = 4, kLibraryMask = 0xf;
enum Pass : unsigned { kNone = 0, kForward = 2, kBackwardData = 3, kBackwardFilter = 4, kBackwardBias = 5 };

// What the trainer's kernels are: the simulated cuDNN's convolution passes
// and its bias gradient; everything else is the trainer's own, or
// cudnnAddTensor's (not a convolution).
Pass pass_of(const std::string& kernel) {
  if (kernel == "vgpusim_cudnn_conv_fprop") return kForward;
  if (kernel == "vgpusim_cudnn_conv_dgrad") return kBackwardData;
  if (kernel == "vgpusim_cudnn_conv_wgrad") return kBackwardFilter;
  if (kernel == "vgpusim_cudnn_bias_grad") return kBackwardBias;
  return kNone;
}

std::string result_line(const std::string& out) {
  const std::size_t at = out.rfind("RESULT ");
  return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

std::uint64_t peak_wanted(const std::string& result) {
  const std::string key = "peak_device_bytes_wanted=";
  const std::size_t at = result.find(key);
  return at == std::string::npos ? 0 : std::stoull(result.substr(at + key.size()));
}

class CnnTrainer : public ::testing::TestWithParam<std::string> {
 protected:
  std::vector<std::string> argv() const {
    return {program("cnn_trainer"), "--steps", "8", "--api", GetParam()};
  }
};

TEST_P(CnnTrainer, LayersAndTheBackwardPassComeFromTheConvolutionCalls) {
  auto env = simulator_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  const ProcessResult uncapped = run_process(argv(), env);
  ASSERT_EQ(uncapped.exit_code, 0) << uncapped.out << uncapped.err;
  const std::string expected = result_line(uncapped.out);
  const std::uint64_t cap = peak_wanted(expected) / 2;
  ASSERT_GT(cap, 0u) << uncapped.out;

  const PagedRun run = run_paged("cnn_" + GetParam(), argv(), std::to_string(cap), {{"VGPUMEM_POLICY", "auto"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "RESULT", cap));
  EXPECT_EQ(result_line(run.process.out), expected) << "bit-identical to the uncapped run";
  EXPECT_GT(run.trace["vgpumem"]["paging"]["bytes_not_fetched"].get<std::uint64_t>(), 0u)
      << "outputs written with beta = 0 came back without a copy";
  // The trace counts the calls each hook received: 8 steps of five forward
  // convolutions, four data gradients (the first layer's input has none) and
  // five filter gradients, through the API the trainer used.
  const nlohmann::json& calls = run.trace["vgpumem"]["library_calls"];
  if (GetParam() == "legacy") {
    EXPECT_EQ(calls.value("cudnnConvolutionForward", 0), 40) << calls.dump();
    EXPECT_EQ(calls.value("cudnnConvolutionBackwardData", 0), 32) << calls.dump();
    EXPECT_EQ(calls.value("cudnnConvolutionBackwardFilter", 0), 40) << calls.dump();
    EXPECT_FALSE(calls.contains("cudnnBackendExecute")) << calls.dump();
  } else {
    EXPECT_EQ(calls.value("cudnnBackendExecute", 0), 112) << calls.dump();
    EXPECT_FALSE(calls.contains("cudnnConvolutionForward")) << calls.dump();
  }

  const nlohmann::json& profile = run.trace["vgpumem"]["schedule"]["profile"];
  ASSERT_TRUE(profile.is_object()) << run.trace["vgpumem"]["schedule"].dump();
  const nlohmann::json& ops = profile["ops"];
  const nlohmann::json& names = profile["names"];
  const std::size_t period = ops.size();
  std::size_t convolutions = 0, backward_calls = 0;
  for (std::size_t i = 0; i < period; ++i) {
    const unsigned flags = ops[i][2].get<unsigned>();
    const std::string name = names[ops[i][4].get<std::size_t>()].get<std::string>();
    const Pass pass = pass_of(name);
    EXPECT_EQ((flags >> kLibraryShift) & kLibraryMask, static_cast<unsigned>(pass)) << "operation " << i << ", " << name;
    const bool layer = pass == kForward || pass == kBackwardData || pass == kBackwardFilter;
    EXPECT_EQ((flags & kHeavy) != 0, layer) << "operation " << i << ", " << name << " leads a layer exactly when a "
                                            << "convolution pass does";
    convolutions += pass == kForward ? 1 : 0;
    backward_calls += pass != kNone && pass != kForward ? 1 : 0;
  }
  EXPECT_EQ(convolutions, 5u) << "the trainer's five convolutions";
  // From where the backward pass begins, every backward call comes before
  // the next forward convolution.
  const std::size_t begins = profile["backward_begins"].get<std::size_t>();
  ASSERT_LT(begins, period);
  EXPECT_NE(pass_of(names[ops[begins][4].get<std::size_t>()].get<std::string>()), kForward);
  std::size_t seen = 0;
  for (std::size_t k = 0; k < period; ++k) {
    const Pass pass = pass_of(names[ops[(begins + k) % period][4].get<std::size_t>()].get<std::string>());
    if (pass == kForward) break;
    seen += pass != kNone ? 1 : 0;
  }
  EXPECT_EQ(seen, backward_calls) << "the backward pass begins at operation " << begins;
}

INSTANTIATE_TEST_SUITE_P(PagingCudnn, CnnTrainer, ::testing::Values("legacy", "backend"));

}  // namespace
}  // namespace vgpumem::test
