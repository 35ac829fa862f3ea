// `vgpumem simulate TRACE --limit SIZE [--policy P] [--bandwidth GB/s]`:
// the step a trace recorded (its summary's schedule.profile: every
// operation of one training step with its device time and the units it
// touched), planned again under another cap, policy or link, and run on the
// planner's two-engine timeline. It answers "how small a cap can I afford,
// and what will it cost?" before running, with the same planners the shim
// runs (scheduler/), never a second copy of them.
#include "cli/simulate.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/trace_argument.h"
#include "scheduler/profile_json.h"
#include "scheduler/profile_pieces.h"
#include "scheduler/swap_plan.h"
#include "shim/config.h"

namespace vgpumem::cli {

namespace {

constexpr const char* kUsage =
    "usage: vgpumem simulate TRACE [--limit SIZE] [--policy auto|vdnn-all|vdnn-conv|all] [--bandwidth GB/s] [--grace K] [--pieces SIZE] [--json] [--swaps] [--late]\n"
    "  TRACE       a trace written with VGPUMEM_TRACE by a run whose schedule locked (its summary's\n"
    "              schedule.profile), or that profile alone\n"
    "  --limit     the device memory cap to plan for: bytes (K/M/G/T, KiB/MiB/GiB/TiB) or a percentage\n"
    "              of the step's bytes (50%); default: what the recorded run had for its paged units\n"
    "  --policy    the planner, or all of them (default auto)\n"
    "  --bandwidth the host link in each direction, GB/s (default: as the run measured it, else 55)\n"
    "  --grace     VGPUMEM_GRACE_LAUNCHES to plan for (default: the recorded run's)\n"
    "  --pieces    plan as if the pager could move part of a unit: each unit cut into pieces of SIZE (a\n"
    "              multiple of 2 MiB), every use of it a use of each piece; a what-if, not a plan a run can take\n"
    "  --json      one JSON object per policy instead of the table\n"
    "  --swaps     list each policy's planned moves: unit, bytes, last use, prefetch trigger, next use\n"
    "  --late      list the prefetches that land after their user could run, the longest waits first, and\n"
    "              what held each back (the copy-in engine busy, fired too late, its own save, room)\n";

struct Options {
  std::string trace;
  std::string limit;
  std::vector<std::string> policies{"auto"};
  std::optional<double> bandwidth;
  bool json = false;
  bool swaps = false;
  bool late = false;
  std::optional<std::size_t> grace;
  std::optional<std::uint64_t> piece_bytes;
};

std::optional<Options> parse(const std::vector<std::string>& args, std::string* error) {
  Options options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& key = args[i];
    if (key == "--json" || key == "--swaps" || key == "--late") {
      (key == "--json" ? options.json : key == "--swaps" ? options.swaps : options.late) = true;
      continue;
    }
    if (key == "--limit" || key == "--policy" || key == "--bandwidth" || key == "--grace" || key == "--pieces") {
      if (i + 1 >= args.size()) {
        *error = "vgpumem simulate: " + key + " needs a value";
        return std::nullopt;
      }
      const std::string& value = args[++i];
      if (key == "--limit") {
        options.limit = value;
      } else if (key == "--grace") {
        char* end = nullptr;
        const long grace = std::strtol(value.c_str(), &end, 10);
        if (end == value.c_str() || *end != '\0' || grace < 0 || grace > 65536) {
          *error = "vgpumem simulate: --grace \"" + value + "\" is not an operation count from 0 to 65536";
          return std::nullopt;
        }
        options.grace = static_cast<std::size_t>(grace);
      } else if (key == "--pieces") {
        const std::optional<std::uint64_t> bytes = parse_byte_size(value);
        if (!bytes || *bytes == 0 || *bytes % scheduler::kPieceGranularity != 0) {
          *error = "vgpumem simulate: --pieces \"" + value + "\" is not a size that is a positive multiple of 2 MiB (2MiB, 8MiB, ...)";
          return std::nullopt;
        }
        options.piece_bytes = *bytes;
      } else if (key == "--policy") {
        if (value == "all") {
          options.policies = {"vdnn-all", "vdnn-conv", "auto"};
        } else if (value == "auto" || value == "vdnn-all" || value == "vdnn-conv") {
          options.policies = {value};
        } else {
          *error = "vgpumem simulate: --policy \"" + value + "\" is not one of auto, vdnn-all, vdnn-conv, all";
          return std::nullopt;
        }
      } else {
        char* end = nullptr;
        const double gbps = std::strtod(value.c_str(), &end);
        if (end == value.c_str() || *end != '\0' || !(gbps > 0)) {
          *error = "vgpumem simulate: --bandwidth \"" + value + "\" is not a positive number of GB/s";
          return std::nullopt;
        }
        options.bandwidth = gbps;
      }
      continue;
    }
    if (!take_trace_argument("simulate", key, kUsage, &options.trace, error)) return std::nullopt;
  }
  if (!trace_given("simulate", options.trace, kUsage, error)) return std::nullopt;
  return options;
}

std::string ms(double ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f ms", ns / 1e6);
  return text;
}
std::string mib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

// Each operation as "operation K (its name)", the name where the profile
// has one (traces since 2026-11-25).
std::vector<std::string> operation_names(const nlohmann::json& profiled, std::size_t period) {
  std::vector<std::string> names(period);
  for (std::size_t k = 0; k < period; ++k) {
    const std::string name = scheduler::profiled_operation_name(profiled, k);
    names[k] = "operation " + std::to_string(k) + (name.empty() ? "" : " (" + name + ")");
  }
  return names;
}

const char* cause_name(scheduler::PlanTiming::Cause cause) {
  switch (cause) {
    case scheduler::PlanTiming::Cause::link: return "the copy-in engine was busy with earlier prefetches";
    case scheduler::PlanTiming::Cause::trigger: return "fired too late for its own copy";
    case scheduler::PlanTiming::Cause::own_save: return "its own save had not finished";
    case scheduler::PlanTiming::Cause::room: return "waited for a save to free its room";
    case scheduler::PlanTiming::Cause::driver: return "the driver work before its copy (mapping) was not done";
  }
  return "?";
}

void print_late(const scheduler::IterationProfile& profile, const scheduler::Plan& plan,
                const scheduler::PlanTiming& timing, const std::vector<std::string>& names) {
  std::vector<scheduler::PlanTiming::Late> late = timing.late;
  std::sort(late.begin(), late.end(), [](const auto& a, const auto& b) { return a.waited_ns > b.waited_ns; });
  std::map<scheduler::PlanTiming::Cause, double> by_cause;
  for (const auto& l : late) by_cause[l.cause] += l.waited_ns;
  std::printf("    %zu prefetches late in the step;", late.size());
  for (const auto& [cause, ns] : by_cause) std::printf(" %s: %s;", ms(ns).c_str(), cause_name(cause));
  std::printf("\n");
  for (std::size_t i = 0; i < late.size() && i < 20; ++i) {
    const scheduler::PlannedSwap& swap = plan.swaps[late[i].swap];
    std::printf("    %10s late  unit %4u %12s  for %s, fired at op %u: %s\n", ms(late[i].waited_ns).c_str(), swap.unit,
                mib(profile.units[swap.unit].bytes).c_str(), names[swap.needed_by].c_str(), swap.prefetch_at,
                cause_name(late[i].cause));
  }
}

// What the prediction is made with, said with it: the planner's timeline
// knows the recorded device times and the link, nothing of the host. The
// simulated driver charges driver calls host time (VGPUSIM_COST_MODEL,
// docs/simulated-driver.md "Host costs"), and a GPU charges more: neither is
// in these numbers.
constexpr const char* kCostModelLine =
    "cost model: the planner's two-engine timeline (each operation's recorded device time, the link each way) and "
    "the driver's lane (the driver work per move the run measured, none where it measured none); no other host "
    "time for driver calls (neither the simulated driver's calibrated nor its idle model)";
constexpr const char* kCostModelKey = "planner timeline and driver lane, no other host costs";

// One policy's plan for the step, and what the timeline made of it.
struct PolicyRow {
  std::string policy;
  scheduler::Plan plan;
  scheduler::IterationProfile planned;  // the step as the plan runs it (its grace)
  scheduler::PlanTiming timing;
  std::optional<double> least_kept;  // least bytes any schedule keeping units as this plan does moves
  double grace_floor = 0;
};

PolicyRow plan_policy(const std::string& policy, const scheduler::IterationProfile& profile, std::uint64_t budget,
                      const scheduler::LinkModel& link, double floor, const Options& options) {
  PolicyRow row;
  row.policy = policy;
  row.plan = policy == "auto"       ? scheduler::plan_auto(profile, budget, link)
             : policy == "vdnn-all" ? scheduler::plan_vdnn(profile, budget, link, false)
                                    : scheduler::plan_vdnn(profile, budget, link, true);
  // As the scheduler plans: where the launch grace leaves no room for a
  // plan, auto cuts the grace as far as a plan needs.
  if (policy == "auto") row.plan = scheduler::fit_by_cutting_grace(profile, budget, link, {}, std::move(row.plan));
  row.planned = scheduler::profile_for(profile, row.plan);
  row.timing = scheduler::simulate(row.planned, row.plan, link, options.late);
  // What the launch grace alone costs: the least any schedule keeping
  // units as this plan does moves, over the slower direction's link.
  row.least_kept = scheduler::least_bytes_keeping(profile, budget, row.planned.offload_delay);
  const double slower_link = std::min(link.to_host_bytes_per_ns, link.to_device_bytes_per_ns);
  row.grace_floor = row.least_kept ? std::max(floor, *row.least_kept / slower_link) : 0.0;
  return row;
}

// A number for a plan that fits; null for one that does not (no prediction).
nlohmann::json if_fits(const PolicyRow& row, double value) {
  return row.plan.fits ? nlohmann::json(value) : nlohmann::json(nullptr);
}

nlohmann::json row_json(const PolicyRow& row, const scheduler::IterationProfile& profile, std::uint64_t budget,
                        double floor, double least_any, const Options& options) {
  return nlohmann::json{{"policy", row.policy},
                        {"budget", budget},
                        {"step_ns", if_fits(row, row.timing.step_ns)},
                        {"floor_ns", floor},
                        {"uncapped_step_ns", profile.step_ns},
                        {"stall_ns", if_fits(row, row.timing.stall_ns)},
                        {"bytes_to_host", row.timing.bytes_to_host},
                        {"bytes_to_device", row.timing.bytes_to_device},
                        {"swaps", row.plan.swaps.size()},
                        {"peak_after", row.plan.peak_after},
                        {"fits", row.plan.fits},
                        {"grace_operations", row.planned.offload_delay},
                        {"least_bytes", least_any},
                        {"least_bytes_under_grace", row.least_kept ? nlohmann::json(*row.least_kept) : nullptr},
                        {"floor_under_grace_ns", row.least_kept ? nlohmann::json(row.grace_floor) : nullptr},
                        {"piece_bytes", options.piece_bytes.value_or(0)},
                        {"cost_model", kCostModelKey}};
}

void print_row(const PolicyRow& row, const scheduler::IterationProfile& profile, double floor, double least_any,
               const std::vector<std::string>& names, const Options& options) {
  const scheduler::PlanTiming& timing = row.timing;
  if (row.plan.fits) {
    std::printf("%-10s %14s %12.3f %10.3f %12s %12s %12s %6zu %5s\n", row.policy.c_str(), ms(timing.step_ns).c_str(),
                timing.step_ns / floor, timing.step_ns / profile.step_ns, mib(timing.bytes_to_host).c_str(),
                mib(timing.bytes_to_device).c_str(), ms(timing.stall_ns).c_str(), row.plan.swaps.size(), "yes");
  } else {
    // What it moves is the partial plan's; its time would leave out the
    // on-demand paging that carries the rest, and come out below the floor.
    std::printf("%-10s %14s %12s %10s %12s %12s %12s %6zu %5s\n", row.policy.c_str(), "-", "-", "-",
                mib(timing.bytes_to_host).c_str(), mib(timing.bytes_to_device).c_str(), "-", row.plan.swaps.size(),
                "no");
  }
  if (row.planned.offload_delay != profile.offload_delay) {
    std::printf("    (no plan fits with a launch grace of %zu operations: this one cuts it to %zu)\n",
                profile.offload_delay, row.planned.offload_delay);
  }
  if (!row.least_kept) {
    std::printf("    no schedule keeping each unit %zu operations past its last use fits this cap\n",
                row.planned.offload_delay);
  } else if (row.grace_floor > floor * 1.0005) {
    std::printf("    under this grace: any schedule moves at least %s each way (%s with none), %s a step (%.3f of the "
                "floor",
                mib(static_cast<std::uint64_t>(*row.least_kept)).c_str(),
                mib(static_cast<std::uint64_t>(least_any)).c_str(), ms(row.grace_floor).c_str(),
                row.grace_floor / floor);
    if (row.plan.fits) std::printf("; this plan %.3f of that", timing.step_ns / row.grace_floor);
    std::printf(")\n");
  }
  if (options.late) print_late(row.planned, row.plan, timing, names);
  if (options.swaps) {
    for (const scheduler::PlannedSwap& swap : row.plan.swaps) {
      std::printf("    unit %4u %12s  out after op %4u  prefetch at op %4u  needed by op %4u\n", swap.unit,
                  mib(profile.units[swap.unit].bytes).c_str(), swap.offload_after, swap.prefetch_at, swap.needed_by);
    }
  }
}

// Whether the step was recorded on a GPU: an access log as the GPU suite
// keeps them, or a trace whose paging ran on the host's clock (the
// simulated driver's traces say "simulated").
bool recorded_on_gpu(const nlohmann::json& trace, const nlohmann::json* schedule) {
  if (schedule == nullptr) return false;  // a bare profile says nothing of where it came from
  if (!trace.contains("traceEvents")) return true;
  const nlohmann::json& paging = trace["vgpumem"].value("paging", nlohmann::json::object());
  return paging.is_object() && paging.contains("host_path") && paging["host_path"].value("clock", "") == "host";
}

// A step recorded on a GPU, said not to be what the model is calibrated
// against: on the H200 the host path (the driver calls that map memory, on
// the launch thread) made the step 10-19 times uncapped, where this model
// charges none of it. The step the GPU measured, where the file carries it
// (`measured`: docs/gpu-runs/), is set beside the prediction.
void gpu_caveat(const nlohmann::json& trace, const nlohmann::json* schedule, const std::vector<PolicyRow>& rows,
                const Options& options) {
  if (!recorded_on_gpu(trace, schedule)) return;
  std::printf("\nThis step was recorded on a GPU, and the model is not calibrated against that run: it charges no "
              "host time, where on a GPU the driver calls that map memory on the program's thread can dominate the "
              "step (docs/results.md).\n");
  const nlohmann::json measured = trace.value("measured", nlohmann::json::object());
  if (!measured.is_object() || !measured.contains("step_ms") || !measured["step_ms"].is_number()) return;
  std::printf("measured on %s: a step of %.1f ms", measured.value("device", std::string("the GPU")).c_str(),
              measured["step_ms"].get<double>());
  if (measured.contains("uncapped_step_ms") && measured["uncapped_step_ms"].is_number()) {
    std::printf(" (uncapped %.1f ms)", measured["uncapped_step_ms"].get<double>());
  }
  const auto auto_row = std::find_if(rows.begin(), rows.end(), [](const PolicyRow& row) { return row.policy == "auto"; });
  if (options.limit.empty() && auto_row != rows.end() && auto_row->plan.fits) {
    std::printf(", where this model predicts %s for auto at the same budget",
                ms(auto_row->timing.step_ns).c_str());
  }
  std::printf("\n");
  if (const std::string what = measured.value("what", std::string()); !what.empty()) std::printf("  (%s)\n", what.c_str());
}

int simulate_trace(const Options& options, nlohmann::json& trace);

}  // namespace

