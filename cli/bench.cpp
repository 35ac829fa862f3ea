// `vgpumem bench`: the learned schedule against its baselines on the
// simulated driver (docs/workloads.md, "The learned schedule"). For each
// layered workload (tests/workloads/layered_trainer.cpp): a run without the
// shim for the result, the peak and the uncapped step; then, at each cap (a
// fraction of that peak), a run under each policy. Each cell: the
// steady-state step (the workload's last), the floor, their ratio, the bytes
// moved each way in that step and its time beyond its compute, and whether
// the result was bit-identical. Byte sizes are scaled down by --scale and the link with
// them (VGPUSIM_LINK_GBPS = 55 / scale), so time ratios are an H100's.
//
// Not run in CI: a full table takes minutes.
#include "cli/bench.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/paths.h"
#include "cli/steady_state.h"
#include "cli/sim_runs.h"
#include "common/format_bytes.h"
#include "scheduler/profile_json.h"
#include "scheduler/swap_plan.h"
#include "shim/config.h"

namespace vgpumem::cli {
namespace {

constexpr double kH100LinkGBps = 55.0;  // the H100's pinned rate each way (docs/gpu-facts.md §8)

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

struct Options {
  std::vector<std::string> models{"resnet50", "vgg16", "bert-large", "gpt2-medium"};
  std::vector<std::string> caps{"50", "33", "25"};
  std::vector<std::string> policies{"lru", "vdnn-all", "vdnn-conv", "auto"};
  // A lock (2), a recorded step, where no plan fits a trial of up to four
  // ways (a transitional step and a measured one each), then the way kept
  // in force: its first step is transitional, the ones after it steady. At
  // 16 ResNet-50's quarter-peak cell still ended on that transitional step.
  int steps = 20;
  int scale = 8;
  double link_gbps = kH100LinkGBps;  // each way, at full size (scaled with the bytes)
  std::string dir, markdown;
  // The workloads' convolutions and GEMMs as cuDNN and cuBLAS calls
  // (layered_trainer --libraries), and the shim's library hooks on, off or
  // both (VGPUMEM_LIBRARY_HOOKS; "off" rows are the policy without hints).
  bool libraries = false;
  std::vector<std::string> library_hooks{"on"};
  // VGPUMEM_PIECE_BYTES for every capped run. Empty: the shim's default
  // scaled with the sizes (its 32 MiB under auto are 4 MiB at --scale 8,
  // never under one 2 MiB chunk), so the runs see what a program at full
  // size would; off under the other policies, as in the shim.
  std::string piece_bytes;
  // How the trainer issues a step: "pytorch" as PyTorch does (backward from
  // a second thread on the same stream, per-step tensors from a caching
  // allocator whose placements alternate between steps), or "one-thread"
  // (everything from one thread, every tensor allocated once).
  std::string issue = "pytorch";
};

constexpr const char* kUsage =
    "usage: vgpumem bench [--models resnet50,vgg16,bert-large,gpt2-medium] [--caps 50,33,25] "
    "[--policies lru,vdnn-all,vdnn-conv,auto] [--steps 20] [--scale 8] [--link 55] [--libraries] "
    "[--library-hooks on,off] [--pieces SIZE] [--issue pytorch|one-thread] [--out DIR] [--markdown FILE]";

bool parse(const std::vector<std::string>& args, Options* options) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& key = args[i];
    if (key == "--libraries") {
      options->libraries = true;
      continue;
    }
    if (i + 1 >= args.size()) {
      std::cerr << "vgpumem bench: " << key << " needs a value; " << kUsage << "\n";
      return false;
    }
    const std::string value = args[++i];
    if (key == "--models") options->models = split(value);
    else if (key == "--caps") options->caps = split(value);
    else if (key == "--policies") options->policies = split(value);
    else if (key == "--steps") options->steps = std::atoi(value.c_str());
    else if (key == "--scale") options->scale = std::atoi(value.c_str());
    else if (key == "--link") options->link_gbps = std::atof(value.c_str());
    else if (key == "--out") options->dir = value;
    else if (key == "--markdown") options->markdown = value;
    else if (key == "--library-hooks") options->library_hooks = split(value);
    else if (key == "--pieces") options->piece_bytes = value;
    else if (key == "--issue") options->issue = value;
    else {
      std::cerr << "vgpumem bench: unknown option \"" << key << "\"; " << kUsage << "\n";
      return false;
    }
  }
  if (options->steps < 4 || options->scale < 1 || !(options->link_gbps > 0)) {
    std::cerr << "vgpumem bench: --steps must be at least 4 (the schedule learns over the first three), --scale "
                 "at least 1, --link a positive number of GB/s\n";
    return false;
  }
  for (const std::string& hooks : options->library_hooks) {
    if (hooks != "on" && hooks != "off") {
      std::cerr << "vgpumem bench: --library-hooks takes on, off or on,off (got \"" << hooks << "\")\n";
      return false;
    }
  }
  if (options->library_hooks.empty()) options->library_hooks = {"on"};
  if (options->issue != "pytorch" && options->issue != "one-thread") {
    std::cerr << "vgpumem bench: --issue takes pytorch (backward on a second thread, a caching allocator) or "
                 "one-thread (got \"" << options->issue << "\")\n";
    return false;
  }
  for (const std::string& cap : options->caps) {
    const int percent = std::atoi(cap.c_str());
    if (percent <= 0 || percent > 100) {
      std::cerr << "vgpumem bench: --caps takes percentages of each workload's peak, 1 to 100 (got \"" << cap
                << "\")\n";
      return false;
    }
  }
  return true;
}

