#include "cli/run_options.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>

#include "cli/driver_probe.h"
#include "cli/paths.h"
#include "shim/config.h"

extern char** environ;

namespace vgpumem::cli {
namespace {

constexpr const char* kSizeForms =
    "a size in bytes with an optional unit K/M/G/T (powers of 1024, also KiB/MiB/GiB/TiB), e.g. 8GiB, "
    "or a percentage of device memory such as 50%";

constexpr const char* kTraceForms = "a file path in an existing, writable directory (%p is replaced by the process id)";

std::string invalid(const std::string& option, const std::string& value, const std::string& accepted) {
  return "vgpumem run: invalid " + option + " \"" + value + "\": expected " + accepted;
}

// As invalid(), saying first what exactly is wrong (empty: the forms say it).
std::string invalid_because(const std::string& option, const std::string& value, const std::string& problem,
                            const std::string& accepted) {
  if (problem.empty()) return invalid(option, value, accepted);
  return "vgpumem run: invalid " + option + " \"" + value + "\": " + problem + "; expected " + accepted;
}

// What the shim would refuse at load, said before the program starts. %p
// stands for a pid not known yet; ours has as many digits as any.
std::string trace_problem(const std::string& pattern) {
  if (pattern.empty()) return "the path is empty";
  return file_destination_problem(expand_pid(pattern, static_cast<int>(::getpid())));
}

// "--name=value" or "--name value"; returns nullopt if `arg` is not --name.
std::optional<std::string> option_value(const std::string& name, const std::vector<std::string>& args,
                                        std::size_t& i, std::string* error) {
  const std::string& arg = args[i];
  if (arg == name) {
    if (i + 1 >= args.size()) {
      *error = "vgpumem run: " + name + " needs a value";
      return std::string();
    }
    return args[++i];
  }
  if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
  return std::nullopt;
}

// The device index of a VGPUMEM_LIMIT_<i> name, or -1.
int device_limit_index(const std::string& name) {
  constexpr std::string_view kPrefix = "VGPUMEM_LIMIT_";
  if (name.rfind(kPrefix, 0) != 0) return -1;
  const std::string index = name.substr(kPrefix.size());
  if (index.empty() || index.size() > 4 || index.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoi(index);
}

}  // namespace

ParseOutcome parse_run_options(const std::vector<std::string>& args) {
  RunOptions options;
  std::string error;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (auto v = option_value("--limit", args, i, &error)) {
      if (!error.empty()) return {std::nullopt, error};
      std::string problem;
      if (!parse_memory_limit(*v, &problem)) return {std::nullopt, invalid_because("--limit", *v, problem, kSizeForms)};
      options.limit = *v;
    } else if (auto d = option_value("--limit-device", args, i, &error)) {
      if (!error.empty()) return {std::nullopt, error};
      const auto eq = d->find('=');
      const std::string index = eq == std::string::npos ? "" : d->substr(0, eq);
      const bool index_ok = !index.empty() && index.size() <= 4 &&
                            index.find_first_not_of("0123456789") == std::string::npos;
      std::string problem;
      if (!index_ok || !parse_memory_limit(d->substr(eq + 1), &problem)) {
        return {std::nullopt, invalid_because("--limit-device", *d, problem,
                                              std::string("I=SIZE with I a device index and SIZE ") + kSizeForms)};
      }
      options.device_limits[std::stoi(index)] = d->substr(eq + 1);
    } else if (auto t = option_value("--trace", args, i, &error)) {
      if (!error.empty()) return {std::nullopt, error};
      if (std::string problem = trace_problem(*t); !problem.empty()) {
        return {std::nullopt, invalid_because("--trace", *t, problem, kTraceForms)};
      }
      options.trace = *t;
    } else if (auto l = option_value("--log-level", args, i, &error)) {
      if (!error.empty()) return {std::nullopt, error};
      if (!parse_log_level(*l)) {
        return {std::nullopt, invalid("--log-level", *l, "one of trace, debug, info, warn, error, critical, off")};
      }
      options.log_level = *l;
    } else if (arg == "--simulated") {
      options.simulated = true;
    } else if (arg.rfind("--simulated=", 0) == 0) {
      const std::string size = arg.substr(std::strlen("--simulated="));
      if (!parse_byte_size(size) || *parse_byte_size(size) == 0) {
        return {std::nullopt, invalid("--simulated", size, "a device memory size such as 16GiB")};
      }
      options.simulated = true;
      options.simulated_device_memory = size;
    } else {
      return {std::nullopt, "vgpumem run: unknown option \"" + arg + "\" (see vgpumem run --help)"};
    }
  }
  options.program.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (options.program.empty()) return {std::nullopt, "vgpumem run: no program given; usage: vgpumem run [OPTIONS] -- PROGRAM [ARGS...]"};
  return {options, ""};
}

std::map<std::string, std::string> run_environment(const RunOptions& options,
                                                   const std::map<std::string, std::string>& current) {
  std::map<std::string, std::string> env = current;
  auto prepend = [&env](const std::string& name, const std::string& first) {
    auto it = env.find(name);
    env[name] = (it == env.end() || it->second.empty()) ? first : first + ":" + it->second;
  };
  if (options.limit) {
    env["VGPUMEM_LIMIT"] = *options.limit;
    std::erase_if(env, [](const auto& entry) { return device_limit_index(entry.first) >= 0; });
  }
  for (const auto& [device, size] : options.device_limits) env["VGPUMEM_LIMIT_" + std::to_string(device)] = size;
  if (options.trace) env["VGPUMEM_TRACE"] = *options.trace;
  if (options.log_level) env["VGPUMEM_LOG_LEVEL"] = *options.log_level;
  // A sanitizer runtime must come before any instrumented library it preloads.
  if (options.preload_shim) {
    std::string preload = shim_path();
    if (std::strlen(VGPUMEM_SANITIZER_RUNTIME) > 0) preload = std::string(VGPUMEM_SANITIZER_RUNTIME) + ":" + preload;
    prepend("LD_PRELOAD", preload);
  }
  if (options.simulated) {
    env["VGPUMEM_DRIVER"] = simulator_dir() + "/libcuda.so.1";
    prepend("LD_LIBRARY_PATH", simulator_dir());
    if (options.simulated_device_memory) env["VGPUSIM_DEVICE_MEMORY"] = *options.simulated_device_memory;
  }
  return env;
}

std::string overridden_by_options(const RunOptions& options, const std::map<std::string, std::string>& current) {
  std::vector<std::string> replaced;
  const auto replaces = [&](const std::string& option, const std::string& value, const std::string& name) {
    const auto it = current.find(name);
    if (it != current.end() && it->second != value) replaced.push_back(option + " " + value + " replaces " + name + "=" + it->second);
  };
  if (options.limit) {
    replaces("--limit", *options.limit, "VGPUMEM_LIMIT");
    for (const auto& [name, value] : current) {
      const int device = device_limit_index(name);
      if (device >= 0 && !options.device_limits.contains(device)) replaces("--limit", *options.limit, name);
    }
  }
  for (const auto& [device, size] : options.device_limits) {
    replaces("--limit-device", std::to_string(device) + "=" + size, "VGPUMEM_LIMIT_" + std::to_string(device));
  }
  if (options.trace) replaces("--trace", *options.trace, "VGPUMEM_TRACE");
  if (options.log_level) replaces("--log-level", *options.log_level, "VGPUMEM_LOG_LEVEL");
  if (replaced.empty()) return {};
  std::string line = "vgpumem run: ";
  for (std::size_t i = 0; i < replaced.size(); ++i) line += (i == 0 ? "" : ", ") + replaced[i];
  return line + " from the environment";
}

std::string absent_device_problem(const std::map<std::string, std::string>& environment) {
  int highest = -1;
  for (const auto& [name, value] : environment) highest = std::max(highest, device_limit_index(name));
  if (highest < 0) return {};
  const auto driver = environment.find("VGPUMEM_DRIVER");
  const DriverReport report = probe_driver(driver != environment.end() ? driver->second : "libcuda.so.1");
  if (!report.loaded || !report.error.empty()) return {};  // the shim says what is wrong with the driver
  const int count = static_cast<int>(report.devices.size());
  if (highest < count) return {};
  return "vgpumem run: VGPUMEM_LIMIT_" + std::to_string(highest) + " names device " + std::to_string(highest) +
         ", but this process sees " + std::to_string(count) + (count == 1 ? " device" : " devices") +
         " (CUDA_VISIBLE_DEVICES leaves devices numbered from 0): it would cap nothing";
}

std::map<std::string, std::string> current_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env[std::string(static_cast<const char*>(*e), eq)] = eq + 1;
  }
  return env;
}

CStringArray::CStringArray(std::vector<std::string> strings) : strings_(std::move(strings)) {
  for (std::string& s : strings_) pointers_.push_back(s.data());
  pointers_.push_back(nullptr);
}

CStringArray CStringArray::from_environment(const std::map<std::string, std::string>& environment) {
  std::vector<std::string> entries;
  for (const auto& [name, value] : environment) entries.push_back(name + "=" + value);
  return CStringArray(std::move(entries));
}

int exec_program(const std::vector<std::string>& program, const std::map<std::string, std::string>& environment) {
  CStringArray argv(program);
  CStringArray envp = CStringArray::from_environment(environment);
  ::execvpe(argv.data()[0], argv.data(), envp.data());
  std::cerr << "vgpumem run: cannot run " << program[0] << ": " << std::strerror(errno) << "\n";
  return 127;
}

}  // namespace vgpumem::cli
