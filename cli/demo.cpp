// `vgpumem demo [--out DIR]`: the demo trainer on the simulated driver, three
// times --
//   1. without the shim: the baseline result, the simulator's peak and time;
//   2. under the shim with a cap a third of what it needs (VGPUMEM_POLICY=lru,
//      the default): the same result bit for bit, the simulator's own peak
//      under the cap, no illegal access, what was moved, the simulated
//      slowdown next to the link's floor, and a trace to open;
//   3. the same cap with paging off (VGPUMEM_POLICY=off): CUDA's
//      out-of-memory error, and a clean stop.
// Exits non-zero if any of that does not hold.
#include "cli/demo.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/paths.h"
#include "cli/run_options.h"
#include "common/format_bytes.h"
#include "shim/config.h"

namespace vgpumem::cli {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string output;
};

RunResult spawn(const std::vector<std::string>& program, const std::map<std::string, std::string>& environment,
                const std::string& output_path) {
  CStringArray argv(program);
  CStringArray envp = CStringArray::from_environment(environment);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  RunResult result;
  if (posix_spawn(&pid, argv.data()[0], &actions, nullptr, argv.data(), envp.data()) == 0) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&actions);
  std::ifstream in(output_path);
  std::stringstream text;
  text << in.rdbuf();
  result.output = text.str();
  return result;
}

std::string result_line(const std::string& output) {
  const std::size_t start = output.find("RESULT ");
  if (start == std::string::npos) return "";
  return output.substr(start, output.find('\n', start) - start);
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) return nullptr;
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception&) {
    return nullptr;
  }
}

std::uint64_t simulator_peak(const nlohmann::json& report) {
  if (report.is_null()) return 0;
  return report.at("devices").at(0).value("physical_bytes_peak", std::uint64_t{0});
}

RunResult run_trainer(const std::string& dir, const std::string& name, bool shim, const std::string& limit,
                      const std::vector<std::string>& trainer_args, const std::string& policy = "") {
  RunOptions options;
  options.simulated = true;
  options.simulated_device_memory = "16GiB";
  options.preload_shim = shim;
  if (!limit.empty()) options.limit = limit;
  if (shim) options.trace = dir + "/" + name + ".trace.json";
  std::map<std::string, std::string> env = run_environment(options, current_environment());
  env["VGPUSIM_REPORT"] = dir + "/" + name + ".simulator.json";
  if (!policy.empty()) env["VGPUMEM_POLICY"] = policy;
  std::vector<std::string> program{demo_trainer()};
  program.insert(program.end(), trainer_args.begin(), trainer_args.end());
  return spawn(program, env, dir + "/" + name + ".out");
}

double milliseconds(const nlohmann::json& report) {
  return report.is_null() ? 0.0 : static_cast<double>(report.value("simulated_time_ns", std::uint64_t{0})) / 1e6;
}

std::string fixed(double value, int decimals) {
  std::ostringstream text;
  text.setf(std::ios::fixed);
  text.precision(decimals);
  text << value;
  return text.str();
}

}  // namespace