// The simulated driver's cost model the runs get (VGPUSIM_COST_MODEL, which
// the driver checks; its default is calibrated: docs/simulated-driver.md).
std::string cost_model() {
  const char* model = std::getenv("VGPUSIM_COST_MODEL");
  return model != nullptr && *model != '\0' ? model : "calibrated";
}

// VGPUMEM_PIECE_BYTES for a run of `policy` (Options::piece_bytes).
std::string pieces_for(const Options& options, const std::string& policy) {
  if (!options.piece_bytes.empty()) return options.piece_bytes;
  if (policy != "auto") return "off";
  constexpr std::uint64_t kChunkMiB = 2;  // vmm/chunk_pool.h
  constexpr std::uint64_t kDefaultMiB = Config::kDefaultPieceBytes >> 20;
  const std::uint64_t chunks = std::max<std::uint64_t>(1, (kDefaultMiB / static_cast<std::uint64_t>(options.scale) +
                                                           kChunkMiB / 2) / kChunkMiB);
  return std::to_string(chunks * kChunkMiB) + "MiB";
}

// VGPUMEM_LEND_MAX_BYTES scaled with the sizes, as the pieces are: the
// allocations that would be small at full size (the shim's 2 MiB default).
std::string lend_max_for(const Options& options) {
  const std::uint64_t bytes = (Config{}.lend_max_bytes) / static_cast<std::uint64_t>(options.scale);
  return std::to_string(std::max<std::uint64_t>(512, bytes));
}

std::uint64_t number(const std::string& text) { return text.empty() ? 0 : std::stoull(text); }

struct Cell {
  std::string model, policy;
  int cap_percent = 0;
  std::uint64_t cap = 0;
  double step_ns = 0, floor_ns = 0, uncapped_ns = 0;
  double out_bytes = 0, in_bytes = 0;  // across the link in the last step, the program's own copies included
  double beyond_ns = 0;                 // the last step less its compute: waiting for data, and the sync
  bool identical = false, clean = false;
  bool kernel_too_large = false;  // one kernel's operands exceed the cap: out of memory under any policy
  bool floor_from_profile = false;  // else the plain bound
  bool trial_running = false;  // the trial of ways had not ended: the last step is not the steady state
  double planned_share = -1;    // of the steady state's fetches, those the plan made ahead; -1: none known
};