int run_simulate(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  std::string error;
  const std::optional<Options> options = parse(args, &error);
  if (!options) {
    std::cerr << error << "\n";
    return 2;
  }
  std::optional<nlohmann::json> read = read_json_file("simulate", options->trace);
  if (!read) return 1;
  try {
    return simulate_trace(*options, *read);
  } catch (const nlohmann::json::exception& exception) {
    // A value of the wrong type where the trace format has a number (an
    // edited trace, another tool's file): said, never an abort.
    std::cerr << "vgpumem simulate: " << options->trace << ": not a trace vgpumem wrote: " << exception.what() << "\n";
    return 1;
  }
}

namespace {

// The trace read; what run_simulate prints, and its status.
int simulate_trace(const Options& options, nlohmann::json& trace) {
  const nlohmann::json* schedule = nullptr;
  if (trace.contains("vgpumem") && trace["vgpumem"].contains("schedule")) schedule = &trace["vgpumem"]["schedule"];
  const nlohmann::json* profiled = schedule != nullptr && schedule->contains("profile") ? &(*schedule)["profile"]
                                   : trace.contains("ops")                               ? &trace
                                                                                         : nullptr;
  if (profiled == nullptr) {
    std::cerr << "vgpumem simulate: \"" << options.trace
              << "\" has no profiled step (vgpumem.schedule.profile): it comes from a run whose schedule never "
                 "locked, or that ran with VGPUMEM_POLICY other than auto, vdnn-all or vdnn-conv\n";
    return 1;
  }
  scheduler::IterationProfile profile;
  nlohmann::json in_pieces;  // the profile cut into pieces, with --pieces
  try {
    profile = scheduler::profile_from_json(*profiled);
    if (options.piece_bytes) {
      in_pieces = scheduler::profile_in_pieces(*profiled, *options.piece_bytes);
      profile = scheduler::profile_from_json(in_pieces);
      profiled = &in_pieces;
    }
  } catch (const std::exception& e) {
    std::cerr << "vgpumem simulate: " << options.trace << ": " << e.what() << "\n";
    return 1;
  }

  if (options.grace) profile.offload_delay = *options.grace;
  std::uint64_t budget = 0;
  if (options.limit.empty()) {
    // A whole number of bytes, as the shim writes it (a float out of range
    // would make the conversion undefined: a damaged or hostile file).
    if (schedule == nullptr || !schedule->contains("plan") || !(*schedule)["plan"].contains("budget") ||
        !(*schedule)["plan"]["budget"].is_number_unsigned()) {
      std::cerr << "vgpumem simulate: \"" << options.trace << "\" does not say what its run's cap was: give --limit\n";
      return 2;
    }
    budget = (*schedule)["plan"]["budget"].get<std::uint64_t>();
  } else {
    const std::optional<MemoryLimit> limit = parse_memory_limit(options.limit);
    if (!limit || !limit->is_set()) {
      std::cerr << "vgpumem simulate: --limit \"" << options.limit
                << "\" is not a size (bytes, with K/M/G/T or KiB/MiB/GiB/TiB) or a percentage (50%)\n";
      return 2;
    }
    budget = limit->resolve(profile.total_bytes);
  }

  scheduler::LinkModel link;
  if (options.bandwidth) {
    link.to_host_bytes_per_ns = link.to_device_bytes_per_ns = *options.bandwidth;
  } else if (schedule != nullptr && schedule->contains("plan")) {
    const nlohmann::json& plan = (*schedule)["plan"];
    link.to_host_bytes_per_ns = plan.value("link_to_host_gbps", link.to_host_bytes_per_ns);
    link.to_device_bytes_per_ns = plan.value("link_to_device_gbps", link.to_device_bytes_per_ns);
  }
  // The driver work per move the run measured, as its plan was made with
  // (LinkModel::fetch_driver_ns); none in a trace from before it was.
  if (schedule != nullptr && schedule->contains("plan")) {
    const nlohmann::json& plan = (*schedule)["plan"];
    link.fetch_driver_ns = 1e3 * plan.value("fetch_driver_us", 0.0);
    link.save_driver_ns = 1e3 * plan.value("save_driver_us", 0.0);
  }

  const double floor = scheduler::step_floor(profile, budget, link);
  const double least_any = scheduler::least_bytes_moved(profile, budget);  // the floor's: no grace
  const std::vector<std::string> names = operation_names(*profiled, profile.period());
  if (!options.json) {
    std::printf("step: %zu operations, %zu units, %s, %s of compute (uncapped)\n", profile.period(),
                profile.units.size(), mib(profile.total_bytes).c_str(), ms(profile.step_ns).c_str());
    std::printf("%s\n", kCostModelLine);
    std::printf("cap %s (%.1f %% of the step's bytes), link %.2f GB/s out, %.2f GB/s in; floor %s\n",
                mib(budget).c_str(), 100.0 * static_cast<double>(budget) / static_cast<double>(profile.total_bytes),
                link.to_host_bytes_per_ns, link.to_device_bytes_per_ns, ms(floor).c_str());
    std::printf("driver work per move, as the run measured it: %.0f us before a fetch's copy, %.0f us after a "
                "save\n\n",
                link.fetch_driver_ns / 1e3, link.save_driver_ns / 1e3);
    if (options.piece_bytes) {
      std::printf("units cut into pieces of %s (--pieces): what moving part of a unit would give; no run can take "
                  "these plans\n\n",
                  mib(*options.piece_bytes).c_str());
    }
    std::printf("%-10s %14s %12s %10s %12s %12s %12s %6s %5s\n", "policy", "step", "step/floor", "/uncapped",
                "out/step", "in/step", "stall/step", "swaps", "fits");
  }
  std::vector<PolicyRow> rows;
  for (const std::string& policy : options.policies) rows.push_back(plan_policy(policy, profile, budget, link, floor, options));
  // Plans that fit first: a plan that does not fit is no prediction.
  std::stable_partition(rows.begin(), rows.end(), [](const PolicyRow& row) { return row.plan.fits; });
  for (const PolicyRow& row : rows) {
    if (options.json) {
      std::cout << row_json(row, profile, budget, floor, least_any, options).dump() << "\n";
      continue;
    }
    print_row(row, profile, floor, least_any, names, options);
  }
  if (!options.json) {
    std::printf(
        "\nA plan that does not fit leaves the rest to on-demand paging at run time, which this does not model: "
        "its row has no time.\n");
    gpu_caveat(trace, schedule, rows, options);
  }
  return 0;
}

}  // namespace

}  // namespace vgpumem::cli
