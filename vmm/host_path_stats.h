// What paging costs the host, and on whose threads: the numbers the trace's
// `paging.host_path` gives and `vgpumem report` says in words
// (docs/trace-format.md).
//
// On a GPU the host path, not the link, was what paging cost (ResNet-50 on
// the H200: 212 ms a step mapping, on the program's thread; docs/results.md).
// So a run says how much driver work paging did (the VMM calls that make,
// map, grant, unmap and release physical memory; the calls that pin host
// memory), how long it took, and whether it ran on the program's threads or
// on the pager's own (the mover, the reclaimer), all per GiB moved, so that
// runs of different sizes compare; which fetches the plan made ahead and
// which the program had to wait for; and why the plan's moves were refused.
//
// Times are on the host's clock, or on a simulated driver's (its
// vgpusimHostTimeNs, which charges each driver call what a GPU's driver
// takes): there the wall time of a call is the simulator's, not the
// GPU's, and would say nothing. Counting costs one relaxed atomic add per
// driver call (each of which costs tens of microseconds), never a lock;
// nothing here is on the launch fast path.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "common/clock.h"

// Note [What paging costs the host]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `vmm/host_path_stats.*` counts every driver call paging makes that costs the
// host tens of microseconds (`cuMemCreate`, `cuMemMap`, `cuMemSetAccess`,
// `cuMemUnmap`, `cuMemRelease`; `cuMemHostAlloc`, `cuMemFreeHost`) at the call
// site (`DriverCallTimer`, `counted_call`), by the side of the thread that
// made it: the program's, or vgpumem's own (the mover and the reclaimer mark
// their threads when they start). With them: the program's paging time (its
// launch path's slow path and the plan's moves made inline), fetches made on
// demand against those the plan made, and why each of the plan's moves was
// refused. Times are on the simulated driver's clock where there is one: its
// wall time says nothing about a GPU's. The trace gives the run's totals
// (`paging.host_path`) and each recent iteration's own share
// (`schedule.recent_iterations`, noted at each iteration's end through
// `PagerControl::host_path_counts`), which is the steady state; `vgpumem
// report` says both in words.

namespace vgpumem::vmm {

// Whose thread does a piece of paging's host work: the program's (its
// launch path, its frees, a planned move made inline) or the pager's own.
enum class HostSide : std::size_t { program, pager, count };

// The calling thread's side. The mover and the reclaimer say so once, when
// they start (mark_pager_thread); every other thread is the program's.
HostSide host_side();
void mark_pager_thread();

// Driver work that costs the host the most, by kind.
enum class DriverWork : std::size_t {
  vmm,  // cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease
  pin,  // cuMemHostAlloc, cuMemFreeHost
  count
};

// Why a move the plan asked for was not made (PagerControl::offload_unit,
// prefetch_unit). None of these is an error: the launch path makes whatever
// the plan missed resident on demand.
enum class Refusal : std::size_t {
  freed,            // the allocation was freed before the move
  pinned,           // held resident for life (a capture, an export, ...)
  elsewhere,        // not where the move starts: already out, already in, or on its way
  capture_open,     // a stream capture is open: no events may be recorded now
  in_grace,         // an offload of a unit inside its launch grace
  held_by_launch,   // a launch was between its check and its enqueue
  no_host_memory,   // no pinned host buffer (VGPUMEM_HOST_LIMIT, or pinning failed)
  no_room,          // a fetch found no room under the cap
  failed,           // a driver call failed
  count
};

inline constexpr std::array<std::string_view, static_cast<std::size_t>(Refusal::count)> kRefusalNames = {
    "freed", "pinned", "elsewhere", "capture_open", "in_grace", "held_by_launch", "no_host_memory", "no_room",
    "failed"};

class HostPathStats {
 public:
  // `simulated_clock`: a simulated driver's host clock (DriverOps::
  // host_time_ns), or null for the host's own.
  explicit HostPathStats(unsigned long long (*simulated_clock)() = nullptr)
      : simulated_clock_(simulated_clock), created_ns_(monotonic_ns()) {}

  // Now, on the clock paging's host time is told on.
  std::uint64_t now() const { return simulated_clock_ != nullptr ? simulated_clock_() : monotonic_ns(); }
  bool simulated() const { return simulated_clock_ != nullptr; }

