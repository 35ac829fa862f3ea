// `vgpumem report TRACE [--top N] [--png FILE] [--json] [--uncapped-ms N]`:
// what a run under vgpumem did, from its trace, in words a user who never
// read the docs can follow: memory against the cap, what moved and what it
// cost in waiting, whether a training step was found and the schedule
// learned from it, the step measured against uncapped, what CUPTI did,
// where the program waited most, and what to try next. Every number comes
// from the trace (docs/trace-format.md); a section the trace has nothing for
// says so rather than inventing one. It also reads an access log (the
// summary alone, as the GPU suite keeps it: docs/gpu-runs/) as what it is.
#include "cli/report.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/demo_plot.h"
#include "cli/paths.h"
#include "cli/steady_state.h"
#include "cli/trace_argument.h"
#include "common/format_bytes.h"
#include "scheduler/profile_json.h"

namespace vgpumem::cli {

namespace {

constexpr const char* kUsage =
    "usage: vgpumem report TRACE [--top N] [--png FILE] [--json] [--uncapped-ms N]\n"
    "  TRACE         a trace written with VGPUMEM_TRACE=FILE (or an access log: its summary alone)\n"
    "  --top         how many kernels to list where the program waited most (default 5)\n"
    "  --png         also draw the run: device memory against the cap, bytes on the host, launches\n"
    "                (an access log: its recorded step's operations and the bytes they hold; needs\n"
    "                Python with matplotlib)\n"
    "  --json        what the text says, as one JSON object\n"
    "  --uncapped-ms the step the program takes uncapped, in ms, to measure the step against\n";

struct Options {
  std::string trace;
  std::size_t top = 5;
  std::string png;
  bool json = false;
  std::optional<double> uncapped_ns;
};

// `value` as --top's count; false, with `error` set, when it is not one.
bool parse_top(const std::string& value, Options* options, std::string* error) {
  char* end = nullptr;
  const long top = std::strtol(value.c_str(), &end, 10);
  if (end == value.c_str() || *end != '\0' || top < 0 || top > 1000) {
    *error = "vgpumem report: --top \"" + value + "\" is not a count from 0 to 1000";
    return false;
  }
  options->top = static_cast<std::size_t>(top);
  return true;
}

bool parse_uncapped(const std::string& value, Options* options, std::string* error) {
  char* end = nullptr;
  const double milliseconds = std::strtod(value.c_str(), &end);
  if (end == value.c_str() || *end != '\0' || !(milliseconds > 0) || milliseconds > 1e9) {
    *error = "vgpumem report: --uncapped-ms \"" + value + "\" is not a positive number of milliseconds";
    return false;
  }
  options->uncapped_ns = milliseconds * 1e6;
  return true;
}

std::optional<Options> parse(const std::vector<std::string>& args, std::string* error) {
  Options options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& key = args[i];
    if (key == "--json") {
      options.json = true;
      continue;
    }
    if (key == "--top" || key == "--png" || key == "--uncapped-ms") {
      if (i + 1 >= args.size()) {
        *error = "vgpumem report: " + key + " needs a value";
        return std::nullopt;
      }
      const std::string& value = args[++i];
      if (key == "--png") {
        options.png = value;
      } else if (!(key == "--top" ? parse_top(value, &options, error) : parse_uncapped(value, &options, error))) {
        return std::nullopt;
      }
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

// An access log is the summary alone (`{"vgpumem": {schedule, paging,
// cupti, launches}}`), as the GPU suite keeps one of each run: no events,
// no devices' caps or peaks, no version. A trace has `traceEvents`.
bool is_access_log(const nlohmann::json& file) { return !file.contains("traceEvents"); }

// Whether any device had a cap: with one and no paging, the cap was strict.
bool any_cap(const nlohmann::json& summary) {
  const nlohmann::json& devices = member(summary, "devices");
  for (std::size_t i = 0; devices.is_array() && i < devices.size(); ++i) {
    if (count(devices[i], "cap") > 0) return true;
  }
  return false;
}

// The policy in words the summary allows: paging's own, else "off" (a cap
// and nothing paged: the strict cap) or "none" (no cap at all).
std::string policy_of(const nlohmann::json& summary) {
  const std::string paged = text(member(summary, "paging"), "policy", "");
  if (!paged.empty()) return paged;
  return any_cap(summary) ? "off" : "none";
}

// A kernel's name as people read it: demangled where it is a C++ symbol
// (the driver gives kernels' mangled names), else as it was.
std::string demangled(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> plain(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status),
                                                    &std::free);
  return status == 0 && plain != nullptr ? std::string(plain.get()) : name;
}

// `name` with every template argument list nested `depth` or deeper cut to
// "<…>" (depth 1: the outermost lists).
std::string templates_cut(const std::string& name, int depth) {
  std::string cut;
  int level = 0;
  for (char c : name) {
    if (c == '<') {
      ++level;
      if (level == depth) cut += "<\u2026";
      if (level >= depth) continue;
    } else if (c == '>') {
      --level;
      if (level + 1 > depth) continue;
      if (level + 1 == depth) {
        cut += '>';
        continue;
      }
    } else if (level >= depth) {
      continue;
    }
    cut += c;
  }
  return cut;
}

// A demangled name on one line of at most `width` characters: a template
// kernel's name runs to hundreds (its template arguments, then the same
// again as its parameters). Dropped in turn until it fits: the return
// type, the parameters (the template arguments say them), the inner
// template arguments, then all of them; a hard cut last.
std::string one_line(std::string name, std::size_t width) {
  for (char& c : name) c = c == '\n' || c == '\t' ? ' ' : c;
  if (name.size() <= width) return name;
  if (name.starts_with("void ")) name.erase(0, 5);
  if (name.ends_with(")")) {
    int level = 0;
    for (std::size_t i = name.size(); i-- > 0;) {
      level += name[i] == ')' ? 1 : name[i] == '(' ? -1 : 0;
      if (level == 0) {
        if (i > 0) name = name.substr(0, i) + "(\u2026)";
        break;
      }
    }
  }
  for (int depth = 2; depth >= 1 && name.size() > width; --depth) name = templates_cut(name, depth);
  if (name.size() > width) name = name.substr(0, width - 3) + "\u2026";
  return name;
}

std::string kernel_name(const std::string& name) { return one_line(demangled(name), 100); }

// The step as measured: the mean of the recent iterations' own lengths
// (recent_iterations[].host_ns, traces since 2026-11-29), or the step a GPU
// measured that the file carries beside an access log (`measured`,
// docs/gpu-runs/); against the uncapped step given, else the one the file
// carries, else the recorded step's stall-free device time (a lower bound
// on the uncapped step: it leaves out the host's time issuing the step).
struct StepTime {
  double measured_ns = 0;  // 0: the trace does not say
  std::size_t repetitions = 0;
  bool steady = false;      // those repetitions were followed throughout
  // Training steps in one repetition of the step found: 2 where placements
  // alternate (a caching allocator), told by the stall-free compute of a
  // repetition against the uncapped step given.
  double steps_per_repetition = 1;
  std::string measured_on;  // the device, for a step the file carries
  double uncapped_ns = 0;
  std::string uncapped_from;  // "--uncapped-ms", "measured", "stall-free compute", or "" for none
};

// The step a GPU measured, where the file carries it beside the summary.
bool carried_step(const nlohmann::json& file, std::optional<double> uncapped_ns, StepTime* step) {
  const nlohmann::json& measured = member(file, "measured");
  if (number(measured, "step_ms") <= 0) return false;
  step->measured_ns = number(measured, "step_ms") * 1e6;
  step->measured_on = text(measured, "device", "a GPU");
  if (!uncapped_ns && number(measured, "uncapped_step_ms") > 0) {
    step->uncapped_ns = number(measured, "uncapped_step_ms") * 1e6;
    step->uncapped_from = "measured";
  }
  return true;
}

// The mean of the recent iterations' own lengths, where the trace has them:
// of the trailing ones the plan followed throughout (the steady state; the
// first after a lock is recorded, not yet planned), else of all.
void recent_steps(const nlohmann::json& schedule, StepTime* step) {
  const nlohmann::json& recent = member(schedule, "recent_iterations");
  if (!recent.is_array()) return;
  const std::size_t trailing = first_followed_throughout(recent);
  step->steady = trailing < recent.size();
  const std::size_t first = step->steady ? trailing : 0;
  double sum = 0;
  for (std::size_t i = first; i < recent.size(); ++i) {
    const double ns = number(recent[i], "host_ns");
    if (ns <= 0) continue;
    sum += ns;
    ++step->repetitions;
  }
  if (step->repetitions > 0) step->measured_ns = sum / static_cast<double>(step->repetitions);
}

StepTime step_time(const nlohmann::json& file, std::optional<double> uncapped_ns) {
  const nlohmann::json& schedule = member(member(file, "vgpumem"), "schedule");
  StepTime step;
  if (!carried_step(file, uncapped_ns, &step)) recent_steps(schedule, &step);
  if (!step.uncapped_from.empty()) return step;
  const double compute = number(member(schedule, "profile"), "step_ns", number(member(schedule, "plan"), "compute_ns"));
  if (uncapped_ns) {
    step.uncapped_ns = *uncapped_ns;
    step.uncapped_from = "--uncapped-ms";
    if (compute > 0 && *uncapped_ns > 0 && step.measured_on.empty()) {
      step.steps_per_repetition = std::max(1.0, std::round(compute / *uncapped_ns));
    }
  } else if (compute > 0) {
    step.uncapped_ns = compute;
    step.uncapped_from = "stall-free compute";
  }
  return step;
}

// What CUPTI did (the summary's `cupti`), in words.
std::string cupti_state_words(const nlohmann::json& cupti) {
  const std::string state = text(cupti, "state", "");
  if (state == "off") return "off (VGPUMEM_CUPTI=off): kernels were timed with events on their streams";
  if (state == "not started") return "not started (paging never started, or a profiler came first)";
  if (state == "absent") {
    return "absent (" + text(cupti, "absent_reason", "no usable libcupti") + "): kernels were timed with events";
  }
  if (state == "taken") return "taken by another subscriber: kernels were timed with events";
  if (state == "stepped aside") {
    return "stepped aside: the program started a profiler and vgpumem gave CUPTI back; kernels were timed with "
           "events from then on";
  }
  if (state == "active") return "active: vgpumem held CUPTI";
  return state.empty() ? "not said (a trace older than the cupti summary)" : state;
}

// Whether CUPTI was held, gave records, and none of them reached the step
// the planner timed: as on the H200 (every record unattributed, the step
// timed with events). Worth saying, since nothing else does.
bool cupti_records_went_unused(const nlohmann::json& summary) {
  const nlohmann::json& cupti = member(summary, "cupti");
  const std::uint64_t records = count(cupti, "kernel_records");
  const nlohmann::json& schedule = member(summary, "schedule");
  return records > 0 && count(cupti, "unattributed_records") == records && schedule.is_object() &&
         count(member(schedule, "timing"), "kernels_clocked") == 0;
}

void cupti_section(std::ostream& out, const nlohmann::json& summary, std::vector<std::string>* advice) {
  const nlohmann::json& cupti = member(summary, "cupti");
  if (!cupti.is_object()) return;
  out << "\nKernel timing\n  CUPTI: " << cupti_state_words(cupti) << "\n";
  const std::uint64_t records = count(cupti, "kernel_records"), unattributed = count(cupti, "unattributed_records");
  if (records > 0 || cupti.contains("unattributed_records")) {
    out << "  " << records << " kernel records, " << (unattributed == records && records > 0 ? "all " : "")
        << unattributed << " unattributed (launched without a launch id: kernels of steps the planner did not time)";
    if (const std::uint64_t dropped = count(cupti, "dropped_records"); dropped > 0) out << "; " << dropped << " dropped";
    out << "\n";
  }
  if (cupti_records_went_unused(summary)) {
    out << "  none reached the steps the planner timed: they were timed with events instead\n";
    advice->push_back("CUPTI was held but none of its " + std::to_string(records) +
                      " kernel records was matched to a launch the planner timed: its steps were timed with events "
                      "instead (two a kernel).");
  }
}

// An access log holds no devices' caps: what it holds of them is the
// paging budget the plan was made under and the physical memory paging held.
void access_log_memory(std::ostream& out, const nlohmann::json& summary) {
  out << "  (an access log holds no device's cap or peak)\n";
  if (const std::uint64_t budget = count(member(member(summary, "schedule"), "plan"), "budget"); budget > 0) {
    out << "  paging budget " << format_bytes(budget) << " (the cap the plan was made under, less what is not paged)\n";
  }
  const nlohmann::json& devices = member(member(summary, "paging"), "devices");
  for (std::size_t i = 0; devices.is_array() && i < devices.size(); ++i) {
    out << "  device " << count(devices[i], "device") << ": paged memory resident at most "
        << format_bytes(count(devices[i], "resident_bytes_peak")) << "\n";
  }
}

void memory_section(std::ostream& out, const nlohmann::json& summary, bool access_log) {
  out << "Memory\n";
  if (access_log) return access_log_memory(out, summary);
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
  if (any_cap(summary) && !member(summary, "paging").is_object()) {
    out << "  a strict cap (VGPUMEM_POLICY=off): nothing was paged, and an allocation past the cap got CUDA's "
           "out-of-memory error\n";
  }
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
  const std::size_t first = first_followed_throughout(all);
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
    if (any_cap(summary)) {
      out << "  off: a strict cap; nothing is paged (VGPUMEM_POLICY=auto, the default with a cap, pages past it)\n";
    } else {
      out << "  off: no allocation was paged (paging needs VGPUMEM_LIMIT and a policy other than \"off\")\n";
    }
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
    std::string name = kernel_name(scheduler::profiled_operation_name(profile, i));
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

// Why no step was looked for: the policy, said for what it is.
void not_looked_for(std::ostream& out, const std::string& policy) {
  out << "  not looked for: ";
  if (policy == "off") {
    out << "policy off is a strict cap (nothing is paged; an allocation past the cap gets CUDA's out-of-memory "
           "error), and only a paging policy looks for a step\n";
  } else if (policy == "none") {
    out << "no cap was set, so nothing was paged and no step was needed\n";
  } else {
    out << "policy " << policy
        << " pages on demand only (VGPUMEM_POLICY=auto learns the step and moves data ahead of need)\n";
  }
}

// The step found: how often the detector locked and broke. The run's end
// is not a break (the trace counts it apart, `breaks_at_end`, since
// 2026-11-29); a trace from before then counts it among the breaks.
void found_line(std::ostream& out, const nlohmann::json& schedule, std::vector<std::string>* advice) {
  const std::uint64_t locks = count(schedule, "locks"), breaks = count(schedule, "breaks");
  const bool end_apart = schedule.contains("breaks_at_end");
  out << "  found: a step of " << count(schedule, "period") << " operations; " << count(schedule, "iterations_followed")
      << " steps followed (" << count(schedule, "iterations_recorded") << " recorded for the planner), locked " << locks
      << (locks == 1 ? " time" : " times");
  if (breaks > 0) out << ", broken " << breaks << (breaks == 1 ? " time" : " times");
  if (!end_apart && breaks > 0 && !flag(schedule, "locked")) {
    out << " (the run's end among them: this file is older than the count that leaves it out)";
  }
  if (flag(schedule, "locked")) {
    out << "; still locked at exit";
  } else if (count(schedule, "breaks_at_end") > 0) {
    out << "; the run ended inside a step, as runs do";
  }
  out << "\n";
  // Step kinds (traces since 2026-11-29): each period locked on is kept,
  // and a lock that comes back to one follows its plan without learning it
  // again.
  const bool kinds_counted = schedule.contains("kinds");
  const std::uint64_t kinds = count(schedule, "kinds"), returns = count(schedule, "kind_returns");
  if (kinds_counted && (kinds > 1 || returns > 0)) {
    out << "  kinds: " << kinds << (kinds == 1 ? " step kind" : " step kinds") << " learned; the stream came back to a "
        << "known one " << returns << (returns == 1 ? " time" : " times")
        << ", its plan followed again without learning it again\n";
  }
  if (breaks > 0 && end_apart) {
    advice->push_back("The step broke " + std::to_string(breaks) + (breaks == 1 ? " time" : " times") +
                      " (an evaluation step, a new input shape): " +
                      (kinds_counted ? "the operations from each break until a known step kind was named again (a few, "
                                       "where the next step is one) ran on demand."
                                     : "those steps ran on demand and the schedule was learned again after each."));
  }
}

// The step as measured against uncapped (StepTime).
void step_time_line(std::ostream& out, const StepTime& step) {
  if (step.measured_ns <= 0) {
    out << "  measured step: not in this trace (traces from 2026-11-29 time each recent step)\n";
    return;
  }
  out << "  measured step: " << ms(step.measured_ns);
  if (!step.measured_on.empty()) {
    out << " (measured on " << step.measured_on << ", carried in the file beside the summary)";
  } else {
    out << " a repetition of the step found (the mean of the last " << step.repetitions
        << (step.steady ? " followed throughout" : "") << ", on the issuing thread's clock)";
  }
  if (step.uncapped_from == "measured") {
    out << printed(", %.2f x uncapped (", step.measured_ns / step.uncapped_ns) << ms(step.uncapped_ns)
        << ", measured there too)";
  } else if (step.uncapped_from == "--uncapped-ms") {
    const double per_step = step.measured_ns / step.steps_per_repetition;
    if (step.steps_per_repetition > 1) {
      out << printed("; %.0f training steps a repetition, ", step.steps_per_repetition) << ms(per_step)
          << " a step";
    }
    out << printed(", %.2f x uncapped (", per_step / step.uncapped_ns) << ms(step.uncapped_ns)
        << ", given with --uncapped-ms)";
  } else if (!step.uncapped_from.empty()) {
    out << printed(", %.2f x the step's stall-free compute (", step.measured_ns / step.uncapped_ns)
        << ms(step.uncapped_ns) << ", its device time without waits: less than the uncapped step, which has the "
           "host's time issuing it too; --uncapped-ms gives the measured one)";
  }
  out << "\n";
}

void schedule_section(std::ostream& out, const nlohmann::json& summary, std::size_t top, const StepTime& step,
                      std::vector<std::string>* advice) {
  const nlohmann::json& schedule = member(summary, "schedule");
  const std::string policy = policy_of(summary);
  out << "\nTraining step\n";
  if (!schedule.is_object()) {
    not_looked_for(out, policy);
    if (policy == "lru" || policy == "fifo") {
      advice->push_back("VGPUMEM_POLICY=auto learns the training step and moves data ahead of need, overlapped with "
                        "compute, where " + policy + " waits for each buffer when a kernel wants it.");
    }
    return;
  }
  if (count(schedule, "locks") == 0) {
    out << "  none found in " << count(schedule, "operations")
        << " operations: the launches never repeated with a period, so paging stayed on demand\n";
    advice->push_back("No training step was found. A step is found once the same sequence of launches repeats; a run "
                      "of only a step or two, or one whose every step differs, stays on demand.");
    return;
  }
  found_line(out, schedule, advice);
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
  step_time_line(out, step);
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

// The first lines: what the file is, the run's process and its size.
void header(std::ostream& out, const std::string& path, const nlohmann::json& file) {
  const nlohmann::json& summary = file["vgpumem"];
  out << "vgpumem report: " << path << "\n";
  if (is_access_log(file)) {
    out << "  an access log: the scheduler's and pager's summary of a run alone (no events, no version, no "
           "process), as the GPU suite keeps them; "
        << count(summary, "launches") << " kernel launches, " << count(member(summary, "schedule"), "operations")
        << " operations\n\n";
    return;
  }
  out << "  vgpumem " << text(summary, "vgpumem_version", "?") << ", process " << count(summary, "pid")
      << printed(", %.2f s traced, ", traced_ns(file) / 1e9) << count(summary, "launches") << " kernel launches\n\n";
}

struct Report {
  std::string text;
  std::vector<std::string> advice;
};

// The whole report; throws nlohmann::json::exception where the summary has
// a field of another type than this version writes.
Report report_text(const std::string& path, const nlohmann::json& file, const Options& options) {
  const nlohmann::json& summary = file["vgpumem"];
  std::ostringstream out;
  header(out, path, file);
  Report report;
  memory_section(out, summary, is_access_log(file));
  paging_section(out, summary);
  library_section(out, summary);
  cupti_section(out, summary, &report.advice);
  schedule_section(out, summary, options.top, step_time(file, options.uncapped_ns),
                   &report.advice);
  if (count(summary, "events_dropped") > 0) {
    report.advice.push_back(std::to_string(count(summary, "events_dropped")) +
                            " trace events were dropped (the per-thread buffers filled): the totals above are whole, "
                            "the timeline is not.");
  }
  if (!report.advice.empty()) {
    out << "\nWhat this means\n";
    for (const std::string& line : report.advice) out << "  - " << line << "\n";
  }
  report.text = out.str();
  return report;
}

// A number the summary has, or null: JSON says "not in the trace" as null.
nlohmann::json number_or_null(const nlohmann::json& object, const char* key) {
  const nlohmann::json& value = member(object, key);
  return value.is_number() ? value : nlohmann::json(nullptr);
}

nlohmann::json devices_json(const nlohmann::json& summary) {
  nlohmann::json devices = nlohmann::json::array();
  const nlohmann::json& listed = member(summary, "devices");
  for (std::size_t i = 0; listed.is_array() && i < listed.size(); ++i) {
    const nlohmann::json& device = listed[i];
    if (count(device, "peak") == 0) continue;  // as the text: untouched devices are not listed
    const std::uint64_t cap = count(device, "cap");
    devices.push_back({{"device", count(device, "device")},
                       {"cap", cap > 0 ? nlohmann::json(cap) : nlohmann::json(nullptr)},
                       {"peak", count(device, "peak")},
                       {"under_cap", cap == 0 || count(device, "peak") <= cap}});
  }
  return devices;
}

nlohmann::json paging_json(const nlohmann::json& summary) {
  const nlohmann::json& paging = member(summary, "paging");
  if (!paging.is_object()) return nullptr;
  const nlohmann::json& fetches = member(member(paging, "host_path"), "fetches");
  return {{"policy", text(paging, "policy", "?")},
          {"bytes_offloaded", count(paging, "bytes_offloaded")},
          {"offloads", count(paging, "offloads")},
          {"planned_offloads", count(paging, "scheduled_offloads")},
          {"bytes_prefetched", count(paging, "bytes_prefetched")},
          {"prefetches", count(paging, "prefetches")},
          {"planned_prefetches", count(paging, "scheduled_prefetches")},
          {"stall_ns", number(paging, "stall_ns")},
          {"stalled_operations", count(paging, "stalled_operations")},
          {"program_paging_ns", number_or_null(member(member(paging, "host_path"), "program_threads"), "paging_ns")},
          {"fetches_planned", number_or_null(fetches, "planned")},
          {"fetches_on_demand", number_or_null(fetches, "on_demand")}};
}

nlohmann::json step_json(const nlohmann::json& file, const Options& options) {
  const nlohmann::json& schedule = member(member(file, "vgpumem"), "schedule");
  if (!schedule.is_object()) return {{"looked_for", false}, {"found", false}};
  const nlohmann::json& plan = member(schedule, "plan");
  const StepTime step = step_time(file, options.uncapped_ns);
  const bool measured = step.measured_ns > 0, against = measured && step.uncapped_ns > 0;
  return {{"looked_for", true},
          {"found", count(schedule, "locks") > 0},
          {"period", count(schedule, "period")},
          {"locks", count(schedule, "locks")},
          {"breaks", count(schedule, "breaks")},
          {"breaks_at_end", number_or_null(schedule, "breaks_at_end")},
          {"kinds", number_or_null(schedule, "kinds")},
          {"kind_returns", number_or_null(schedule, "kind_returns")},
          {"locked_at_exit", flag(schedule, "locked")},
          {"plan",
           plan.is_object() && !plan.empty()
               ? nlohmann::json{{"fits", flag(plan, "fits")},
                                {"swaps", count(plan, "swaps")},
                                {"budget", count(plan, "budget")},
                                {"compute_ns", number(plan, "compute_ns")},
                                {"predicted_step_ns", number(plan, "predicted_step_ns")},
                                {"floor_ns", number(plan, "floor_ns")}}
               : nlohmann::json(nullptr)},
          {"measured_step_ns", measured ? nlohmann::json(step.measured_ns) : nlohmann::json(nullptr)},
          {"measured_steps", step.repetitions},
          {"measured_on", step.measured_on.empty() ? nlohmann::json(nullptr) : nlohmann::json(step.measured_on)},
          {"uncapped_step_ns", step.uncapped_ns > 0 ? nlohmann::json(step.uncapped_ns) : nlohmann::json(nullptr)},
          {"uncapped_from", step.uncapped_from.empty() ? nlohmann::json(nullptr) : nlohmann::json(step.uncapped_from)},
          {"step_over_uncapped", against ? nlohmann::json(step.measured_ns / step.uncapped_ns) : nlohmann::json(nullptr)}};
}

// What the text says, as one JSON object (docs/usage.md, `report --json`).
nlohmann::json report_json(const std::string& path, const nlohmann::json& file, const Options& options,
                           const std::vector<std::string>& advice) {
  const nlohmann::json& summary = file["vgpumem"];
  const bool access_log = is_access_log(file);
  nlohmann::json waits = nlohmann::json::array();
  const std::vector<Wait> by_kernel = waits_by_kernel(member(member(summary, "schedule"), "profile"));
  for (std::size_t i = 0; i < by_kernel.size() && i < options.top; ++i) {
    waits.push_back({{"kernel", by_kernel[i].name},
                     {"stall_ns", by_kernel[i].stall_ns},
                     {"operations", by_kernel[i].operations}});
  }
  const nlohmann::json& cupti = member(summary, "cupti");
  const nlohmann::json& calls = member(summary, "library_calls");
  return {{"file", path},
          {"kind", access_log ? "access log" : "trace"},
          {"vgpumem_version", access_log ? nlohmann::json(nullptr) : nlohmann::json(text(summary, "vgpumem_version", "?"))},
          {"pid", number_or_null(summary, "pid")},
          {"traced_s", access_log ? nlohmann::json(nullptr) : nlohmann::json(traced_ns(file) / 1e9)},
          {"launches", count(summary, "launches")},
          {"policy", policy_of(summary)},
          {"devices", devices_json(summary)},
          {"paging_budget", number_or_null(member(member(summary, "schedule"), "plan"), "budget")},
          {"ooms_returned", access_log ? number_or_null(summary, "ooms_returned")
                                       : nlohmann::json(count(summary, "ooms_returned"))},
          {"paging", paging_json(summary)},
          {"library_calls", calls.is_object() ? calls : nlohmann::json::object()},
          {"cupti",
           cupti.is_object() ? nlohmann::json{{"state", text(cupti, "state", "")},
                                              {"said", cupti_state_words(cupti)},
                                              {"kernel_records", count(cupti, "kernel_records")},
                                              {"unattributed_records", count(cupti, "unattributed_records")},
                                              {"records_unused", cupti_records_went_unused(summary)}}
                             : nlohmann::json(nullptr)},
          {"step", step_json(file, options)},
          {"waits", waits},
          {"advice", advice}};
}

// The picture, where one can be drawn: 0, or the command's status. The
// script draws a trace's run over time, and an access log's recorded step
// (it has no events over the run, but the step's operations in order).
int draw_picture(const Options& options) {
  // The script's output is kept only when it failed.
  const std::string log =
      (std::filesystem::temp_directory_path() / ("vgpumem-report-plot-" + std::to_string(getpid()) + ".log")).string();
  const PlotOutcome plot = draw_trace(options.trace, options.png, log);
  if (!plot.drawn) {
    std::cerr << "vgpumem report: no picture: " << plot.why_not << "\n  (to draw it: " << plot.command << ")\n";
    return 1;
  }
  std::filesystem::remove(log);
  if (!options.json) std::cout << "\npicture: " << options.png << "\n";
  return 0;
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
  Report report;
  nlohmann::json json;
  try {
    report = report_text(options->trace, trace, *options);
    if (options->json) json = report_json(options->trace, trace, *options, report.advice);
  } catch (const nlohmann::json::exception& e) {
    std::cerr << "vgpumem report: \"" << options->trace << "\" has a summary this version cannot read: " << e.what()
              << "\n";
    return 1;
  }
  if (options->json) {
    std::cout << json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << report.text;
  }
  return options->png.empty() ? 0 : draw_picture(*options);
}

}  // namespace vgpumem::cli
