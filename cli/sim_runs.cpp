#include "cli/sim_runs.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/paths.h"
#include "cli/run_options.h"

namespace vgpumem::cli {
namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) return nullptr;
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception&) {
    return nullptr;
  }
}

}  // namespace

SimRun run_simulated(const SimRunRequest& request) {
  RunOptions options;
  options.simulated = true;
  options.simulated_device_memory = "16GiB";
  options.preload_shim = request.shim;
  if (!request.limit.empty()) options.limit = request.limit;
  const std::string base = request.dir + "/" + request.name;
  if (request.shim) options.trace = base + ".trace.json";
  std::map<std::string, std::string> env = run_environment(options, current_environment());
  env["VGPUSIM_REPORT"] = base + ".simulator.json";
  if (!request.policy.empty()) env["VGPUMEM_POLICY"] = request.policy;
  const std::string timeline = base + ".timeline.json";
  if (request.timeline) {
    env["VGPUSIM_TIMELINE"] = timeline;
    std::remove(timeline.c_str());  // a file left by an earlier run in the same folder is not this run's
  }
  for (const auto& [key, value] : request.extra_environment) env[key] = value;

  CStringArray argv(request.program);
  CStringArray envp = CStringArray::from_environment(env);
  const std::string output_path = base + ".out";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  SimRun run;
  if (posix_spawn(&pid, argv.data()[0], &actions, nullptr, argv.data(), envp.data()) == 0) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&actions);
  std::ifstream in(output_path);
  std::stringstream text;
  text << in.rdbuf();
  run.output = text.str();
  if (const std::size_t start = run.output.find("RESULT "); start != std::string::npos) {
    run.result = run.output.substr(start, run.output.find('\n', start) - start);
  }
  run.simulator = read_json(base + ".simulator.json");
  if (request.timeline && std::ifstream(timeline).good()) run.timeline_path = timeline;
  if (request.shim) {
    run.trace_path = base + ".trace.json";
    const nlohmann::json trace = read_json(run.trace_path);
    if (trace.is_object() && trace.contains("vgpumem")) run.trace = trace.at("vgpumem");
  }
  return run;
}

std::string result_field(const std::string& result, const std::string& key) {
  const std::string needle = " " + key + "=";
  const std::size_t at = result.find(needle);
  if (at == std::string::npos) return "";
  const std::size_t from = at + needle.size();
  return result.substr(from, result.find(' ', from) - from);
}

std::string outcome(const std::string& result) {
  // What training produced, and nothing a run measured (its step, its bytes
  // copied, its driver calls): kept by name, so that a field a trainer adds
  // to its line cannot make two identical trainings differ.
  std::istringstream words(result);
  std::string word, kept = "RESULT";
  while (words >> word) {
    if (word.rfind("loss=", 0) == 0 || word.rfind("weights_fnv1a=", 0) == 0) kept += " " + word;
  }
  return kept;
}

std::uint64_t simulator_peak(const nlohmann::json& report) {
  if (report.is_null()) return 0;
  return report.at("devices").at(0).value("physical_bytes_peak", std::uint64_t{0});
}

double simulated_ms(const nlohmann::json& report) {
  return report.is_null() ? 0.0 : static_cast<double>(report.value("simulated_time_ns", std::uint64_t{0})) / 1e6;
}

std::string fixed(double value, int decimals) {
  std::ostringstream text;
  text.setf(std::ios::fixed);
  text.precision(decimals);
  text << value;
  return text.str();
}

}  // namespace vgpumem::cli
