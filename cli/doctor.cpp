// `vgpumem doctor [--simulated[=SIZE]]`: what a user needs to report a
// problem, and whether anything would stop vgpumem from working --
//   the command, its version and the library it preloads;
//   the configuration (VGPUMEM_* in this environment, read by the shim's own
//     parser, so a bad value is reported exactly as the shim would report it);
//   the driver the shim would load, its version, the GPUs, their memory and
//     the cap in effect on each;
//   whether libvgpumem.so is preloaded in the current shell (LD_PRELOAD).
// Exits 1 with each reason listed when something would stop vgpumem from
// working (no driver, no GPU, a bad setting, a missing library), else 0.
// --simulated asks the simulated driver instead (VGPUMEM_DRIVER set to it).
#include "cli/doctor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli/driver_probe.h"
#include "cli/paths.h"
#include "common/format_bytes.h"
#include "shim/config.h"
#include "vgpumem_version.h"

namespace vgpumem::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage = "usage: vgpumem doctor [--simulated[=DEVICE_SIZE]]\n";

class Findings {
 public:
  void line(const std::string& label, const std::string& value) {
    std::cout << "  " << label << std::string(label.size() < 14 ? 14 - label.size() : 1, ' ') << value << "\n";
  }
  void problem(const std::string& what) { problems_.push_back(what); }
  int finish() const {
    if (problems_.empty()) {
      std::cout << "\nno problems found\n";
      return 0;
    }
    std::cout << "\n";
    for (const std::string& p : problems_) std::cout << "problem: " << p << "\n";
    std::cout << "vgpumem doctor: " << problems_.size() << (problems_.size() == 1 ? " problem" : " problems")
              << " found\n";
    return 1;
  }

 private:
  std::vector<std::string> problems_;
};

std::string describe(const MemoryLimit& limit) {
  switch (limit.kind) {
    case MemoryLimit::Kind::none: return "none";
    case MemoryLimit::Kind::bytes: return format_bytes(limit.bytes);
    case MemoryLimit::Kind::percent: {
      std::ostringstream text;
      text << limit.percent << "% of device memory";
      return text.str();
    }
  }
  return "?";
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, separator);) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

bool loaded_into_this_process(const std::string& file_name) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find(file_name) != std::string::npos) return true;
  }
  return false;
}

void report_command(Findings& findings) {
  std::cout << "vgpumem " << kVersion << "\n";
  findings.line("command", self_directory() + "/vgpumem" + (in_build_tree() ? " (build tree)" : ""));
  const std::string shim = shim_path();
  std::error_code error;
  const fs::path real = fs::canonical(shim, error);
  if (error) {
    findings.line("library", shim + " (missing)");
    findings.problem("the library " + shim + " is missing: reinstall vgpumem, or rebuild (cmake --build)");
    return;
  }
  findings.line("library", real.string());
  // An installed libvgpumem.so.<version> must be this command's version.
  const std::string name = real.filename().string();
  const std::string prefix = "libvgpumem.so.";
  if (name.rfind(prefix, 0) == 0 && name.size() > prefix.size() && name.find('.', prefix.size()) != std::string::npos &&
      name.substr(prefix.size()) != kVersion) {
    findings.problem("the library " + real.string() + " is not version " + kVersion +
                     " of the command: install both from one build");
  }
}

// Returns the configuration, or nullopt after reporting why it is invalid.
std::optional<Config> report_configuration(Findings& findings) {
  std::cout << "\nconfiguration (VGPUMEM_* in this environment)\n";
  if (const char* hami = std::getenv("CUDA_DEVICE_MEMORY_LIMIT")) {
    findings.line("note", std::string("CUDA_DEVICE_MEMORY_LIMIT=") + hami +
                              ": CUDA_DEVICE_MEMORY_LIMIT is HAMi's setting, which vgpumem does not read; "
                              "vgpumem's cap is VGPUMEM_LIMIT");
  }
  const ConfigResult parsed = parse_process_config();
  if (!parsed.config) {
    const std::string message = parsed.error ? parsed.error->message() : "invalid configuration";
    findings.line("invalid", message);
    findings.problem(message);
    return std::nullopt;
  }
  const Config& config = *parsed.config;
  findings.line("cap", describe(config.limit_all) + (config.limit_all.is_set() ? " on every device" : ""));
  for (const auto& [device, limit] : config.limit_device) {
    findings.line("cap device " + std::to_string(device), describe(limit));
  }
  findings.line("policy", std::string(to_string(config.policy)) +
                              (config.policy != Policy::off ? " (pages past the cap)" : " (strict cap, no paging)"));
  findings.line("host limit", config.host_limit ? format_bytes(*config.host_limit) : "none");
  findings.line("trace", config.trace_path.empty() ? "off" : config.trace_path);
  findings.line("log level", std::string(to_string(config.log_level)));
  return config;
}

