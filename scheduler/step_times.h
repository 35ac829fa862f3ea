// Each operation's device time and the stall before it, in a timed step
// (docs/architecture.md, "Where durations come from"): a kernel launched with
// a launch id from the kernel clock's span for it, every other timed
// operation (copies and memsets, which have no kernel record, and every
// kernel when the clock was not active) from its two marks. A kernel with a
// launch id and marks both (beside a copy, or in a step not yet seen whole)
// is timed by its span if that has come once the marks are read, else by
// its marks: only kernels without marks are waited for.
//
// The stall before an operation is the gap from the end of the one before it
// in issue order, when that one ran on the same stream, to its own start:
// with marks, from the first's end mark to the second's start mark (recorded
// after the stream's wait for its units); with spans, from the first
// kernel's end to the second's start. The two timelines cannot be compared,
// so a stall across a marked operation and a clocked kernel is not measured
// (0 in the profile): on a step of kernels that is the first kernel after a
// copy or memset on its stream.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "scheduler/access_log.h"
#include "scheduler/kernel_clock.h"
#include "vmm/pager_control.h"

namespace vgpumem::scheduler {

struct StepTimes {
  std::vector<double> duration_ns, stall_ns;  // per operation; -1 where unknown
  std::size_t kernels_clocked = 0;   // kernels timed by the kernel clock's spans
  std::size_t kernels_marked = 0;    // kernels timed with two marks each
  std::size_t others_marked = 0;     // copies, memsets and stream memory operations, two marks each
  std::size_t kernels_missing = 0;   // launched with an id and no marks, whose span never came
  // "cupti" (the clock's name) when any kernel was clocked, else "events".
  std::string_view source = "events";
  std::size_t marks() const { return 2 * (kernels_marked + others_marked); }
};

// Reads every time of a timed `iteration` at once: the marks' through
// `marks` (one call; null: none readable), the spans through `spans` (null:
// no clock), waiting for spans not yet delivered as KernelSpans::await does.
StepTimes read_step_times(const RecordedIteration& iteration, vmm::PagerControl* marks, KernelSpans* spans);

}  // namespace vgpumem::scheduler
