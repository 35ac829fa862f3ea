// `vgpumem report TRACE [--top N] [--png FILE]`: what a run under vgpumem
// did, from its trace, in words a user who never read the docs can follow:
// memory against the cap, what moved and what it cost in waiting, whether
// a training step was found and the schedule learned from it, where the
// program waited most, and what to try next. Every number comes from the
// trace (docs/trace-format.md); a section the trace has nothing for says
// so rather than inventing one.
#include "cli/report.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/demo_plot.h"
#include "cli/paths.h"
#include "cli/trace_argument.h"
#include "common/format_bytes.h"
#include "scheduler/profile_json.h"

namespace vgpumem::cli {

namespace {

constexpr const char* kUsage =
    "usage: vgpumem report TRACE [--top N] [--png FILE]\n"
    "  TRACE   a trace written with VGPUMEM_TRACE=FILE\n"
    "  --top   how many kernels to list where the program waited most (default 5)\n"
    "  --png   also draw the run: device memory against the cap, bytes on the host, launches\n"
    "          (needs Python with matplotlib)\n";

struct Options {
  std::string trace;
  std::size_t top = 5;
  std::string png;
};

std::optional<Options> parse(const std::vector<std::string>& args, std::string* error) {
  Options options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& key = args[i];
    if (key == "--top" || key == "--png") {
      if (i + 1 >= args.size()) {
        *error = "vgpumem report: " + key + " needs a value";
        return std::nullopt;
      }
      const std::string& value = args[++i];
      if (key == "--png") {
        options.png = value;
        continue;
      }
      char* end = nullptr;
      const long top = std::strtol(value.c_str(), &end, 10);
      if (end == value.c_str() || *end != '\0' || top < 0 || top > 1000) {
        *error = "vgpumem report: --top \"" + value + "\" is not a count from 0 to 1000";
        return std::nullopt;
      }
      options.top = static_cast<std::size_t>(top);
      continue;
    }
    if (!take_trace_argument("report", key, kUsage, &options.trace, error)) return std::nullopt;
  }
  if (!trace_given("report", options.trace, kUsage, error)) return std::nullopt;
  if (!options.png.empty()) {
    *error = output_file_problem("report", "--png", options.png);
    if (!error->empty()) return std::nullopt;
  }
  return options;
}

__attribute__((format(printf, 1, 2))) std::string printed(const char* format, ...) {
  char text[512];
  va_list values;
  va_start(values, format);
  std::vsnprintf(text, sizeof text, format, values);
  va_end(values);
  return text;
}
std::string ms(double ns) { return printed("%.1f ms", ns / 1e6); }
std::string percent(double part, double whole) { return whole > 0 ? printed("%.0f %%", 100.0 * part / whole) : "-"; }

// A number the trace may or may not have.
double number(const nlohmann::json& object, const char* key, double otherwise = 0) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number()) return otherwise;
  return object[key].get<double>();
}
// A count the trace may or may not have: an integer as written, a number
// of another kind rounded down into range (a hostile or damaged file must
// not make the conversion undefined), anything else 0.
std::uint64_t count(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) return 0;
  const nlohmann::json& value = object[key];
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (!value.is_number()) return 0;
  const double number = value.get<double>();
  constexpr double kBeyond = 18446744073709551616.0;  // 2^64
  if (!(number > 0)) return 0;  // negative, zero, NaN
  return number >= kBeyond ? ~std::uint64_t{0} : static_cast<std::uint64_t>(number);
}
bool flag(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) return false;
  const nlohmann::json& value = object[key];
  return value.is_boolean() && value.get<bool>();
}
std::string text(const nlohmann::json& object, const char* key, const std::string& otherwise) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_string()) return otherwise;
  return object[key].get<std::string>();
}
const nlohmann::json& member(const nlohmann::json& object, const char* key) {
  static const nlohmann::json kNone;
  return object.is_object() && object.contains(key) ? object[key] : kNone;
}