  // One driver call of `work` that took `ns`, on the calling thread's side;
  // `pinned_bytes`: host memory a pinning call pinned.
  void driver_call(DriverWork work, std::uint64_t ns, std::uint64_t pinned_bytes = 0) {
    Calls& calls = calls_[index(host_side())][static_cast<std::size_t>(work)];
    calls.count.fetch_add(1, std::memory_order_relaxed);
    calls.ns.fetch_add(ns, std::memory_order_relaxed);
    if (pinned_bytes != 0) pinned_bytes_.fetch_add(pinned_bytes, std::memory_order_relaxed);
  }
  void refused(Refusal why) { refused_[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed); }
  // A unit the program's operation needed that was on the host and no move
  // of the plan's was bringing in: fetched on its thread.
  void fetched_on_demand() { on_demand_.fetch_add(1, std::memory_order_relaxed); }
  // An operation that found a unit it needs still queued for the mover and
  // waited for it: planned, but late.
  void waited_for_mover() { waited_for_mover_.fetch_add(1, std::memory_order_relaxed); }
  // The program's launch path making units resident (its slow path), and
  // the plan's moves made on the program's thread (the mover off, or its
  // ring full): how long each took it.
  void slow_path(std::uint64_t ns) { slow_path_ns_.fetch_add(ns, std::memory_order_relaxed); }
  // The driver work of one move, waits for the driver's lock included: a
  // fetch's mapping and access granted, before its copy can start; a
  // save's range unmapped, after it.
  // The plan's model charges their means on a lane of their own
  // (scheduler::LinkModel::fetch_driver_ns).
  void move_driver_work(bool save, std::uint64_t ns) {
    MoveWork& work = move_work_[save ? 1 : 0];
    const bool first = work.moves.fetch_add(1, std::memory_order_relaxed) == 0;
    // An average over about the last kRecentMoves: the warm-up's on-demand
    // moves, made while the program's thread and the reclaimer contend for
    // the driver, cost more than the planned ones that follow.
    double recent = work.recent_ns.load(std::memory_order_relaxed);
    const auto sample = static_cast<double>(ns);
    while (!work.recent_ns.compare_exchange_weak(recent, first ? sample : recent + (sample - recent) / kRecentMoves,
                                                  std::memory_order_relaxed)) {
    }
  }
  // Their recent mean (above), in ns; 0 before any.
  double driver_ns_per_move(bool save) const {
    return move_work_[save ? 1 : 0].recent_ns.load(std::memory_order_relaxed);
  }
  void moved_inline(std::uint64_t ns) { inline_moves_ns_.fetch_add(ns, std::memory_order_relaxed); }

  std::uint64_t calls(HostSide side, DriverWork work) const {
    return calls_[index(side)][static_cast<std::size_t>(work)].count.load(std::memory_order_relaxed);
  }
  std::uint64_t call_ns(HostSide side, DriverWork work) const {
    return calls_[index(side)][static_cast<std::size_t>(work)].ns.load(std::memory_order_relaxed);
  }
  std::uint64_t refusals(Refusal why) const {
    return refused_[static_cast<std::size_t>(why)].load(std::memory_order_relaxed);
  }
  std::uint64_t fetches_on_demand() const { return on_demand_.load(std::memory_order_relaxed); }
  // The program's threads' paging time so far (slow path and moves made inline).
  std::uint64_t program_paging_ns() const {
    return slow_path_ns_.load(std::memory_order_relaxed) + inline_moves_ns_.load(std::memory_order_relaxed);
  }

  // What the run's paging moved and made, from the pager's other counts.
  struct Totals {
    std::uint64_t moved_bytes = 0;          // offloaded + fetched
    std::uint64_t planned_fetches = 0;      // the plan's prefetches made
    std::uint64_t mover_busy_ns = 0;        // wall time
    std::uint64_t lock_waited_ns = 0;       // threads waiting for the pager's lock (on the stats' clock)
  };
  // `paging.host_path` in the trace (docs/trace-format.md).
  nlohmann::json summary(const Totals& totals) const;

 private:
  struct Calls {
    std::atomic<std::uint64_t> count{0}, ns{0};
  };
  static constexpr double kRecentMoves = 64;
  struct MoveWork {
    std::atomic<std::uint64_t> moves{0};
    std::atomic<double> recent_ns{0};
  };
  static std::size_t index(HostSide side) { return static_cast<std::size_t>(side); }
  nlohmann::json side_summary(HostSide side, double gib_moved) const;

  unsigned long long (*const simulated_clock_)();
  const std::uint64_t created_ns_;  // wall time
  std::array<std::array<Calls, static_cast<std::size_t>(DriverWork::count)>, static_cast<std::size_t>(HostSide::count)>
      calls_{};
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(Refusal::count)> refused_{};
  std::array<MoveWork, 2> move_work_{};  // fetches, saves
  std::atomic<std::uint64_t> pinned_bytes_{0}, on_demand_{0}, waited_for_mover_{0};
  std::atomic<std::uint64_t> slow_path_ns_{0}, inline_moves_ns_{0};
};

// Times one driver call and counts it (a null `stats` counts nothing: the
// parts tests build without a pager).
class DriverCallTimer {
 public:
  DriverCallTimer(HostPathStats* stats, DriverWork work, std::uint64_t pinned_bytes = 0)
      : stats_(stats), work_(work), pinned_bytes_(pinned_bytes), started_(stats != nullptr ? stats->now() : 0) {}
  ~DriverCallTimer() {
    if (stats_ != nullptr) stats_->driver_call(work_, stats_->now() - started_, pinned_bytes_);
  }
  DriverCallTimer(const DriverCallTimer&) = delete;
  DriverCallTimer& operator=(const DriverCallTimer&) = delete;
  // The call failed: it pinned nothing.
  void pinned_nothing() { pinned_bytes_ = 0; }

 private:
  HostPathStats* stats_;
  DriverWork work_;
  std::uint64_t pinned_bytes_;
  std::uint64_t started_;
};

// `call()`, timed and counted as one driver call of `work`.
template <typename Call>
auto counted_call(HostPathStats* stats, DriverWork work, Call&& call) {
  DriverCallTimer timed(stats, work);
  return call();
}

}  // namespace vgpumem::vmm
