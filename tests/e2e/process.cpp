#include "process.h"

#include "cap_watch.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace vgpumem::test {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::optional<std::string>>& env) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) merged[std::string(static_cast<const char*>(*e), eq)] = eq + 1;
  }
  for (const auto& [key, value] : env) {
    if (value) merged[key] = *value;
    else merged.erase(key);
  }
  const CapWatch cap_watch(merged);
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : merged) env_strings.push_back(key + "=" + value);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (auto& a : args) argp.push_back(a.data());
  argp.push_back(nullptr);

  // Output goes to files, not pipes: no deadlock however much a child prints.
  static int counter = 0;
  const std::string stem = temp_path("proc-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  const std::string out_path = stem + ".out";
  const std::string err_path = stem + ".err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argp[0], &actions, nullptr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(spawned));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  ProcessResult result;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  result.out = slurp(out_path);
  result.err = slurp(err_path);
  ::unlink(out_path.c_str());
  ::unlink(err_path.c_str());
  cap_watch.check(args[0]);
  return result;
}

std::map<std::string, std::optional<std::string>> simulator_environment() {
  std::string library_path = VGPUMEM_TEST_SIM_DIR;
  if (const char* old = std::getenv("LD_LIBRARY_PATH")) library_path += std::string(":") + old;
  // In sanitizer builds the runtime is preloaded in both environments, so the
  // two differ only by the shim.
  std::optional<std::string> preload;
  if (!std::string(VGPUMEM_TEST_PRELOAD_PREFIX).empty()) preload = VGPUMEM_TEST_PRELOAD_PREFIX;
  return {{"LD_LIBRARY_PATH", library_path},
          {"LD_PRELOAD", preload},
          {"VGPUMEM_LIMIT", std::nullopt},
          {"VGPUMEM_TRACE", std::nullopt},
          {"VGPUMEM_LOG_LEVEL", std::nullopt}};
}

std::map<std::string, std::optional<std::string>> shim_environment() {
  auto env = simulator_environment();
  std::string preload = VGPUMEM_TEST_PRELOAD_PREFIX;
  if (!preload.empty()) preload += ":";
  env["LD_PRELOAD"] = preload + shim_library();
  env["VGPUMEM_DRIVER"] = std::string(VGPUMEM_TEST_SIM_DIR) + "/libcuda.so.1";
  return env;
}

std::string shim_library() { return VGPUMEM_TEST_SHIM; }
std::string program(const std::string& name) { return std::string(VGPUMEM_TEST_PROGRAM_DIR) + "/" + name; }
std::string temp_path(const std::string& name) { return std::string(VGPUMEM_TEST_TMP_DIR) + "/" + name; }

std::vector<std::string> lines_starting_with(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) lines.push_back(line);
  }
  return lines;
}

std::string field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + " ", 0) == 0) return line.substr(key.size() + 1);
  }
  return "";
}

std::uint64_t result_number(const std::string& out, const std::string& key) {
  const std::string line = field(out, "RESULT");
  const std::size_t at = line.find(key + "=");
  return at == std::string::npos ? 0 : std::stoull(line.substr(at + key.size() + 1));
}

}  // namespace vgpumem::test
