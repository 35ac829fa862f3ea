// Library hooks reached however the library is found (interpose/dlsym.cpp,
// library_definitions.h): cuBLAS, cuBLASLt and cuDNN dlopen'ed RTLD_LOCAL,
// their functions found with dlsym on the handle, as XLA, TensorFlow and
// PyTorch's lazy loaders find them (programs/library_dlsym_probe.cpp). The
// hook must run -- an output overwritten whole is not copied back, seen in
// the trace -- and forward to that library's function: same bits as without
// the shim. The mirror, for library names, of lookup_test.cpp's dlsym cases.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

constexpr std::uint64_t kCap = 16ull << 20;
constexpr std::uint64_t kMiB = 1ull << 20;
constexpr const char* kShim = "libvgpumem.so";

std::string at(const std::string& symbol, const std::string& object) { return symbol + " " + object; }

struct ProbeRun {
  std::uint64_t not_fetched = ~std::uint64_t{0};
  std::string out;
};

// library_dlsym_probe MODE under a 16 MiB cap, strict, no launch grace.
ProbeRun paged(const std::string& mode, const std::map<std::string, std::string>& extra = {}) {
  std::map<std::string, std::string> env = {
      {"VGPUMEM_CHECK", "strict"}, {"VGPUMEM_GRACE_LAUNCHES", "0"}, {"VGPUMEM_POLICY", "lru"}};
  env.insert(extra.begin(), extra.end());
  const PagedRun run = run_paged("library_dlsym_" + mode + (extra.empty() ? "" : "_control"),
                                 {program("library_dlsym_probe"), mode}, "16MiB", env);
  EXPECT_NO_FATAL_FAILURE(expect_clean_probe_run(run, mode + " ok", kCap));
  ProbeRun result;
  result.out = run.process.out;
  if (run.trace.contains("vgpumem")) {
    const nlohmann::json& paging = run.trace["vgpumem"]["paging"];
    EXPECT_EQ(paging["overwrites_restored"].get<std::uint64_t>(), 0u) << mode;
    result.not_fetched = paging["bytes_not_fetched"].get<std::uint64_t>();
  }
  return result;
}

// The output's hash without the shim at all: the bits every run must give.
std::string unshimmed_hash(const std::string& mode) {
  const ProcessResult plain = run_process({program("library_dlsym_probe"), mode}, simulator_environment());
  EXPECT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  EXPECT_NE(plain.out.find(mode + " ok"), std::string::npos) << plain.out;
  return field(plain.out, mode + " fnv");
}

class ThroughDlsymOnAHandle : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(ThroughDlsymOnAHandle, TheHookRunsAndForwardsToThatLibrary) {
  const auto [mode, function] = GetParam();
  const ProbeRun run = paged(mode);
  EXPECT_EQ(field(run.out, std::string("found.") + function), at(function, kShim)) << run.out;
  EXPECT_EQ(run.not_fetched, 4 * kMiB) << "the hook claimed the output: no copy back";
  const std::string hash = field(run.out, std::string(mode) + " fnv");
  EXPECT_FALSE(hash.empty()) << run.out;
  EXPECT_EQ(hash, unshimmed_hash(mode));
}

TEST_P(ThroughDlsymOnAHandle, TheLibrarysOwnFunctionIsNoHook) {
  // The control: dlvsym, which the shim does not override, finds the
  // library's own function; the same run then copies the output back.
  const auto [mode, function] = GetParam();
  const ProbeRun run = paged(mode, {{"LIBRARY_PROBE_LOOKUP", "dlvsym"}});
  EXPECT_NE(field(run.out, std::string("found.") + function).find(function), std::string::npos) << run.out;
  EXPECT_EQ(field(run.out, std::string("found.") + function).find(kShim), std::string::npos) << run.out;
  EXPECT_EQ(run.not_fetched, 0u);
  EXPECT_EQ(field(run.out, std::string(mode) + " fnv"), unshimmed_hash(mode));
}

