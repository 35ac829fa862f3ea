#include "cli/traced_run.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <regex>

#include "cli/run_options.h"
#include "shim/config.h"

namespace vgpumem::cli {
namespace {

namespace fs = std::filesystem;

constexpr int kTraceMissingStatus = 1;

// A file's identity: the shim replaces a trace by renaming a new file over
// it, so a trace written during the run has a new inode or a new time.
struct Identity {
  ino_t inode = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const Identity&) const = default;
};
using Snapshot = std::map<std::string, Identity>;

// The regular expression of the file names a %p pattern stands for.
std::string name_expression(const std::string& pattern) {
  std::string expression;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && (pattern[i + 1] == 'p' || pattern[i + 1] == '%')) {
      expression += pattern[++i] == 'p' ? "[0-9]+" : "%";
    } else if (std::strchr("\\^$.|?*+()[]{}", pattern[i]) != nullptr) {
      expression += '\\';
      expression += pattern[i];
    } else {
      expression += pattern[i];
    }
  }
  return expression;
}

Snapshot files_matching(const std::string& directory, const std::regex& name) {
  Snapshot files;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory, error)) {
    const std::string file = entry.path().filename().string();
    struct stat status {};
    if (!std::regex_match(file, name) || ::stat(entry.path().c_str(), &status) != 0) continue;
    files[entry.path().string()] = {status.st_ino, status.st_mtim.tv_sec * 1'000'000'000LL + status.st_mtim.tv_nsec};
  }
  return files;
}

std::vector<std::string> written_since(const Snapshot& before, const Snapshot& after) {
  std::vector<std::string> written;
  for (const auto& [path, identity] : after) {
    const auto old = before.find(path);
    if (old == before.end() || !(old->second == identity)) written.push_back(path);
  }
  return written;
}

// Where traces the pattern names can appear: in its directory, under its
// name, or in the shim's fallback directory under the name with ".<pid>".
struct TraceWatch {
  std::string directory;
  std::regex name;
  std::string fallback_directory;
  std::regex fallback_name;
  Snapshot before;
  Snapshot fallback_before;

  TraceWatch(const std::string& pattern, const std::map<std::string, std::string>& environment) {
    const fs::path path(pattern);
    directory = path.has_parent_path() ? path.parent_path().string() : ".";
    const std::string expression = name_expression(path.filename().string());
    name = std::regex(expression);
    const auto tmpdir = environment.find("TMPDIR");
    fallback_directory =
        fs::path(fallback_trace_path("x", 0, tmpdir == environment.end() ? nullptr : tmpdir->second.c_str()))
            .parent_path()
            .string();
    fallback_name = std::regex(expression + "\\.[0-9]+");
    before = files_matching(directory, name);
    fallback_before = files_matching(fallback_directory, fallback_name);
  }
};

pid_t g_child = 0;

void forward_to_child(int signal) {
  if (g_child > 0) ::kill(g_child, signal);
}

// The terminal's signals (Ctrl-C, Ctrl-\) reach the program with us, in one
// process group: we leave them to it and wait for it to finish. Those sent
// to us alone (kill, a batch system's SIGTERM, a hang-up) are passed on.
void wait_through_signals(pid_t child) {
  g_child = child;
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGQUIT, SIG_IGN);
  struct sigaction forward {};
  forward.sa_handler = &forward_to_child;
  sigemptyset(&forward.sa_mask);
  forward.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &forward, nullptr);
  sigaction(SIGHUP, &forward, nullptr);
}

// Ends this process as the signal ended the program, so that a shell sees
// what it would have seen without vgpumem; no core file of ours.
int die_like(int signal) {
  const struct rlimit no_core {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  ::signal(signal, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(signal);
  return 128 + signal;
}

void say_where_the_trace_is_not(const TraceWatch& watch, const std::string& asked) {
  const std::vector<std::string> fallbacks =
      written_since(watch.fallback_before, files_matching(watch.fallback_directory, watch.fallback_name));
  if (fallbacks.empty()) {
    std::cerr << "vgpumem run: no trace at " << asked
              << ": the program made no CUDA call, or did not get to exit (the trace is written at exit)\n";
    return;
  }
  std::cerr << "vgpumem run: the trace is not at " << asked << ": it could not be written there at exit and went to";
  for (std::size_t i = 0; i < fallbacks.size(); ++i) std::cerr << (i == 0 ? " " : ", ") << fallbacks[i];
  std::cerr << " instead\n";
}

}  // namespace

int run_traced(const std::vector<std::string>& program, const std::map<std::string, std::string>& environment,
               const std::string& trace_pattern) {
  const TraceWatch watch(trace_pattern, environment);
  CStringArray argv(program);
  CStringArray envp = CStringArray::from_environment(environment);
  const pid_t child = ::fork();
  if (child < 0) {
    std::cerr << "vgpumem run: cannot start " << program[0] << ": " << std::strerror(errno) << "\n";
    return 127;
  }
  if (child == 0) {
    ::execvpe(argv.data()[0], argv.data(), envp.data());
    std::cerr << "vgpumem run: cannot run " << program[0] << ": " << std::strerror(errno) << "\n";
    ::_exit(127);
  }
  wait_through_signals(child);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  const bool written = !written_since(watch.before, files_matching(watch.directory, watch.name)).empty();
  const int exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  const bool never_ran = exit_status == 127;  // the child said why
  if (!written && !never_ran) say_where_the_trace_is_not(watch, expand_pid(trace_pattern, child));
  if (WIFSIGNALED(status)) return die_like(WTERMSIG(status));
  return exit_status != 0 || written ? exit_status : kTraceMissingStatus;
}

}  // namespace vgpumem::cli
