#include "vmm/host_path_stats.h"

#include <nlohmann/json.hpp>

namespace vgpumem::vmm {
namespace {

thread_local HostSide t_side = HostSide::program;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// `value` per GiB moved; null when nothing moved (a rate of nothing is no
// number, and a reader must not take 0 for "free").
nlohmann::json per_gib(double value, double gib_moved) {
  return gib_moved > 0 ? nlohmann::json(value / gib_moved) : nlohmann::json(nullptr);
}

}  // namespace

HostSide host_side() { return t_side; }
void mark_pager_thread() { t_side = HostSide::pager; }

nlohmann::json HostPathStats::side_summary(HostSide side, double gib_moved) const {
  const std::uint64_t vmm = calls(side, DriverWork::vmm);
  return {{"vmm_calls", vmm},
          {"vmm_ns", call_ns(side, DriverWork::vmm)},
          {"vmm_calls_per_gib", per_gib(static_cast<double>(vmm), gib_moved)},
          {"pin_calls", calls(side, DriverWork::pin)},
          {"pin_ns", call_ns(side, DriverWork::pin)}};
}

nlohmann::json HostPathStats::summary(const Totals& totals) const {
  const double gib_moved = static_cast<double>(totals.moved_bytes) / kGiB;
  nlohmann::json program = side_summary(HostSide::program, gib_moved);
  // The program's threads' paging time: its launch path's slow path (which
  // holds every on-demand fetch, eviction and wait) and the plan's moves
  // made inline. A free's own unmap is not paging's, and not in it.
  const std::uint64_t paging_ns = program_paging_ns();
  program["paging_ns"] = paging_ns;
  program["paging_ms_per_gib"] = per_gib(static_cast<double>(paging_ns) / 1e6, gib_moved);
  const std::uint64_t vmm_calls = calls(HostSide::program, DriverWork::vmm) + calls(HostSide::pager, DriverWork::vmm);
  const std::uint64_t on_demand = on_demand_.load(std::memory_order_relaxed);
  const std::uint64_t fetches = totals.planned_fetches + on_demand;
  nlohmann::json refused = nlohmann::json::object();
  for (std::size_t i = 0; i < kRefusalNames.size(); ++i) {
    if (const std::uint64_t n = refused_[i].load(std::memory_order_relaxed)) refused[std::string(kRefusalNames[i])] = n;
  }
  const std::uint64_t alive_ns = monotonic_ns() - created_ns_;
  return {{"clock", simulated() ? "simulated" : "host"},
          {"moved_bytes", totals.moved_bytes},
          {"program_threads", program},
          {"pager_threads", side_summary(HostSide::pager, gib_moved)},
          {"vmm_calls_per_gib", per_gib(static_cast<double>(vmm_calls), gib_moved)},
          {"lock_waited_ns", totals.lock_waited_ns},
          {"mover_busy_share",
           alive_ns > 0 ? static_cast<double>(totals.mover_busy_ns) / static_cast<double>(alive_ns) : 0.0},
          {"fetches",
           {{"planned", totals.planned_fetches},
            {"on_demand", on_demand},
            {"waited_for_mover", waited_for_mover_.load(std::memory_order_relaxed)},
            {"planned_share", fetches > 0 ? nlohmann::json(static_cast<double>(totals.planned_fetches) /
                                                            static_cast<double>(fetches))
                                          : nlohmann::json(nullptr)}}},
          {"refused", refused},
          {"driver_us_per_fetch", driver_ns_per_move(false) / 1e3},
          {"driver_us_per_save", driver_ns_per_move(true) / 1e3},
          {"pinned_bytes", pinned_bytes_.load(std::memory_order_relaxed)},
          {"pin_ns", call_ns(HostSide::program, DriverWork::pin) + call_ns(HostSide::pager, DriverWork::pin)}};
}

}  // namespace vgpumem::vmm
