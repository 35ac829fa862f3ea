#include "scheduler/step_times.h"

#include <algorithm>
#include <optional>

namespace vgpumem::scheduler {

namespace {

bool same_stream(const RecordedOp& a, const RecordedOp& b) {
  return a.stream_bit == b.stream_bit && a.device == b.device;
}

double nanoseconds_or_unknown(std::int64_t ns) { return ns < 0 ? -1.0 : static_cast<double>(ns); }

}  // namespace

StepTimes read_step_times(const RecordedIteration& iteration, vmm::PagerControl* marks, KernelSpans* spans) {
  const std::size_t count = iteration.ops.size();
  StepTimes times;
  times.duration_ns.assign(count, -1.0);
  times.stall_ns.assign(count, -1.0);

  // Marks: (ran, waited) for each marked operation, in one call.
  std::vector<vmm::ElapsedQuery> queries(2 * count);
  for (std::size_t i = 0; i < count; ++i) {
    const RecordedOp& op = iteration.ops[i];
    if (op.started == nullptr) continue;
    ++(op.function != nullptr ? times.kernels_marked : times.others_marked);
    queries[2 * i] = {op.device, op.started, op.ended};
    if (i == 0) {
      // The wait before the first: from the end of the operation before it.
      const RecordedIteration::Mark& before = iteration.before_first;
      if (before.event != nullptr && before.stream_bit == op.stream_bit && before.device == op.device) {
        queries[1] = {op.device, before.event, op.started};
      }
      continue;
    }
    const RecordedOp& previous = iteration.ops[i - 1];
    if (previous.ended != nullptr && same_stream(previous, op)) {
      queries[2 * i + 1] = {op.device, previous.ended, op.started};
    }
  }
  if (marks != nullptr && times.marks() > 0) {
    std::vector<std::int64_t> nanoseconds(queries.size(), -1);
    marks->elapsed_ns(queries, nanoseconds);
    for (std::size_t i = 0; i < count; ++i) {
      if (queries[2 * i].from != nullptr) times.duration_ns[i] = nanoseconds_or_unknown(nanoseconds[2 * i]);
      if (queries[2 * i + 1].from != nullptr) times.stall_ns[i] = nanoseconds_or_unknown(nanoseconds[2 * i + 1]);
    }
  }

  // Spans: each clocked kernel's, then the gaps between clocked neighbours.
  // Only the kernels without marks are waited for: a marked kernel's span
  // is taken if it has come (the marks were read first, so its kernel has
  // completed, and a clock that delivers has delivered it), else its marks
  // time it. The first step timed after a lock marks every kernel, so the
  // first plan never waits on a clock whose records may never come (seen on
  // an H200: CUPTI's records never joined our launch ids, and the first
  // plan waited out the clock's two seconds of patience).
  std::vector<std::uint64_t> ids, unmarked;
  for (const RecordedOp& op : iteration.ops) {
    if (op.launch_id == 0) continue;
    ids.push_back(op.launch_id);
    if (op.started == nullptr) unmarked.push_back(op.launch_id);
  }
  if (ids.empty()) return times;
  times.kernels_missing = unmarked.size();
  if (spans == nullptr) return times;
  spans->await(unmarked);
  std::vector<std::optional<KernelSpan>> span_of(count);
  for (std::size_t i = 0; i < count; ++i) {
    const RecordedOp& op = iteration.ops[i];
    if (op.launch_id == 0) continue;
    span_of[i] = spans->take(op.launch_id);
    if (!span_of[i]) continue;
    if (op.started == nullptr) --times.kernels_missing;
    ++times.kernels_clocked;
    times.duration_ns[i] = static_cast<double>(span_of[i]->end_ns - span_of[i]->start_ns);
    if (i == 0 || !span_of[i - 1] || !same_stream(iteration.ops[i - 1], op)) continue;
    // Issued after the one before it on its stream, so it starts no sooner
    // than that one ends; a negative gap is the clock's rounding.
    const double gap = static_cast<double>(span_of[i]->start_ns) - static_cast<double>(span_of[i - 1]->end_ns);
    times.stall_ns[i] = std::max(gap, 0.0);
  }
  spans->end_read();
  if (times.kernels_clocked > 0) times.source = spans->clock().name();
  return times;
}

}  // namespace vgpumem::scheduler
