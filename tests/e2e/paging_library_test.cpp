// cuBLAS and cuBLASLt calls under paging, end to end (interpose/
// hooks_cublas.cpp, hooks_cublaslt.cpp): an output on the host that the call
// overwrites whole comes back without a copy, and every byte the call reads
// or leaves alone -- C with a non-zero beta, the gaps between columns, the
// rest of a buffer the output is part of -- comes back bit-identical. Under
// strict checking with no launch grace, so only the hooks keep operands on
// the device.
#include <gtest/gtest.h>

#include <string>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

constexpr std::uint64_t kCap = 16ull << 20;
constexpr std::uint64_t kMiB = 1ull << 20;

// Runs gemm_probe MODE under a 16 MiB cap; returns the bytes the shim did
// not copy in.
std::uint64_t not_fetched(const std::string& mode, const std::string& hooks = "on") {
  const PagedRun run = run_paged("gemm_" + mode + "_" + hooks, {program("gemm_probe"), mode}, "16MiB",
                                 {{"VGPUMEM_CHECK", "strict"},
                                  {"VGPUMEM_GRACE_LAUNCHES", "0"},
                                  {"VGPUMEM_POLICY", "lru"},
                                  {"VGPUMEM_LIBRARY_HOOKS", hooks}});
  EXPECT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "gemm ok", kCap));
  if (!run.trace.contains("vgpumem")) return ~std::uint64_t{0};
  const nlohmann::json& paging = run.trace["vgpumem"]["paging"];
  EXPECT_EQ(paging["overwrites_restored"].get<std::uint64_t>(), 0u) << mode;
  return paging["bytes_not_fetched"].get<std::uint64_t>();
}

TEST(PagingLibraries, AGemmOutputOverwrittenWholeCostsNoCopyBack) { EXPECT_EQ(not_fetched("beta0"), 4 * kMiB); }

// VGPUMEM_LIBRARY_HOOKS=off: the call is forwarded untouched, and its
// output comes back as any operand.
TEST(PagingLibraries, WithTheLibraryHooksOffTheOutputIsCopiedBackAsAnyOther) {
  EXPECT_EQ(not_fetched("beta0", "off"), 0u);
  EXPECT_EQ(not_fetched("lt_other_c", "off"), 0u);
}

TEST(PagingLibraries, AGemmThatReadsItsOutputHasItCopiedBack) { EXPECT_EQ(not_fetched("beta1"), 0u); }

TEST(PagingLibraries, TheGapsBetweenColumnsOfAnOutputAreCopiedBack) { EXPECT_EQ(not_fetched("gapped"), 0u); }

TEST(PagingLibraries, TheRestOfTheBufferAnOutputIsPartOfComesBack) {
  EXPECT_EQ(not_fetched("inside"), 4 * kMiB) << "the output's 4 MiB; B before it and the bytes after, copied";
}

TEST(PagingLibraries, AStridedBatchedOutputOverwrittenWholeCostsNoCopyBack) {
  EXPECT_EQ(not_fetched("batched"), 4 * kMiB);
}

TEST(PagingLibraries, ACublasLtResultBesideItsAddendCostsNoCopyBack) {
  EXPECT_EQ(not_fetched("lt_other_c"), 4 * kMiB) << "D is written whole; C is read, and copied";
}

TEST(PagingLibraries, ACublasLtResultInPlaceIsCopiedBack) { EXPECT_EQ(not_fetched("lt_in_place"), 0u); }

}  // namespace
}  // namespace vgpumem::test