// The wall time the trace's events span, in nanoseconds (its timestamps
// are microseconds).
double traced_ns(const nlohmann::json& trace) {
  const nlohmann::json& events = member(trace, "traceEvents");
  if (!events.is_array()) return 0;
  double first = 0, last = 0;
  bool any = false;
  for (const nlohmann::json& event : events) {
    if (!event.contains("ts") || !event["ts"].is_number()) continue;
    const double ts = event["ts"].get<double>();
    first = any ? std::min(first, ts) : ts;
    last = any ? std::max(last, ts) : ts;
    any = true;
  }
  return any ? (last - first) * 1e3 : 0;
}

void memory_section(std::ostream& out, const nlohmann::json& summary) {
  out << "Memory\n";
  const nlohmann::json& devices = member(summary, "devices");
  if (!devices.is_array() || devices.empty()) out << "  no device memory was counted (no cap was set)\n";
  std::size_t unused = 0;
  for (std::size_t i = 0; devices.is_array() && i < devices.size(); ++i) {
    const nlohmann::json& device = devices[i];
    const std::uint64_t cap = count(device, "cap"), peak = count(device, "peak");
    if (peak == 0) {
      ++unused;  // a cap for every device, most of them never touched
      continue;
    }
    out << "  device " << count(device, "device") << ": ";
    if (cap == 0) {
      out << "no cap; the program's peak was " << format_bytes(peak) << "\n";
      continue;
    }
    out << "cap " << format_bytes(cap) << ", peak " << format_bytes(peak) << " (" << percent(peak, cap)
        << " of the cap): " << (peak <= cap ? "stayed under the cap" : "ABOVE THE CAP") << "\n";
  }
  if (unused > 0) out << "  " << unused << (unused == 1 ? " other device" : " other devices") << ": nothing allocated\n";
  const std::uint64_t ooms = count(summary, "ooms_returned");
  out << "  allocations refused with CUDA's out-of-memory error: " << ooms
      << (ooms > 0 ? " (the program saw them: a single kernel's operands, or what cannot be paged, exceeded the cap)"
                   : "")
      << "\n";
  const nlohmann::json& paging = member(summary, "paging");
  if (paging.is_object()) {
    out << "  pinned host memory holding offloaded data: " << format_bytes(count(paging, "host_pinned_bytes_peak"))
        << " at most\n";
  }
}

// Where paging's host work ran and what it cost (paging.host_path): on a
// GPU the driver calls that map memory, not the link, were what paging
// cost, and on the program's thread they are the program's time.
void host_path_lines(std::ostream& out, const nlohmann::json& path) {
  if (!path.is_object()) return;
  const nlohmann::json& program = member(path, "program_threads");
  const nlohmann::json& pager = member(path, "pager_threads");
  out << "  the program's threads spent " << ms(number(program, "paging_ns")) << " paging";
  if (member(program, "paging_ms_per_gib").is_number()) {
    out << printed(" (%.2f ms per GiB moved)", number(program, "paging_ms_per_gib"));
  }
  if (text(path, "clock", "") == "simulated") out << ", times on the simulated driver's clock";
  out << "\n  driver calls that map memory: " << count(program, "vmm_calls") << " on the program's threads ("
      << ms(number(program, "vmm_ns")) << "), " << count(pager, "vmm_calls") << " on vgpumem's ("
      << ms(number(pager, "vmm_ns")) << ")";
  if (member(path, "vmm_calls_per_gib").is_number()) {
    out << printed("; %.0f per GiB moved", number(path, "vmm_calls_per_gib"));
  }
  out << "\n";
  const nlohmann::json& fetches = member(path, "fetches");
  if (member(fetches, "planned_share").is_number()) {
    out << "  fetches: " << percent(number(fetches, "planned_share"), 1.0) << " planned ahead ("
        << count(fetches, "planned") << " planned, " << count(fetches, "on_demand") << " on demand";
    if (const std::uint64_t late = count(fetches, "waited_for_mover"); late > 0) {
      out << "; " << late << " times an operation waited for a planned one still queued";
    }
    out << ")\n";
  }
  if (const nlohmann::json& refused = member(path, "refused"); refused.is_object() && !refused.empty()) {
    static const std::map<std::string, const char*> kWhy = {
        {"freed", "freed first"},
        {"pinned", "held resident for life"},
        {"elsewhere", "already where asked, or on the way"},
        {"capture_open", "a stream capture open"},
        {"in_grace", "inside their launch grace"},
        {"held_by_launch", "held by a launch being issued"},
        {"no_host_memory", "no pinned host memory"},
        {"no_room", "no room under the cap"},
        {"failed", "a driver call failed"}};
    std::uint64_t total = 0;
    std::string reasons;
    for (const auto& [key, value] : refused.items()) {
      if (!value.is_number_unsigned()) continue;
      total += value.get<std::uint64_t>();
      const auto why = kWhy.find(key);
      reasons += (reasons.empty() ? "" : ", ") + std::to_string(value.get<std::uint64_t>()) + " " +
                 (why != kWhy.end() ? why->second : key.c_str());
    }
    out << "  the plan's moves refused: " << total << " (" << reasons << ")\n";
  }
  if (const std::uint64_t pinned = count(path, "pinned_bytes"); pinned > 0) {
    out << "  host memory pinned: " << format_bytes(pinned) << " in " << ms(number(path, "pin_ns")) << "\n";
  }
}