void report_driver(const Config* config, Findings& findings) {
  // With a bad setting elsewhere, the driver asked for is still the one to check.
  const char* asked = std::getenv("VGPUMEM_DRIVER");
  const std::string driver_path = config != nullptr                     ? config->driver_path
                                  : asked != nullptr && *asked != '\0' ? asked
                                                                        : "libcuda.so.1";
  const bool simulated = driver_path == simulator_dir() + "/libcuda.so.1";
  std::cout << "\ndriver (VGPUMEM_DRIVER, default libcuda.so.1)\n";
  findings.line("asked for", driver_path);
  const DriverReport driver = probe_driver(driver_path);
  if (!driver.loaded) {
    findings.line("found", "no");
    findings.problem("no CUDA driver found: " + driver.error +
                     (simulated ? ". The simulated driver is missing; " + missing_companion_advice()
                                : std::string(". Install the NVIDIA driver (it provides libcuda.so.1), or point "
                                              "VGPUMEM_DRIVER at it; `vgpumem doctor --simulated` checks the "
                                              "simulated driver instead")));
    return;
  }
  findings.line("found", driver.loaded_from);
  if (driver.version != 0) findings.line("version", format_driver_version(driver.version) + " (" + std::to_string(driver.version) + ")");
  if (!driver.error.empty()) {
    findings.problem("the CUDA driver " + driver.loaded_from + " does not work: " + driver.error);
    return;
  }
  findings.line("GPUs", std::to_string(driver.devices.size()));
  for (const DeviceInfo& device : driver.devices) {
    std::string line = device.name + ", " + format_bytes(device.total_bytes);
    if (config != nullptr) {
      const MemoryLimit& limit = config->limit_for(device.ordinal);
      line += limit.is_set() ? ", cap " + format_bytes(std::min(limit.resolve(device.total_bytes), device.total_bytes))
                             : ", no cap";
    }
    findings.line("GPU " + std::to_string(device.ordinal), line);
  }
  if (driver.devices.empty()) findings.problem("the CUDA driver " + driver.loaded_from + " reports no GPU");
  if (config != nullptr) {
    for (const auto& [device, limit] : config->limit_device) {
      if (device >= static_cast<int>(driver.devices.size())) {
        std::cout << "  note: VGPUMEM_LIMIT_" << device << " names a device this machine does not have\n";
      }
    }
  }
}

void report_shell(Findings& findings) {
  std::cout << "\nthis shell\n";
  const char* preload = std::getenv("LD_PRELOAD");
  findings.line("LD_PRELOAD", preload != nullptr && *preload != '\0' ? preload : "(not set)");
  bool named = false;
  for (const std::string& entry : split(preload != nullptr ? preload : "", ':')) {
    if (fs::path(entry).filename().string().rfind("libvgpumem.so", 0) != 0) continue;
    named = true;
    if (!fs::exists(entry)) findings.problem("LD_PRELOAD names " + entry + ", which does not exist");
  }
  const bool loaded = loaded_into_this_process("libvgpumem.so");
  findings.line("preloaded", loaded  ? "yes: every CUDA program started from this shell runs under vgpumem"
                             : named ? "no: LD_PRELOAD names libvgpumem.so but it did not load"
                                     : "no (use `vgpumem run -- PROGRAM`, or LD_PRELOAD=" + shim_path() + ")");
}

}  // namespace

int run_doctor(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--simulated" || arg.rfind("--simulated=", 0) == 0) {
      // Ask the simulated driver, exactly as `vgpumem run --simulated` makes the shim do.
      ::setenv("VGPUMEM_DRIVER", (simulator_dir() + "/libcuda.so.1").c_str(), 1);
      if (arg.size() > std::strlen("--simulated=")) {
        const std::string size = arg.substr(std::strlen("--simulated="));
        if (!parse_byte_size(size) || *parse_byte_size(size) == 0) {
          std::cerr << "vgpumem doctor: invalid --simulated \"" << size << "\": expected a device memory size such as 16GiB\n";
          return 2;
        }
        ::setenv("VGPUSIM_DEVICE_MEMORY", size.c_str(), 1);
      }
      continue;
    }
    std::cerr << "vgpumem doctor: unknown option \"" << arg << "\"\n" << kUsage;
    return 2;
  }
  Findings findings;
  report_command(findings);
  const std::optional<Config> config = report_configuration(findings);
  report_driver(config ? &*config : nullptr, findings);
  report_shell(findings);
  return findings.finish();
}

}  // namespace vgpumem::cli
