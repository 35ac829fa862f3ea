// Running a workload on the simulated driver, with or without the shim, and
// reading what it left: its output, the simulator's report and the trace.
// Shared by `vgpumem demo` and `vgpumem bench`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vgpumem::cli {

struct SimRun {
  int exit_code = -1;
  std::string output;        // stdout and stderr
  std::string result;        // the workload's RESULT line ("" if none)
  nlohmann::json simulator;  // VGPUSIM_REPORT (null if none)
  nlohmann::json trace;      // VGPUMEM_TRACE's "vgpumem" object (null without the shim)
  std::string trace_path;    // the trace file ("" without the shim)
  std::string timeline_path; // VGPUSIM_TIMELINE's file ("" unless asked for and written)
};

struct SimRunRequest {
  std::string dir, name;          // files go to dir/name.{out,simulator.json,trace.json,timeline.json}
  std::vector<std::string> program;
  bool shim = true;
  std::string limit;              // VGPUMEM_LIMIT ("" for none)
  std::string policy;             // VGPUMEM_POLICY ("" for the default)
  bool timeline = false;          // the simulator's timeline (VGPUSIM_TIMELINE), for scripts/plot_timeline.py
  std::map<std::string, std::string> extra_environment;
};

SimRun run_simulated(const SimRunRequest& request);

// The value of `key=` in a RESULT line, or "" (key names end at '=').
std::string result_field(const std::string& result, const std::string& key);
// What a RESULT line says training produced ("RESULT loss=… weights_fnv1a=…"),
// without the fields that describe the run (its step, bytes, driver calls).
std::string outcome(const std::string& result);

std::uint64_t simulator_peak(const nlohmann::json& report);
double simulated_ms(const nlohmann::json& report);
std::string fixed(double value, int decimals);

}  // namespace vgpumem::cli