// The steady state: the last whole iterations followed since the last lock
// (schedule.recent_iterations), each with its own share of the pager's host
// work; the whole run's counts hold the warm-up before any plan. Those at
// the end that the plan followed throughout are the steady state where
// there are any (the first after a lock is recorded, not yet planned).
void steady_state_line(std::ostream& out, const nlohmann::json& all) {
  if (!all.is_array() || all.empty() || !all.back().contains("moved_bytes")) return;
  std::size_t first = all.size();
  while (first > 0 && number(all[first - 1], "followed") == number(all[first - 1], "operations")) --first;
  const nlohmann::json recent = first < all.size() ? nlohmann::json(std::vector<nlohmann::json>(
                                                         all.begin() + static_cast<std::ptrdiff_t>(first), all.end()))
                                                   : all;
  double operations = 0, paging_ns = 0, moved = 0, on_demand = 0, planned = 0;
  for (const nlohmann::json& iteration : recent) {
    operations += number(iteration, "operations");
    paging_ns += number(iteration, "program_paging_ns");
    moved += number(iteration, "moved_bytes");
    on_demand += number(iteration, "fetches_on_demand");
    planned += number(iteration, "fetches_planned");
  }
  const double iterations = static_cast<double>(recent.size());
  out << "  the last " << recent.size() << (recent.size() == 1 ? " repetition" : " repetitions")
      << " of the step found" << (first < all.size() ? ", followed throughout" : "") << " ("
      << printed("%.0f", operations) << " operations): the program's threads paged "
      << ms(paging_ns / iterations) << " each";
  if (moved > 0) out << printed(" (%.2f ms per GiB moved)", paging_ns / 1e6 / (moved / (1024.0 * 1024 * 1024)));
  if (planned + on_demand > 0) {
    out << "; " << percent(planned, planned + on_demand) << " of fetches planned ahead";
    if (planned == 0) out << " (everything came back on demand: the plan in force moves nothing back)";
  }
  out << "\n";
}

