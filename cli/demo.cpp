// `vgpumem demo [--out DIR]`: the demo trainer on the simulated driver, three
// times —
//   1. without the shim: the baseline result and the simulator's peak;
//   2. under the shim with a cap that fits: the same result bit for bit, the
//      simulator's own peak under the cap, and a trace to open;
//   3. under a cap that is too small: the program gets CUDA's out-of-memory
//      error and stops cleanly (oversubscription, which keeps it running, is
//      the next feature).
// Exits non-zero if any of that does not hold.
#include "cli/demo.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
                      const std::vector<std::string>& trainer_args) {
  RunOptions options;
  options.simulated = true;
  options.simulated_device_memory = "16GiB";
  options.preload_shim = shim;
  if (!limit.empty()) options.limit = limit;
  if (shim) options.trace = dir + "/" + name + ".trace.json";
  std::map<std::string, std::string> env = run_environment(options, current_environment());
  env["VGPUSIM_REPORT"] = dir + "/" + name + ".simulator.json";
  std::vector<std::string> program{companion_program("mlp_trainer")};
  program.insert(program.end(), trainer_args.begin(), trainer_args.end());
  return spawn(program, env, dir + "/" + name + ".out");
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
  for (const std::string& needed : {shim_path(), simulator_dir() + "/libcuda.so.1", companion_program("mlp_trainer")}) {
    if (!std::filesystem::exists(needed)) {
      std::cerr << "vgpumem demo: " << needed << " is missing; build the project first (scripts/demo.sh)\n";
      return 1;
    }
  }
  const std::vector<std::string> trainer_args{"--layers", "6", "--width", "512", "--batch", "128", "--steps", "6"};
  bool ok = true;
  auto verdict = [&ok](bool good, const std::string& what) {
    std::cout << (good ? "  ok    " : "  FAIL  ") << what << "\n";
    ok = ok && good;
  };

  std::cout << "vgpumem demo: a 6-layer MLP trained for 6 steps on the simulated driver\n\n";
  const RunResult baseline = run_trainer(dir, "baseline", false, "", trainer_args);
  const std::uint64_t baseline_peak = simulator_peak(read_json(dir + "/baseline.simulator.json"));
  std::cout << "1. without vgpumem\n";
  verdict(baseline.exit_code == 0 && !result_line(baseline.output).empty(), "trained: " + result_line(baseline.output));
  std::cout << "        simulated device memory at peak: " << format_bytes(baseline_peak) << "\n\n";
  if (!ok) {
    std::cout << baseline.output;
    return 1;
  }

  // A cap with room to spare, and one the program cannot fit under.
  const std::uint64_t roomy = (baseline_peak * 5 / 4 + (1u << 20) - 1) / (1u << 20) * (1u << 20);
  const std::uint64_t tight = baseline_peak / 2 / (1u << 20) * (1u << 20);
  const RunResult capped = run_trainer(dir, "capped", true, std::to_string(roomy), trainer_args);
  const nlohmann::json capped_sim = read_json(dir + "/capped.simulator.json");
  const nlohmann::json capped_trace = read_json(dir + "/capped.trace.json");
  std::cout << "2. under vgpumem with a " << format_bytes(roomy) << " cap (vgpumem run --limit "
            << roomy << " --simulated)\n";
  verdict(capped.exit_code == 0 && result_line(capped.output) == result_line(baseline.output),
          "bit-identical result: " + result_line(capped.output));
  verdict(simulator_peak(capped_sim) <= roomy,
          "simulator's own peak " + format_bytes(simulator_peak(capped_sim)) + " <= cap");
  verdict(!capped_sim.is_null() && capped_sim.value("illegal_accesses", 0) == 0, "no illegal memory access");
  if (!capped_trace.is_null()) {
    const auto& summary = capped_trace.at("vgpumem");
    std::cout << "        shim: peak counted " << format_bytes(summary.at("devices").at(0).at("peak").get<std::uint64_t>())
              << ", " << summary.value("launches", 0) << " launches hooked, " << summary.value("ooms_returned", 0)
              << " allocations refused\n";
  }
  verdict(!capped_trace.is_null(), "trace written: " + dir + "/capped.trace.json (open in ui.perfetto.dev)");
  std::cout << "\n";

  const RunResult refused = run_trainer(dir, "too-small", true, std::to_string(tight), trainer_args);
  std::cout << "3. under vgpumem with a " << format_bytes(tight) << " cap, below what the program needs\n";
  verdict(refused.exit_code == 3 && refused.output.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos,
          "the program got CUDA_ERROR_OUT_OF_MEMORY and stopped cleanly (exit " +
              std::to_string(refused.exit_code) + ")");
  verdict(simulator_peak(read_json(dir + "/too-small.simulator.json")) <= tight, "simulator's own peak <= cap");
  std::cout << "\nfiles: " << dir << "\n" << (ok ? "demo passed\n" : "demo FAILED\n");
  return ok ? 0 : 1;
}

}  // namespace vgpumem::cli