INSTANTIATE_TEST_SUITE_P(LibraryDlsym, ThroughDlsymOnAHandle,
                         ::testing::Values(std::pair{"gemm", "cublasGemmEx"}, std::pair{"lt", "cublasLtMatmul"},
                                           std::pair{"conv", "cudnnConvolutionForward"}),
                         [](const auto& instance) { return std::string(instance.param.first); });

// A library loaded RTLD_LOCAL that links cuBLAS calls cublasGemmEx through
// its PLT: the global scope comes first, so the call lands in the hook,
// though no dlsym ever showed where cuBLAS is. The hook finds it among the
// loaded objects, forwards, and claims the output.
TEST(LibraryDlsym, ALocallyLoadedLibrarysOwnCallReachesTheHookWhichFindsItsLibrary) {
  const ProbeRun run = paged("indirect");
  EXPECT_EQ(run.not_fetched, 4 * kMiB) << run.out;
  const std::string hash = field(run.out, "indirect fnv");
  EXPECT_FALSE(hash.empty()) << run.out;
  EXPECT_EQ(hash, unshimmed_hash("indirect"));
}

TEST(LibraryDlsym, WithPagingOffTheHookStillForwards) {
  const ProcessResult run = run_process({program("library_dlsym_probe"), "gemm"}, shim_environment());
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(field(run.out, "found.cublasGemmEx"), at("cublasGemmEx", kShim));
  EXPECT_NE(run.out.find("gemm ok"), std::string::npos) << run.out;
  EXPECT_EQ(field(run.out, "gemm fnv"), unshimmed_hash("gemm"));
}

class LibraryLookups : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Per process: ctest runs each case of the suite in a process of its
    // own, in parallel, and one must never overwrite the copy another has
    // loaded (nor its trace).
    const std::string own = std::to_string(getpid());
    copy_dir_ = new std::string(temp_path("library-dlsym-copy-" + own));
    const std::filesystem::path copy = *copy_dir_ + "/libcublas_copy.so.13";
    std::filesystem::create_directories(copy.parent_path());
    std::filesystem::copy_file(std::string(VGPUMEM_TEST_SIM_DIR) + "/libcublas.so.13", copy,
                               std::filesystem::copy_options::overwrite_existing);
    trace_ = new std::string(temp_path("library-dlsym-lookups-" + own + ".json"));
    auto env = shim_environment();
    env["VGPUMEM_TRACE"] = *trace_;
    preloaded_ = new ProcessResult(run_process({program("library_dlsym_probe"), "lookups", copy.string()}, env));
    plain_ = new ProcessResult(
        run_process({program("library_dlsym_probe"), "lookups", copy.string()}, simulator_environment()));
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    std::filesystem::remove_all(*copy_dir_, ignored);
    std::filesystem::remove(*trace_, ignored);
    delete preloaded_;
    delete plain_;
    delete trace_;
    delete copy_dir_;
  }
  static ProcessResult* preloaded_;
  static ProcessResult* plain_;
  static std::string* copy_dir_;
  static std::string* trace_;
};
ProcessResult* LibraryLookups::preloaded_ = nullptr;
ProcessResult* LibraryLookups::plain_ = nullptr;
std::string* LibraryLookups::trace_ = nullptr;
std::string* LibraryLookups::copy_dir_ = nullptr;

