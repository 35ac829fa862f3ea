// Paging with several contexts and devices: device work of the pager runs in
// the right context whatever the program's thread has current (the simulated
// driver refuses an event recorded on another context's stream, as the real
// one does), and every byte comes back.
#include <gtest/gtest.h>

#include <string>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

constexpr std::uint64_t kCap = 12ull << 20;

TEST(PagingContexts, TwoContextsOnOneDeviceSwitchedBetweenOperationsKeepEveryByte) {
  // 32 MiB in two contexts under 12 MiB.
  const PagedRun run = run_paged("contexts", {program("context_probe"), "contexts"}, "12MiB");
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "contexts ok", kCap));
  EXPECT_GT(run.trace["vgpumem"]["paging"]["offloads"].get<int>(), 0);
  EXPECT_EQ(run.trace["vgpumem"]["paging"]["context_synchronizations"].get<int>(), 0)
      << "every user stream was waited for in its own context";
}

TEST(PagingContexts, TwoDevicesSwitchedBetweenOperationsKeepEveryByte) {
  const PagedRun run =
      run_paged("devices", {program("context_probe"), "devices"}, "12MiB", {{"VGPUSIM_DEVICES", "2"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "devices ok", kCap));
  EXPECT_LE(run.simulator["devices"][1]["physical_bytes_peak"].get<std::uint64_t>(), kCap);
  EXPECT_GT(run.trace["vgpumem"]["paging"]["offloads"].get<int>(), 0);
  EXPECT_EQ(run.trace["vgpumem"]["paging"]["context_synchronizations"].get<int>(), 0);
}

// Streams made, used and destroyed in turn, more of them than the pager
// has bits (the driver may hand a destroyed stream's handle to the next):
// every byte exact, and offloads wait for exactly the streams that used a
// buffer, never for the whole device.
TEST(PagingContexts, StreamsDestroyedAndMadeAgainKeepEveryByte) {
  const PagedRun run = run_paged("streams", {program("context_probe"), "streams"}, "12MiB");
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "streams ok", kCap));
  EXPECT_GT(run.trace["vgpumem"]["paging"]["offloads"].get<int>(), 0);
  EXPECT_EQ(run.trace["vgpumem"]["paging"]["context_synchronizations"].get<int>(), 0);
}

// A free returns once the program's work on every kind of stream is done
// (the probe checks each stream right after its free), without waiting for
// whole contexts: the non-blocking streams were listed as they were made.
TEST(PagingContexts, AFreeWaitsForTheProgramsWorkOnEveryKindOfStream) {
  const PagedRun run = run_paged("frees", {program("context_probe"), "frees"}, "12MiB");
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "frees ok", kCap));
  const auto& paging = run.trace["vgpumem"]["paging"];
  EXPECT_GT(paging["offloads"].get<int>(), 0);
  EXPECT_GE(paging["frees_waiting"]["for_program_streams"].get<int>(), 5);
  EXPECT_EQ(paging["frees_waiting"]["for_whole_contexts"].get<int>(), 0);
}

}  // namespace
}  // namespace vgpumem::test
