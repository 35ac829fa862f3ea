#include "cli/demo_plot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "cli/paths.h"
#include "cli/run_options.h"

extern char** environ;

namespace vgpumem::cli {
namespace {

// Runs `argv` (found on PATH) with this environment, its output to `output`;
// its exit status, or -1 if it could not start.
int run_quietly(const std::vector<std::string>& argv, const std::string& output) {
  CStringArray args(argv);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  int status = -1;
  if (posix_spawnp(&pid, args.data()[0], &actions, nullptr, args.data(), environ) == 0) {
    int raw = 0;
    while (waitpid(pid, &raw, 0) < 0) {
    }
    status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  return status;
}

// The first Python that has matplotlib, or "". python3 on PATH may be a
// virtual environment or pyenv's, without Debian's python3-matplotlib, which
// serves /usr/bin/python3: try both.
std::string python_with_matplotlib() {
  for (const char* python : {"python3", "/usr/bin/python3"}) {
    if (run_quietly({python, "-c", "import matplotlib"}, "/dev/null") == 0) return python;
  }
  return "";
}

std::string shell_quoted(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:+-") ==
                           std::string::npos) {
    return word;
  }
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// `script` (a file name of scripts/) with `arguments`, drawing `out`.
PlotOutcome run_plot_script(const std::string& name, const std::vector<std::string>& arguments,
                            const std::string& out, const std::string& log) {
  const std::string script = plot_script(name);
  const std::string python = python_with_matplotlib();
  std::vector<std::string> argv{python.empty() ? "python3" : python, script};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  PlotOutcome outcome;
  for (const std::string& word : argv) {
    // Appended in two steps: `"" + string` here trips GCC 12's -Wrestrict at -O3 (a false positive).
    if (!outcome.command.empty()) outcome.command += ' ';
    outcome.command += shell_quoted(word);
  }

  if (!std::filesystem::exists(script)) {
    outcome.why_not = script + " is missing";
  } else if (python.empty()) {
    outcome.why_not = "no python3 here has matplotlib (Debian: apt-get install python3-matplotlib)";
  } else if (run_quietly(argv, log) != 0 || !std::filesystem::exists(out)) {
    outcome.why_not = name + " failed; its output is in " + log;
  } else {
    outcome.drawn = true;
  }
  return outcome;
}

}  // namespace

PlotOutcome draw_timelines(const PlotRequest& request) {
  std::vector<std::string> arguments{"--compare"};
  arguments.insert(arguments.end(), request.timelines.begin(), request.timelines.end());
  arguments.push_back("--labels");
  arguments.insert(arguments.end(), request.labels.begin(), request.labels.end());
  arguments.push_back("--trace");
  arguments.insert(arguments.end(), request.traces.begin(), request.traces.end());
  arguments.insert(arguments.end(), {"--title", request.title, "--out", request.out});
  return run_plot_script("plot_timeline.py", arguments, request.out, request.log);
}

PlotOutcome draw_trace(const std::string& trace, const std::string& out, const std::string& log) {
  return run_plot_script("plot_trace.py", {trace, "--out", out}, out, log);
}

}  // namespace vgpumem::cli
