// HostPathStats (vmm/host_path_stats.h): driver work counted on the side of
// the thread that did it, rates per GiB moved, fetches by origin.
#include <gtest/gtest.h>

#include <thread>

#include <nlohmann/json.hpp>

#include "vmm/host_path_stats.h"

namespace vgpumem::vmm {
namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

TEST(HostPathStats, DriverCallsCountOnTheSideOfTheThreadThatMadeThem) {
  HostPathStats stats;
  stats.driver_call(DriverWork::vmm, 1000);
  std::thread pager_thread([&] {
    mark_pager_thread();
    EXPECT_EQ(host_side(), HostSide::pager);
    stats.driver_call(DriverWork::vmm, 3000);
    stats.driver_call(DriverWork::vmm, 3000);
    stats.driver_call(DriverWork::pin, 5000, 64 << 20);
  });
  pager_thread.join();
  EXPECT_EQ(host_side(), HostSide::program) << "another thread's mark is its own";
  EXPECT_EQ(stats.calls(HostSide::program, DriverWork::vmm), 1u);
  EXPECT_EQ(stats.calls(HostSide::pager, DriverWork::vmm), 2u);
  EXPECT_EQ(stats.call_ns(HostSide::pager, DriverWork::vmm), 6000u);
  const nlohmann::json summary = stats.summary({2 * kGiB, 3, 0, 0});
  EXPECT_EQ(summary["pinned_bytes"].get<std::uint64_t>(), 64u << 20);
  EXPECT_EQ(summary["pin_ns"].get<std::uint64_t>(), 5000u);
  EXPECT_DOUBLE_EQ(summary["vmm_calls_per_gib"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(summary["program_threads"]["vmm_calls_per_gib"].get<double>(), 0.5);
  EXPECT_EQ(summary["clock"], "host");
}

// The slow path and the plan's moves made inline are the program's paging
// time, told on a simulated driver's clock where there is one.
unsigned long long g_simulated_ns = 0;
unsigned long long simulated_clock() { return g_simulated_ns; }

TEST(HostPathStats, TheProgramsPagingTimeIsItsSlowPathAndTheMovesMadeInline) {
  HostPathStats stats(simulated_clock);
  stats.slow_path(3'000'000);
  stats.moved_inline(1'000'000);
  g_simulated_ns = 10'000;
  {
    DriverCallTimer call(&stats, DriverWork::vmm);
    g_simulated_ns += 87'600;  // the driver call, as the simulator charges it
  }
  const nlohmann::json summary = stats.summary({2 * kGiB, 0, 0, 0});
  EXPECT_EQ(summary["clock"], "simulated");
  EXPECT_EQ(summary["program_threads"]["paging_ns"].get<std::uint64_t>(), 4'000'000u);
  EXPECT_DOUBLE_EQ(summary["program_threads"]["paging_ms_per_gib"].get<double>(), 2.0) << "4 ms over 2 GiB";
  EXPECT_EQ(summary["program_threads"]["vmm_ns"].get<std::uint64_t>(), 87'600u) << "on the simulated clock";
}

TEST(HostPathStats, RatesOfNothingMovedAreNullNotZero) {
  HostPathStats stats;
  stats.driver_call(DriverWork::vmm, 1000);
  const nlohmann::json summary = stats.summary({0, 0, 0, 0});
  EXPECT_TRUE(summary["vmm_calls_per_gib"].is_null());
  EXPECT_TRUE(summary["program_threads"]["paging_ms_per_gib"].is_null());
  EXPECT_TRUE(summary["fetches"]["planned_share"].is_null()) << "no fetch at all";
}

// The driver work per move the plan is told is the recent moves': the
// warm-up's dear on-demand fetches fade as the planned ones follow. Fetches
// and saves are kept apart; none measured reads 0.
TEST(HostPathStats, TheDriverWorkPerMoveIsTheRecentMovesAverage) {
  HostPathStats stats;
  EXPECT_EQ(stats.driver_ns_per_move(false), 0);
  stats.move_driver_work(false, 900'000);
  EXPECT_DOUBLE_EQ(stats.driver_ns_per_move(false), 900'000) << "the first sets it";
  EXPECT_EQ(stats.driver_ns_per_move(true), 0) << "saves apart";
  for (int i = 0; i < 400; ++i) stats.move_driver_work(false, 120'000);
  EXPECT_NEAR(stats.driver_ns_per_move(false), 120'000, 2'000) << "the warm-up faded";
  for (int i = 0; i < 10; ++i) stats.move_driver_work(true, 60'000);
  EXPECT_DOUBLE_EQ(stats.driver_ns_per_move(true), 60'000);
  const nlohmann::json summary = stats.summary({0, 0, 0, 0});
  EXPECT_NEAR(summary["driver_us_per_fetch"].get<double>(), 120, 2);
  EXPECT_DOUBLE_EQ(summary["driver_us_per_save"].get<double>(), 60);
}

TEST(HostPathStats, PlannedShareIsThePlansFetchesAmongAll) {
  HostPathStats stats;
  stats.fetched_on_demand();
  stats.waited_for_mover();
  const nlohmann::json fetches = stats.summary({kGiB, 9, 0, 0})["fetches"];
  EXPECT_EQ(fetches["on_demand"].get<int>(), 1);
  EXPECT_EQ(fetches["waited_for_mover"].get<int>(), 1) << "late, but planned";
  EXPECT_DOUBLE_EQ(fetches["planned_share"].get<double>(), 0.9);
}

TEST(HostPathStats, OnlyReasonsThatHappenedAreListed) {
  HostPathStats stats;
  stats.refused(Refusal::no_room);
  stats.refused(Refusal::no_room);
  stats.refused(Refusal::capture_open);
  EXPECT_EQ(stats.summary({})["refused"], nlohmann::json({{"no_room", 2}, {"capture_open", 1}}));
}

}  // namespace
}  // namespace vgpumem::vmm
