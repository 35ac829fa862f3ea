// Checking modes (VGPUMEM_CHECK), end to end: under strict and torture,
// memory reached through a pointer no hook saw faults instead of yielding
// another buffer's bytes (the in-process control, fast mode reading the next
// owner's bytes, is in tests/paging/check_mode_test.cpp).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "paged_run.h"
#include "process.h"

namespace vgpumem::test {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kCap = 16 * kMiB;
// Near: the writer's two buffers and table, and the two buffers the launches
// between use (18 MiB), fit; the other four buffers of the probe do not.
constexpr std::uint64_t kNearCap = 24 * kMiB;

// `grace`: VGPUMEM_GRACE_LAUNCHES; `more`: further variables.
PagedRun run_hidden(const std::string& check, const std::string& distance = "far", const std::string& grace = "",
                    const std::map<std::string, std::string>& more = {}) {
  std::map<std::string, std::string> env = {{"VGPUMEM_CHECK", check}};
  if (!grace.empty()) env["VGPUMEM_GRACE_LAUNCHES"] = grace;
  std::string tag;
  for (const auto& [name, value] : more) {
    env[name] = value;
    tag += "-" + value;
  }
  const std::string limit = distance == "near" ? "24MiB" : "16MiB";
  return run_paged("hidden-" + check + "-" + distance + grace + tag, {program("hidden_probe"), distance}, limit, env);
}

const nlohmann::json& paging(const PagedRun& run) { return run.trace["vgpumem"]["paging"]; }

void expect_fault(const PagedRun& run, std::uint64_t cap = kCap) {
  EXPECT_EQ(run.process.exit_code, 5) << run.process.out << run.process.err;
  EXPECT_NE(run.process.out.find("hidden fault CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << run.process.out;
  ASSERT_FALSE(run.simulator.is_null());
  EXPECT_GE(run.simulator["illegal_accesses"].get<int>(), 1);
  EXPECT_LE(run.simulator["devices"][0]["physical_bytes_peak"].get<std::uint64_t>(), cap);
}

void expect_exact(const PagedRun& run) {
  EXPECT_EQ(run.process.exit_code, 0) << run.process.out << run.process.err;
  EXPECT_NE(run.process.out.find("hidden ok"), std::string::npos) << run.process.out;
  ASSERT_FALSE(run.simulator.is_null());
  EXPECT_EQ(run.simulator["illegal_accesses"].get<int>(), 0);
  EXPECT_LE(run.simulator["devices"][0]["physical_bytes_peak"].get<std::uint64_t>(), kNearCap);
  EXPECT_GE(paging(run)["offloads"].get<int>(), 4) << "the cap forced buffers out around the pair";
}

// Past the grace, nothing keeps the table's targets on the device.
TEST(PagingCheck, AHiddenPointerFaultsUnderStrict) { expect_fault(run_hidden("strict")); }
TEST(PagingCheck, AHiddenPointerFaultsUnderTorture) { expect_fault(run_hidden("torture")); }

// A table built by one kernel and read two launches later (a prepare kernel
// and its consumer): the reader names the table the writer named, so it is
// lent what the writer named (vmm/table_lending.h), even under torture,
// which offloads everything else before each launch.
TEST(PagingCheck, ATableReadSoonAfterItIsBuiltOnTheDeviceIsExactUnderTorture) {
  const PagedRun run = run_hidden("torture", "near");
  expect_exact(run);
  EXPECT_EQ(paging(run)["grace"]["operations"].get<int>(), 8);
  EXPECT_EQ(paging(run)["grace"]["kind"], "lend");
  EXPECT_GE(paging(run)["grace"]["lendings"].get<int>(), 1) << paging(run)["grace"].dump();
}
// The blanket grace (VGPUMEM_GRACE=blanket) keeps the pair exact too.
TEST(PagingCheck, TheBlanketGraceKeepsATableReadSoonAfterExactUnderTorture) {
  const PagedRun run = run_hidden("torture", "near", "", {{"VGPUMEM_GRACE", "blanket"}});
  expect_exact(run);
  EXPECT_EQ(paging(run)["grace"]["lendings"].get<int>(), 0);
}
// Lending looks for tables in small allocations only: with the table's
// allocation above VGPUMEM_LEND_MAX_BYTES nothing is lent, and the pair
// faults as with no grace.
TEST(PagingCheck, ATableOutsideTheSmallAllocationsIsNotLentAndFaultsUnderTorture) {
  expect_fault(run_hidden("torture", "near", "", {{"VGPUMEM_LEND_MAX_BYTES", "512"}}), kNearCap);
}
TEST(PagingCheck, ATableReadSoonAfterItIsBuiltOnTheDeviceIsExactUnderStrict) {
  expect_exact(run_hidden("strict", "near"));
}
// The rule taken out (a grace of 0): the same pair faults.
TEST(PagingCheck, WithoutTheGraceATableReadSoonAfterFaultsUnderTorture) {
  expect_fault(run_hidden("torture", "near", "0"), kNearCap);
}
// The reader is the third launch after the writer: a grace of 3 covers it,
// 2 does not.
TEST(PagingCheck, TheGraceCountsTheLaunchesOnTheStream) {
  expect_exact(run_hidden("torture", "near", "3"));
  expect_fault(run_hidden("torture", "near", "2"), kNearCap);
}

}  // namespace
}  // namespace vgpumem::test
