// Each operation's device time and the stall before it, in a timed step
// (Note [Where durations come from], below): a kernel launched with
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

// Note [Where durations come from]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Where durations come from (`scheduler/step_times.{h,cpp}`,
// `scheduler/kernel_clock.{h,cpp}`; tests in
// `tests/unit/step_times_test.cpp` and `tests/e2e/cupti_test.cpp`). While
// the kernel clock is active (`VGPUMEM_CUPTI=auto` and CUPTI ours), the
// kernels of a timed step carry no events: when the feed asks to time a
// kernel, the pager notes it for a launch id instead of recording a mark,
// and the launch hook (`Runtime::timed_launch`) notes a fresh id (the
// thread's number in the high bits, its own count below: no shared counter)
// in a thread-local around it, which CUPTI's launch callback pairs with the
// kernel's correlation id; the id rides in the
// access record to `RecordedOp::launch_id`. Only those launches note an id: an
// untimed launch pays one load of its `Access` (see
// docs/journal/2026-11-25-benchmarks.md#cupti-on-the-launch-path). Copies, memsets
// and stream memory operations have no kernel record, so they keep their
// two events; so does every kernel while the clock is not active (CUPTI
// absent, taken by a profiler, or stepped aside for one: the next timed
// step after that is timed with events, decided at each launch). The
// planner reads a step's times at once: the marks through
// `PagerControl::elapsed_ns`, the spans by flushing CUPTI and polling each
// millisecond until every launch id of the step that has no marks has its
// span — kernels still queued behind the step complete first — or the
// clock stops (what it flushed on stepping aside is all there will be), or
// two seconds pass with no new record (one CUPTI dropped never comes). A
// kernel with marks as well is never waited for: its span if it has come by
// then, else its marks. The first step timed after a lock marks every
// kernel (until a step of the period has been recorded whole the log
// cannot say which kernels are beside a copy), so the first plan never
// waits on the clock: on an H200 (2026-11-27) CUPTI's records never joined
// our launch ids, and each first plan waited out the two seconds
// (`profile_ms` 2,010–2,033 ms: about one and a half steps of sixteen
// before the plan was in force) and was then made from the marks anyway
// (tests `KernelSpansTest.MarkedKernelsAreNotWaitedForAndTheirMarksTimeThem`,
// `Scheduler.EveryKernelOfTheFirstTimedStepIsMarked`). Spans a flush delivers for
// the next timed step are kept for it; ones no read takes in two are
// forgotten. A kernel whose span never came has an unknown duration (the
// profile's median) while the clock is still active; if the clock stepped
// aside, the step is not planned from and the next one is timed (with
// events). The stall before an operation is the gap from the end of the one
// before it in issue order on the same stream to its own start: with
// events, end mark to start mark (recorded after the stream's wait for its
// units); with CUPTI, the earlier kernel's end to the later's start — the
// same gap on the device's timeline, including any wait for a unit. The two
// clocks cannot be compared, so a kernel beside a copy carries marks too
// (its launch id still gives its duration): the kernel after a copy, the
// kernel before one (as the last recorded step had it; in a step not yet
// seen whole, every kernel), and the step's first operation. The wait
// between them is then end mark to start mark. The first operation's wait
// runs from the end of the operation before it, the last of the step
// before: a mark recorded on that operation's stream as the timed step
// begins (`RecordedIteration::before_first`). Without these, the wait for
// the room a step's first layer needs after the input's copy went uncounted
// (15 ms a step on VGG-16 at a third of its peak, 2026-11-26), and the trial
// measured each way 7 % under the step the program timed; now the two
// agree (tests `Scheduler.KernelsBesideACopyAreMarkedUnderAKernelClock`,
// `Scheduler.TheWaitBeforeAStepsFirstOperationIsTimedToo`). The trace's `schedule.timing_source` says which source
// timed the last step read, and `schedule.timing` counts kernels clocked,
// kernels and other operations marked, and the events recorded
// (docs/trace-format.md).

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
