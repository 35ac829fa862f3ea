// `vgpumem demo [--out DIR]`: the demo trainer on the simulated driver --
//   1. without the shim: the baseline result, the simulator's peak and time;
//   2. under the shim at 60 % of what it needs, paged on demand (lru) and on
//      the learned schedule (auto, the default), side by side: the same
//      result bit for bit, the simulator's own peak under the cap, no
//      illegal access, what was moved, the simulated time of each, and a
//      picture of both runs' timelines (timeline.png) where matplotlib is;
//   3. a third of what it needs under auto: still bit-identical;
//   4. the same cap with paging off (VGPUMEM_POLICY=off): CUDA's
//      out-of-memory error, and a clean stop.
// Exits non-zero if any of that does not hold.
#include "cli/demo.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/demo_plot.h"
#include "cli/paths.h"
#include "cli/sim_runs.h"
#include "common/format_bytes.h"

namespace vgpumem::cli {
namespace {

std::uint64_t paging_value(const SimRun& run, const char* key) {
  if (!run.trace.is_object() || !run.trace.contains("paging")) return 0;
  return run.trace.at("paging").value(key, std::uint64_t{0});
}
std::uint64_t schedule_value(const SimRun& run, const char* key) {
  if (!run.trace.is_object() || !run.trace.contains("schedule")) return 0;
  return run.trace.at("schedule").value(key, std::uint64_t{0});
}

}  // namespace

int run_demo(const std::vector<std::string>& args) {
  std::string dir;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--out" && i + 1 < args.size()) {
      dir = args[++i];
    } else if (args[i] == "--help" || args[i] == "-h") {
      std::cout << "usage: vgpumem demo [--out DIR]\n";
      return 0;
    } else {
      std::cerr << "vgpumem demo: unknown option \"" << args[i] << "\"; usage: vgpumem demo [--out DIR]\n";
      return 2;
    }
  }
  if (dir.empty()) {
    char pattern[] = "/tmp/vgpumem-demo-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) {
      std::perror("vgpumem demo: mkdtemp");
      return 1;
    }
    dir = pattern;
  }
  if (const std::string problem = make_output_directory("demo", "--out", dir); !problem.empty()) {
    std::cerr << problem << "\n";
    return 2;
  }
  for (const std::string& needed : {shim_path(), simulator_dir() + "/libcuda.so.1", demo_trainer()}) {
    if (!std::filesystem::exists(needed)) {
      std::cerr << "vgpumem demo: " << needed << " is missing; " << missing_companion_advice() << "\n";
      return 1;
    }
  }
  // Wide layers and a small batch: 4 MiB weight matrices and as much for
  // their gradients dominate, as parameters and optimizer state do in a
  // large model; the simulator's host kernels stay quick. Sixteen steps:
  // the learned schedule locks on the second step, records the third and
  // plans from it on its own thread, which on the simulated driver takes a
  // few steps of wall time (its event queries wait for the simulator's
  // lock, which the program's kernels hold while they run on the host; with
  // eight steps the plan came too late about one run in three).
  const std::vector<std::string> trainer_args{"--layers", "12", "--width", "1024", "--batch", "8", "--steps", "16"};
  std::vector<std::string> trainer{demo_trainer()};
  trainer.insert(trainer.end(), trainer_args.begin(), trainer_args.end());
  bool ok = true;
  auto verdict = [&ok](bool good, const std::string& what) {
    std::cout << (good ? "  ok    " : "  FAIL  ") << what << "\n";
    ok = ok && good;
  };
  const auto run = [&](const std::string& name, bool shim, std::uint64_t cap, const std::string& policy,
                       bool timeline = false) {
    SimRunRequest request;
    request.timeline = timeline;
    request.dir = dir;
    request.name = name;
    request.program = trainer;
    request.shim = shim;
    if (cap != 0) request.limit = std::to_string(cap);
    request.policy = policy;
    return run_simulated(request);
  };

  std::cout << "vgpumem demo: a 12-layer MLP trained for 16 steps on the simulated driver\n\n";
  const SimRun baseline = run("baseline", false, 0, "");
  const std::uint64_t baseline_peak = simulator_peak(baseline.simulator);
  std::cout << "1. without vgpumem\n";
  verdict(baseline.exit_code == 0 && !baseline.result.empty(), "trained: " + outcome(baseline.result));
  std::cout << "        simulated device memory at peak: " << format_bytes(baseline_peak) << ", simulated time "
            << fixed(simulated_ms(baseline.simulator), 2) << " ms\n\n";
  if (!ok) {
    std::cout << baseline.output;
    return 1;
  }
  const auto check_paged = [&](const SimRun& paged, std::uint64_t cap) {
    verdict(paged.exit_code == 0 && outcome(paged.result) == outcome(baseline.result),
            "bit-identical result: " + outcome(paged.result));
    verdict(simulator_peak(paged.simulator) <= cap,
            "simulator's own peak " + format_bytes(simulator_peak(paged.simulator)) + " <= cap");
    verdict(!paged.simulator.is_null() && paged.simulator.value("illegal_accesses", 0) == 0, "no illegal memory access");
  };

  // 60 % of what the program needs: the step fits with moves planned ahead.
  const std::uint64_t cap = baseline_peak * 6 / 10 / (1u << 20) * (1u << 20);
  std::cout << "2. under vgpumem with a " << format_bytes(cap) << " cap, 60 % of that: on demand (lru) and on the "
            << "learned schedule (auto, the default)\n";
  const SimRun lru = run("lru", true, cap, "lru", true);
  std::cout << "   lru  (vgpumem run --limit " << cap << " --simulated, VGPUMEM_POLICY=lru)\n";
  check_paged(lru, cap);
  const SimRun automatic = run("auto", true, cap, "auto", true);
  std::cout << "   auto (vgpumem run --limit " << cap << " --simulated)\n";
  check_paged(automatic, cap);
  verdict(schedule_value(automatic, "plans") > 0 && schedule_value(automatic, "scheduled_prefetches") > 0,
          "auto learned the step and moved units ahead of need (" +
              std::to_string(schedule_value(automatic, "scheduled_offloads")) + " offloads, " +
              std::to_string(schedule_value(automatic, "scheduled_prefetches")) + " prefetches planned)");
  std::cout << "\n        policy  simulated time  vs baseline  moved out   moved in    stalled ops  stall time\n";
  for (const auto& [name, paged] : {std::pair<const char*, const SimRun*>{"lru", &lru}, {"auto", &automatic}}) {
    const double ms = simulated_ms(paged->simulator);
    std::cout << "        " << std::left << std::setw(8) << name << std::right << std::setw(11) << fixed(ms, 2)
              << " ms" << std::setw(12) << fixed(ms / std::max(simulated_ms(baseline.simulator), 1e-9), 2) << "x  "
              << std::left << std::setw(12) << format_bytes(paging_value(*paged, "bytes_offloaded"))
              << std::setw(12) << format_bytes(paging_value(*paged, "bytes_prefetched")) << std::right
              << std::setw(11) << paging_value(*paged, "stalled_operations") << std::setw(9)
              << fixed(static_cast<double>(paging_value(*paged, "stall_ns")) / 1e6, 2) << " ms\n";
  }
  std::cout << "        traces: " << dir << "/lru.trace.json, " << dir
            << "/auto.trace.json (open in ui.perfetto.dev; in words: vgpumem report " << dir << "/auto.trace.json)\n";
  if (!lru.timeline_path.empty() && !automatic.timeline_path.empty()) {
    std::cout << "        simulated timelines: " << lru.timeline_path << ", " << automatic.timeline_path << "\n";
    PlotRequest picture;
    picture.timelines = {lru.timeline_path, automatic.timeline_path};
    picture.labels = {"lru", "auto"};
    picture.traces = {lru.trace_path, automatic.trace_path};
    picture.title = "vgpumem demo: 12-layer MLP, 16 steps, " + format_bytes(cap) + " cap: lru above, auto below";
    picture.out = dir + "/timeline.png";
    picture.log = dir + "/timeline.plot.out";
    const PlotOutcome plotted = draw_timelines(picture);
    if (plotted.drawn) {
      std::cout << "        picture: " << picture.out
                << " (device memory against the cap over the compute, copy-out and copy-in lanes)\n";
    } else {
      std::cout << "        no picture: " << plotted.why_not << "; to draw it:\n          " << plotted.command << "\n";
    }
  }
  std::cout << "\n";

  // A third: the demo trainer's step cannot fit with its launch grace, and
  // auto pages on demand (the summary's schedule.plan says so).
  const std::uint64_t third = baseline_peak / 3 / (1u << 20) * (1u << 20);
  std::cout << "3. a " << format_bytes(third) << " cap, a third of that, under auto\n";
  check_paged(run("third", true, third, "auto"), third);
  std::cout << "\n";

  const SimRun refused = run("paging-off", true, third, "off");
  std::cout << "4. the same cap with paging off (VGPUMEM_POLICY=off)\n";
  verdict(refused.exit_code == 3 && refused.output.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos,
          "the program got CUDA_ERROR_OUT_OF_MEMORY and stopped cleanly (exit " +
              std::to_string(refused.exit_code) + ")");
  verdict(simulator_peak(refused.simulator) <= third, "simulator's own peak <= cap");
  std::cout << "\nfiles: " << dir << "\n" << (ok ? "demo passed\n" : "demo FAILED\n");
  return ok ? 0 : 1;
}

}  // namespace vgpumem::cli
