// A profiled step as JSON: what the trace keeps of the step the last plan
// was made from (the summary's "schedule" → "profile"), so that the
// planners can be run again on it away from the program — `vgpumem
// simulate` asks "how would this step run under another cap, policy or
// link?" (docs/trace-format.md, "The profiled step").
//
// Units are numbered in order of first use; nothing in the JSON names an
// address, so a read-back profile has no vmm::Unit behind its units
// (ProfileUnit::unit is null) and serves planning and simulation only.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "scheduler/iteration_profile.h"

namespace vgpumem::scheduler {

// {"format": 2, "period", "step_ns", "offload_delay", "backward_begins",
//  "units": [bytes, ...],
//  "ops": [[duration_ns, stall_ns, flags, [unit, ...], name], ...],
//  "names": [text, ...]}
// flags: 1 a kernel, 2 heavy (leads a layer), 4 a convolution. With
// `op_names` (one per operation: a kernel's name, else the API that
// enqueued it), each distinct name is written once in "names" and an
// operation's fifth element indexes it; without, operations have four.
nlohmann::json profile_to_json(const IterationProfile& profile, const std::vector<std::string>* op_names = nullptr);

// The name `profile_to_json` gave operation `op` of `profile`, "" where it
// gave none (an unnamed step, a trace from before names were written) or
// the JSON is not what it wrote.
std::string profiled_operation_name(const nlohmann::json& profile, std::size_t op);

struct ProfileFormatError : std::runtime_error {
  explicit ProfileFormatError(const std::string& what) : std::runtime_error(what) {}
};

// The profile `profile_to_json` wrote; times, uses and totals are derived
// again from the operations. Throws ProfileFormatError naming what is
// wrong.
IterationProfile profile_from_json(const nlohmann::json& json);

}  // namespace vgpumem::scheduler