void paging_section(std::ostream& out, const nlohmann::json& summary) {
  const nlohmann::json& paging = member(summary, "paging");
  out << "\nPaging\n";
  if (!paging.is_object()) {
    out << "  off: no allocation was paged (paging needs VGPUMEM_LIMIT and a policy other than \"off\")\n";
    return;
  }
  out << "  policy " << text(paging, "policy", "?") << ", checking " << text(paging, "check", "?")
      << "\n";
  const std::uint64_t planned_out = count(paging, "scheduled_offloads"), planned_in = count(paging, "scheduled_prefetches");
  out << "  to the host:   " << format_bytes(count(paging, "bytes_offloaded")) << " in " << count(paging, "offloads")
      << " offloads" << (planned_out > 0 ? " (" + std::to_string(planned_out) + " of them planned ahead)" : "")
      << "\n";
  if (const nlohmann::json& victims = member(paging, "victims"); victims.is_object()) {
    const std::uint64_t taken = count(victims, "taken"), in_order = count(victims, "in_order");
    const std::string order = text(victims, "order", "?");
    out << "  room made on demand: " << taken << " buffers sent out, ";
    if (order == "least recently used") {
      out << "least recently used first\n";
    } else {
      out << in_order << " of them by the learned step's " << order << ", the rest least recently used (no plan "
          << "yet, or the program off its step)\n";
    }
  }
  out << "  back again:    " << format_bytes(count(paging, "bytes_prefetched")) << " in " << count(paging, "prefetches")
      << " copies" << (planned_in > 0 ? " (" + std::to_string(planned_in) + " of them planned ahead)" : "");
  if (const std::uint64_t revived = count(paging, "revived"); revived > 0) {
    out << "; " << revived << " more wanted back before they had left, kept with no copy";
  }
  out << "\n";
  if (const nlohmann::json& mover = member(paging, "mover"); mover.is_object() && count(mover, "posted") > 0) {
    // The plan's moves and where their driver work ran (vmm/mover.h).
    out << "  the plan's moves: " << count(mover, "made") << " made by vgpumem's mover thread, off the program's "
        << "threads (" << ms(number(mover, "busy_ns")) << " of its time)";
    if (const std::uint64_t full = count(mover, "ring_full"); full > 0) {
      out << ", " << full << " by the program's thread (the mover's queue was full)";
    }
    out << "\n";
  }
  host_path_lines(out, member(paging, "host_path"));
  if (const nlohmann::json& devices = member(paging, "devices"); devices.is_array()) {
    for (const nlohmann::json& device : devices) {
      if (!device.is_object() || count(device, "blocks") == 0) continue;
      out << "  device " << count(device, "device") << " physical memory: " << count(device, "blocks")
          << " blocks holding " << format_bytes(count(device, "chunk_bytes")) << ", each mapped whole";
      if (const std::uint64_t reshaped = count(device, "reshaped_blocks"); reshaped > 0) {
        out << "; " << reshaped << " released to make blocks of the sizes buffers needed";
      }
      out << "\n";
    }
  }
  const double stall = number(paging, "stall_ns");
  // (Device time: on the simulated driver, simulated, unlike the wall time traced.)
  out << "  the program's work waited " << ms(stall) << " for its data, before " << count(paging, "stalled_operations")
      << " operations\n";
  if (const nlohmann::json& frees = member(paging, "frees_waiting"); frees.is_object()) {
    const std::uint64_t alone = count(frees, "for_program_streams"), whole = count(frees, "for_whole_contexts");
    if (alone + whole > 0) {
      out << "  cuMemFree: " << alone << (alone == 1 ? " free" : " frees") << " waited for the program's work alone";
      if (whole > 0) {
        out << "; " << whole << " also for vgpumem's queued copies (whole contexts: the program made a stream "
            << "vgpumem could not list, a green context's)";
      }
      out << "\n";
    }
  }
  if (const std::uint64_t spared = count(paging, "bytes_not_fetched"); spared > 0) {
    out << "  not copied back: " << format_bytes(spared) << " that library calls overwrote whole ("
        << count(paging, "overwritten_fetches") << " buffers)\n";
  }
}

// The library entry points the program called through vgpumem's hooks
// (cuBLAS, cuBLASLt, cuDNN, CUPTI), most called first; nothing when none.
void library_section(std::ostream& out, const nlohmann::json& summary) {
  const nlohmann::json& calls = member(summary, "library_calls");
  if (!calls.is_object() || calls.empty()) return;
  std::vector<std::pair<std::uint64_t, std::string>> sorted;
  for (const auto& [name, n] : calls.items()) sorted.emplace_back(n.is_number_unsigned() ? n.get<std::uint64_t>() : 0, name);
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  out << "\nLibrary calls seen\n  ";
  for (std::size_t i = 0; i < sorted.size(); ++i) out << (i > 0 ? ", " : "") << sorted[i].second << " " << sorted[i].first;
  out << "\n";
}

struct Wait {
  std::string name;
  double stall_ns = 0;
  std::size_t operations = 0;
};

// Where the program waited in the recorded step, by kernel name: the step
// the last plan was made from (the on-demand step before the first plan, or
// a step under the plan before it).
std::vector<Wait> waits_by_kernel(const nlohmann::json& profile) {
  std::map<std::string, Wait> by_name;
  const nlohmann::json& ops = member(profile, "ops");
  if (!ops.is_array()) return {};
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const nlohmann::json& op = ops[i];
    if (!op.is_array() || op.size() < 4 || !op[1].is_number()) continue;
    const double stall = op[1].get<double>();
    if (stall <= 0) continue;
    std::string name = scheduler::profiled_operation_name(profile, i);
    if (name.empty()) name = "operation " + std::to_string(i);
    Wait& wait = by_name[name];
    wait.name = name;
    wait.stall_ns += stall;
    ++wait.operations;
  }
  std::vector<Wait> waits;
  for (auto& [name, wait] : by_name) waits.push_back(std::move(wait));
  std::sort(waits.begin(), waits.end(), [](const Wait& a, const Wait& b) { return a.stall_ns > b.stall_ns; });
  return waits;
}