int run_demo(const std::vector<std::string>& args) {
  std::string dir;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--out" && i + 1 < args.size()) {
      dir = args[++i];
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
  std::filesystem::create_directories(dir);
  for (const std::string& needed : {shim_path(), simulator_dir() + "/libcuda.so.1", demo_trainer()}) {
    if (!std::filesystem::exists(needed)) {
      std::cerr << "vgpumem demo: " << needed << " is missing; the demo needs the simulated driver and its "
                   "trainer, built and installed with VGPUMEM_BUILD_TESTS=ON (the default)\n";
      return 1;
    }
  }
  // Wide layers and a small batch: 4 MiB weight matrices and as much for
  // their gradients dominate, as parameters and optimizer state do in a
  // large model; the simulator's host kernels stay quick.
  const std::vector<std::string> trainer_args{"--layers", "12", "--width", "1024", "--batch", "8", "--steps", "3"};
  bool ok = true;
  auto verdict = [&ok](bool good, const std::string& what) {
    std::cout << (good ? "  ok    " : "  FAIL  ") << what << "\n";
    ok = ok && good;
  };

  std::cout << "vgpumem demo: a 12-layer MLP trained for 3 steps on the simulated driver\n\n";
  const RunResult baseline = run_trainer(dir, "baseline", false, "", trainer_args);
  const nlohmann::json baseline_sim = read_json(dir + "/baseline.simulator.json");
  const std::uint64_t baseline_peak = simulator_peak(baseline_sim);
  std::cout << "1. without vgpumem\n";
  verdict(baseline.exit_code == 0 && !result_line(baseline.output).empty(), "trained: " + result_line(baseline.output));
  std::cout << "        simulated device memory at peak: " << format_bytes(baseline_peak) << ", simulated time "
            << fixed(milliseconds(baseline_sim), 2) << " ms\n\n";
  if (!ok) {
    std::cout << baseline.output;
    return 1;
  }

  // A third of what the program needs: 3x oversubscription.
  const std::uint64_t cap = baseline_peak / 3 / (1u << 20) * (1u << 20);
  const RunResult paged = run_trainer(dir, "paged", true, std::to_string(cap), trainer_args);
  const nlohmann::json paged_sim = read_json(dir + "/paged.simulator.json");
  const nlohmann::json paged_trace = read_json(dir + "/paged.trace.json");
  std::cout << "2. under vgpumem with a " << format_bytes(cap) << " cap, a third of that (vgpumem run --limit " << cap
            << " --simulated)\n";
  verdict(paged.exit_code == 0 && result_line(paged.output) == result_line(baseline.output),
          "bit-identical result: " + result_line(paged.output));
  verdict(simulator_peak(paged_sim) <= cap,
          "simulator's own peak " + format_bytes(simulator_peak(paged_sim)) + " <= cap");
  verdict(!paged_sim.is_null() && paged_sim.value("illegal_accesses", 0) == 0, "no illegal memory access");
  if (!paged_trace.is_null() && paged_trace.at("vgpumem").contains("paging")) {
    const auto& paging = paged_trace.at("vgpumem").at("paging");
    const auto offloaded = paging.value("bytes_offloaded", std::uint64_t{0});
    const auto prefetched = paging.value("bytes_prefetched", std::uint64_t{0});
    const double slowdown = milliseconds(paged_sim) / std::max(milliseconds(baseline_sim), 1e-9);
    // The floor: every byte moved once over a 55 GB/s link, nothing overlapped.
    const double floor_ms = static_cast<double>(offloaded + prefetched) / 55e9 * 1e3;
    std::cout << "        moved " << format_bytes(offloaded) << " to the host in " << paging.value("offloads", 0)
              << " offloads and " << format_bytes(prefetched) << " back in " << paging.value("prefetches", 0)
              << " prefetches (on demand, LRU)\n";
    std::cout << "        " << paging.value("stalled_operations", 0) << " launches and copies waited for data on its way "
              << "in, " << fixed(static_cast<double>(paging.value("stall_ns", std::uint64_t{0})) / 1e6, 2)
              << " ms of GPU time in all\n";
    std::cout << "        simulated time " << fixed(milliseconds(paged_sim), 2) << " ms: " << fixed(slowdown, 2)
              << "x the baseline; the copies alone need " << fixed(floor_ms, 2)
              << " ms at 55 GB/s (on-demand paging overlaps nothing yet)\n";
  }
  verdict(!paged_trace.is_null(), "trace written: " + dir + "/paged.trace.json (open in ui.perfetto.dev)");
  std::cout << "\n";

  const RunResult refused = run_trainer(dir, "paging-off", true, std::to_string(cap), trainer_args, "off");
  std::cout << "3. the same cap with paging off (VGPUMEM_POLICY=off)\n";
  verdict(refused.exit_code == 3 && refused.output.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos,
          "the program got CUDA_ERROR_OUT_OF_MEMORY and stopped cleanly (exit " +
              std::to_string(refused.exit_code) + ")");
  verdict(simulator_peak(read_json(dir + "/paging-off.simulator.json")) <= cap, "simulator's own peak <= cap");
  std::cout << "\nfiles: " << dir << "\n" << (ok ? "demo passed\n" : "demo FAILED\n");
  return ok ? 0 : 1;
}

}  // namespace vgpumem::cli