TEST_F(LibraryLookups, HookedNamesOnAHandleAnswerWithTheHook) {
  ASSERT_EQ(preloaded_->exit_code, 0) << preloaded_->out << preloaded_->err;
  ASSERT_EQ(plain_->exit_code, 0) << plain_->out << plain_->err;
  const std::pair<const char*, const char*> hooked[] = {{"cublasGemmEx", "libcublas.so.13"},
                                                        {"cublasSgemm_v2", "libcublas.so.13"},
                                                        {"cublasGemmStridedBatchedEx", "libcublas.so.13"},
                                                        {"cublasLtMatmul", "libcublasLt.so.13"},
                                                        {"cudnnConvolutionForward", "libcudnn.so.9"},
                                                        {"cudnnBackendExecute", "libcudnn.so.9"}};
  for (const auto& [name, library] : hooked) {
    EXPECT_EQ(field(preloaded_->out, std::string("handle.") + name), at(name, kShim)) << name;
    EXPECT_EQ(field(plain_->out, std::string("handle.") + name), at(name, library)) << name;
  }
  // Not hooked: the library's own, shim or not.
  for (const auto& [name, library] : {std::pair{"cublasCreate_v2", "libcublas.so.13"},
                                      std::pair{"cublasLtCreate", "libcublasLt.so.13"},
                                      std::pair{"cudnnCreate", "libcudnn.so.9"}}) {
    EXPECT_EQ(field(preloaded_->out, std::string("handle.") + name), at(name, library)) << name;
  }
}

TEST_F(LibraryLookups, ANameTheLibraryLacksIsNullWithTheLoadersError) {
  for (const char* name : {"cudnnConvolutionForward", "cublasGemmEx", "cublasNoSuch"}) {
    for (const ProcessResult* run : {preloaded_, plain_}) {
      EXPECT_EQ(field(run->out, std::string("missing.") + name), "null -") << name;
      EXPECT_EQ(field(run->out, std::string("missing.") + name + ".error"), "names-it") << name;
    }
  }
}

TEST_F(LibraryLookups, DefaultAndNextFromTheProgramFindTheExport) {
  // The libraries are in no global scope: the only global definition is ours.
  EXPECT_EQ(field(preloaded_->out, "default.cublasGemmEx"), at("cublasGemmEx", kShim));
  EXPECT_EQ(field(preloaded_->out, "next.cublasLtMatmul"), at("cublasLtMatmul", kShim));
  EXPECT_EQ(field(plain_->out, "default.cublasGemmEx"), "null -");
  EXPECT_EQ(field(plain_->out, "next.cublasLtMatmul"), "null -");
}

TEST_F(LibraryLookups, ASecondCopyOfTheLibraryIsLeftUnhookedAndSaysSo) {
  // The hook forwards to the first copy's function; the second copy's
  // caller gets its own, never a hook that would call the other copy.
  EXPECT_EQ(field(preloaded_->out, "copy.cublasGemmEx"), at("cublasGemmEx", "libcublas_copy.so.13"));
  EXPECT_EQ(field(preloaded_->out, "copy.distinct"), "yes");
  EXPECT_NE((preloaded_->out + preloaded_->err).find("left unhooked"), std::string::npos) << preloaded_->err;
}

TEST_F(LibraryLookups, LookupsAppearInTheTraceSummary) {
  const nlohmann::json doc = read_json(*trace_);
  ASSERT_TRUE(doc.contains("vgpumem")) << "no trace at " << *trace_;
  std::map<std::string, bool> hooked;  // as of the latest look-up of each name
  for (const auto& lookup : doc["vgpumem"]["lookups"]) {
    if (lookup.at("path") == "dlsym") hooked[lookup.at("name").get<std::string>()] = lookup.at("hooked").get<bool>();
  }
  const std::string all = doc["vgpumem"]["lookups"].dump(1);
  for (const char* name : {"cublasLtMatmul", "cudnnConvolutionForward", "cublasSgemm_v2"}) {
    EXPECT_TRUE(hooked.contains(name) && hooked[name]) << name << all;
  }
  // cublasGemmEx was asked last of the second copy, and left alone.
  EXPECT_TRUE(hooked.contains("cublasGemmEx") && !hooked["cublasGemmEx"]) << all;
  EXPECT_FALSE(hooked.contains("cublasCreate_v2")) << "not a hooked name: not recorded";
}

}  // namespace
}  // namespace vgpumem::test