void schedule_section(std::ostream& out, const nlohmann::json& summary, std::size_t top,
                      std::vector<std::string>* advice) {
  const nlohmann::json& schedule = member(summary, "schedule");
  const std::string policy = text(member(summary, "paging"), "policy", "");
  out << "\nTraining step\n";
  if (!schedule.is_object()) {
    out << "  not looked for: policy " << (policy.empty() ? std::string("off") : policy)
        << " pages on demand only (VGPUMEM_POLICY=auto learns the step and moves data ahead of need)\n";
    if (policy == "lru" || policy == "fifo") {
      advice->push_back("VGPUMEM_POLICY=auto learns the training step and moves data ahead of need, overlapped with "
                        "compute, where " + policy + " waits for each buffer when a kernel wants it.");
    }
    return;
  }
  const std::uint64_t locks = count(schedule, "locks"), breaks = count(schedule, "breaks");
  if (locks == 0) {
    out << "  none found in " << count(schedule, "operations")
        << " operations: the launches never repeated with a period, so paging stayed on demand\n";
    advice->push_back("No training step was found. A step is found once the same sequence of launches repeats; a run "
                      "of only a step or two, or one whose every step differs, stays on demand.");
    return;
  }
  out << "  found: a step of " << count(schedule, "period") << " operations; " << count(schedule, "iterations_followed")
      << " steps followed (" << count(schedule, "iterations_recorded") << " recorded for the planner), locked " << locks
      << (locks == 1 ? " time" : " times");
  if (breaks > 0) out << ", broken " << breaks << (breaks == 1 ? " time" : " times");
  out << (flag(schedule, "locked") ? "; still locked at exit\n" : "\n");
  if (breaks > 0) {
    advice->push_back("The step broke " + std::to_string(breaks) +
                      (breaks == 1 ? " time" : " times") +
                      " (an evaluation step, a new input shape, the end of the run): those steps ran on demand "
                      "and the schedule was learned again after each.");
  }
  const nlohmann::json& plan = member(schedule, "plan");
  const std::uint64_t plans = count(schedule, "plans");
  if (plans == 0 || !plan.is_object() || plan.empty()) {
    out << "  no plan was made (the run ended before a recorded step could be planned)\n";
    return;
  }
  const double compute = number(plan, "compute_ns"), predicted = number(plan, "predicted_step_ns"),
               floor = number(plan, "floor_ns");
  out << "  planner " << text(schedule, "planner", "?") << ": " << plans
      << (plans == 1 ? " plan" : " plans") << "; the last moves " << count(plan, "swaps")
      << " buffers out and back each step under a budget of " << format_bytes(count(plan, "budget")) << "\n";
  if (!flag(plan, "fits")) {
    out << "  no plan could fit the step under the cap: what no plan covers pages on demand\n";
    const nlohmann::json& trial = member(schedule, "trial");
    if (trial.is_object() && member(trial, "candidates").is_array()) {
      out << "  measured, a step each way:";
      for (const nlohmann::json& candidate : trial["candidates"]) {
        const double step_ns = number(candidate, "step_ns", -1);
        out << "  " << text(candidate, "policy", "?") << " " << (step_ns < 0 ? std::string("(not yet)") : ms(step_ns));
      }
      out << "\n  kept: " << text(trial, "chosen", "?") << (flag(trial, "done") ? "" : " (so far: the trial was cut short)")
          << "\n";
    }
    advice->push_back("No schedule fit this cap, so part of every step waited for its data on demand. Try a larger "
                      "cap, or ask `vgpumem simulate TRACE --limit SIZE --policy all` which caps a plan fits.");
  } else {
    out << "  per step: compute " << ms(compute) << ", predicted " << ms(predicted) << ", floor " << ms(floor);
    if (floor > 0) out << " (predicted / floor " << printed("%.2f", predicted / floor) << ")";
    out << "\n";
  }
  const std::uint64_t followed = count(schedule, "operations_followed"), strayed = count(schedule, "operations_strayed");
  const std::uint64_t operations = count(schedule, "operations");
  out << "  followed on " << followed << " of " << operations << " operations (" << percent(followed, operations)
      << ")";
  if (strayed > 0) out << ", strayed from on " << strayed;
  if (const std::uint64_t refused = count(schedule, "scheduled_refused"); refused > 0) {
    out << "; " << refused << " planned moves refused (why: under Paging)";
  }
  out << "\n";
  steady_state_line(out, member(schedule, "recent_iterations"));
  out << printed("  link as measured: %.1f GB/s to the host, %.1f GB/s back\n", number(plan, "link_to_host_gbps"),
                 number(plan, "link_to_device_gbps"));

  const std::vector<Wait> waits = waits_by_kernel(member(schedule, "profile"));
  if (top == 0) return;
  out << "\nWhere the program waited most (the step the last plan was made from)\n";
  if (waits.empty()) {
    out << "  nowhere: no operation of that step waited\n";
    return;
  }
  for (std::size_t i = 0; i < waits.size() && i < top; ++i) {
    out << printed("  %10s  %4zu %-10s  ", ms(waits[i].stall_ns).c_str(), waits[i].operations,
                   waits[i].operations == 1 ? "operation" : "operations")
        << waits[i].name << "\n";
  }
}