// The share of fetches the plan made ahead in the steady state: the trailing
// iterations of the trace's schedule.recent_iterations that the plan
// followed throughout (each carries its own fetch counts); -1 where there
// are none, or none fetched.
double steady_planned_share(const nlohmann::json& trace) {
  if (!trace.is_object() || !trace.contains("schedule")) return -1;
  const nlohmann::json& recent = trace["schedule"].value("recent_iterations", nlohmann::json::array());
  double planned = 0, on_demand = 0;
  for (std::size_t k = first_followed_throughout(recent); k < recent.size(); ++k) {
    planned += recent[k].value("fetches_planned", 0.0);
    on_demand += recent[k].value("fetches_on_demand", 0.0);
  }
  return planned + on_demand > 0 ? planned / (planned + on_demand) : -1;
}

// The floor of the step a run's trace recorded, under the budget it ran
// with, on the bench's link, per training step: a recorded period may hold
// several steps (a caching allocator whose placements alternate makes it
// two), told apart by its stall-free length against one step's compute
// (`step_compute_ns`, the trainer's). False if the run recorded none.
bool recorded_floor(const nlohmann::json& trace, double link_gbps, double step_compute_ns, double* floor_ns) {
  if (!trace.is_object() || !trace.contains("schedule")) return false;
  const nlohmann::json& schedule = trace.at("schedule");
  if (!schedule.contains("profile") || !schedule.contains("plan") || !schedule.at("plan").contains("budget") ||
      !schedule.at("plan").at("budget").is_number_unsigned()) {
    return false;
  }
  try {
    const scheduler::IterationProfile profile = scheduler::profile_from_json(schedule.at("profile"));
    scheduler::LinkModel link;
    link.to_host_bytes_per_ns = link.to_device_bytes_per_ns = link_gbps;
    const double steps =
        step_compute_ns > 0 ? std::max(1.0, std::round(profile.step_ns / step_compute_ns)) : 1.0;
    *floor_ns = scheduler::step_floor(profile, schedule.at("plan").at("budget").get<std::uint64_t>(), link) / steps;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

std::string row(const Cell& c) {
  std::ostringstream line;
  if (c.kernel_too_large) {
    line << "| " << c.model << " | " << c.cap_percent << " % (" << format_bytes(c.cap) << ") | " << c.policy
         << " | out of memory: one kernel's operands exceed the cap | | | | | | | | (no run) |";
    return line.str();
  }
  line << "| " << c.model << " | " << c.cap_percent << " % (" << format_bytes(c.cap) << ") | " << c.policy << " | "
       << fixed(c.step_ns / 1e6, 2) << " ms" << (c.trial_running ? " (trial running)" : "") << " | " << fixed(c.floor_ns / 1e6, 2) << (c.floor_from_profile ? "" : "*")
       << " ms | **"
       << fixed(c.step_ns / std::max(c.floor_ns, 1.0), 2) << "** | " << fixed(c.step_ns / std::max(c.uncapped_ns, 1.0), 2)
       << " | " << format_bytes(static_cast<std::uint64_t>(c.out_bytes)) << " | "
       << format_bytes(static_cast<std::uint64_t>(c.in_bytes)) << " | " << fixed(c.beyond_ns / 1e6, 2) << " ms | "
       << (c.planned_share < 0 ? std::string("-") : fixed(100 * c.planned_share, 0) + " %") << " | "
       << (c.identical && c.clean ? "yes" : "**NO**") << " |";
  return line.str();
}

}  // namespace

int run_bench(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kUsage << "\n";
    return 0;
  }
  Options options;
  if (!parse(args, &options)) return 2;
  if (options.dir.empty()) {
    char pattern[] = "/tmp/vgpumem-bench-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) {
      std::perror("vgpumem bench: mkdtemp");
      return 1;
    }
    options.dir = pattern;
  }
  if (const std::string problem = make_output_directory("bench", "--out", options.dir); !problem.empty()) {
    std::cerr << problem << "\n";
    return 2;
  }
  if (!options.markdown.empty()) {
    if (const std::string problem = output_file_problem("bench", "--markdown", options.markdown); !problem.empty()) {
      std::cerr << problem << "\n";
      return 2;
    }
  }
  const std::string trainer = workload_program("layered_trainer");
  if (!std::filesystem::exists(trainer)) {
    std::cerr << "vgpumem bench: " << trainer << " is missing; " << missing_companion_advice() << "\n";
    return 1;
  }
  const double scaled_link = options.link_gbps / options.scale;
  const std::string link = fixed(scaled_link, 6);
  std::cout << "vgpumem bench: layered workloads on the simulated driver, sizes / " << options.scale << ", link "
            << link << " GB/s (" << fixed(options.link_gbps, 1) << " / " << options.scale << "), " << options.steps
            << " steps each" << (options.libraries ? "; convolutions and GEMMs as cuDNN and cuBLAS calls" : "")
            << (options.issue == "pytorch" ? "; each step issued as PyTorch issues it (backward on a second thread, "
                                             "a caching allocator)"
                                           : "; each step issued from one thread, every tensor allocated once")
            << "; the simulated driver's " << cost_model() << " cost model"
            << "; VGPUMEM_PIECE_BYTES "
            << (options.piece_bytes.empty() ? pieces_for(options, "auto") + " under auto (the default scaled)"
                                            : options.piece_bytes)
            << "; VGPUMEM_LEND_MAX_BYTES " << lend_max_for(options) << " (the default scaled)"
            << "\n";
  if (options.scale > 1) {
    // Copies scale with the bytes (the link is divided by the scale), but a
    // unit 1/S the size is mapped from about 1/S the 2 MiB chunks: per-handle
    // driver costs are charged on fewer handles than at full size.
    std::cout << "note: at --scale " << options.scale << " a unit is mapped from about 1/" << options.scale
              << " of the 2 MiB handles it has at full size, so the driver's per-handle costs are under-charged; "
                 "--scale 1 charges them as a real GPU would (scripts/sim/h200_paging.py)\n";
  }
  std::cout << "\n";
  const std::string header =
      "| workload | cap | policy | step | floor | step / floor | step / uncapped | out / step | in / step | "
      "beyond compute | fetches planned (steady) | bit-identical |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |";
  std::cout << header << "\n";
  std::vector<Cell> cells;
  bool ok = true;
  for (const std::string& model : options.models) {
    SimRunRequest request;
    request.dir = options.dir;
    request.program = {trainer, "--model", model, "--steps", std::to_string(options.steps), "--scale",
                       std::to_string(options.scale)};
    if (options.libraries) request.program.push_back("--libraries");
    if (options.issue == "pytorch") {
      for (const char* arg : {"--backward-thread", "--allocator", "caching"}) request.program.push_back(arg);
    }
    request.extra_environment["VGPUSIM_LINK_GBPS"] = link;
    request.name = model + "-uncapped";
    request.shim = false;
    const SimRun uncapped = run_simulated(request);
    if (uncapped.exit_code != 0 || uncapped.result.empty()) {
      std::cerr << "vgpumem bench: " << model << " did not run (exit " << uncapped.exit_code << "):\n"
                << uncapped.output;
      ok = false;
      continue;
    }
    const std::uint64_t peak = number(result_field(uncapped.result, "peak_device_bytes_wanted"));
    const double uncapped_ns = static_cast<double>(number(result_field(uncapped.result, "step_ns")));
    for (const std::string& cap_text : options.caps) {
      const int percent = std::atoi(cap_text.c_str());
      const std::uint64_t cap = peak * static_cast<std::uint64_t>(percent) / 100 / (1u << 20) * (1u << 20);
      // The floor (scheduler/step_floor.cpp, docs/workloads.md "The
      // floor"): from the step a run recorded (its trace's profile: every
      // operation's device time and units, the same under every policy and
      // independent of any plan), planned for nothing; without one, the
      // plain bound from the uncapped run: its step, or the time the link
      // needs to move out and back what cannot stay.
      // With the library hooks off the step's profile lacks what the calls
      // overwrite, so its floor is its own: one floor per hooks setting.
      const double away = static_cast<double>(peak > cap ? peak - cap : 0);
      std::map<std::string, double> floor_ns;
      std::map<std::string, bool> floor_from_profile;
      for (const std::string& hooks : options.library_hooks) {
        floor_ns[hooks] = std::max(uncapped_ns, away / scaled_link);
        floor_from_profile[hooks] = false;
      }
      std::vector<std::pair<Cell, std::string>> row_cells;
      for (const std::string& policy : options.policies) {
        for (const std::string& hooks : options.library_hooks) {
          request.shim = true;
          request.limit = std::to_string(cap);
          request.policy = policy;
          request.extra_environment["VGPUMEM_LIBRARY_HOOKS"] = hooks;
          request.extra_environment["VGPUMEM_PIECE_BYTES"] = pieces_for(options, policy);
          request.extra_environment["VGPUMEM_LEND_MAX_BYTES"] = lend_max_for(options);
          request.name = model + "-" + cap_text + "-" + policy + (hooks == "off" ? "-hooks-off" : "");
          const SimRun run = run_simulated(request);
          Cell cell;
          cell.model = model;
          cell.policy = policy + (hooks == "off" ? ", hooks off" : "");
          cell.cap_percent = percent;
          cell.cap = cap;
          cell.uncapped_ns = uncapped_ns;
          cell.step_ns = static_cast<double>(number(result_field(run.result, "step_ns")));
          cell.identical = run.exit_code == 0 && outcome(run.result) == outcome(uncapped.result);
          cell.clean = !run.simulator.is_null() && run.simulator.value("illegal_accesses", 0) == 0 &&
                       simulator_peak(run.simulator) <= cap;
          // The last step's: the steady state, as the step column is.
          cell.out_bytes = static_cast<double>(number(result_field(run.result, "copied_out")));
          cell.in_bytes = static_cast<double>(number(result_field(run.result, "copied_in")));
          cell.beyond_ns = cell.step_ns - static_cast<double>(number(result_field(run.result, "compute_ns")));
          cell.planned_share = steady_planned_share(run.trace);
          cell.trial_running = run.trace.is_object() && run.trace.contains("schedule") &&
                               run.trace["schedule"].contains("trial") &&
                               !run.trace["schedule"]["trial"].value("done", true);
          if (!floor_from_profile[hooks]) {
            floor_from_profile[hooks] =
                recorded_floor(run.trace, scaled_link, static_cast<double>(number(result_field(run.result, "compute_ns"))),
                               &floor_ns[hooks]);
          }
          cell.kernel_too_large = run.exit_code == 3 &&
                                  run.output.find("more than its cap") != std::string::npos &&
                                  run.output.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos;
          ok = ok && ((cell.identical && cell.clean) || cell.kernel_too_large);
          row_cells.emplace_back(cell, hooks);
        }
      }
      for (auto& [cell, hooks] : row_cells) {
        cell.floor_ns = floor_ns[hooks];
        cell.floor_from_profile = floor_from_profile[hooks];
        std::cout << row(cell) << std::endl;
        cells.push_back(cell);
      }
    }
  }
  if (!options.markdown.empty()) {
    std::ofstream out(options.markdown);
    out << header << "\n";
    for (const Cell& cell : cells) out << row(cell) << "\n";
    out.close();
    if (!out) {
      std::cerr << "vgpumem bench: cannot write the table to " << options.markdown << ": " << std::strerror(errno) << "\n";
      ok = false;
    }
  }
  std::cout << "\nfloor: the least step any schedule could take on the recorded step's operations and units at that "
               "cap (docs/workloads.md, \"The floor\"), per training step where the recorded period holds several "
               "(a caching allocator's alternating placements make it two); * where no run recorded the step: the "
               "uncapped step or the "
               "link time for the peak less the cap, whichever is longer; (trial running): the last step was still "
               "one of the trial's, not the steady state (more --steps)\n";
  std::cout << "\nfiles: " << options.dir << "\n";
  return ok ? 0 : 1;
}

}  // namespace vgpumem::cli
