// TMA tensor maps, end to end: kernels that reach their operands only
// through maps the program encoded (the simulated driver's maps hide the
// address from any word scan) read and write exact bytes past the cap, with
// the operands pushed to the host before every launch (and, under torture,
// everything the launch does not hold). Without the encode hooks' ranges the
// launches fault (checked with the call in interpose/hooks_launch.cpp taken out).
#include <gtest/gtest.h>

#include <string>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

constexpr std::uint64_t kCap = 16ull << 20;

PagedRun run_tma(const std::string& check) {
  return run_paged("tma-" + check, {program("tma_probe")}, "16MiB", {{"VGPUMEM_CHECK", check}});
}

void expect_exact(const PagedRun& run) {
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "tma ok", kCap));
  const nlohmann::json& shim = run.trace["vgpumem"];
  EXPECT_GT(shim["paging"]["offloads"].get<int>(), 0) << "the operands never left the device";
  // Every entry point reached the shim, whichever way the probe found it.
  const nlohmann::json& calls = shim["calls_by_api"];
  EXPECT_EQ(calls.value("cuTensorMapEncodeTiled", 0), 2) << calls.dump();
  EXPECT_EQ(calls.value("cuTensorMapEncodeIm2col", 0), 1) << calls.dump();
  EXPECT_EQ(calls.value("cuTensorMapEncodeIm2colWide", 0), 1) << calls.dump();
  EXPECT_EQ(calls.value("cuTensorMapReplaceAddress", 0), 1) << calls.dump();
  // Five distinct maps (the tiled source again after its new address); two
  // found in each of the five launches that copy through them.
  const nlohmann::json& maps = shim["paging"]["tensor_maps"];
  EXPECT_EQ(maps.value("remembered", 0), 5) << maps.dump();
  EXPECT_EQ(maps.value("found_in_launches", 0), 10) << maps.dump();
}

// The probe is right on its own: the driver alone, no shim, no cap.
TEST(PagingTensorMaps, TheProbeCopiesExactlyOnTheDriverAlone) {
  auto env = simulator_environment();
  env["VGPUSIM_DEVICE_MEMORY"] = "1GiB";
  const ProcessResult run = run_process({program("tma_probe")}, env);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("tma ok"), std::string::npos) << run.out;
}

TEST(PagingTensorMaps, DataReadAndWrittenThroughMapsIsExactPastTheCap) { expect_exact(run_tma("fast")); }

TEST(PagingTensorMaps, DataReadAndWrittenThroughMapsIsExactUnderTorture) { expect_exact(run_tma("torture")); }

}  // namespace
}  // namespace vgpumem::test