// The whole report; throws nlohmann::json::exception where the summary has
// a field of another type than this version writes.
std::string report_text(const std::string& path, const nlohmann::json& trace, std::size_t top) {
  const nlohmann::json& summary = trace["vgpumem"];
  const double traced = traced_ns(trace);
  std::ostringstream out;
  out << "vgpumem report: " << path << "\n";
  out << "  vgpumem " << text(summary, "vgpumem_version", "?") << ", process " << count(summary, "pid")
      << printed(", %.2f s traced, ", traced / 1e9) << count(summary, "launches") << " kernel launches\n\n";
  std::vector<std::string> advice;
  memory_section(out, summary);
  paging_section(out, summary);
  library_section(out, summary);
  schedule_section(out, summary, top, &advice);
  if (count(summary, "events_dropped") > 0) {
    advice.push_back(std::to_string(count(summary, "events_dropped")) +
                     " trace events were dropped (the per-thread buffers filled): the totals above are whole, "
                     "the timeline is not.");
  }
  if (!advice.empty()) {
    out << "\nWhat this means\n";
    for (const std::string& line : advice) out << "  - " << line << "\n";
  }
  return out.str();
}

}  // namespace

int run_report(const std::vector<std::string>& args) {
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
  const std::optional<nlohmann::json> read = read_json_file("report", options->trace);
  if (!read) return 1;
  const nlohmann::json& trace = *read;
  if (!trace.is_object() || !trace.contains("vgpumem") || !trace["vgpumem"].is_object()) {
    std::cerr << "vgpumem report: \"" << options->trace
              << "\" is not a vgpumem trace (a JSON object with a \"vgpumem\" summary, written with "
                 "VGPUMEM_TRACE=FILE)\n";
    return 1;
  }
  std::string report;
  try {
    report = report_text(options->trace, trace, options->top);
  } catch (const nlohmann::json::exception& e) {
    std::cerr << "vgpumem report: \"" << options->trace << "\" has a summary this version cannot read: " << e.what()
              << "\n";
    return 1;
  }
  std::cout << report;

  if (!options->png.empty()) {
    // The script's output is kept only when it failed.
    const std::string log =
        (std::filesystem::temp_directory_path() / ("vgpumem-report-plot-" + std::to_string(getpid()) + ".log")).string();
    const PlotOutcome plot = draw_trace(options->trace, options->png, log);
    if (plot.drawn) {
      std::filesystem::remove(log);
      std::cout << "\npicture: " << options->png << "\n";
    } else {
      std::cerr << "vgpumem report: no picture: " << plot.why_not << "\n  (to draw it: " << plot.command << ")\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace vgpumem::cli
