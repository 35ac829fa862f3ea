// vgpumem — the front door: `vgpumem run … -- PROGRAM` preloads the shim into
// a program with the configuration given as options; `vgpumem demo` runs the
// demo on the simulated driver; `vgpumem doctor` checks the machine.
#include <exception>
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/bench.h"
#include "cli/demo.h"
#include "cli/doctor.h"
#include "cli/run_options.h"
#include "cli/report.h"
#include "cli/simulate.h"
#include "cli/traced_run.h"
#include "vgpumem_version.h"

namespace {

constexpr const char* kUsage = R"(usage: vgpumem <command> [options]

commands:
  run     run a program with libvgpumem.so preloaded
  demo    run the demo trainer on the simulated driver (no GPU needed): on
          demand (lru) and on the learned schedule (auto) side by side
  bench   every policy on layered workloads shaped like ResNet-50, VGG-16,
          BERT-large and GPT-2-medium, on the simulated driver (minutes)
  report  what a run did, from its trace (VGPUMEM_TRACE): memory against the
          cap, bytes moved, waiting, the step found and its plan; --png draws it
  simulate  a trace's recorded step planned again under another cap, policy or
          link: predicted step time, floor, bytes moved, stall (no GPU, seconds)
  doctor  what to include in a bug report: version, driver, GPUs, caps, policy,
          whether the shim is preloaded here; exits 1 if anything would stop vgpumem

  vgpumem --help | --version
  vgpumem run --help
)";

constexpr const char* kRunUsage = R"(usage: vgpumem run [options] -- PROGRAM [ARGS...]

options:
  --limit SIZE            cap device memory on every device (VGPUMEM_LIMIT):
                          bytes with K/M/G/T or KiB/MiB/GiB/TiB, or a percentage (50%)
  --limit-device I=SIZE   cap device I only (VGPUMEM_LIMIT_<I>); repeatable
  --trace FILE            write a Chrome trace + summary at exit (VGPUMEM_TRACE; %p = pid)
  --log-level L           trace, debug, info, warn (default), error, critical, off
  --simulated[=SIZE]      run on the simulated CUDA driver (device memory SIZE, default 16GiB)

Everything else is configured by environment variables: see docs/configuration.md.
)";

}  // namespace

namespace {

int dispatch(const std::vector<std::string>& args);

// What escaped a command, said in one line: each command reports the errors
// it expects where it knows the path; this is the net under them, so that
// no input ends in std::terminate's abort and its core dump.
int report_escaped_error(const std::string& command, const std::exception_ptr& escaped) {
  const std::string name = "vgpumem " + command + ": ";
  try {
    std::rethrow_exception(escaped);
  } catch (const std::filesystem::filesystem_error& error) {
    std::cerr << name << error.path1().string() << ": " << error.code().message() << "\n";
  } catch (const nlohmann::json::exception& error) {
    std::cerr << name << "not the JSON vgpumem writes: " << error.what() << "\n";
  } catch (const std::bad_alloc&) {
    std::cerr << name << "out of memory\n";
  } catch (const std::exception& error) {
    std::cerr << name << error.what() << "\n";
  } catch (...) {
    std::cerr << name << "failed (unknown error)\n";
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return dispatch(args);
  } catch (...) {
    return report_escaped_error(args.empty() ? "" : args[0], std::current_exception());
  }
}

namespace {

int dispatch(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string& command = args[0];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (command == "--version") {
    std::cout << "vgpumem " << vgpumem::kVersion << "\n";
    return 0;
  }
  if (command == "run") {
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (!rest.empty() && (rest[0] == "--help" || rest[0] == "-h")) {
      std::cout << kRunUsage;
      return 0;
    }
    const auto parsed = vgpumem::cli::parse_run_options(rest);
    if (!parsed.options) {
      std::cerr << parsed.error << "\n";
      return 2;
    }
    const auto current = vgpumem::cli::current_environment();
    const auto environment = vgpumem::cli::run_environment(*parsed.options, current);
    if (const std::string problem = vgpumem::cli::absent_device_problem(environment); !problem.empty()) {
      std::cerr << problem << "\n";
      return 2;
    }
    if (const std::string note = vgpumem::cli::overridden_by_options(*parsed.options, current); !note.empty()) {
      std::cerr << note << "\n";
    }
    // A trace asked for is checked for when the program is done; otherwise
    // the command becomes the program, its status the program's own.
    if (const auto trace = environment.find("VGPUMEM_TRACE"); trace != environment.end() && !trace->second.empty()) {
      return vgpumem::cli::run_traced(parsed.options->program, environment, trace->second);
    }
    return vgpumem::cli::exec_program(parsed.options->program, environment);
  }
  if (command == "doctor") return vgpumem::cli::run_doctor(std::vector<std::string>(args.begin() + 1, args.end()));
  if (command == "demo") return vgpumem::cli::run_demo(std::vector<std::string>(args.begin() + 1, args.end()));
  if (command == "report") return vgpumem::cli::run_report(std::vector<std::string>(args.begin() + 1, args.end()));
  if (command == "simulate") {
    return vgpumem::cli::run_simulate(std::vector<std::string>(args.begin() + 1, args.end()));
  }
  if (command == "bench") return vgpumem::cli::run_bench(std::vector<std::string>(args.begin() + 1, args.end()));
  std::cerr << "vgpumem: unknown command \"" << command << "\"\n" << kUsage;
  return 2;
}

}  // namespace
