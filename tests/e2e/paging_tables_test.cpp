// Pointer tables, end to end (Note [Pointer tables], vmm/pointer_tables.h): buffers
// a kernel reaches only through a table — one uploaded to the device, or in
// pinned host memory it reads directly — are there and exact under torture
// (everything no operation holds is offloaded and unmapped before each one,
// so a target the launch did not hold faults), and a long run that uploads a
// table every step keeps the registry flat and keeps paging.
#include <gtest/gtest.h>

#include <string>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

const nlohmann::json& tables_of(const PagedRun& run) { return run.trace["vgpumem"]["paging"]["pointer_tables"]; }

// An FSDP2-sized upload: 3 MiB, over the scan limit, its pointers first.
TEST(PagingTables, BuffersReachedThroughALargeUploadAreExactUnderTorture) {
  const PagedRun run =
      run_paged("table_large", {program("table_probe"), "large"}, "16MiB", {{"VGPUMEM_CHECK", "torture"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "large ok", 16 * kMiB));
  const nlohmann::json& tables = tables_of(run);
  EXPECT_GE(tables["launches_followed"].get<int>(), 1) << tables.dump();
  EXPECT_EQ(tables["tables_peak"].get<int>(), 1) << tables.dump();
  EXPECT_EQ(tables["target_granules_peak"].get<int>(), 4) << "one per buffer: " << tables.dump();
  EXPECT_EQ(tables["tables"].get<int>(), 0) << "freed with its allocation";
  EXPECT_GT(run.trace["vgpumem"]["paging"]["offloads"].get<int>(), 0);
}

// cudaMemcpyDefault from the host arrives as cuMemcpy: the same table,
// uploaded that way, is scanned as an upload. Without the launch grace, the
// table is the only way the targets are reached.
TEST(PagingTables, BuffersReachedThroughAUnifiedCopyFromTheHostAreExactUnderTorture) {
  const PagedRun run = run_paged("table_unified", {program("table_probe"), "unified"}, "16MiB",
                                 {{"VGPUMEM_CHECK", "torture"}, {"VGPUMEM_GRACE_LAUNCHES", "0"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "unified ok", 16 * kMiB));
  const nlohmann::json& tables = tables_of(run);
  EXPECT_GE(tables["uploads_scanned"].get<int>(), 1) << tables.dump();
  EXPECT_GE(tables["launches_followed"].get<int>(), 1) << tables.dump();
  EXPECT_EQ(tables["target_granules_peak"].get<int>(), 4) << "one per buffer: " << tables.dump();
}

// NCCL's work FIFO: the table is in cuMemHostAlloc memory the kernel reads.
TEST(PagingTables, BuffersReachedThroughPinnedHostMemoryAreExactUnderTorture) {
  const PagedRun run =
      run_paged("table_fifo", {program("table_probe"), "fifo"}, "16MiB", {{"VGPUMEM_CHECK", "torture"}});
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "fifo ok", 16 * kMiB));
  const nlohmann::json& tables = tables_of(run);
  EXPECT_GE(tables["host_buffers_scanned"].get<int>(), 1) << tables.dump();
  EXPECT_EQ(tables["host_buffers"].get<int>(), 0) << "freed by cuMemFreeHost";
}

// Thousands of steps, each uploading a table to the same block: one table
// at a time, nothing pinned for it, and every buffer it names keeps moving.
TEST(PagingTables, ALongRunUploadingATableEachStepStaysFlatAndKeepsPaging) {
  constexpr int kSteps = 2000;
  const PagedRun run = run_paged("table_long", {program("table_probe"), "long", std::to_string(kSteps)}, "12MiB");
  ASSERT_NO_FATAL_FAILURE(expect_clean_probe_run(run, "long ok", 12 * kMiB));
  const nlohmann::json& paging = run.trace["vgpumem"]["paging"];
  const nlohmann::json& tables = paging["pointer_tables"];
  EXPECT_EQ(tables["uploads_scanned"].get<int>(), kSteps);
  EXPECT_EQ(tables["launches_followed"].get<int>(), kSteps);
  EXPECT_EQ(tables["tables_peak"].get<int>(), 1) << "each upload replaced the last: " << tables.dump();
  EXPECT_EQ(tables["target_granules_peak"].get<int>(), 2) << tables.dump();
  for (const char* pinned : {"capture_pinned_bytes", "ipc_pinned_bytes", "peer_shared_pinned_bytes",
                             "handle_exported_pinned_bytes"}) {
    EXPECT_EQ(paging[pinned].get<std::uint64_t>(), 0u) << pinned;
  }
  // Eight 2 MiB buffers and the segment under a 12 MiB cap: the buffers a
  // step's table names are out again within a few steps.
  EXPECT_GE(paging["offloads"].get<int>(), kSteps) << paging.dump();
}

}  // namespace
}  // namespace vgpumem::test
